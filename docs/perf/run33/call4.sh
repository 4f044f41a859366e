# Session 39 call 4 (20ddc50): GPU tests; then alternated rounds of vkmoe (default, dense
# split-K off / target 512 workgroups, dense tile L) and llama-bench -fa 1 / -fa 0 on the
# same file; time to first token for 4096 tokens with peak VRAM; a per-step profile.
set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "build $(cat devbin_scripts/HEAD)"
( qwen3_model > $OUT/synth.txt 2>&1 ) & SYN=$!
unpack_llama
{
timeout 200 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.*/coopmat_*:*GateUp*:Prefill*:GpuForward.*:GpuOffload.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -12
} 2>&1 | tee "$OUT/tests.txt"
wait $SYN; cat $OUT/synth.txt
{
for r in 1 2; do
  for v in default split0 split512 tileL; do
    case $v in
      default) e="VKMOE_X=1";; split0) e="VKMOE_GEMM_SPLIT_K=0";; split512) e="VKMOE_GEMM_SPLIT_K=512";; tileL) e="VKMOE_COOPMAT_TILE=L";;
    esac
    warm_up; echo "--- round $r vkmoe $v $(date +%T)"; env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 -o jsonl 2>/dev/null | samples
  done
  for fa in 1 0; do
    warm_up; echo "--- round $r llama-bench -fa $fa $(date +%T)"; /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa $fa -o jsonl 2>/dev/null | samples
  done
done
echo "--- TTFT 4096"
warm_up; run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 --moe-mode resident
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa 1
warm_up; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa 0
warm_up; echo "--- profile"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 8 2>&1 | grep -A16 "GPU time per prompt"
} 2>&1 | tee "$OUT/side_by_side.txt"
