# Session 40 call 8 (word_of): peak VRAM of the 4096-token prompt with the token rows decoded on the
# GPU (default) and on the host (VKMOE_GPU_EMBED=0): call 5 read 18267 MiB where run 33 read 18171;
# the driver's statistics of the get_rows and rms_norm_h pipelines.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
qwen3_model
{
for v in gpu host; do
  if [ $v = host ]; then export VKMOE_GPU_EMBED=0; else unset VKMOE_GPU_EMBED; fi
  echo "--- $v embedding"; run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 --moe-mode resident 2>&1 | grep -E "pp4096|peak"
done
unset VKMOE_GPU_EMBED
echo "--- pipeline statistics"
VKMOE_PIPELINE_STATS=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 1 2>&1 | grep -iE "get_rows|head_matmul|gemm_q4_k|matvec_q4_k" | head -8
} 2>&1 | tee "$OUT/vram.txt"
{
timeout 100 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='ShaderTrunk*:Prefill*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -6
warm_up; echo "--- pp512"; $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
} 2>&1 | tee -a "$OUT/vram.txt"
