// Tiled GEMM shaders (shaders/gemm.comp, GemmPath::Tiled) vs. a scalar
// double-precision reference over dequantize_row (runs on lavapipe).
// Tolerance per output: 1e-4 * (sum_i |w_i x_i| + |y0| when accumulating) + 1e-5
// (f32 sums in another order), as for the matvec tests.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <sstream>

#include "cpu/quant.h"
#include "engine/vulkan/gemm_paths.h"
#include "engine/vulkan/vk_gemm.h"
#include "engine/vulkan/weight_types.h"
#include "engine/vulkan/vk_runtime.h"
#include "tests/bench_test_util.h"

#include "tests/gemm_test_util.h"
#include "tests/seed.h"
using namespace vkmoe;
using namespace vkmoe::vk;

namespace {

const GgmlType kTypes[] = {GgmlType::F32,    GgmlType::F16,   GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q4_K,
                           GgmlType::Q5_K,   GgmlType::Q6_K,  GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0,
                           GgmlType::Q5_1,   GgmlType::IQ4_NL, GgmlType::MXFP4, GgmlType::Q2_K, GgmlType::Q3_K,
                           GgmlType::IQ4_XS};
// Types only the tiled path decodes.
const GgmlType kTiledOnly[] = {GgmlType::Q4_0,  GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1,  GgmlType::IQ4_NL,
                               GgmlType::MXFP4, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_XS};

const GemmConfig kTiled{GemmPath::Tiled};



std::vector<float> random_floats(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& f : v) f = nd(rng);
  return v;
}

// Checks y[yi] = W[r] . x (+ y0[yi]) within the stated tolerance.
::testing::AssertionResult near_ref(const test::QMatrix& m, uint32_t r, const float* x, float got, float y0,
                                    bool accumulate) {
  // Four partial sums (ncols is a multiple of 4) keep the loop fast.
  double ref4[4] = {}, mag4[4] = {};
  const float* w = m.deq.data() + size_t(r) * m.ncols;
  for (uint32_t i = 0; i < m.ncols; i += 4)
    for (uint32_t j = 0; j < 4; ++j) {
      const double p = double(w[i + j]) * x[i + j];
      ref4[j] += p;
      mag4[j] += std::fabs(p);
    }
  const double ref = (accumulate ? y0 : 0.0) + (ref4[0] + ref4[1]) + (ref4[2] + ref4[3]);
  const double mag = (accumulate ? std::fabs(y0) : 0.0) + (mag4[0] + mag4[1]) + (mag4[2] + mag4[3]);
  const double tol = 1e-4 * mag + 1e-5;
  if (std::fabs(got - ref) <= tol) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "got " << got << ", reference " << ref << ", tolerance " << tol;
}

struct DenseCase {
  uint32_t ncols, nrows, n_tokens;
  bool accumulate;
  uint32_t w_off = 64;
  GemmPath path = GemmPath::Tiled;
};

