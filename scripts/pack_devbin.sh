#!/usr/bin/env bash
# Collects the binaries and the shared libraries Debian provides but the GPU
# machine lacks into devbin/ (git-ignored) for the device tool's `carry`.
set -euo pipefail
cd "$(dirname "$0")/.."
rm -rf devbin && mkdir -p devbin/lib
cp build/vkmoe build/vkmoe_tests build/bench_cpu_kernels devbin/
strip devbin/vkmoe devbin/vkmoe_tests devbin/bench_cpu_kernels
# vkmoe serve links cpp-httplib and what it was built with (TLS, zlib, brotli).
for so in libhwy.so.1 libbenchmark.so.1debian libgtest.so.1.12.1 libgtest_main.so.1.12.1 libcpp-httplib.so.0.11 \
    libssl.so.3 libcrypto.so.3 libbrotlidec.so.1 libbrotlienc.so.1 libbrotlicommon.so.1; do
  [ -e /usr/lib/x86_64-linux-gnu/$so ] && cp -L /usr/lib/x86_64-linux-gnu/$so devbin/lib/
done
du -sh devbin
