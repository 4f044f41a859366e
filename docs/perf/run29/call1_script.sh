set -uo pipefail
source scripts/device_env.sh
S=$PWD/devbin_scripts
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader
{
for v in v_skip v_f16acc v_both v_cm2f16; do echo "--- tests $v"; VKMOE_SHADER_DIR=$S/$v timeout 60 devbin/vkmoe_tests --gtest_brief=1 --gtest_filter='*GemmCoopmat.Indexed*' 2>&1 | grep -E "Failure|max|PASSED|FAILED|Skipped" | head -12; done
} 2>&1 | tee "$OUT/tests.txt"
warm_up
{
for r in 1 2; do for v in base v_skip v_f16acc v_both; do
  echo "--- round $r khr $v"
  e=VKMOE_X=1; [ $v != base ] && e=VKMOE_SHADER_DIR=$S/$v
  env $e VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_ids --gemm-shapes 2048x768:512,768x2048:512,2048x768:2048 --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm_coopmat_ids" | sort -u
done
for v in base v_cm2f16; do
  echo "--- round $r cm2 $v"
  e=VKMOE_X=1; [ $v != base ] && e=VKMOE_SHADER_DIR=$S/$v
  env $e VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_ids --gemm-shapes 2048x768:512,768x2048:512,2048x768:2048 --gemm-path coopmat2 2>&1 | grep -E "^gemm_|pipeline gemm_cm2_ids" | sort -u
done; done
} 2>&1 | tee "$OUT/bench.txt"
qwen3_model
unpack_llama
{
warm_up; echo "--- llama cm2 stats"; GGML_VK_PIPELINE_STATS=matmul_id /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512 -n 0 -r 2 -fa 1 2>&1 | grep -E "pipeline stats|Register|Binary|Shared|pp512" | head -60
warm_up; echo "--- llama KHR (DISABLE_COOPMAT2)"; GGML_VK_DISABLE_COOPMAT2=1 GGML_VK_PIPELINE_STATS=matmul_id /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512 -n 0 -r 2 -fa 1 2>&1 | grep -E "pipeline stats|Register|Binary|Shared|pp512|matrix cores" | head -60
} 2>&1 | tee "$OUT/llama.txt"
{
for r in 1 2; do
for v in base v_skip v_both; do warm_up; echo "--- round $r inplace khr $v"; e=VKMOE_X=1; [ $v != base ] && e=VKMOE_SHADER_DIR=$S/$v
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples; done
for v in base v_cm2f16; do warm_up; echo "--- round $r inplace cm2 $v"; e=VKMOE_X=1; [ $v != base ] && e=VKMOE_SHADER_DIR=$S/$v
  env $e $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 3 --gemm coopmat2 -o jsonl 2>/dev/null | samples; done
done
} 2>&1 | tee "$OUT/inplace.txt"
