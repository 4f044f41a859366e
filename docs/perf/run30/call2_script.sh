set -uo pipefail
source scripts/device_env.sh
warm_up
{
for r in 1 2; do
for sh in default 128,64,32,32,32,1 64,64,32,32,32,1 64,64,32,16,32,1 128,64,64,32,32,1; do
  e=VKMOE_X=1; [ $sh != default ] && e=VKMOE_COOPMAT_IDS_SHAPE=$sh
  echo "--- round $r ids shape $sh"
  env $e VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_ids --gemm-shapes 2048x768:512,768x2048:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm_coopmat|fit" | sort -u
done
for sh in default 128,128,64,32,32,1 64,64,32,32,32,1 64,32,32,16,32,1 128,128,64,32,64,1 128,64,32,32,32,1; do
  e=VKMOE_X=1; [ $sh != default ] && e=VKMOE_COOPMAT_SHAPE=$sh
  echo "--- round $r dense shape $sh"
  env $e VKMOE_PIPELINE_STATS=1 $B/vkmoe bench-shaders --kernels gemm_q4_k,gemm_q6_k --gemm-shapes 2048x4096:512,4096x2048:512,2048x512:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_|pipeline gemm_coopmat|fit" | sort -u
done
done
} 2>&1 | tee "$OUT/bench.txt"
qwen3_model
{
for r in 1 2; do for sh in default 128,64,32,32,32,1 256,64,32,32,32,1; do
  e=VKMOE_X=1; [ $sh != default ] && e=VKMOE_COOPMAT_IDS_SHAPE=$sh
  warm_up; echo "--- round $r $sh $(date +%T)"
  env $e $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
for r in 1 2; do for sh in 128,128,64,32,32,1 64,64,32,32,32,1; do
  warm_up; echo "--- round $r ids 128,64,32,32,32,1 dense $sh $(date +%T)"
  VKMOE_COOPMAT_IDS_SHAPE=128,64,32,32,32,1 VKMOE_COOPMAT_SHAPE=$sh $B/vkmoe bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
} 2>&1 | tee "$OUT/inplace.txt"
