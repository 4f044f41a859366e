set -uo pipefail
source scripts/device_env.sh
S=$PWD/devbin_scripts/abl
warm_up
{
for r in 1 2; do
for a in a0 a1 a2 a4 a6 a8 a9 a15; do
  echo "--- round $r ablate $a"
  VKMOE_SHADER_DIR=$S/$a $B/vkmoe bench-shaders --kernels gemm_q4_k,gemm_ids --gemm-shapes 2048x4096:512,2048x768:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_"
done
for sh in 128,64,32,32,32 64,64,64,32,32 64,64,32,32,64 64,64,16,32,32; do
  echo "--- round $r ids shape $sh"
  VKMOE_COOPMAT_IDS_SHAPE=$sh VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_ids --gemm-shapes 2048x768:512,768x2048:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm|fit" | sort -u
done
done
} 2>&1 | tee "$OUT/ablate.txt"
