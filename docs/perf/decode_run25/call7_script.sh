set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "rounds_topk|devbin|VKMOE_SHADER_DIR=$PWD/devbin_diag/d0" \
  "by_logit_topk|devbin" \
  "no_topk_diag|devbin|VKMOE_SHADER_DIR=$PWD/devbin_diag/d1"
for d in "VKMOE_SHADER_DIR=$PWD/devbin_diag/d0" "VKMOE_X=1"; do
  env $d VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep -i 'pipeline matvec_topk' | head -2
done | tee "$OUT/router_stats.txt"
timeout 200 devbin/vkmoe_tests --gtest_filter='ShaderMoe.*:*GpuForward*:Prefill.*' 2>&1 | grep -E 'seed|Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tee "$OUT/gpu_tests.txt" | tail -30
unpack_llama
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 2>&1 | tee "$OUT/llama_decode.txt"
