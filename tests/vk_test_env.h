#pragma once
// A Vulkan device (lavapipe in CI) with fresh random inputs for the shader
// tests: host-visible buffers to fill and read, and one-shot recording.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "engine/vulkan/vk_runtime.h"
#include "tests/seed.h"

namespace vkmoe::test {

// Whether device-clock stamp b is not before a: a 64-bit clock, or a 32-bit
// one (lavapipe's: high words 0) that wraps every 2^32 ticks.
inline bool clock_not_before(uint64_t b, uint64_t a) {
  if ((a >> 32) == 0 && (b >> 32) == 0) return int32_t(uint32_t(b) - uint32_t(a)) >= 0;
  return b >= a;
}

struct VkEnv {
  std::unique_ptr<vk::Context> ctx = vk::Context::create();
  uint32_t seed = uint32_t(test_seed());  // printed with SCOPED_TRACE; VKMOE_TEST_SEED replays it
  std::mt19937 rng{seed};

  std::vector<float> randn(size_t n, float sd = 1.f) {
    std::normal_distribution<float> nd(0, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
  }
  vk::Buffer bytes(const void* src, size_t n) {
    vk::Buffer b = ctx->create_buffer(std::max<size_t>(n, 4), vk::MemoryKind::Upload, "test");
    if (n) std::memcpy(b.data(), src, n);  // src may be null for an empty vector
    return b;
  }
  template <class T>
  vk::Buffer buf(const std::vector<T>& v) {
    return bytes(v.data(), v.size() * sizeof(T));
  }
  template <class T = float>
  std::vector<T> read(const vk::Buffer& b, size_t n) {
    std::vector<T> v(n);
    std::memcpy(v.data(), b.data(), n * sizeof(T));
    return v;
  }
  template <class Fn>
  void record(Fn&& fn) {
    vk::Recorder r(*ctx);
    r.begin();
    fn(r);
    r.submit().wait();
  }
  template <class Push>
  void run(const char* shader, std::initializer_list<vk::BufferRange> bindings, const Push& pc, uint32_t gx,
           uint32_t gy = 1) {
    const vk::Pipeline& p = ctx->pipeline(shader, static_cast<uint32_t>(bindings.size()), sizeof(Push));
    record([&](vk::Recorder& r) { r.dispatch(p, bindings, pc, gx, gy); });
  }
};

}  // namespace vkmoe::test
