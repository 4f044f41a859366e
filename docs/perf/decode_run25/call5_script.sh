set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
ROUNDS=3 ARGS="-p 0 -n 128 -d 0,4096 -r 3 --moe-mode resident" LLAMA=0 scripts/perf_prefill_ab.sh \
  "router_main|devbin|VKMOE_SHADER_DIR=$PWD/devbin_diag/d0" \
  "router_no_topk|devbin|VKMOE_SHADER_DIR=$PWD/devbin_diag/d1" \
  "router_no_tail|devbin|VKMOE_SHADER_DIR=$PWD/devbin_diag/d2"
VKMOE_SHADER_DIR=$PWD/devbin_diag/d0 VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep -i 'matvec_topk' | head -3
VKMOE_SHADER_DIR=$PWD/devbin_diag/d2 VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep -i 'matvec_topk' | head -3
timeout 150 devbin/vkmoe_tests --gtest_filter='Prefill.Q8KvCacheCloseToReference:Prefill.DefaultPrecisionCloseToReference:ShaderTrunk.*' --gtest_repeat=4 2>&1 | grep -E 'seed|Failure|Which is|^\[  (PASSED|FAILED)|OK \]|FAILED  \]' | tee "$OUT/gpu_tests.txt" | tail -40
