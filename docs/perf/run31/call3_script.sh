# Session 37 call 3: chunked prefill submission (main) and split-K for dense q/o products.
set -uo pipefail
source scripts/device_env.sh
S=$PWD/devbin_scripts
{
echo "--- tests $(date +%T)"; timeout 200 $B/vkmoe_tests --gtest_brief=1 --gtest_filter='*Prefill*:*GpuForward*:Paths/GemmCoopmat.Dense/*' 2>&1 | grep -E "PASSED|FAILED|Failure" | head -20
} 2>&1 | tee "$OUT/tests.txt"
warm_up
{
for sk in 0 256 512 1024; do for sh in default L M 128,64,32,32,32,1 64,64,32,32,32,1; do
  e=VKMOE_X=1; [ $sh = L -o $sh = M ] && e=VKMOE_COOPMAT_TILE=$sh; [[ $sh == *,* ]] && e=VKMOE_COOPMAT_SHAPE=$sh
  echo "--- split $sk tile $sh"
  env $e VKMOE_GEMM_SPLIT_K=$sk $B/vkmoe bench-shaders --kernels gemm_q4_k,gemm_q6_k --gemm-shapes 2048x4096:512,4096x2048:512,2048x512:512 --gemm-path coopmat 2>&1 | grep -E "^gemm_|fit" | sort -u
done; done
} 2>&1 | tee "$OUT/bench.txt"
qwen3_model
{
for r in 1 2; do for v in main nochunk split256 split512 split1024; do
  bin=$B/vkmoe; e=VKMOE_X=1
  [ $v = nochunk ] && e=VKMOE_CHUNKED_SUBMIT=0
  [[ $v == split* ]] && bin=$B/vkmoe_splitqo && e=VKMOE_GEMM_SPLIT_K=${v#split}
  warm_up; echo "--- round $r $v $(date +%T)"
  env $e $bin bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
for sk in 512 1024; do
  warm_up; echo "--- profile splitqo $sk"; VKMOE_GEMM_SPLIT_K=$sk VKMOE_PROFILE=1 $B/vkmoe_splitqo bench -m $MODEL -p 512 -n 0 -r 2 --expert-stats 2>&1 | grep -A14 "GPU time per prompt"
done
} 2>&1 | tee "$OUT/inplace.txt"
