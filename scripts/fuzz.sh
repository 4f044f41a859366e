#!/usr/bin/env bash
# Builds the libFuzzer targets with clang (build-fuzz/, ASan + coverage) and
# runs each for SECONDS (default 60) over its corpus in fuzz/corpus/: fuzz_gguf
# (GGUF parse, model checks, tokenizer, plan) and fuzz_template (chat-template
# parse and render). New inputs go to build-fuzz/corpus-new/, crashes to
# build-fuzz/artifacts/; any finding fails the script. CI runs it bounded;
# run it longer by hand: scripts/fuzz.sh 3600
set -euo pipefail
cd "$(dirname "$0")/.."
seconds=${1:-60}
if ! scripts/ensure_packages.sh clang libclang-rt-14-dev; then
  echo "fuzz: SKIPPED: clang and libFuzzer (Debian: clang libclang-rt-14-dev) could not be installed" >&2
  exit 0
fi
[ -d build-fuzz ] || CC=clang CXX=clang++ cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DVKMOE_FUZZ=ON >/dev/null
cmake --build build-fuzz -j"$(nproc)" --target fuzz_gguf fuzz_template
mkdir -p build-fuzz/artifacts
for target in gguf template; do
  new=build-fuzz/corpus-new/$target
  mkdir -p "$new"
  echo "fuzz_$target: ${seconds} s over fuzz/corpus/$target"
  # -rss_limit_mb: a render may build up to 128 MiB of text (RenderBudget), a
  # model file's metadata a few times its size; -timeout: seconds per input (a
  # template that spends a render's whole step budget in each of the three
  # conversations took 35 s under ASan and coverage: ~1 s in a release build).
  log=build-fuzz/fuzz_$target.log
  if ! build-fuzz/fuzz_$target "$new" "fuzz/corpus/$target" -max_total_time="$seconds" -timeout=120 \
      -rss_limit_mb=4096 -artifact_prefix=build-fuzz/artifacts/ -print_final_stats=1 >"$log" 2>&1; then
    tail -40 "$log"
    echo "fuzz_$target found a failure (input in build-fuzz/artifacts/, log in $log)"
    exit 1
  fi
  grep -E "^stat::(number_of_executed_units|peak_rss_mb)" "$log" | tr '\n' ' '; echo
done
echo "fuzz: no findings"
