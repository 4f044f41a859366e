set -uo pipefail
source scripts/device_env.sh
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
git_head=$(cat devbin_scripts/HEAD 2>/dev/null); echo "build $git_head"
timeout 200 devbin/vkmoe_tests --gtest_filter='ShaderAttention.*:ShaderTrunk.*:ShaderMoe.*:GpuForward.*:*GemmCoopmat.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tee "$OUT/gpu_tests.txt" | tail -8
warm_up
{
for r in 1 2; do for sh in default 128,64,32,32,32 64,128,32,32,32 128,64,64,32,32; do
  e=VKMOE_X=1; [ $sh != default ] && e=VKMOE_COOPMAT_SHAPE=$sh
  echo "--- round $r dense $sh"
  env $e VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_q4_k,gemm_q6_k --gemm-shapes 2048x4096:512,2048x512:512,4096x2048:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm_coopmat_q4|fit" | sort -u
done; done
} 2>&1 | tee "$OUT/dense_tiles.txt"
qwen3_model
{
for r in 1 2; do for cfg in default dense128x64; do
  e=VKMOE_X=1; [ $cfg = dense128x64 ] && e=VKMOE_COOPMAT_SHAPE=128,64,32,32,32
  warm_up; echo "--- round $r $cfg $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
warm_up; echo "--- vkmoe resident (md)"; run $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 --moe-mode resident
} 2>&1 | tee "$OUT/inplace.txt"
unpack_llama
{
for fa in 1 0; do warm_up; echo "--- llama-bench -fa $fa"; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 3 -fa $fa; done
echo "--- TTFT 4096"
run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 --moe-mode resident
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa 0
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa 1
} 2>&1 | tee "$OUT/side_by_side.txt"
