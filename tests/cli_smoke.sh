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
# plan on a real model's shapes, without building its weights
"$VKMOE" plan --preset gpt-oss-120b --vram-budget 24GiB 2>/dev/null | grep -q "^mode: expert-cache" || fail "plan --preset gpt-oss-120b"
# logits: every position, n_tokens x n_vocab float32; the GPU's match the reference's
for backend in ref gpu; do
  "$VKMOE" logits -m "$T/olmoe.gguf" --backend $backend --kv-type f32 --tokens 3,1,4,1,5 -o "$T/l_$backend.f32" 2>/dev/null || fail "logits --backend $backend"
done
python3 - "$T/l_ref.f32" "$T/l_gpu.f32" <<'PY' || fail "logits content"
import array, sys
a, b = array.array("f"), array.array("f")
a.frombytes(open(sys.argv[1], "rb").read()); b.frombytes(open(sys.argv[2], "rb").read())
assert len(a) == 5 * 600 == len(b), len(a)
assert max(abs(x - y) for x, y in zip(a, b)) < 2e-3 * max(abs(x) for x in a)
PY

# bench: llama-bench table (one row per test, t/s as mean ± sd), JSON with the raw samples.
"$VKMOE" bench -m "$T/olmoe.gguf" -p 8 -n 4 -r 1 >"$T/b.md" 2>"$T/b.err" || { cat "$T/b.err"; fail bench; }
grep -qx '| model | size | params | backend | moe | n_ubatch | type_kv | ttft ms | test | t/s |' "$T/b.md" || { cat "$T/b.md"; fail "bench table header"; }
grep -Eqx '\| olmoe [^|]+ \| [0-9.]+ MiB \| [0-9.]+ M \| gpu \| resident \| 512 \| f16 \| [0-9.]+ \| pp8 \| [0-9.]+ ± 0.00 \|' "$T/b.md" || { cat "$T/b.md"; fail "bench pp8 row"; }
grep -Eqx '\| olmoe .* \| - \| tg4 \| [0-9.]+ ± 0.00 \|' "$T/b.md" || { cat "$T/b.md"; fail "bench tg4 row"; }
[ "$(grep -c '^| olmoe' "$T/b.md")" -eq 2 ] || fail "bench printed other than 2 rows"
# --progress: each run (the warm-up and -r timed ones) and its wall time on stderr, as it ends.
"$VKMOE" bench -m "$T/olmoe.gguf" -p 8 -n 0 -r 2 --progress >/dev/null 2>"$T/p.err" || { cat "$T/p.err"; fail "bench --progress"; }
[ "$(grep -Ec '^vkmoe bench: test 1/1: (warm-up|run [12]/2) [0-9.]+ ms$' "$T/p.err")" -eq 3 ] || { cat "$T/p.err"; fail "bench --progress lines"; }
"$VKMOE" bench --backend cpu -p 8,6 -n 2 -d 0,4 -ub 3 -r 2 --kv-type f32 -o json >"$T/b.json" 2>"$T/b.err" || { cat "$T/b.err"; fail "bench -o json"; }
python3 - "$T/b.json" <<'PY' || fail "bench -o json content"
import json, sys
rows = json.load(open(sys.argv[1]))
assert [r["test"] for r in rows] == ["pp8", "pp6", "tg2", "pp8 @ d4", "pp6 @ d4", "tg2 @ d4"], [r["test"] for r in rows]
for r in rows:
    assert r["n_ubatch"] == 3 and r["type_k"] == "f32" and r["backend"] == "cpu" and r["n_ctx"] == 12, r
    assert len(r["samples_ns"]) == 2 and len(r["samples_ts"]) == 2 and r["avg_ts"] > 0 and r["avg_ns"] > 0, r
    n = r["n_prompt"] + r["n_gen"]
    assert all(abs(t - 1e9 * n / ns) < 1e-3 * t for t, ns in zip(r["samples_ts"], r["samples_ns"])), r
    assert (r["ttft_ms"] is None) == (r["n_prompt"] == 0), r
    assert r["n_depth"] == (4 if "@ d4" in r["test"] else 0) and "vram_bytes" in r and r["engine"], r
PY
"$VKMOE" bench -p 0 -n 0 -pg 4,2 -r 1 --moe-mode expert-cache --vram-budget 400MiB --expert-stats -o jsonl \
  >"$T/b.jsonl" 2>"$T/b.err" || { cat "$T/b.err"; fail "bench -pg -o jsonl"; }
