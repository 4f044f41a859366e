# Session 40 call 4: where a pp512 repetition's wall time exceeds its GPU time (~1 ms of 51 on the
# 48-layer file in call 1): a 6-layer file of Qwen3-30B-A3B's shapes, VKMOE_PROFILE=2 (GPU time of
# each ubatch, host embedding / recording / waiting) with bench --progress wall times.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
M6=/tmp/q6.gguf
$B/vkmoe synth --preset qwen3-30b-a3b --set n_layer=6 -o $M6 2>&1 | tail -1
nproc
for i in 1 2; do
  for c in 1 0; do
    warm_up; echo "--- chunked=$c round $i"
    VKMOE_CHUNKED_SUBMIT=$c VKMOE_PROFILE=2 $B/vkmoe bench -m $M6 -p 512 -n 0 -r 6 --progress 2>&1 | grep -E "vkmoe bench|time of"
  done
done 2>&1 | tee $OUT/host.txt
warm_up; echo "--- plain"; $B/vkmoe bench -m $M6 -p 512 -n 0 -r 6 --progress 2>&1 | grep -E "vkmoe bench|pp512" | tee -a $OUT/host.txt
