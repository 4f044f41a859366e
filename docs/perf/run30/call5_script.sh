set -uo pipefail
source scripts/device_env.sh
S=$PWD/devbin_scripts
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader
echo "build $(cat devbin_scripts/HEAD)"
{
timeout 200 devbin/vkmoe_tests --gtest_filter='ShaderAttention.*:ShaderTrunk.*:ShaderMoe.*:GpuForward.*:*GemmCoopmat.*' 2>&1 | grep -E 'Failure|^\[  (PASSED|FAILED)|FAILED  \]|^\[==' | tail -8
for v in mut hdr; do echo "--- tests $v"; VKMOE_SHADER_DIR=$S/$v timeout 120 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='Paths/GemmCoopmat.Indexed/coopmat_Q*' 2>&1 | grep -E "PASSED|FAILED" | head -8; done
} 2>&1 | tee "$OUT/gpu_tests.txt"
qwen3_model; unpack_llama
{
warm_up; echo "--- vkmoe resident (md)"; run $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 --moe-mode resident
for fa in 1 0; do warm_up; echo "--- llama-bench -fa $fa"; run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512,2048 -n 0 -r 3 -fa $fa; done
echo "--- TTFT 4096"
run $B/vkmoe bench -m $MODEL -p 4096 -n 1 -r 1 --moe-mode resident
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa 0
run /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 4096 -n 0 -r 1 -fa 1
} 2>&1 | tee "$OUT/side_by_side.txt"
warm_up
{
for r in 1 2; do for v in base hdr; do
  e=VKMOE_X=1; [ $v != base ] && e=VKMOE_SHADER_DIR=$S/$v
  echo "--- round $r $v"
  env $e VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_ids --gemm-shapes 2048x768:512,768x2048:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm_coopmat_ids_q4" | sort -u
done; done
} 2>&1 | tee "$OUT/bench.txt"
{
for r in 1 2; do for v in base hdr; do
  e=VKMOE_X=1; [ $v != base ] && e=VKMOE_SHADER_DIR=$S/$v
  warm_up; echo "--- round $r $v $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
} 2>&1 | tee "$OUT/inplace.txt"