void check_dense(std::mt19937& rng, GgmlType t, const DenseCase& c) {
  SCOPED_TRACE(std::string(type_name(t)) + " " + std::to_string(c.ncols) + "x" + std::to_string(c.nrows) + " tokens " +
               std::to_string(c.n_tokens) + (c.accumulate ? " accumulate" : "") + " w_off " +
               std::to_string(c.w_off) + " " + gemm_path_name(c.path));
  Context& ctx = test::shared_context();
  const test::QMatrix m = test::random_block_matrix(rng, t, c.ncols, c.nrows);
  // Non-zero offsets, strides with gaps (x: multiples of 4 floats as required).
  const uint32_t w_off = c.w_off, x_off = 8, x_stride = c.ncols + 12, y_off = 5, y_stride = c.nrows + 3;
  const std::vector<float> x = random_floats(rng, x_off + size_t(x_stride) * c.n_tokens);
  const std::vector<float> y0 = random_floats(rng, y_off + size_t(y_stride) * c.n_tokens + 2);
  Buffer wb = ctx.create_buffer(w_off + m.bytes.size(), MemoryKind::Device, "w");
  Buffer xb = ctx.create_buffer(x.size() * 4, MemoryKind::Device, "x");
  Buffer yb = ctx.create_buffer(y0.size() * 4, MemoryKind::Device, "y");
  ctx.write_buffer(wb, w_off, m.bytes.data(), m.bytes.size());
  ctx.write_buffer(xb, 0, x.data(), x.size() * 4);
  ctx.write_buffer(yb, 0, y0.data(), y0.size() * 4);

  GemmArgs a;
  a.type = t;
  a.ncols = c.ncols;
  a.nrows = c.nrows;
  a.n_tokens = c.n_tokens;
  a.w = BufferRange(wb);
  a.w_offset = w_off;
  a.x = BufferRange(xb);
  a.x_offset = x_off;
  a.x_stride = x_stride;
  a.y = BufferRange(yb);
  a.y_offset = y_off;
  a.y_stride = y_stride;
  a.accumulate = c.accumulate;
  Recorder rec(ctx);
  rec.begin();
  record_gemm(rec, a, GemmConfig{c.path});
  rec.submit().wait();
  std::vector<float> y(y0.size());
  ctx.read_buffer(yb, 0, y.data(), y.size() * 4);

  for (size_t i = 0; i < y.size(); ++i) {
    const bool out = i >= y_off && (i - y_off) / y_stride < c.n_tokens && (i - y_off) % y_stride < c.nrows;
    if (!out) {
      ASSERT_EQ(y[i], y0[i]) << "y[" << i << "] is outside the output but changed";
    }
  }
  for (uint32_t n = 0; n < c.n_tokens; ++n)
    for (uint32_t r = 0; r < c.nrows; ++r) {
      const size_t yi = y_off + size_t(n) * y_stride + r;
      ASSERT_TRUE(near_ref(m, r, x.data() + x_off + size_t(n) * x_stride, y[yi], y0[yi], c.accumulate))
          << "token " << n << " row " << r;
    }
}

