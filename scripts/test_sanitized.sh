#!/usr/bin/env bash
# Builds the suite with AddressSanitizer + UndefinedBehaviorSanitizer into
# build-san/ and runs the CPU and lavapipe tests under them (any finding fails
# the test that made it). Run after scripts/build.sh (packages, glslang cache).
set -euo pipefail
cd "$(dirname "$0")/.."
cmake -S . -B build-san -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g" \
  -DVKMOE_SANITIZE=ON >/dev/null
cmake --build build-san -j"$(nproc)"
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
# ASan aborts on an impossible operator new where the tests expect bad_alloc:
# the scripted tests skip those cases when this is set (the gtest ones are
# compiled with VKMOE_SANITIZED).
export VKMOE_SANITIZED=1
export LSAN_OPTIONS=suppressions=$PWD/tests/sanitizer/lsan.supp:print_suppressions=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
ctest --test-dir build-san --output-on-failure -j2
