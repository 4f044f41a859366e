// Trunk shaders (norm, axpy, add_rows, swiglu, combine, the logits' copy) on the
// Vulkan device (lavapipe in CI) against scalar CPU references, fresh random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "cpu/moe_route.h"
#include "cpu/quant.h"
#include "engine/vulkan/weight_types.h"
#include "engine/forward/cpu_forward.h"
#include "engine/vulkan/moe_table.h"
#include "engine/vulkan/vk_gemm.h"

#include "tests/gemm_test_util.h"
#include "tests/vk_test_env.h"
using namespace vkmoe;
using namespace vkmoe::vk;

namespace {

using Env = test::VkEnv;

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 1e-6;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * scale) << what << " element " << i;
}

struct RmsNormPush { uint32_t n, x_off, w_off, y_off, row_stride, has_w; float eps; uint32_t check; };
struct AxpyPush { uint32_t n, items, x_off, a_off, y_off, mode; float scale; };
struct SwigluPush { uint32_t n, g_off, u_off, act, row_elems, count_off; };
struct CombineNormPush { uint32_t n, items; float eps; uint32_t check; };
constexpr uint32_t kNone = 0xFFFFFFFFu;

}  // namespace

// Rows with and without weights, at workgroup sizes 64..1024, on the 16-byte
// path (n, offsets and stride multiples of 4: n 300 and 2048, one row longer
// than a load batch of 4 x 64 words) and the scalar one (n 302, and n 300 at odd offsets).
TEST(ShaderTrunk, RmsNormRowsWithAndWithoutWeights) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t rows = 3;
  struct Case {
    uint32_t n, x_off, w_off, y_off;
  };
  for (uint32_t wg : {64u, 256u, 1024u})
    for (Case c : {Case{300, 0, 0, 0}, Case{2048, 4, 8, 0}, Case{302, 0, 0, 0}, Case{300, 1, 3, 2}}) {
      if (wg > e.ctx->info().max_workgroup_invocations) continue;
      SCOPED_TRACE("wg " + std::to_string(wg) + " n " + std::to_string(c.n) + " offsets " + std::to_string(c.x_off));
      const uint32_t n = c.n, stride = n + 4;
      auto x = e.randn(c.x_off + stride * rows, 3.f), w = e.randn(c.w_off + n);
      const vk::Pipeline& p = e.ctx->pipeline("rms_norm", 4, sizeof(RmsNormPush), {wg});
      for (uint32_t has_w : {0u, 1u}) {
        Buffer bx = e.buf(x), bw = e.buf(w), by = e.buf(std::vector<float>(c.y_off + stride * rows, NAN));
        Buffer flag = e.buf(std::vector<uint32_t>{kNone});
        e.record([&](vk::Recorder& r) {
          r.dispatch(p, {bx, bw, by, flag}, RmsNormPush{n, c.x_off, c.w_off, c.y_off, stride, has_w, 1e-6f, 7}, rows);
        });
        const auto y = e.read(by, c.y_off + stride * rows);
        for (uint32_t r = 0; r < rows; ++r) {
          std::vector<float> want(n), got(y.begin() + c.y_off + r * stride, y.begin() + c.y_off + r * stride + n);
          rms_norm(&x[c.x_off + r * stride], has_w ? &w[c.w_off] : nullptr, want.data(), n, 1e-6f);
          expect_close(got, want, 1e-5, "rms_norm");
        }
        EXPECT_EQ(e.read<uint32_t>(flag, 1)[0], kNone) << "finite input flagged";
      }
    }
}