void check_ids(std::mt19937& rng, GgmlType t, uint32_t ncols, uint32_t nrows, uint32_t n_tokens, uint32_t k,
               bool gather_x, bool accumulate, GemmPath path = GemmPath::Tiled, bool packed = false,
               bool by_pair = false) {
  SCOPED_TRACE(std::string(type_name(t)) + " " + std::to_string(ncols) + "x" + std::to_string(nrows) + " tokens " +
               std::to_string(n_tokens) + " k " + std::to_string(k) + (gather_x ? " gather_x" : " slot x") +
               (accumulate ? " accumulate" : "") + (packed ? " packed" : "") + (by_pair ? " y by pair" : "") + " " +
               gemm_path_name(path));
  Context& ctx = test::shared_context();
  const uint32_t n_experts = 7, n_used = 5;  // experts 5 and 6 receive no tokens
  const test::MoeTestTable h = test::random_moe_table(rng, n_tokens, k, n_experts, n_used);
  const MoeTableLayout& l = h.layout;
  std::vector<test::QMatrix> experts;
  for (uint32_t e = 0; e < n_experts; ++e) experts.push_back(test::random_block_matrix(rng, t, ncols, nrows));
  // packed: experts back to back at the type's alignment (as the engine's
  // expert_bytes stride), else padded.
  const size_t ebytes = experts[0].bytes.size();
  const size_t stride = packed ? ebytes : (ebytes + 15) / 16 * 16 + 32, w_off = packed ? 16 + ebytes % 16 : 16;
  Buffer wb = ctx.create_buffer(w_off + stride * n_experts, MemoryKind::Device, "experts");
  for (uint32_t e = 0; e < n_experts; ++e) ctx.write_buffer(wb, w_off + e * stride, experts[e].bytes.data(), ebytes);

  const uint32_t x_rows = gather_x ? n_tokens : l.max_slots();
  const uint32_t x_off = 4, x_stride = ncols + 4, y_off = 3, y_stride = nrows + 1;
  const std::vector<float> x = random_floats(rng, x_off + size_t(x_stride) * x_rows);
  const uint32_t y_rows = by_pair ? l.pairs() : l.max_slots();
  const std::vector<float> y0 = random_floats(rng, y_off + size_t(y_stride) * y_rows);
  Buffer xb = ctx.create_buffer(x.size() * 4, MemoryKind::Device, "x");
  Buffer yb = ctx.create_buffer(y0.size() * 4, MemoryKind::Device, "y");
  Buffer tb = ctx.create_buffer(l.bytes() + 64, MemoryKind::Device, "table");
  ctx.write_buffer(xb, 0, x.data(), x.size() * 4);
  ctx.write_buffer(yb, 0, y0.data(), y0.size() * 4);
  ctx.write_buffer(tb, 64, h.words.data(), l.bytes());

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
  a.table = BufferRange(tb, 64, l.bytes());
  a.layout = l;
  a.expert_stride = stride;
  a.n_experts = n_experts;
  a.gather_x = gather_x;
  a.y_by_pair = by_pair;
  Recorder rec(ctx);
  rec.begin();
  record_gemm_ids(rec, a, GemmConfig{path});
  rec.submit().wait();
  std::vector<float> y(y0.size());
  ctx.read_buffer(yb, 0, y.data(), y.size() * 4);

  std::vector<bool> written(y.size(), false);
  uint32_t checked = 0;
  for (uint32_t i = 0; i < h.used_tiles; ++i) {
    const int32_t e = h.tile_expert(i);
    if (e < 0) continue;
    for (uint32_t s = i * kMoeTileRows; s < (i + 1) * kMoeTileRows; ++s) {
      const int32_t tok = h.slot_token(s);
      if (tok < 0) continue;
      const float* xs = x.data() + x_off + size_t(gather_x ? uint32_t(tok) : s) * x_stride;
      for (uint32_t r = 0; r < nrows; ++r) {
        const size_t yi = y_off + size_t(by_pair ? uint32_t(h.slot_pair(s)) : s) * y_stride + r;
        ASSERT_FALSE(written[yi]) << "slot " << s << " row " << r << " written twice";
        written[yi] = true;
        ASSERT_TRUE(near_ref(experts[e], r, xs, y[yi], y0[yi], accumulate))
            << "tile " << i << " expert " << e << " slot " << s << " token " << tok << " row " << r;
      }
      ++checked;
    }
  }
  EXPECT_EQ(checked, n_tokens * k);
  for (size_t i = 0; i < y.size(); ++i)
    if (!written[i]) {
      ASSERT_EQ(y[i], y0[i]) << "y[" << i << "] changed but is no computed slot row";
    }
}

class ShaderGemm : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    seed_ = uint32_t(test::test_seed());
    rng_.seed(seed_);
  }
  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

}  // namespace

// Every tile shape the dispatcher picks: decode-sized (1, 7, 8 tokens), small
// (33, 100 tokens), medium (70 tokens over 8200 rows) and large (130 tokens
// over 8100 rows); row counts that are no multiple of any tile; accumulate on/off.
TEST_P(ShaderGemm, Dense) {
  SCOPED_TRACE("seed=" + std::to_string(seed_));
  const GgmlType t = GetParam();
  const DenseCase cases[] = {{512, 37, 1, false},    {768, 69, 7, true},    {2304, 45, 8, true},
                             {256, 130, 33, false},  {512, 100, 100, true}, {256, 8200, 70, true},
                             {256, 8100, 130, false}};
  for (const auto& c : cases) check_dense(rng_, t, c);
}