python3 -c '
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 1 and rows[0]["test"] == "pp4+tg2" and rows[0]["moe_mode"] == "expert-cache", rows
assert rows[0]["vram_bytes"] > 0 and rows[0]["ttft_ms"] > 0, rows' "$T/b.jsonl" || fail "bench -pg -o jsonl content"
grep -q "hit-rate" "$T/b.err" || fail "bench --expert-stats printed no table"
"$VKMOE" synth --set n_layer=1,n_ctx=8192,n_vocab=512 -o "$T/long.gguf" 2>/dev/null || fail "synth n_ctx=8192"
"$VKMOE" bench -m "$T/long.gguf" --backend cpu -p 0 -n 1 -d 4100 -r 1 -o csv >"$T/b.csv" 2>"$T/b.err" || { cat "$T/b.err"; fail "bench beyond the default context"; }
grep -q '"tg1 @ d4100"' "$T/b.csv" || fail "bench -o csv"

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
expect_error "logits needs --tokens" "$VKMOE" logits -o "$T/x.f32"
expect_error "needs an integer" "$VKMOE" run -n many
expect_error "unknown backend" "$VKMOE" run --backend tpu
expect_error "-ub/--ubatch-size must be at least 1, got 0" "$VKMOE" bench -ub 0
expect_error "--kv-type must be f16, f32 or q8_0" "$VKMOE" run --kv-type q4_0
expect_error "-o/--output must be md, json, jsonl or csv" "$VKMOE" bench -o xml
expect_error "-p/--n-prompt must be at least 0, got -3" "$VKMOE" bench -p -3
expect_error "-n/--n-gen needs comma-separated integers" "$VKMOE" bench -n 4,,2
expect_error "-d/--n-depth needs comma-separated integers" "$VKMOE" bench -d 1k
expect_error "-r/--repetitions must be at least 1" "$VKMOE" bench -r 0
expect_error "-pg needs two values" "$VKMOE" bench -pg 8
expect_error "nothing to bench" "$VKMOE" bench -p 0 -n 0
expect_error "-c/--ctx 8 is smaller than the 12 tokens" "$VKMOE" bench -p 8 -n 4 -d 4 -c 8
expect_error "needs 5000 tokens but the model's context is 4096" "$VKMOE" bench -p 5000 -n 0
# Options: unknown ones and bad numbers are errors naming the option, in every command.
expect_error "unknown option '--n-predcit' for run (did you mean --n-predict?)" "$VKMOE" run --n-predcit 2
expect_error "unknown option '--vram_budget' for plan (did you mean --vram-budget?)" "$VKMOE" plan --vram_budget 1MiB
expect_error "unknown option '--temp' for bench" "$VKMOE" bench --temp 0.5
expect_error "unknown option '--verbose' for info" "$VKMOE" info --verbose
expect_error "unknown option '--ctx' for synth" "$VKMOE" synth -o "$T/x.gguf" --ctx 8
expect_error "unknown option '--iter' for bench-shaders (did you mean --iters?)" "$VKMOE" bench-shaders --iter 3
expect_error "-n/--n-predict must be at least 0, got -5" "$VKMOE" run -n -5
expect_error "-p/--n-prompt must be at least 0, got -1" "$VKMOE" bench -p -1
expect_error "-n/--n-gen must be at least 0, got -3" "$VKMOE" bench -p 0 -n -3
expect_error "--device must be at most 2147483647, got 4294967296" "$VKMOE" run --device 4294967296
expect_error "-t/--threads must be at most 1024, got 4294967297" "$VKMOE" run -t 4294967297
expect_error "-t/--threads must be at least 1, got 0" "$VKMOE" bench -t 0
expect_error "--temp needs a number, got '0.7abc'" "$VKMOE" run --temp 0.7abc
expect_error "--top-p needs a finite number, got 'nan'" "$VKMOE" run --top-p nan
expect_error "--capacity-ratio needs a finite number, got 'inf'" "$VKMOE" plan --capacity-ratio inf
expect_error "--iters must be at least 1, got 0" "$VKMOE" bench-shaders --iters 0
expect_error "Vulkan device 99 does not exist (.*; see \`vkmoe info\`)" "$VKMOE" run --device 99
# --vram-budget 0 is the device's free memory in plan as in run.
"$VKMOE" plan --vram-budget 0 2>/dev/null | grep -q "blk.\*.ffn_up_exps.weight" || fail "plan --vram-budget 0"
# A synth that fails while writing leaves no temp file (attn_q would need 2^58 bytes).
if [ -z "${VKMOE_SANITIZED:-}" ]; then
  expect_error "out of host memory" "$VKMOE" synth --set n_head=67108864,head_dim=33554432 -o "$T/huge.gguf"
  [ ! -e "$T/huge.gguf.tmp" ] || fail "synth left $T/huge.gguf.tmp"
fi
expect_error "no Vulkan driver" env VK_ICD_FILENAMES=/nonexistent.json VK_DRIVER_FILES=/nonexistent.json "$VKMOE" run
# A lost device (injected): one error line and exit 1, also with the expert cache's upload thread.
expect_error "Vulkan device lost" env VKMOE_FAULT_DEVICE_LOST=after:3 "$VKMOE" run -n 8
expect_error "Vulkan device lost" env VKMOE_FAULT_DEVICE_LOST=after:20 "$VKMOE" run -n 8 --moe-mode expert-cache
# Out of VRAM after the trunk (injected): a warning, and the same text from the CPU experts.
env VKMOE_FAIL_DEVICE_ALLOC=from:blk.0.ffn_gate_exps "$VKMOE" run -p "Hello" -n 8 >"$T/oom.txt" 2>"$T/oom.err" || { cat "$T/oom.err"; fail "run out of VRAM"; }
grep -q "vkmoe: warning: out of VRAM allocating the resident experts" "$T/oom.err" || { cat "$T/oom.err"; fail "no out-of-VRAM warning"; }
cmp -s "$T/oom.txt" "$T/run_gpu.txt" || fail "the text changed when VRAM ran out"
echo "cli smoke: all passed"
