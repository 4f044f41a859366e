set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
timeout 170 devbin/vkmoe_tests --gtest_filter='ShaderAttention.*:ShaderTrunk.*:ShaderMoe.*:GpuForward.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tee "$OUT/gpu_tests.txt" | tail -12
qwen3_model
summ() { python3 -c '
import sys, json
for l in sys.stdin:
    if not l.startswith("{"): continue
    d = json.loads(l)
    s = d["samples_ts"]
    print("p%-4s d%-5s mean %7.2f  samples %s" % (d["n_prompt"], d["n_depth"], d["avg_ts"], " ".join("%.2f" % x for x in s)))'; }
V=$PWD/devbin_scripts/var
cfg_env() { case $1 in new) echo VKMOE_X=1;; *) echo VKMOE_SHADER_DIR=$V/$1;; esac; }
for v in new old_all; do
  echo "--- pipeline stats $v"; env $(cfg_env $v) VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 0 -n 4 -r 1 2>&1 | grep -E 'pipeline (attn_flash_rope|moe_combine_norm)' | head -3
done | tee "$OUT/pipeline_stats.txt"
for round in 1 2 3; do
  for v in new old_reduce old_all; do
    warm_up
    echo "--- round $round $v $(date +%T)"
    env $(cfg_env $v) $B/vkmoe bench -m $MODEL -p 0 -n 128 -d 0,4096 -r 3 -o jsonl 2>/dev/null | summ
  done
done 2>&1 | tee "$OUT/decode_ab.txt"
unpack_llama
for i in 1 2; do
  warm_up
  echo "--- llama-bench -fa 1 ($i)"
  /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 0 -n 128 -d 0,4096 -r 3 -fa 1 -o jsonl 2>/dev/null | summ
done 2>&1 | tee -a "$OUT/decode_ab.txt"
{
warm_up; echo "--- vkmoe pp (new)"; $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | summ
warm_up; echo "--- llama-bench pp -fa 1"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 3 -fa 1 -o jsonl 2>/dev/null | summ
warm_up; echo "--- llama-bench pp -fa 0"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 3 -fa 0 -o jsonl 2>/dev/null | summ
} 2>&1 | tee "$OUT/prefill.txt"
