#pragma once
// Weight matrices for the GEMM kernel tests (tiled, int8, cooperative matrix):
// ggml bytes plus the dequantized rows the double-precision references use.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "cpu/quant.h"
#include "engine/vulkan/moe_table.h"
#include "engine/vulkan/vk_moe.h"
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

// A MoE table (engine/vulkan/moe_table.h) for random top-k routing of n_tokens
// over the first n_used of n_experts, k distinct experts a token, grouped by
// the engine's host builder (its own tests check it against the GPU grouping).
// Around the builder's tiles, what the expert-grouped GEMMs must get right: one
// more counted tile with expert -1 (skipped, although its slots name real
// tokens and pairs) and, past the count, tiles naming expert 0 and real tokens
// (they must not run).
struct MoeTestTable {
  MoeTableLayout layout;
  std::vector<uint32_t> words;
  uint32_t used_tiles = 0;  // counted, the skipped tile included
  int32_t tile_expert(uint32_t i) const { return int32_t(words[layout.tile_expert_off + i]); }
  int32_t slot_token(uint32_t s) const { return int32_t(words[layout.slot_token_off + s]); }
  int32_t slot_pair(uint32_t s) const { return int32_t(words[layout.slot_pair_off + s]); }
  // The expert whose product a slot gets; -1: none (padding, skipped or uncounted tile).
  int32_t slot_expert(uint32_t s) const {
    const uint32_t tile = s / kMoeTileRows;
    return tile < used_tiles && slot_token(s) >= 0 ? tile_expert(tile) : -1;
  }
};

inline MoeTestTable random_moe_table(std::mt19937& rng, uint32_t n_tokens, uint32_t k, uint32_t n_experts,
                                     uint32_t n_used) {
  MoeTestTable h;
  h.layout = MoeTableLayout::make(n_tokens, k, n_experts + 1);  // + the skipped tile's group
  const MoeTableLayout& l = h.layout;
  std::vector<int32_t> ids(l.pairs()), experts(n_used), group_of_expert(n_experts);
  std::iota(experts.begin(), experts.end(), 0);
  std::iota(group_of_expert.begin(), group_of_expert.end(), 0);
  for (uint32_t tok = 0; tok < n_tokens; ++tok) {
    std::shuffle(experts.begin(), experts.end(), rng);
    std::copy_n(experts.begin(), k, ids.begin() + tok * k);
  }
  h.words.resize(l.words);
  vk::build_moe_table(ids.data(), l, group_of_expert.data(), n_experts, h.words.data());
  uint32_t tile = h.words[l.count_off];
  auto add_tile = [&](int32_t expert, std::initializer_list<uint32_t> tokens) {
    h.words[l.tile_expert_off + tile] = uint32_t(expert);
    uint32_t s = tile * kMoeTileRows;
    for (uint32_t tok : tokens) {
      h.words[l.slot_token_off + s] = tok % n_tokens;
      h.words[l.slot_pair_off + s++] = tok % n_tokens * k;
    }
    ++tile;
  };
  // Always room: MoeTableLayout counts one partial tile per group, and there is one group more.
  add_tile(-1, {0, 1, 2});
  h.used_tiles = h.words[l.count_off] = tile;
  while (tile < l.max_tiles) add_tile(0, {0, 1});
  return h;
}

}  // namespace vkmoe::test
