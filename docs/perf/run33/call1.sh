# Prepared in session 38 for the next device session: per-op GPU time of one resident
# pp512 in both engines on the H200 (llama.cpp's GGML_VK_PERF_LOGGER, as run 18 did on
# the H100; vkmoe's VKMOE_PROFILE), to find the ops where llama.cpp is still faster.
set -uo pipefail
source scripts/device_env.sh
echo "build $(cat devbin_scripts/HEAD)"
qwen3_model; unpack_llama
{
warm_up; echo "--- llama.cpp -fa 1, GGML_VK_PERF_LOGGER (the second 'Vulkan Timings' block is a steady pp512)"
GGML_VK_PERF_LOGGER=1 /tmp/ll/llama-bench -m $MODEL -ngl 99 -p 512 -n 0 -r 2 -fa 1 2>&1 | grep -v "^ggml_vulkan\|^load_backend"
warm_up; echo "--- vkmoe VKMOE_PROFILE"
VKMOE_PROFILE=1 $B/vkmoe bench -m $MODEL -p 512 -n 0 -r 3 --expert-stats 2>&1 | grep -A16 "GPU time per prompt"
echo "--- vkmoe expert kernels alone"
VKMOE_COOPMAT_BENCH=1 timeout 60 $B/vkmoe_tests --gtest_filter='*GemmCoopmatBench*/coopmat' 2>&1 | grep -E " ids |dense"
} 2>&1 | tee "$OUT/ops.txt"
