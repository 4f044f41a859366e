// The int8 dot-product GEMM path (engine/vulkan/gemm_int8.cpp) on fresh random
// inputs (runs on lavapipe, which has VK_KHR_shader_integer_dot_product).
// Each run reads back the quantized activations from the scratch buffer and checks:
//  - the quantizer: per 32-block d = max|x| / 127 (relative 1e-6), |q - x / d| <= 0.5 + 1e-4,
//    stored d * sum q (relative 1e-6);
//  - the product against a double-precision reference on those same int8
//    activations x~ = d q: |y - W.x~| <= 1e-6 * sum_i (|w_i| + B_i) |x~_i|, B_i = max |w|
//    over i's 32-block (bounds the K-quant scale and min terms, each <= ~2 B_i, summed
//    in f32; measured errors are ~3e-8 of it);
//  - the product against the f32 reference on x with the Q8 activation bound of
//    vk_matvec.h: |y - W.x| <= that tolerance + sum_i |w_i| dx(i) / 2 (1 + 1e-5);
//  - outputs outside the written rows and columns keep their values.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "cpu/quant.h"
#include "engine/vulkan/gemm_paths.h"
#include "engine/vulkan/vk_runtime.h"

#include "tests/gemm_test_util.h"
#include "tests/seed.h"
using namespace vkmoe;
using namespace vkmoe::vk;

namespace {

const GgmlType kTypes[] = {GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};
const uint32_t kTokenCounts[] = {1, 13, 64, 100};


// ncols that exercise a partial K-step (Q8_0: 13 blocks of 32) or several super-blocks.
uint32_t test_ncols(GgmlType t) { return t == GgmlType::Q8_0 ? 416 : 768; }



// Random activations with varied magnitudes per 32-block, some blocks all zero.
std::vector<float> random_x(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> scale(0.01f, 4.f);
  std::vector<float> x(n);
  for (size_t b = 0; b < n; b += 32) {
    const float s = (rng() % 23 == 0) ? 0.f : scale(rng);
    for (size_t i = b; i < std::min(n, b + 32); ++i) x[i] = s * nd(rng);
  }
  return x;
}

// Scratch contents: int8 q per row (ncols), then per block (d, d * sum q).
struct QuantizedX {
  uint32_t ncols = 0, rows = 0;
  std::vector<int8_t> q;
  std::vector<float> ds;  // 2 per block
  double value(uint32_t r, uint32_t i) const {
    return double(ds[(size_t(r) * (ncols / 32) + i / 32) * 2]) * q[size_t(r) * ncols + i];
  }
};

QuantizedX read_scratch(Context& ctx, const Buffer& scratch, uint32_t ncols, uint32_t rows) {
  QuantizedX qx{ncols, rows, std::vector<int8_t>(size_t(rows) * ncols), std::vector<float>(size_t(rows) * ncols / 16)};
  EXPECT_EQ(gemm_int8_scratch_bytes(ncols, rows), qx.q.size() + qx.ds.size() * 4);
  ctx.read_buffer(scratch, 0, qx.q.data(), qx.q.size());
  ctx.read_buffer(scratch, qx.q.size(), qx.ds.data(), qx.ds.size() * 4);
  return qx;
}

// Checks row r of the quantized activations against the f32 row x.
void check_quantized_row(const QuantizedX& qx, uint32_t r, const float* x) {
  const uint32_t nblk = qx.ncols / 32;
  for (uint32_t b = 0; b < nblk; ++b) {
    float amax = 0;
    for (uint32_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    const double d = qx.ds[(size_t(r) * nblk + b) * 2], dsum = qx.ds[(size_t(r) * nblk + b) * 2 + 1];
    ASSERT_NEAR(d, amax / 127.0, 1e-6 * amax / 127.0) << "row " << r << " block " << b;
    int64_t sum = 0;
    for (uint32_t i = 0; i < 32; ++i) {
      const int q = qx.q[size_t(r) * qx.ncols + b * 32 + i];
      sum += q;
      if (amax == 0) {
        ASSERT_EQ(q, 0);
      } else {
        ASSERT_LE(std::fabs(q - x[b * 32 + i] * 127.0 / amax), 0.5 + 1e-4) << "row " << r << " element " << b * 32 + i;
      }
    }
    ASSERT_NEAR(dsum, d * double(sum), 1e-6 * std::fabs(d * double(sum)) + 1e-30) << "row " << r << " block " << b;
  }
}

// Checks one output y against weight row w (deq) and activation row x (f32) / qx row xr.
void check_output(float y, double base, const float* w, const float* x, const QuantizedX& qx, uint32_t xr,
                  uint32_t ncols, const char* where) {
  double ref_q = 0, ref_f = 0, mag = 0, q8_bound = 0;
  for (uint32_t b = 0; b < ncols; b += 32) {
    float wmax = 0, xmax = 0;
    for (uint32_t i = b; i < b + 32; ++i) {
      wmax = std::max(wmax, std::fabs(w[i]));
      xmax = std::max(xmax, std::fabs(x[i]));
    }
    for (uint32_t i = b; i < b + 32; ++i) {
      const double xq = qx.value(xr, i);
      ref_q += double(w[i]) * xq;
      ref_f += double(w[i]) * x[i];
      mag += (std::fabs(w[i]) + wmax) * std::fabs(xq);
      q8_bound += std::fabs(w[i]) * xmax / 127.0 / 2;
    }
  }
  const double tol = 1e-6 * (mag + std::fabs(base)) + 1e-30;
  ASSERT_NEAR(y, base + ref_q, tol) << where << " (int8 activations)";
  ASSERT_NEAR(y, base + ref_f, tol + q8_bound * (1 + 1e-5)) << where << " (f32 activations, Q8 bound)";
}

class GemmInt8 : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    if (!gemm_int8_available(test::shared_context(), GetParam()))
      GTEST_SKIP() << "no int8 GEMM for " << type_name(GetParam()) << " on " << test::shared_context().info().name;
    seed_ = uint32_t(test::test_seed());
    rng_.seed(seed_);
  }
  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

}  // namespace

