set -uo pipefail
source scripts/device_env.sh
S=$PWD/devbin_scripts
warm_up
for r in 1 2; do for v in base f16acc; do
  e=VKMOE_X=1; [ $v = f16acc ] && e=VKMOE_SHADER_DIR=$S/f16acc
  echo "--- round $r $v"
  env $e VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_ids --gemm-shapes 2048x768:512,768x2048:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm_coopmat_ids_q4" | sort -u
done; done 2>&1 | tee "$OUT/bench.txt"
