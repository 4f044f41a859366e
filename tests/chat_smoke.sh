#!/usr/bin/env bash
# End-to-end checks of `vkmoe chat` on the built-in model: multi-turn with the
# KV cache reused across turns, /reset, backends agreeing, Ctrl-C stopping a
# reply without ending the session, a conversation outgrowing the context.
set -u
VKMOE=$1
T=$(mktemp -d)
trap 'kill $CHAT_PID 2>/dev/null; rm -rf "$T"' EXIT
CHAT_PID=
fail() { echo "FAIL: $*"; exit 1; }

# Three turns, the third after /reset (f32 KV and GEMM: the GPU matches the reference).
printf 'Hello there\nTell me more\n/reset\nHello there\n' >"$T/in"
for backend in ref gpu; do
  "$VKMOE" chat --backend $backend --kv-type f32 --gemm tiled -n 6 <"$T/in" >"$T/out_$backend" 2>"$T/err_$backend" ||
    { cat "$T/err_$backend"; fail "chat --backend $backend"; }
done
grep -q "chat template: the model's" "$T/err_ref" || fail "the built-in model's chat template was not used"
[ "$(grep -c '^\[.* prompt tokens' "$T/err_ref")" -eq 3 ] || { cat "$T/err_ref"; fail "expected three replies"; }
cached() { grep '^\[.* prompt tokens' "$T/err_ref" | sed -n "$1p" | sed 's/.*, \([0-9]*\) from cache.*/\1/'; }
[ "$(cached 1)" -eq 0 ] || fail "first turn used a cache"
[ "$(cached 2)" -gt 10 ] || { cat "$T/err_ref"; fail "second turn did not reuse the first turn's tokens"; }
[ "$(cached 3)" -eq 0 ] || fail "/reset kept the cache"
grep -q "conversation reset" "$T/err_ref" || fail "/reset not acknowledged"
cmp -s "$T/out_ref" "$T/out_gpu" || fail "gpu and reference replies differ"

# Ctrl-C stops a long reply; the session goes on with the next message.
printf 'Tell me a long story\n' >"$T/in1"
"$VKMOE" chat --backend ref -n 300 <"$T/in1" >/dev/null 2>"$T/err_long" || fail "long reply"
grep -q '; 300 tokens' "$T/err_long" || { cat "$T/err_long"; fail "the long reply ends before 300 tokens"; }
mkfifo "$T/fifo"
"$VKMOE" chat --backend ref -c 4096 -n 100000 <"$T/fifo" >"$T/out_int" 2>"$T/err_int" &
CHAT_PID=$!
exec 3>"$T/fifo"
printf 'Tell me a long story\n' >&3
for _ in $(seq 600); do [ "$(wc -c <"$T/out_int")" -gt 20 ] && break; sleep 0.05; done  # up to 30 s (a loaded CI machine)
kill -INT $CHAT_PID
for _ in $(seq 600); do grep -q "reply stopped" "$T/err_int" && break; sleep 0.05; done
grep -q "reply stopped" "$T/err_int" || { cat "$T/err_int"; fail "Ctrl-C did not stop the reply"; }
printf 'And then?\n' >&3
exec 3>&-
wait $CHAT_PID || { cat "$T/err_int"; fail "chat exited with an error after Ctrl-C"; }
CHAT_PID=
[ "$(grep -c '^\[.* prompt tokens' "$T/err_int")" -eq 2 ] || { cat "$T/err_int"; fail "no reply after Ctrl-C"; }
n_first=$(grep '^\[.* prompt tokens' "$T/err_int" | head -1 | sed 's/.*; \([0-9]*\) tokens.*/\1/')
[ "$n_first" -lt 300 ] || fail "the stopped reply was not cut short ($n_first tokens)"

# A conversation that outgrows the context: a clear message, the session continues.
printf 'one two three four five six seven eight nine ten eleven twelve\nhi\n/reset\nhi\n' >"$T/in2"
"$VKMOE" chat --backend cpu -c 40 -n 8 <"$T/in2" >/dev/null 2>"$T/err_ctx" || { cat "$T/err_ctx"; fail "small context"; }
grep -q "does not fit the context of 40 tokens; /reset to start over" "$T/err_ctx" || { cat "$T/err_ctx"; fail "no context message"; }

echo "chat smoke: all passed"