// Expert-grouped product over a host-built MoeTable: gathered and
// slot-indexed x, accumulate, row counts that are no multiple of the tile,
// y by slot and by routing pair (the down product's).
TEST_P(ShaderGemm, Indexed) {
  SCOPED_TRACE("seed=" + std::to_string(seed_));
  const GgmlType t = GetParam();
  check_ids(rng_, t, 512, 70, 37, 3, true, false);
  check_ids(rng_, t, 256, 70, 21, 4, false, true);
  check_ids(rng_, t, 256, 300, 100, 5, true, true);
  check_ids(rng_, t, 256, 70, 21, 4, false, false, GemmPath::Tiled, false, true);
  check_ids(rng_, t, 256, 300, 100, 5, false, true, GemmPath::Tiled, false, true);
}

// The tiled-only types at their minimum alignment (MXFP4 at odd bytes,
// experts packed at odd strides), and GemmPath::Auto resolving to the tiled
// path for them on this device whatever int8 / coopmat support it has.
TEST(ShaderGemmTiledOnly, AlignmentAndAutoPath) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  Context& ctx = test::shared_context();
  for (GgmlType t : kTiledOnly) {
    EXPECT_EQ(resolve_gemm_path(ctx, GemmPath::Auto, t), GemmPath::Tiled) << type_name(t);
    for (GemmPath p : {GemmPath::Int8Dot, GemmPath::CoopMat, GemmPath::CoopMat2})
      EXPECT_FALSE(gemm_path_available(ctx, p, t)) << type_name(t) << " " << gemm_path_name(p);
    // 17 blocks a row for the 32-element types: odd (MXFP4) or 2 mod 4 bytes.
    const uint32_t align = gpu_weight_type(t)->align, ncols = type_traits(t).block_size == 32 ? 544 : 512;
    check_dense(rng, t, {ncols, 37, 9, true, 64 + align, GemmPath::Auto});
    check_ids(rng, t, ncols, 37, 21, 3, true, true, GemmPath::Auto, true);
  }
}

// A device with every cooperative-matrix and int8 feature still gets no
// coopmat kernel for the tiled-only types (their shaders do not exist).
TEST(ShaderGemmTiledOnly, CoopmatBasicsExcludeThem) {
  DeviceInfo d = test::shared_context().info();
  d.api_version = VK_API_VERSION_1_3;
  d.shader_float16 = d.storage_16bit = d.shader_int16 = true;
  EXPECT_TRUE(coopmat_basics(d, GgmlType::Q4_K));
  for (GgmlType t : kTiledOnly) EXPECT_FALSE(coopmat_basics(d, t)) << type_name(t);
}

INSTANTIATE_TEST_SUITE_P(ShaderGemm, ShaderGemm, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& i) { return std::string(type_name(i.param)); });

