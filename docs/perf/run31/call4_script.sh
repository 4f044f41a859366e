# Session 37 call 4: L1 tile + split-K k/v/o (HEAD) against chunked-only (vkmoe_chunk); side by side.
set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "build $(cat devbin_scripts/HEAD)"
{
timeout 240 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*Prefill*:GpuForward.*:*GemmCoopmat.*:ShaderTrunk.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -8
} 2>&1 | tee "$OUT/gpu_tests.txt"
warm_up
{
for v in vkmoe vkmoe_chunk; do echo "--- $v"
  $B/$v bench-shaders --kernels gemm_q4_k,gemm_q6_k,gemm_f32 --gemm-shapes 2048x4096:512,4096x2048:512,2048x512:512,2048x128:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_" | sort -u
done
} 2>&1 | tee "$OUT/bench.txt"
qwen3_model; unpack_llama
{
for r in 1 2 3; do for v in vkmoe vkmoe_chunk; do
  warm_up; echo "--- round $r $v $(date +%T)"
  $B/$v bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
warm_up; echo "--- profile"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 2 --expert-stats 2>&1 | grep -A14 "GPU time per prompt"
} 2>&1 | tee "$OUT/inplace.txt"
{
warm_up; echo "--- vkmoe resident (md)"; run $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 5 --moe-mode resident
for fa in 1 0; do warm_up; echo "--- llama-bench -fa $fa"; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 5 -fa $fa; done
echo "--- TTFT 4096"
run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 --moe-mode resident
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa 0
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa 1
echo "--- 12 GiB pp512 (sanity)"; run $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 2 --vram-budget 12GiB
} 2>&1 | tee "$OUT/side_by_side.txt"