// rms_norm_h: the same rows, also as f16 rows at y's offset and stride in
// halfs (the input of GEMMs on f16 rows), each the f32 output rounded to f16;
// 16-byte rows only.
TEST(ShaderTrunk, RmsNormWritesAnF16Copy) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t rows = 3;
  for (uint32_t n : {300u, 2048u}) {
    const uint32_t stride = n + 4, x_off = 4, y_off = 8;
    auto x = e.randn(x_off + stride * rows, 3.f), w = e.randn(n);
    Buffer bx = e.buf(x), bw = e.buf(w), by = e.buf(std::vector<float>(y_off + stride * rows, NAN));
    Buffer bh = e.buf(std::vector<float>((y_off + stride * rows) / 2, NAN));
    Buffer flag = e.buf(std::vector<uint32_t>{kNone});
    e.run("rms_norm_h", {bx, bw, by, flag, bh}, RmsNormPush{n, x_off, 0, y_off, stride, 1, 1e-6f, 7}, rows);
    const auto y = e.read(by, y_off + stride * rows);
    const auto h = e.read<uint16_t>(bh, y_off + stride * rows);
    for (uint32_t r = 0; r < rows; ++r) {
      std::vector<float> want(n);
      rms_norm(&x[x_off + r * stride], w.data(), want.data(), n, 1e-6f);
      for (uint32_t i = 0; i < n; ++i) {
        const size_t at = y_off + r * stride + i;
        ASSERT_NEAR(y[at], want[i], 1e-5 * std::fabs(want[i]) + 1e-6) << "row " << r << " element " << i;
        ASSERT_NEAR(fp16_to_fp32(h[at]), y[at], std::ldexp(std::fabs(y[at]), -11) + 1e-7)
            << "f16 copy, row " << r << " element " << i;
      }
    }
    EXPECT_EQ(e.read<uint32_t>(flag, 1)[0], kNone) << "finite input flagged";
  }
}

namespace {

// The split-K sum of n_tokens rows of nrows from `splits` planes of partials
// into y at y_off, y_stride apart.
GemmSplitSum split_sum(const Buffer& partials, const Buffer& y, uint32_t nrows, uint32_t n_tokens, uint32_t splits,
                       uint32_t plane, uint32_t y_off, uint32_t y_stride, bool accumulate) {
  GemmSplitSum s;
  s.partials = partials;
  s.y = y;
  s.nrows = nrows;
  s.n_tokens = n_tokens;
  s.splits = splits;
  s.plane = plane;
  s.y_offset = y_off;
  s.y_stride = y_stride;
  s.accumulate = accumulate;
  return s;
}

}  // namespace

// The plain split-K sum: y (+)= the partial planes added in plane order from
// 0, the same floats as that sum on the host; other elements untouched.
TEST(ShaderTrunk, SplitSumAddsThePlanesInOrder) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t nrows = 300, n_tokens = 5, splits = 3, plane = n_tokens * nrows + 7, y_off = 3, y_stride = nrows + 5;
  const auto parts = e.randn(size_t(splits) * plane);
  for (bool accumulate : {false, true}) {
    const auto y0 = e.randn(y_off + size_t(n_tokens) * y_stride);
    Buffer bp = e.buf(parts), by = e.buf(y0);
    GemmSplitSum s = split_sum(bp, by, nrows, n_tokens, splits, plane, y_off, y_stride, accumulate);
    e.record([&](Recorder& r) { record_gemm_split_sums(r, {s}); });
    const auto y = e.read(by, y0.size());
    std::vector<float> want = y0;
    for (uint32_t t = 0; t < n_tokens; ++t)
      for (uint32_t r = 0; r < nrows; ++r) {
        float sum = 0.f;
        for (uint32_t z = 0; z < splits; ++z) sum += parts[z * plane + t * nrows + r];
        float& w = want[y_off + t * y_stride + r];
        w = accumulate ? w + sum : sum;
      }
    for (size_t i = 0; i < y.size(); ++i) ASSERT_EQ(y[i], want[i]) << "element " << i << (accumulate ? " (+=)" : "");
  }
}

