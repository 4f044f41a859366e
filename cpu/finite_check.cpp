#include "cpu/finite_check.h"

#include <cstddef>
#include <cstring>
#include <vector>

namespace vkmoe {

bool all_finite(const float* x, size_t n) {
  // x * 0 is ±0 for finite x and NaN for NaN or ±Inf, so the sum of the
  // products is 0 exactly when all are finite. Explicit 4-wide vectors and
  // eight accumulators: -O2 leaves the plain loop scalar.
  typedef float V4 __attribute__((vector_size(16)));
  typedef float V4Unaligned __attribute__((vector_size(16), aligned(4)));
  constexpr int kAcc = 8;
  V4 acc[kAcc] = {};
  size_t i = 0;
  for (; i + 4 * kAcc <= n; i += 4 * kAcc)
    for (int k = 0; k < kAcc; ++k) acc[k] += *reinterpret_cast<const V4Unaligned*>(x + i + 4 * k) * 0.0f;
  V4 a = acc[0];
  for (int k = 1; k < kAcc; ++k) a += acc[k];
  float sum = a[0] + a[1] + a[2] + a[3];
  for (; i < n; ++i) sum += x[i] * 0.0f;
  return sum == 0.0f;
}

namespace {

bool f16_finite(uint16_t h) { return (h & 0x7C00) != 0x7C00; }
bool bf16_finite(uint16_t h) { return (h & 0x7F80) != 0x7F80; }
bool f32_finite(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return (u & 0x7F800000) != 0x7F800000;
}

// The fp16 scales and mins (field offsets in the block) of the quantized
// types whose values are integer combinations of them.
struct ScaleField {
  size_t offset;
  const char* name;
};
struct ScaleLayout {
  ScaleField f[2];
  int n;
};
std::optional<ScaleLayout> fp16_scales(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return ScaleLayout{{{offsetof(BlockQ8_0, d), "scale d"}}, 1};
    case GgmlType::Q4_K:
      return ScaleLayout{{{offsetof(BlockQ4_K, d), "scale d"}, {offsetof(BlockQ4_K, dmin), "min scale dmin"}}, 2};
    case GgmlType::Q5_K:
      return ScaleLayout{{{offsetof(BlockQ5_K, d), "scale d"}, {offsetof(BlockQ5_K, dmin), "min scale dmin"}}, 2};
    case GgmlType::Q6_K: return ScaleLayout{{{offsetof(BlockQ6_K, d), "scale d"}}, 1};
    case GgmlType::Q4_0: return ScaleLayout{{{offsetof(BlockQ4_0, d), "scale d"}}, 1};
    case GgmlType::Q5_0: return ScaleLayout{{{offsetof(BlockQ5_0, d), "scale d"}}, 1};
    case GgmlType::Q4_1:
      return ScaleLayout{{{offsetof(BlockQ4_1, d), "scale d"}, {offsetof(BlockQ4_1, m), "min m"}}, 2};
    case GgmlType::Q5_1:
      return ScaleLayout{{{offsetof(BlockQ5_1, d), "scale d"}, {offsetof(BlockQ5_1, m), "min m"}}, 2};
    case GgmlType::IQ4_NL: return ScaleLayout{{{offsetof(BlockIQ4_NL, d), "scale d"}}, 1};
    case GgmlType::IQ4_XS: return ScaleLayout{{{offsetof(BlockIQ4_XS, d), "scale d"}}, 1};
    case GgmlType::Q2_K:
      return ScaleLayout{{{offsetof(BlockQ2_K, d), "scale d"}, {offsetof(BlockQ2_K, dmin), "min scale dmin"}}, 2};
    case GgmlType::Q3_K: return ScaleLayout{{{offsetof(BlockQ3_K, d), "scale d"}}, 1};
    default: return std::nullopt;
  }
}

template <class Bits, class Finite>
std::optional<NonFiniteBlock> scan_elements(const void* data, int64_t begin, int64_t end, Finite finite) {
  const auto* p = static_cast<const uint8_t*>(data);
  for (int64_t i = begin; i < end; ++i) {
    Bits v;
    std::memcpy(&v, p + i * sizeof(Bits), sizeof(Bits));
    if (!finite(v)) return NonFiniteBlock{i, "value"};
  }
  return std::nullopt;
}

}  // namespace

std::optional<NonFiniteBlock> find_non_finite_block(GgmlType t, const void* data, int64_t begin, int64_t end) {
  switch (t) {
    case GgmlType::F32: return scan_elements<float>(data, begin, end, f32_finite);
    case GgmlType::F16: return scan_elements<uint16_t>(data, begin, end, f16_finite);
    case GgmlType::BF16: return scan_elements<uint16_t>(data, begin, end, bf16_finite);
    default: break;
  }
  const TypeTraits& tt = type_traits(t);
  const auto* p = static_cast<const uint8_t*>(data);
  if (const auto layout = fp16_scales(t)) {
    for (int64_t b = begin; b < end; ++b)
      for (int k = 0; k < layout->n; ++k) {
        uint16_t h;
        std::memcpy(&h, p + b * tt.type_size + layout->f[k].offset, 2);
        if (!f16_finite(h)) return NonFiniteBlock{b, layout->f[k].name};
      }
    return std::nullopt;
  }
  if (t == GgmlType::MXFP4) {  // an E8M0 scale of 0xFF is NaN (OCP MX spec)
    for (int64_t b = begin; b < end; ++b)
      if (p[b * tt.type_size + offsetof(BlockMXFP4, e)] == 0xFF) return NonFiniteBlock{b, "scale e"};
    return std::nullopt;
  }
  std::vector<float> v(tt.block_size);
  for (int64_t b = begin; b < end; ++b) {
    dequantize_row(t, p + b * tt.type_size, v.data(), tt.block_size);
    if (!all_finite(v.data(), v.size())) return NonFiniteBlock{b, "value"};
  }
  return std::nullopt;
}

}  // namespace vkmoe