// Dense product: n_tokens 1, 13, 64, 100 (partial token and row tiles), offsets
// and strides on every operand, with and without accumulate.
TEST_P(GemmInt8, Dense) {
  SCOPED_TRACE("seed=" + std::to_string(seed_));
  const GgmlType t = GetParam();
  Context& ctx = test::shared_context();
  const uint32_t ncols = test_ncols(t), nrows = 100;
  const test::QMatrix m = test::quantized_matrix(rng_, t, ncols, nrows);
  const uint32_t w_off = 48;
  Buffer wb = ctx.create_buffer(w_off + m.bytes.size(), MemoryKind::Device, "w");
  ctx.write_buffer(wb, w_off, m.bytes.data(), m.bytes.size());
  bool accumulate = false;
  for (uint32_t n_tokens : kTokenCounts) {
    SCOPED_TRACE(std::string(type_name(t)) + " n_tokens=" + std::to_string(n_tokens) + (accumulate ? " accumulate" : ""));
    const uint32_t x_off = 3, x_stride = ncols + 5, y_off = 7, y_stride = nrows + 3;
    const std::vector<float> x = random_x(rng_, x_off + size_t(x_stride) * n_tokens);
    const std::vector<float> y0 = random_x(rng_, y_off + size_t(y_stride) * n_tokens + 4);
    Buffer xb = ctx.create_buffer(x.size() * 4, MemoryKind::Device, "x");
    Buffer yb = ctx.create_buffer(y0.size() * 4, MemoryKind::Device, "y");
    Buffer sb = ctx.create_buffer(gemm_int8_scratch_bytes(ncols, n_tokens), MemoryKind::Device, "scratch");
    ctx.write_buffer(xb, 0, x.data(), x.size() * 4);
    ctx.write_buffer(yb, 0, y0.data(), y0.size() * 4);

    GemmArgs a;
    a.type = t;
    a.ncols = ncols;
    a.nrows = nrows;
    a.n_tokens = n_tokens;
    a.w = BufferRange(wb);
    a.w_offset = w_off;
    a.x = BufferRange(xb);
    a.x_offset = x_off;
    a.x_stride = x_stride;
    a.y = BufferRange(yb);
    a.y_offset = y_off;
    a.y_stride = y_stride;
    a.accumulate = accumulate;
    a.scratch = BufferRange(sb);
    Recorder rec(ctx);
    rec.begin();
    record_gemm_int8(rec, a, nullptr);
    rec.submit().wait();
    std::vector<float> y(y0.size());
    ctx.read_buffer(yb, 0, y.data(), y.size() * 4);
    const QuantizedX qx = read_scratch(ctx, sb, ncols, n_tokens);

    std::vector<bool> written(y.size(), false);
    for (uint32_t n = 0; n < n_tokens; ++n) {
      const float* xn = x.data() + x_off + size_t(n) * x_stride;
      check_quantized_row(qx, n, xn);
      for (uint32_t r = 0; r < nrows; ++r) {
        const size_t yi = y_off + size_t(n) * y_stride + r;
        written[yi] = true;
        const std::string where = "token " + std::to_string(n) + " row " + std::to_string(r);
        check_output(y[yi], accumulate ? y0[yi] : 0.0, m.deq.data() + size_t(r) * ncols, xn, qx, n, ncols,
                     where.c_str());
        if (HasFatalFailure()) return;
      }
    }
    for (size_t i = 0; i < y.size(); ++i) {
      if (!written[i]) {
        ASSERT_EQ(y[i], y0[i]) << "y[" << i << "] outside the output was modified";
      }
    }
    accumulate = !accumulate;
  }
}