// A split-K sum that also writes the FFN norm: y += the partial planes in
// order, then xn = rms_norm(y) * w at y's offset and stride, one workgroup per
// token; a non-finite row lowers the flag to the check value.
TEST(ShaderTrunk, SplitSumWritesTheNorm) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t nrows = 300, n_tokens = 5, splits = 3, plane = n_tokens * nrows, y_off = 8, y_stride = nrows + 4;
  const auto parts = e.randn(size_t(splits) * plane), w = e.randn(nrows);
  for (bool poison : {false, true}) {
    auto y0 = e.randn(y_off + size_t(n_tokens) * y_stride);
    if (poison) y0[y_off + 2 * y_stride + 5] = NAN;
    Buffer bp = e.buf(parts), by = e.buf(y0), bw = e.buf(w), bxn = e.buf(std::vector<float>(y0.size(), 7.f));
    Buffer flag = e.buf(std::vector<uint32_t>{kNone});
    GemmSplitSum s = split_sum(bp, by, nrows, n_tokens, splits, plane, y_off, y_stride, true);
    s.norm_w = bw;
    s.xn = bxn;
    s.flags = flag;
    s.eps = 1e-6f;
    s.check = 5;
    e.record([&](Recorder& r) { record_gemm_split_sums(r, {s}); });
    EXPECT_EQ(e.read<uint32_t>(flag, 1)[0], poison ? 5u : kNone);
    if (poison) continue;
    const auto y = e.read(by, y0.size()), xn = e.read(bxn, y0.size());
    std::vector<float> want = y0, norm(nrows);
    for (uint32_t t = 0; t < n_tokens; ++t) {
      float* row = &want[y_off + t * y_stride];
      for (uint32_t z = 0; z < splits; ++z)
        for (uint32_t r = 0; r < nrows; ++r) row[r] += parts[z * plane + t * nrows + r];
      rms_norm(row, w.data(), norm.data(), nrows, 1e-6f);
      for (uint32_t r = 0; r < nrows; ++r) {
        const size_t at = y_off + t * y_stride + r;
        ASSERT_NEAR(y[at], want[at], 1e-5 * (1 + std::fabs(want[at]))) << "y, token " << t << " row " << r;
        ASSERT_NEAR(xn[at], norm[r], 1e-5 * std::fabs(norm[r]) + 1e-6) << "xn, token " << t << " row " << r;
      }
    }
    for (size_t i = 0; i < y0.size(); ++i) {
      const bool in = i >= y_off && (i - y_off) % y_stride < nrows;
      if (!in) {
        ASSERT_EQ(y[i], y0[i]) << "element " << i << " outside the rows";
        ASSERT_EQ(xn[i], 7.f) << "element " << i << " outside the rows";
      }
    }
  }
}

// get_rows_<type>: packed raw rows of every GPU weight type decoded as the
// CPU's dequantize_row does (rows of 512 and 2880 values, as many rows as a
// workgroup's chunks fit and more).
TEST(ShaderTrunk, GetRowsDecodesEveryType) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  std::mt19937 rng(uint32_t(e.seed));
  const GgmlType types[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,   GgmlType::Q4_K,
                            GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q4_0, GgmlType::Q4_1,   GgmlType::Q5_0,
                            GgmlType::Q5_1, GgmlType::IQ4_NL, GgmlType::MXFP4, GgmlType::Q2_K, GgmlType::Q3_K,
                            GgmlType::IQ4_XS};
  for (GgmlType t : types)
    for (uint32_t cols : {512u, 2816u}) {
      if (cols % uint32_t(type_traits(t).block_size) != 0 || gpu_weight_type_missing_feature(e.ctx->info(), t)) continue;
      SCOPED_TRACE(std::string(type_name(t)) + " cols " + std::to_string(cols));
      const uint32_t rows = 5;
      const test::QMatrix m = test::quantized_matrix(rng, t, cols, rows);
      Buffer raw = e.bytes(m.bytes.data(), m.bytes.size()), y = e.buf(std::vector<float>(size_t(rows) * cols, NAN));
      struct {
        uint32_t cols, y_stride;
      } push{cols, cols};
      e.run((std::string("get_rows_") + gpu_weight_type(t)->suffix).c_str(), {raw, y}, push, rows);
      const auto got = e.read(y, size_t(rows) * cols);
      for (size_t i = 0; i < got.size(); ++i)
        ASSERT_NEAR(got[i], m.deq[i], 1e-6 * std::fabs(m.deq[i]) + 1e-7) << "element " << i;
    }
}

