#pragma once
// Weight matrices for the GEMM kernel tests (tiled, int8, cooperative matrix):
// ggml bytes plus the dequantized rows the double-precision references use.
#include <cstdint>
#include <cstring>
#include <memory>
#include <random>
#include <vector>

#include "cpu/quant.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe::test {

// One device for a whole test file (pipelines compile once).
inline vk::Context& shared_context() {
  static std::unique_ptr<vk::Context> ctx = vk::Context::create();
  return *ctx;
}

struct QMatrix {
  GgmlType type = GgmlType::F32;
  uint32_t ncols = 0, nrows = 0;
  size_t row_bytes = 0;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // nrows * ncols
};

inline QMatrix make_matrix(GgmlType t, uint32_t ncols, uint32_t nrows) {
  QMatrix m{t, ncols, nrows, row_bytes(t, ncols), {}, {}};
  m.bytes.resize(m.row_bytes * nrows);
  m.deq.resize(size_t(ncols) * nrows);
  return m;
}

inline void dequantize_all(QMatrix& m) {
  for (uint32_t r = 0; r < m.nrows; ++r)
    dequantize_row(m.type, m.bytes.data() + r * m.row_bytes, m.deq.data() + size_t(r) * m.ncols, m.ncols);
}

// Rows of normal values with varied scale and offset per row, quantized by quantize_row.
inline QMatrix quantized_matrix(std::mt19937& rng, GgmlType t, uint32_t ncols, uint32_t nrows) {
  QMatrix m = make_matrix(t, ncols, nrows);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> scale(0.05f, 3.f);
  std::vector<float> row(ncols);
  for (uint32_t r = 0; r < nrows; ++r) {
    const float s = scale(rng), bias = 0.3f * nd(rng);
    for (auto& v : row) v = s * nd(rng) + bias;
    quantize_row(t, row.data(), m.bytes.data() + r * m.row_bytes, ncols);
  }
  dequantize_all(m);
  return m;
}

// Random valid blocks (every quant bit pattern, random 6-bit scales and mins)
// with random finite f16 block scales (MXFP4: exponents 2^-10..1); float types get normal values.
// Cheaper than quantize_row for large matrices.
inline QMatrix random_block_matrix(std::mt19937& rng, GgmlType t, uint32_t ncols, uint32_t nrows) {
  QMatrix m = make_matrix(t, ncols, nrows);
  const size_t n = size_t(ncols) * nrows;
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> scale(0.002f, 0.05f);
  auto put16 = [&](size_t off, uint16_t v) { std::memcpy(m.bytes.data() + off, &v, 2); };
  if (t == GgmlType::F32) {
    for (size_t i = 0; i < n; ++i) {
      const float v = nd(rng);
      std::memcpy(m.bytes.data() + 4 * i, &v, 4);
    }
  } else if (t == GgmlType::F16 || t == GgmlType::BF16) {
    for (size_t i = 0; i < n; ++i) put16(2 * i, t == GgmlType::F16 ? fp32_to_fp16(nd(rng)) : fp32_to_bf16(nd(rng)));
  } else {
    for (auto& b : m.bytes) b = static_cast<uint8_t>(rng());
    const size_t bb = type_traits(t).type_size, blocks = m.bytes.size() / bb;
    for (size_t b = 0; b < blocks; ++b) {
      const size_t o = b * bb;
      switch (t) {
        case GgmlType::Q8_0: put16(o, fp32_to_fp16(scale(rng))); break;
        case GgmlType::Q4_K:
        case GgmlType::Q5_K:  // d, dmin
          put16(o, fp32_to_fp16(scale(rng)));
          put16(o + 2, fp32_to_fp16(scale(rng)));
          break;
        case GgmlType::Q6_K: put16(o + 208, fp32_to_fp16(scale(rng))); break;
        case GgmlType::Q4_0:
        case GgmlType::Q5_0:
        case GgmlType::IQ4_NL:
        case GgmlType::IQ4_XS: put16(o, fp32_to_fp16(scale(rng))); break;
        case GgmlType::Q4_1:
        case GgmlType::Q5_1:  // d, m
          put16(o, fp32_to_fp16(scale(rng)));
          put16(o + 2, fp32_to_fp16(scale(rng)));
          break;
        case GgmlType::MXFP4: m.bytes[o] = uint8_t(118 + rng() % 11); break;  // 2^-10 .. 1
        case GgmlType::Q2_K:
          put16(o + 80, fp32_to_fp16(scale(rng)));
          put16(o + 82, fp32_to_fp16(scale(rng)));
          break;
        case GgmlType::Q3_K: put16(o + 108, fp32_to_fp16(scale(rng))); break;
        default: break;
      }
    }
  }
  dequantize_all(m);
  return m;
}

}  // namespace vkmoe::test
