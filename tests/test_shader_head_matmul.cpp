// Per-head products (engine/vulkan/vk_head_matmul.h, latent attention's
// attn_k_b / attn_v_b) on the Vulkan device (lavapipe in CI) against a
// double-precision product of the dequantized weights, on fresh random
// inputs: several weight types, odd head / row / token counts, strided and
// offset rows; and the copy mode (no weights).
#include <gtest/gtest.h>

#include <cmath>
#include <string>

#include "cpu/quant.h"
#include "engine/vulkan/vk_head_matmul.h"

#include "tests/vk_test_env.h"
using namespace vkmoe;
using namespace vkmoe::vk;

namespace {

struct Case {
  GgmlType type;
  uint32_t rows, cols, n_head, n_tokens;
};

// The products sum cols terms in f32 against a double reference: relative
// error (max |diff| / max |want|) ~1e-6 on lavapipe; 1e-5 leaves room for
// other devices' summation order. The weights are the same dequantized
// values on both sides, so the type does not widen the bound.
constexpr double kTol = 1e-5;

double rel_err(const std::vector<float>& got, const std::vector<double>& want) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(double(got[i]) - want[i]);
    err = std::isnan(d) ? INFINITY : std::max(err, d);
    scale = std::max(scale, std::fabs(want[i]));
  }
  return err / scale;
}

}  // namespace

TEST(ShaderHeadMatmul, MatchesReferenceOverTypesAndShapes) {
  test::VkEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const Case cases[] = {
      {GgmlType::F32, 13, 48, 3, 5},    {GgmlType::F16, 64, 48, 5, 1},   {GgmlType::F16, 7, 32, 1, 9},
      {GgmlType::Q8_0, 33, 64, 3, 6},   {GgmlType::Q8_0, 48, 96, 7, 1},  {GgmlType::Q4_K, 9, 256, 3, 3},
      {GgmlType::Q6_K, 17, 512, 2, 5},  {GgmlType::Q4_0, 5, 32, 3, 2},   {GgmlType::BF16, 11, 16, 2, 4},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(type_name(c.type)) + " rows " + std::to_string(c.rows) + " cols " +
                 std::to_string(c.cols) + " heads " + std::to_string(c.n_head) + " tokens " +
                 std::to_string(c.n_tokens));
    // n_head stacked matrices of rows x cols, dequantized for the reference.
    const size_t rb = row_bytes(c.type, c.cols), n_rows = size_t(c.rows) * c.n_head;
    std::vector<uint8_t> w(n_rows * rb);
    std::vector<float> deq(n_rows * c.cols);
    const auto src = e.randn(n_rows * c.cols);
    for (size_t r = 0; r < n_rows; ++r) {
      quantize_row(c.type, &src[r * c.cols], &w[r * rb], c.cols);
      dequantize_row(c.type, &w[r * rb], &deq[r * c.cols], c.cols);
    }
    // x: per token a row of heads (x_head apart, from x_off); y likewise with padding.
    const uint32_t x_off = 3, x_head = c.cols + 5, x_tok = c.n_head * x_head + 2;
    const uint32_t y_off = 1, y_head = c.rows + 2, y_tok = c.n_head * y_head + 7;
    const auto x = e.randn(size_t(c.n_tokens) * x_tok);
    Buffer bw = e.bytes(w.data(), w.size()), bx = e.buf(x);
    Buffer by = e.buf(std::vector<float>(size_t(c.n_tokens) * y_tok, NAN));
    HeadMatmulArgs a;
    a.type = c.type;
    a.rows = c.rows;
    a.cols = c.cols;
    a.n_head = c.n_head;
    a.n_tokens = c.n_tokens;
    a.w = bw;
    a.x = bx;
    a.y = by;
    a.x_off = x_off, a.x_tok = x_tok, a.x_head = x_head;
    a.y_off = y_off, a.y_tok = y_tok, a.y_head = y_head;
    e.record([&](Recorder& r) { record_head_matmul(r, a); });
    const auto y = e.read<float>(by, size_t(c.n_tokens) * y_tok);
    std::vector<float> got;
    std::vector<double> want;
    for (uint32_t t = 0; t < c.n_tokens; ++t)
      for (uint32_t h = 0; h < c.n_head; ++h)
        for (uint32_t r = 0; r < c.rows; ++r) {
          double s = 0;
          for (uint32_t d = 0; d < c.cols; ++d)
            s += double(deq[(size_t(h) * c.rows + r) * c.cols + d]) * x[t * x_tok + h * x_head + x_off + d];
          want.push_back(s);
          got.push_back(y[t * y_tok + h * y_head + y_off + r]);
        }
    EXPECT_LT(rel_err(got, want), kTol);
    size_t written = 0;  // exactly the output rows: the rest stays NaN
    for (float v : y) written += !std::isnan(v);
    EXPECT_EQ(written, want.size());
  }
}

TEST(ShaderHeadMatmul, CopyModeMovesHeadSlices) {
  test::VkEnv e;
  const uint32_t rows = 5, n_head = 3, n_tokens = 6, x_head = 11, x_tok = 40, y_head = 9, y_tok = 30;
  const auto x = e.randn(n_tokens * x_tok);
  Buffer bx = e.buf(x), by = e.buf(std::vector<float>(n_tokens * y_tok, NAN));
  HeadMatmulArgs a;
  a.rows = rows;
  a.n_head = n_head;
  a.n_tokens = n_tokens;
  a.x = bx;
  a.y = by;
  a.x_off = 6, a.x_tok = x_tok, a.x_head = x_head;
  a.y_off = 2, a.y_tok = y_tok, a.y_head = y_head;
  e.record([&](Recorder& r) { record_head_matmul(r, a); });
  const auto y = e.read<float>(by, n_tokens * y_tok);
  for (uint32_t t = 0; t < n_tokens; ++t)
    for (uint32_t h = 0; h < n_head; ++h)
      for (uint32_t r = 0; r < rows; ++r)
        ASSERT_EQ(y[t * y_tok + h * y_head + 2 + r], x[t * x_tok + h * x_head + 6 + r]) << t << " " << h << " " << r;
}

TEST(ShaderHeadMatmul, RejectsColumnsOffTheBlock) {
  test::VkEnv e;
  Buffer b = e.buf(std::vector<float>(4096));
  HeadMatmulArgs a;
  a.type = GgmlType::Q8_0;
  a.rows = 2, a.cols = 48, a.n_head = 1, a.n_tokens = 1;
  a.w = a.x = a.y = b;
  Recorder rec(*e.ctx);
  rec.begin();
  EXPECT_THROW(record_head_matmul(rec, a), Error);
  rec.discard();
}