// A NaN or Inf in any row lowers the flag to the dispatch's check code (the
// smallest code wins); check 0 never touches it.
TEST(ShaderTrunk, NormsFlagNonFiniteInput) {
  Env e;
  const uint32_t n = 300, rows = 3;
  for (float bad : {NAN, INFINITY, -INFINITY}) {
    auto x = e.randn(n * rows);
    x[n + 17] = bad;
    Buffer bx = e.buf(x), bw = e.buf(e.randn(n)), by = e.buf(std::vector<float>(n * rows));
    Buffer flag = e.buf(std::vector<uint32_t>{kNone});
    e.run("rms_norm", {bx, bw, by, flag}, RmsNormPush{n, 0, 0, 0, n, 1, 1e-6f, 0}, rows);
    EXPECT_EQ(e.read<uint32_t>(flag, 1)[0], kNone);
    e.run("rms_norm", {bx, bw, by, flag}, RmsNormPush{n, 0, 0, 0, n, 1, 1e-6f, 9}, rows);
    EXPECT_EQ(e.read<uint32_t>(flag, 1)[0], 9u);
    e.run("rms_norm", {bx, bw, by, flag}, RmsNormPush{n, 0, 0, 0, n, 1, 1e-6f, 12}, rows);
    EXPECT_EQ(e.read<uint32_t>(flag, 1)[0], 9u) << "a later site replaced an earlier one";
    e.run("rms_norm", {bx, bw, by, flag}, RmsNormPush{n, 0, 0, 0, n, 1, 1e-6f, 4}, rows);
    EXPECT_EQ(e.read<uint32_t>(flag, 1)[0], 4u);

    auto y = e.randn(n * 2);
    y[n + 3] = bad;
    Buffer by2 = e.buf(y), bwt = e.buf(e.randn(2)), bx2 = e.buf(e.randn(n)), bnw = e.buf(e.randn(n)),
           bxn = e.buf(std::vector<float>(n));
    Buffer flag2 = e.buf(std::vector<uint32_t>{kNone});
    e.run("moe_combine_norm", {by2, bwt, bx2, bnw, bxn, flag2}, CombineNormPush{n, 2, 1e-6f, 5}, 1);
    EXPECT_EQ(e.read<uint32_t>(flag2, 1)[0], 5u);
  }
}

// The logits' copy into readback memory: every value bit for bit (n not a
// multiple of the workgroup), finite extremes unflagged, a NaN or Inf at any
// position flags its word (only that one), nothing written past n.
struct CopyFinitePush { uint32_t n, word; };
TEST(ShaderTrunk, CopyFiniteCopiesAndFlags) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  std::mt19937 rng(uint32_t(e.seed));
  for (uint32_t n : {1u, 255u, 257u, 1000u}) {
    auto x = e.randn(n, 100.f);
    x[rng() % n] = std::numeric_limits<float>::max();
    x[rng() % n] = -std::numeric_limits<float>::denorm_min();
    for (int bad = -1; bad < 3; ++bad) {
      SCOPED_TRACE("n " + std::to_string(n) + " bad " + std::to_string(bad));
      auto src = x;
      if (bad >= 0) src[rng() % n] = bad == 0 ? NAN : bad == 1 ? INFINITY : -INFINITY;
      Buffer bs = e.buf(src), bd = e.buf(std::vector<float>(n + 1, 7.f)), flag = e.buf(std::vector<uint32_t>{0, 0, 0});
      e.run("copy_finite", {bs, bd, flag}, CopyFinitePush{n, 1}, (n + 255) / 256);
      const auto got = e.read(bd, n + 1);
      EXPECT_EQ(std::memcmp(got.data(), src.data(), n * sizeof(float)), 0);
      EXPECT_EQ(got[n], 7.f) << "written past n";
      EXPECT_EQ(e.read<uint32_t>(flag, 3), (std::vector<uint32_t>{0, bad >= 0 ? 1u : 0u, 0}));
    }
  }
}



TEST(ShaderTrunk, AxpyModesAndSwiglu) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t n = 1000, items = 3;
  auto x = e.randn(n * items), a = e.randn(items), y = e.randn(n);
  for (uint32_t mode : {0u, 1u, 2u}) {
    Buffer bx = e.buf(x), ba = e.buf(a), by = e.buf(y);
    e.run("axpy", {bx, ba, by}, AxpyPush{n, items, 0, 0, 0, mode, 0.5f}, (n + 255) / 256);
    auto want = y;
    for (uint32_t j = 0; j < items; ++j) {
      float alpha = 0.5f * (mode == 0 ? 1.f : mode == 1 ? a[j] : 1.f / (1.f + std::exp(-a[j])));
      for (uint32_t i = 0; i < n; ++i) want[i] += alpha * x[j * n + i];
    }
    expect_close(e.read(by, n), want, 1e-5, "axpy");
  }
  auto g = e.randn(n, 3.f), u = e.randn(n);
  Buffer bg = e.buf(g), bu = e.buf(u);
  e.run("swiglu", {bg, bu, bg}, SwigluPush{n, 0, 0, 0, 0, 0}, (n + 255) / 256);
  std::vector<float> want(n);
  for (uint32_t i = 0; i < n; ++i) want[i] = silu(g[i]) * u[i];
  expect_close(e.read(bg, n), want, 1e-5, "swiglu");

  // MoE slot rows: three tiles, the table's count says 2 are used, so the
  // third tile's rows stay as they were.
  const uint32_t row = 5, used = 2 * kMoeTileRows * row, m = 3 * kMoeTileRows * row;
  auto mg = e.randn(m, 3.f), mu = e.randn(m);
  const std::vector<uint32_t> table_words = {2, 0, 0, 0};
  Buffer bmg = e.buf(mg), bmu = e.buf(mu), bt = e.buf(table_words);
  e.run("swiglu", {bmg, bmu, bt}, SwigluPush{m, 0, 0, 0, row, 0}, (m + 255) / 256);
  std::vector<float> want_rows = mg;
  for (uint32_t i = 0; i < used; ++i) want_rows[i] = silu(mg[i]) * mu[i];
  const std::vector<float> got = e.read(bmg, m);
  expect_close(got, want_rows, 1e-5, "swiglu over used MoE tiles");
  for (uint32_t i = used; i < m; ++i) ASSERT_EQ(got[i], mg[i]) << "unused tile row value " << i << " was written";
}