TEST(ShaderGemmErrors, RejectsBadArguments) {
  Context& ctx = test::shared_context();
  Buffer wb = ctx.create_buffer(1 << 16, MemoryKind::Device, "w");
  Buffer xb = ctx.create_buffer(1 << 14, MemoryKind::Device, "x");
  Buffer yb = ctx.create_buffer(1 << 14, MemoryKind::Device, "y");
  Recorder rec(ctx);
  rec.begin();
  GemmArgs a;
  a.type = GgmlType::Q4_K;
  a.ncols = 256;
  a.nrows = 4;
  a.n_tokens = 3;
  a.w = BufferRange(wb);
  a.x = BufferRange(xb);
  a.x_stride = 256;
  a.y = BufferRange(yb);
  a.y_stride = 4;
  EXPECT_NO_THROW(record_gemm(rec, a, kTiled));
  GemmArgs bad = a;
  bad.ncols = 128;  // not a multiple of the block size
  EXPECT_THROW(record_gemm(rec, bad, kTiled), Error);
  bad = a;
  bad.type = GgmlType::F16;
  bad.ncols = 40;  // not a multiple of the 32-element K step
  EXPECT_THROW(record_gemm(rec, bad, kTiled), Error);
  bad = a;
  bad.w_offset = 8;  // Q4_K needs 16-byte alignment
  EXPECT_THROW(record_gemm(rec, bad, kTiled), Error);
  bad = a;
  bad.x_stride = 258;  // x rows must be vec4-aligned
  EXPECT_THROW(record_gemm(rec, bad, kTiled), Error);
  bad = a;
  bad.y_stride = 3;  // token outputs would overlap
  EXPECT_THROW(record_gemm(rec, bad, kTiled), Error);
  bad = a;
  bad.nrows = 1000;  // past the end of the weights
  EXPECT_THROW(record_gemm(rec, bad, kTiled), Error);
  bad = a;
  bad.n_tokens = 100;  // past the end of x
  EXPECT_THROW(record_gemm(rec, bad, kTiled), Error);
  bad = a;
  bad.type = GgmlType::Q8_K;  // an activation type: no kernel
  EXPECT_THROW(record_gemm(rec, bad, kTiled), Error);
  for (GemmPath p : {GemmPath::Int8Dot, GemmPath::CoopMat}) {
    if (!gemm_path_available(ctx, p, a.type)) {
      EXPECT_THROW(record_gemm(rec, a, GemmConfig{p}), Error) << gemm_path_name(p);
    }
  }
  EXPECT_TRUE(gemm_path_available(ctx, GemmPath::Tiled, GgmlType::Q6_K));
  EXPECT_FALSE(gemm_path_available(ctx, GemmPath::Tiled, GgmlType::Q8_K));
  EXPECT_FALSE(gemm_supported(GgmlType::Q8_K));
  EXPECT_TRUE(gemm_supported(GgmlType::Q2_K));
  EXPECT_TRUE(gemm_supported(GgmlType::BF16));
  EXPECT_STREQ(gemm_path_name(GemmPath::Tiled), "tiled");

  GemmIdsArgs ids;
  static_cast<GemmArgs&>(ids) = a;
  ids.layout = MoeTableLayout::make(3, 2, 4);
  Buffer tb = ctx.create_buffer(ids.layout.bytes(), MemoryKind::Device, "table");
  ids.table = BufferRange(tb);
  ids.n_experts = 4;
  ids.expert_stride = row_bytes(a.type, a.ncols) * a.nrows;
  EXPECT_NO_THROW(record_gemm_ids(rec, ids, kTiled));
  GemmIdsArgs bad_ids = ids;
  bad_ids.n_experts = 1000;  // experts past the end of the weights
  EXPECT_THROW(record_gemm_ids(rec, bad_ids, kTiled), Error);
  bad_ids = ids;
  bad_ids.expert_stride = 8;  // breaks Q4_K alignment
  EXPECT_THROW(record_gemm_ids(rec, bad_ids, kTiled), Error);
  bad_ids = ids;
  bad_ids.table = BufferRange(tb, 0, 16);  // table shorter than its layout
  EXPECT_THROW(record_gemm_ids(rec, bad_ids, kTiled), Error);
  rec.discard();
}

// The GEMM benchmark on tiny settings: one sane row per kernel and shape.
TEST(ShaderGemmBench, PrintsSaneNumbers) {
  const auto [rc, out] = vkmoe::test::run_bench_shaders({"bench-shaders", "--kernels", "gemm_q4_k,gemm_f16,gemm_ids",
                                                          "--gemm-shapes", "256x96:40", "--iters", "2", "--bw-mib", "8",
                                                          "--experts", "8"});
  ASSERT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  std::string line;
  int rows = 0;
  while (std::getline(lines, line)) {
    std::istringstream ls(line);
    std::vector<std::string> tok;
    for (std::string s; ls >> s;) tok.push_back(s);
    if (tok.size() != 6 || tok[0].rfind("gemm_", 0) != 0) continue;
    ++rows;
    for (int i = 3; i < 6; ++i) {
      const double v = std::stod(tok[i]);
      EXPECT_TRUE(std::isfinite(v) && v > 0) << line;
    }
  }
  EXPECT_EQ(rows, 3) << out;
}