// Expert-grouped product over a host-built MoeTable: k = 4 of 6 experts per
// token, padded tiles, a tile with expert -1 and stale tiles past the used
// count (all must leave y alone), activations gathered per token and per slot,
// outputs per slot and per routing pair (the down product's, y_by_pair).
TEST_P(GemmInt8, Indexed) {
  SCOPED_TRACE("seed=" + std::to_string(seed_));
  const GgmlType t = GetParam();
  Context& ctx = test::shared_context();
  const uint32_t ncols = test_ncols(t), nrows = 70, n_experts = 6, k = 4;
  std::vector<test::QMatrix> experts;
  for (uint32_t e = 0; e < n_experts; ++e) experts.push_back(test::quantized_matrix(rng_, t, ncols, nrows));
  const size_t ebytes = experts[0].bytes.size(), stride = (ebytes + 15) / 16 * 16 + 16;
  const uint32_t w_off = 32;
  Buffer wb = ctx.create_buffer(w_off + stride * n_experts, MemoryKind::Device, "experts");
  for (uint32_t e = 0; e < n_experts; ++e) ctx.write_buffer(wb, w_off + e * stride, experts[e].bytes.data(), ebytes);

  bool accumulate = false;
  for (uint32_t n_tokens : kTokenCounts) {
    for (const auto [gather_x, by_pair] : {std::pair{true, false}, {false, false}, {false, true}}) {
      SCOPED_TRACE(std::string(type_name(t)) + " n_tokens=" + std::to_string(n_tokens) +
                   (gather_x ? " gathered x" : " slot x") + (by_pair ? " y by pair" : "") +
                   (accumulate ? " accumulate" : ""));
      const test::MoeTestTable table = test::random_moe_table(rng_, n_tokens, k, n_experts, n_experts);
      const MoeTableLayout& L = table.layout;

      const uint32_t x_rows = gather_x ? n_tokens : L.max_slots();
      const uint32_t x_off = 5, x_stride = ncols + 1, y_off = 2, y_stride = nrows + 6;
      const std::vector<float> x = random_x(rng_, x_off + size_t(x_stride) * x_rows);
      const uint32_t y_rows = by_pair ? L.pairs() : L.max_slots();
      const std::vector<float> y0 = random_x(rng_, y_off + size_t(y_stride) * y_rows + 3);
      Buffer xb = ctx.create_buffer(x.size() * 4, MemoryKind::Device, "x");
      Buffer yb = ctx.create_buffer(y0.size() * 4, MemoryKind::Device, "y");
      Buffer tb = ctx.create_buffer(L.bytes(), MemoryKind::Device, "table");
      Buffer sb = ctx.create_buffer(gemm_int8_scratch_bytes(ncols, x_rows), MemoryKind::Device, "scratch");
      ctx.write_buffer(xb, 0, x.data(), x.size() * 4);
      ctx.write_buffer(yb, 0, y0.data(), y0.size() * 4);
      ctx.write_buffer(tb, 0, table.words.data(), L.bytes());

      GemmIdsArgs a;
      a.type = t;
      a.ncols = ncols;
      a.nrows = nrows;
      a.w = BufferRange(wb);
      a.w_offset = w_off;
      a.x = BufferRange(xb);
      a.x_offset = x_off;
      a.x_stride = x_stride;
      a.y = BufferRange(yb);
      a.y_offset = y_off;
      a.y_stride = y_stride;
      a.accumulate = accumulate;
      a.scratch = BufferRange(sb);
      a.table = BufferRange(tb);
      a.layout = L;
      a.expert_stride = stride;
      a.n_experts = n_experts;
      a.gather_x = gather_x;
      a.y_by_pair = by_pair;
      Recorder rec(ctx);
      rec.begin();
      record_gemm_int8(rec, a, &a);
      rec.submit().wait();
      std::vector<float> y(y0.size());
      ctx.read_buffer(yb, 0, y.data(), y.size() * 4);
      const QuantizedX qx = read_scratch(ctx, sb, ncols, x_rows);

      std::vector<bool> written(y.size(), false);
      for (uint32_t s = 0; s < L.max_slots(); ++s) {
        if (table.slot_expert(s) < 0) continue;
        const uint32_t tok = uint32_t(table.slot_token(s)), xr = gather_x ? tok : s;
        const float* xs = x.data() + x_off + size_t(xr) * x_stride;
        check_quantized_row(qx, xr, xs);
        const test::QMatrix& m = experts[table.slot_expert(s)];
        for (uint32_t r = 0; r < nrows; ++r) {
          const size_t yi = y_off + size_t(by_pair ? uint32_t(table.slot_pair(s)) : s) * y_stride + r;
          ASSERT_FALSE(written[yi]) << "slot " << s << " row " << r << " written twice";
          written[yi] = true;
          const std::string where = "slot " + std::to_string(s) + " row " + std::to_string(r);
          check_output(y[yi], accumulate ? y0[yi] : 0.0, m.deq.data() + size_t(r) * ncols, xs, qx, xr, ncols,
                       where.c_str());
          if (HasFatalFailure()) return;
        }
      }
      for (size_t i = 0; i < y.size(); ++i) {
        if (!written[i]) {
        ASSERT_EQ(y[i], y0[i]) << "y[" << i << "] outside the computed slots was modified";
      }
      }
      accumulate = !accumulate;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Types, GemmInt8, ::testing::ValuesIn(kTypes),
                         [](const auto& info) { return std::string(type_name(info.param)); });

// Availability follows the type and the device; a missing scratch or a bad
// shape is an Error, not a dispatch.
TEST(GemmInt8Args, Errors) {
  Context& ctx = test::shared_context();
  EXPECT_FALSE(gemm_int8_available(ctx, GgmlType::F32));
  EXPECT_FALSE(gemm_int8_available(ctx, GgmlType::F16));
  if (!gemm_int8_available(ctx, GgmlType::Q4_K)) GTEST_SKIP() << "no integer dot products on this device";
  Buffer wb = ctx.create_buffer(144 * 4, MemoryKind::Device, "w");
  Buffer xb = ctx.create_buffer(256 * 4, MemoryKind::Device, "x");
  Buffer yb = ctx.create_buffer(4 * 4, MemoryKind::Device, "y");
  Buffer sb = ctx.create_buffer(gemm_int8_scratch_bytes(256, 1), MemoryKind::Device, "scratch");
  GemmArgs a;
  a.type = GgmlType::Q4_K;
  a.ncols = 256;
  a.nrows = 4;
  a.n_tokens = 1;
  a.w = BufferRange(wb);
  a.x = BufferRange(xb);
  a.x_stride = 256;
  a.y = BufferRange(yb);
  a.y_stride = 4;
  Recorder rec(ctx);
  rec.begin();
  EXPECT_THROW(record_gemm_int8(rec, a, nullptr), Error);  // no scratch
  a.scratch = BufferRange(sb);
  a.ncols = 128;
  EXPECT_THROW(record_gemm_int8(rec, a, nullptr), Error);  // not a multiple of 256
  a.ncols = 256;
  a.type = GgmlType::F32;
  EXPECT_THROW(record_gemm_int8(rec, a, nullptr), Error);  // not an int8 type
  a.type = GgmlType::Q4_K;
  a.n_tokens = 2;
  EXPECT_THROW(record_gemm_int8(rec, a, nullptr), Error);  // x, y and scratch too small
  EXPECT_EQ(rec.dispatch_count(), 0u);
  rec.discard();
}