// The decode's combine + next norm, one workgroup: its sizes 64..1024 (the
// engine picks one per 4 values), the 16-byte path (n % 4 == 0) and the
// scalar one, more items than one load batch (8).
TEST(ShaderTrunk, MoeCombineThenNorm) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  for (uint32_t wg : {64u, 256u, 1024u})
    for (auto [n, items] : {std::pair<uint32_t, uint32_t>{2048, 8}, {302, 11}, {1000, 3}}) {
      if (wg > e.ctx->info().max_workgroup_invocations) continue;
      SCOPED_TRACE("wg " + std::to_string(wg) + " n " + std::to_string(n) + " items " + std::to_string(items));
      auto y = e.randn(n * items), w = e.randn(items), x = e.randn(n), nw = e.randn(n);
      Buffer by = e.buf(y), bw = e.buf(w), bx = e.buf(x), bnw = e.buf(nw), bxn = e.buf(std::vector<float>(n, NAN));
      Buffer flag = e.buf(std::vector<uint32_t>{kNone});
      const vk::Pipeline& p = e.ctx->pipeline("moe_combine_norm", 6, sizeof(CombineNormPush), {wg});
      e.record([&](vk::Recorder& r) {
        r.dispatch(p, {by, bw, bx, bnw, bxn, flag}, CombineNormPush{n, items, 1e-6f, 3}, 1);
      });
      EXPECT_EQ(e.read<uint32_t>(flag, 1)[0], kNone);
      auto want_x = x;
      for (uint32_t j = 0; j < items; ++j)
        for (uint32_t i = 0; i < n; ++i) want_x[i] += w[j] * y[j * n + i];
      std::vector<float> want_xn(n);
      rms_norm(want_x.data(), nw.data(), want_xn.data(), n, 1e-6f);
      expect_close(e.read(bx, n), want_x, 1e-5, "x");
      expect_close(e.read(bxn, n), want_xn, 1e-5, "xn");
    }
}

TEST(ShaderTrunk, AddRowsScalesAndBroadcasts) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  struct AddRowsPush {
    uint32_t n, rows, x_off, x_stride, a_off, y_off, y_stride, mode;
  };
  const uint32_t n = 300, rows = 5, ys = 320;
  const Pipeline& p = e.ctx->pipeline("add_rows", 3, sizeof(AddRowsPush));
  for (uint32_t mode : {0u, 1u, 2u})
    for (uint32_t xs : {0u, 310u}) {  // 0: one x row broadcast to every y row (biases)
      auto x = e.randn(3 + rows * std::max(xs, n)), a = e.randn(2 + rows), y = e.randn(7 + rows * ys);
      Buffer bx = e.buf(x), ba = e.buf(a), by = e.buf(y);
      Recorder r(*e.ctx);
      r.begin();
      r.dispatch(p, {bx, ba, by}, AddRowsPush{n, rows, 3, xs, 2, 7, ys, mode}, (n + 255) / 256, rows);
      r.submit().wait();
      std::vector<float> want = y;
      for (uint32_t t = 0; t < rows; ++t)
        for (uint32_t i = 0; i < n; ++i) {
          const float al = mode == 0 ? 1.f : mode == 1 ? a[2 + t] : 1.f / (1.f + std::exp(-a[2 + t]));
          want[7 + t * ys + i] += al * x[3 + t * xs + i];
        }
      expect_close(e.read(by, want.size()), want, 1e-6, "add_rows");
    }
}
