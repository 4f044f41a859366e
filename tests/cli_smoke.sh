#!/usr/bin/env bash
# End-to-end checks of the vkmoe CLI: every command runs on the built-in and on a
# written synthetic model, backends agree, and bad input gives one clear error line
# and exit status 1.
set -u
VKMOE=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

# expect_error "words" cmd...: exit status 1 and one 'vkmoe: error:' line containing words.
expect_error() {
  local words=$1; shift
  "$@" >"$T/out" 2>"$T/err"; local rc=$?
  [ $rc -eq 1 ] || fail "'$*' exited $rc, expected 1"
  grep -q "^vkmoe: error: .*$words" "$T/err" || { cat "$T/err"; fail "'$*' did not report '$words'"; }
  [ "$(grep -c 'vkmoe: error' "$T/err")" -eq 1 ] || fail "'$*' printed more than one error line"
}

"$VKMOE" --help | grep -q "usage: vkmoe" || fail "--help"
"$VKMOE" info | grep -q "device 0" || fail "info lists no device"

for backend in gpu cpu ref; do
  "$VKMOE" run --backend $backend -p "Hello" -n 8 >"$T/run_$backend.txt" 2>"$T/run_$backend.err" || { cat "$T/run_$backend.err"; fail "run --backend $backend"; }
  grep -q "generation: 8 tokens" "$T/run_$backend.err" || fail "run --backend $backend printed no tokens/s"
done
cmp -s "$T/run_gpu.txt" "$T/run_ref.txt" || fail "gpu and reference texts differ"

"$VKMOE" synth --set arch=olmoe,n_layer=2,n_vocab=600,quant=Q5_K_M -o "$T/olmoe.gguf" 2>/dev/null || fail synth
"$VKMOE" run -m "$T/olmoe.gguf" -p "The" -n 4 --vram-budget 400MiB --moe-mode expert-cache --predict-prefetch --expert-stats \
  >"$T/o.txt" 2>"$T/o.err" || { cat "$T/o.err"; fail "run olmoe expert-cache"; }
grep -q "hit-rate" "$T/o.err" || fail "--expert-stats printed no table"
"$VKMOE" plan -m "$T/olmoe.gguf" --vram-budget 300MiB | grep -q "blk.\*.ffn_up_exps.weight" || fail plan
"$VKMOE" bench -m "$T/olmoe.gguf" -p 8 -n 4 --reps 1 | grep -q "tg4" || fail bench

# Errors: one line, exit 1.
expect_error "No such file" "$VKMOE" run -m "$T/missing.gguf"
head -c 100000 "$T/olmoe.gguf" >"$T/trunc.gguf"
expect_error "truncated" "$VKMOE" run -m "$T/trunc.gguf"
printf 'not a gguf file at all, just text\n' >"$T/text.gguf"
expect_error "GGUF" "$VKMOE" run -m "$T/text.gguf"
"$VKMOE" synth --set arch=qwen3,n_layer=1,n_vocab=512 -o "$T/q3.gguf" 2>/dev/null || fail "synth qwen3"
sed 's/qwen3/qwenX/' "$T/q3.gguf" >"$T/arch.gguf"
expect_error "unsupported architecture 'qwenX'" "$VKMOE" run -m "$T/arch.gguf"
expect_error "needs .* but the budget is" "$VKMOE" run -m "$T/olmoe.gguf" --vram-budget 1MiB
expect_error "unknown command" "$VKMOE" frobnicate
expect_error "needs an integer" "$VKMOE" run -n many
expect_error "unknown backend" "$VKMOE" run --backend tpu
expect_error "no Vulkan driver" env VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json "$VKMOE" run
echo "cli smoke: all passed"
