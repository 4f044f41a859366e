# Prepared in stop 36 for the next device session: run after `bash scripts/pack_devbin.sh` and
# `cp /work/wt_dense1/build/vkmoe devbin/vkmoe_dense1 && strip devbin/vkmoe_dense1` (branch
# next/dense-one-buffer, built 13:03 on 2026-11-28 at 306429e; rebuild it if main moved).
set -uo pipefail
source scripts/device_env.sh
S=$PWD/devbin_scripts
# The one-buffer 128x64 dense tile's kernel passed GemmCoopmat Dense when forced (run 30 call 3).
qwen3_model
{
for v in main dense1; do
  bin=$B/vkmoe; [ $v = dense1 ] && bin=$B/vkmoe_dense1
  warm_up; echo "--- profile $v"; VKMOE_PROFILE=1 $bin bench -m $MODEL -p 512 -n 0 -r 2 2>&1 | grep -A16 "GPU time per prompt"
done
for r in 1 2 3; do for v in main dense1 old_swiglu; do
  bin=$B/vkmoe; e=VKMOE_X=1
  [ $v = dense1 ] && bin=$B/vkmoe_dense1
  [ $v = old_swiglu ] && e=VKMOE_SHADER_DIR=$S/old_swiglu
  warm_up; echo "--- round $r $v $(date +%T)"
  env $e $bin bench -m $MODEL -p 512,2048 -n 0 -r 3 -o jsonl 2>/dev/null | samples
done; done
} 2>&1 | tee "$OUT/inplace.txt"
# issue 8: where the resident decode's GPU time goes today (depth 0 and 4096)
{
warm_up; echo "--- decode profile d0"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 0 -n 64 -r 1 2>&1 | grep -A24 "GPU time per decoded"
warm_up; echo "--- decode profile d4096"; VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 0 -n 64 -d 4096 -r 1 2>&1 | grep -A24 "GPU time per decoded"
} 2>&1 | tee "$OUT/decode_profile.txt"
