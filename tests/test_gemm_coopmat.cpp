// Cooperative-matrix GEMM paths vs. a scalar reference on the dequantized
// weights, for every type, dense and expert-grouped, every workgroup tile:
// the KHR path (engine/vulkan/gemm_coopmat.cpp) and the NVIDIA
// cooperative-matrix-2 path (gemm_coopmat2.cpp). Skipped (with the reason)
// where the device lacks the extension or the shaders were not built with
// glslang 15 (lavapipe, CI); scripts/gpu_coopmat_test.sh runs them on a GPU.
// Tolerance per output: 2e-3 * sum_i |w_i x_i| + 1e-5: w and x are rounded to
// f16 (relative error <= 2^-11 each, so <= ~2^-10 per product) and summed in f32.
// The gate/up form glu(W x, U x): that tolerance on both products, carried
// through glu's slope (glu_tol).
// GemmCoopmatBench (env VKMOE_COOPMAT_BENCH=1) prints TFLOP/s.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "cpu/quant.h"
#include "engine/vulkan/gemm_paths.h"
#include "engine/vulkan/vk_runtime.h"
#include "engine/vulkan/weight_types.h"

#include "tests/gemm_test_util.h"
#include "tests/glu_bound.h"
#include "tests/seed.h"
using namespace vkmoe;
using namespace vkmoe::vk;

namespace {

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K};

#ifdef VKMOE_HAVE_COOPMAT_SHADERS
constexpr bool kShadersBuilt = true;
#else
constexpr bool kShadersBuilt = false;
#endif

// One cooperative-matrix path: how to record it, force its tiles, and whether it runs here.
struct Path {
  const char* name;
  const char* tile_env;
  std::vector<const char*> dense_tiles, ids_tiles;
  bool (*available)(const Context&, GgmlType);
  void (*record)(Recorder&, const GemmArgs&, const GemmIdsArgs*);
  bool cm2;  // needs vec4-aligned activation rows and whole-block expert strides
};
const Path kCoopmat{"coopmat", "VKMOE_COOPMAT_TILE", {"L1", "L", "M", "XS32"}, {"L", "M", "S"},
                    gemm_coopmat_available, record_gemm_coopmat, false};
const Path kCoopmat2{"coopmat2", "VKMOE_COOPMAT2_TILE", {"L", "M", "S", "XS", "L64", "M64"}, {"L", "M", "L64", "M64"},
                     gemm_coopmat2_available, record_gemm_coopmat2, true};

// Skips the test unless the path runs here.
#define REQUIRE_PATH(path, t)                                                                        \
  do {                                                                                              \
    const DeviceInfo& dev_ = test::shared_context().info();                                         \
    if (!(path).available(test::shared_context(), t))                                               \
      GTEST_SKIP() << (path).name << " GEMM unavailable on " << dev_.name                           \
                   << (dev_.cooperative_matrix ? "" : " (no VK_KHR_cooperative_matrix)")            \
                   << ((path).cm2 && !dev_.cooperative_matrix2 ? " (no VK_NV_cooperative_matrix2)" : "") \
                   << (kShadersBuilt ? "" : " (shaders not built: glslang 15 missing)");            \
  } while (0)

// Forces a workgroup tile by name for the scope.
struct TileScope {
  TileScope(const Path& p, const char* name) : env(p.tile_env) { setenv(env, name, 1); }
  ~TileScope() { unsetenv(env); }
  const char* env;
};

// W[r] . x and the sum of its terms' magnitudes.
std::pair<double, double> dot_row(const test::QMatrix& m, const float* x, uint32_t r) {
  double ref = 0, mag = 0;
  const float* w = m.deq.data() + size_t(r) * m.ncols;
  for (uint32_t i = 0; i < m.ncols; ++i) {
    ref += double(w[i]) * x[i];
    mag += std::fabs(double(w[i]) * x[i]);
  }
  return {ref, mag};
}

// Checks y[r] against W[r] . x (+ y0[r]).
void expect_row(const test::QMatrix& m, const float* x, const float* y, const float* y0, bool accumulate,
                const std::string& where) {
  for (uint32_t r = 0; r < m.nrows; ++r) {
    auto [ref, mag] = dot_row(m, x, r);
    if (accumulate) {
      ref += y0[r];
      mag += std::fabs(y0[r]);
    }
    ASSERT_NEAR(y[r], ref, 2e-3 * mag + 1e-5) << where << " row " << r;
  }
}

Buffer upload(Context& ctx, const void* data, size_t bytes, const char* what) {
  Buffer b = ctx.create_buffer(bytes, MemoryKind::Device, what);
  ctx.write_buffer(b, 0, data, bytes);
  return b;
}

// x as f16 values (GemmArgs::x_f16), rounded to nearest even.
Buffer upload_f16(Context& ctx, const std::vector<float>& x, const char* what) {
  std::vector<uint16_t> h(x.size());
  for (size_t i = 0; i < x.size(); ++i) h[i] = fp32_to_fp16(x[i]);
  return upload(ctx, h.data(), h.size() * 2, what);
}

// How a dense case runs: accumulate into y; split_k: room for a split-K
// product's partial sums (the KHR path splits few-workgroup products);
// aligned_y: y rows of vec4s (the KHR path's vec4 stores); sums_later: the
// split's sum recorded by the test after a barrier (GemmArgs::sums_later);
// x_f16: activation rows in f16 (KHR path).
struct DenseCase {
  bool accumulate = false, split_k = false, aligned_y = false, sums_later = false, x_f16 = false;
};

void check_dense(const Path& path, std::mt19937& rng, GgmlType t, uint32_t ncols, uint32_t nrows, uint32_t n_tokens,
                 DenseCase c = {}) {
  const auto [accumulate, split_k, aligned_y, sums_later, x_f16] = c;
  Context& ctx = test::shared_context();
  SCOPED_TRACE(std::string(type_name(t)) + " " + std::to_string(ncols) + "x" + std::to_string(nrows) + " tokens " +
               std::to_string(n_tokens) + (accumulate ? " accumulate" : "") + (split_k ? " split-K room" : "") +
               (aligned_y ? " aligned y" : "") + (sums_later ? " sums later" : "") + (x_f16 ? " f16 x" : ""));
  const test::QMatrix m = test::quantized_matrix(rng, t, ncols, nrows);
  std::normal_distribution<float> nd(0.f, 1.f);
  // Unaligned y (scalar stores), or with aligned_y rows of vec4s (the KHR path's vec4 stores; nrows may
  // end inside one).
  const uint32_t w_off = 32, x_off = 4, x_stride = ncols + 12, y_off = aligned_y ? 4 : 3,
                 y_stride = aligned_y ? (nrows + 3) / 4 * 4 + 8 : nrows + 5;
  std::vector<float> x(x_off + size_t(n_tokens) * x_stride), y0(y_off + size_t(n_tokens) * y_stride + 7);
  for (auto& v : x) v = nd(rng);
  for (auto& v : y0) v = nd(rng);
  std::vector<uint8_t> wbytes(w_off, 0);
  wbytes.insert(wbytes.end(), m.bytes.begin(), m.bytes.end());
  Buffer wb = upload(ctx, wbytes.data(), wbytes.size(), "w"),
         xb = x_f16 ? upload_f16(ctx, x, "x") : upload(ctx, x.data(), x.size() * 4, "x"),
         yb = upload(ctx, y0.data(), y0.size() * 4, "y");
  GemmArgs a;
  a.x_f16 = x_f16;
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
  Buffer sb = ctx.create_buffer(gemm_scratch_bytes(ncols, n_tokens), MemoryKind::Device, "scratch");
  a.scratch = BufferRange(sb);
  Buffer kb = ctx.create_buffer(gemm_split_k_bytes(nrows, n_tokens), MemoryKind::Device, "split-K");
  if (split_k) a.split_k = BufferRange(kb);
  std::vector<GemmSplitSum> sums;
  if (sums_later) a.sums_later = &sums;
  Recorder rec(ctx);
  rec.begin();
  path.record(rec, a, nullptr);
  if (sums_later && !path.cm2) {
    EXPECT_FALSE(sums.empty()) << "the split product left no sum for later";
  }
  if (!sums.empty()) {
    rec.barrier();
    record_gemm_split_sums(rec, sums);
  }
  rec.submit().wait();
  std::vector<float> y(y0.size());
  ctx.read_buffer(yb, 0, y.data(), y.size() * 4);
  for (size_t i = 0; i < y.size(); ++i) {
    const bool out = i >= y_off && (i - y_off) / y_stride < n_tokens && (i - y_off) % y_stride < nrows;
    if (!out) {
      ASSERT_EQ(y[i], y0[i]) << "element " << i << " outside the output was modified";
    }
  }
  for (uint32_t n = 0; n < n_tokens; ++n)
    expect_row(m, x.data() + x_off + size_t(n) * x_stride, y.data() + y_off + size_t(n) * y_stride,
               y0.data() + y_off + size_t(n) * y_stride, accumulate, "token " + std::to_string(n));
}

// glu(g, u) as shaders/glu.glsl (act 0: SiLU, 1: gpt-oss's clamped form) and
// a bound on its change when g and u change by at most eg and eu (|d/dg| <= 1.1
// times the u factor; the clamps only shrink changes).
double glu_ref(double g, double u, int act) {
  if (act == 1) {
    const double xg = std::min(g, 7.0), xu = std::clamp(u, -7.0, 7.0);
    return xg / (1 + std::exp(-1.702 * xg)) * (xu + 1);
  }
  return g / (1 + std::exp(-g)) * u;
}
double glu_tol(double g, double u, double eg, double eu, int act) {
  const test::GluFactors f = test::glu_factors(g, u, eg, eu, act);
  return 1.1 * (act == 1 ? 1.702 : 1.0) * eg * f.u + f.g * eu;
}

// Experts' weights at w_off, expert_stride apart.
std::vector<uint8_t> expert_bytes(const std::vector<test::QMatrix>& ms, uint32_t w_off, uint64_t expert_stride) {
  std::vector<uint8_t> wbytes(w_off + expert_stride * ms.size(), 0);
  for (size_t e = 0; e < ms.size(); ++e)
    std::copy(ms[e].bytes.begin(), ms[e].bytes.end(), wbytes.begin() + w_off + e * expert_stride);
  return wbytes;
}

// How an expert-grouped case runs: gather_x: x rows by token (else by slot);
// glu_act >= 0: the gate/up form, y = glu(W x, U x) with random up weights U;
// x_f16: activation rows in f16; y_f16: the gate/up form writes f16 rows (KHR path);
// by_pair: y rows by routing pair (the down product's, GemmIdsArgs::y_by_pair).
struct IdsCase {
  bool gather_x = false, accumulate = false;
  int glu_act = -1;
  bool x_f16 = false, y_f16 = false, by_pair = false;
};

void check_ids(const Path& path, std::mt19937& rng, GgmlType t, uint32_t ncols, uint32_t nrows, uint32_t n_tokens, uint32_t k,
               uint32_t n_experts, IdsCase c) {
  const auto [gather_x, accumulate, glu_act, x_f16, y_f16, by_pair] = c;
  Context& ctx = test::shared_context();
  SCOPED_TRACE(std::string(type_name(t)) + " ids " + std::to_string(ncols) + "x" + std::to_string(nrows) +
               " tokens " + std::to_string(n_tokens) + " k " + std::to_string(k) + " experts " +
               std::to_string(n_experts) + (gather_x ? " gather" : "") + (accumulate ? " accumulate" : "") +
               (glu_act >= 0 ? " gate/up act " + std::to_string(glu_act) : "") + (x_f16 ? " f16 x" : "") +
               (y_f16 ? " f16 y" : "") + (by_pair ? " y by pair" : ""));
  std::vector<test::QMatrix> ms, us;
  for (uint32_t e = 0; e < n_experts; ++e) ms.push_back(test::quantized_matrix(rng, t, ncols, nrows));
  if (glu_act >= 0)
    for (uint32_t e = 0; e < n_experts; ++e) us.push_back(test::quantized_matrix(rng, t, ncols, nrows));
  // A gap between experts; whole blocks for coopmat2.
  const uint64_t expert_stride =
      path.cm2 ? ms[0].bytes.size() + gpu_weight_type(t)->block_bytes : (ms[0].bytes.size() + 15) / 16 * 16 + 16;
  const uint32_t w_off = 16;
  const std::vector<uint8_t> wbytes = expert_bytes(ms, w_off, expert_stride);
  const test::MoeTestTable table = test::random_moe_table(rng, n_tokens, k, n_experts, n_experts);
  const MoeTableLayout& L = table.layout;
  std::normal_distribution<float> nd(0.f, 1.f);
  const uint32_t x_rows = gather_x ? n_tokens : L.max_slots();
  // Scalar x loads on the KHR path; vec4 rows for coopmat2 and f16 rows.
  const bool vec4_x = path.cm2 || x_f16;
  const uint32_t x_off = vec4_x ? 8 : 5, x_stride = ncols + (vec4_x ? 4 : 3), y_off = 8,
                 y_stride = (nrows + 3) / 4 * 4 + 4;  // vec4 rows (nrows may end inside one)
  const uint32_t y_rows = by_pair ? L.pairs() : L.max_slots();
  std::vector<float> x(x_off + size_t(x_rows) * x_stride), y0(y_off + size_t(y_rows) * y_stride);
  for (auto& v : x) v = nd(rng);
  for (auto& v : y0) v = y_f16 ? fp16_to_fp32(fp32_to_fp16(nd(rng))) : nd(rng);  // f16 rows: representable values
  Buffer wb = upload(ctx, wbytes.data(), wbytes.size(), "w"),
         xb = x_f16 ? upload_f16(ctx, x, "x") : upload(ctx, x.data(), x.size() * 4, "x"),
         yb = y_f16 ? upload_f16(ctx, y0, "y") : upload(ctx, y0.data(), y0.size() * 4, "y"),
         tb = upload(ctx, table.words.data(), L.bytes(), "table");
  GemmIdsArgs a;
  a.x_f16 = x_f16;
  a.glu_y_f16 = y_f16;
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
  a.table = BufferRange(tb);
  a.layout = L;
  a.expert_stride = expert_stride;
  a.n_experts = n_experts;
  a.gather_x = gather_x;
  a.y_by_pair = by_pair;
  Buffer sb = ctx.create_buffer(gemm_scratch_bytes(ncols, L.max_slots()), MemoryKind::Device, "scratch");
  a.scratch = BufferRange(sb);
  Buffer ub;
  if (glu_act >= 0) {
    const std::vector<uint8_t> ubytes = expert_bytes(us, w_off, expert_stride);
    ub = upload(ctx, ubytes.data(), ubytes.size(), "u");
    a.glu_up = BufferRange(ub);
    a.glu_act = uint32_t(glu_act);
  }
  Recorder rec(ctx);
  rec.begin();
  path.record(rec, a, &a);
  rec.submit().wait();
  std::vector<float> y(y0.size());
  if (y_f16) {
    std::vector<uint16_t> h(y.size());
    ctx.read_buffer(yb, 0, h.data(), h.size() * 2);
    for (size_t i = 0; i < y.size(); ++i) y[i] = fp16_to_fp32(h[i]);
  } else {
    ctx.read_buffer(yb, 0, y.data(), y.size() * 4);
  }
  std::vector<bool> written(y_rows, false);
  for (uint32_t s = 0; s < L.max_slots(); ++s) {
    const int expert = table.slot_expert(s), token = table.slot_token(s);
    if (expert < 0) continue;
    const uint32_t row = by_pair ? uint32_t(table.slot_pair(s)) : s;
    ASSERT_FALSE(written[row]) << "slot " << s << ": y row " << row << " written twice";
    written[row] = true;
    const float* ys = y.data() + y_off + size_t(row) * y_stride;
    const float* y0s = y0.data() + y_off + size_t(row) * y_stride;
    for (uint32_t r = nrows; r < y_stride; ++r) ASSERT_EQ(ys[r], y0s[r]) << "slot " << s << " padding modified";
    const float* xs = x.data() + x_off + size_t(gather_x ? uint32_t(token) : s) * x_stride;
    if (glu_act < 0) {
      expect_row(ms[expert], xs, ys, y0s, accumulate, "slot " + std::to_string(s));
      continue;
    }
    for (uint32_t r = 0; r < nrows; ++r) {
      const auto [g, gmag] = dot_row(ms[expert], xs, r);
      const auto [u, umag] = dot_row(us[expert], xs, r);
      const double eg = 2e-3 * gmag + 1e-5, eu = 2e-3 * umag + 1e-5;
      const double ref = glu_ref(g, u, glu_act), f16_rounding = y_f16 ? std::ldexp(std::fabs(ref), -11) : 0.0;
      ASSERT_NEAR(ys[r], ref, glu_tol(g, u, eg, eu, glu_act) + f16_rounding + 1e-5)
          << "slot " << s << " row " << r << " gate " << g << " up " << u;
    }
  }
  for (uint32_t row = 0; row < y_rows; ++row)
    if (!written[row])
      for (uint32_t r = 0; r < y_stride; ++r)
        ASSERT_EQ(y[y_off + size_t(row) * y_stride + r], y0[y_off + size_t(row) * y_stride + r])
            << "y row " << row << " of no computed slot was modified";
}

using PathType = std::tuple<const Path*, GgmlType>;

class GemmCoopmat : public ::testing::TestWithParam<PathType> {
 protected:
  void SetUp() override {
    seed_ = uint32_t(test::test_seed());
    rng_.seed(seed_);
  }
  const Path& path() const { return *std::get<0>(GetParam()); }
  GgmlType type() const { return std::get<1>(GetParam()); }
  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

std::string param_name(const ::testing::TestParamInfo<PathType>& info) {
  return std::string(std::get<0>(info.param)->name) + "_" + type_name(std::get<1>(info.param));
}

}  // namespace

// Every workgroup tile, row/token counts not multiples of any tile, float rows
// ending inside a 32-column step.
TEST_P(GemmCoopmat, Dense) {
  SCOPED_TRACE("seed=" + std::to_string(seed_));
  const GgmlType t = type();
  REQUIRE_PATH(path(), t);
  const bool fl = t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
  const uint32_t k1 = fl ? 264 : (t == GgmlType::Q8_0 ? 288 : 512);
  for (const char* tile : path().dense_tiles) {
    TileScope scope(path(), tile);
    SCOPED_TRACE(std::string("tile ") + tile);
    check_dense(path(), rng_, t, k1, 200, 77);
    check_dense(path(), rng_, t, 256, 130, 150, {.accumulate = true});
    check_dense(path(), rng_, t, 256, 130, 150, {.accumulate = true, .aligned_y = true});
  }
  check_dense(path(), rng_, t, 1024, 300, 300);  // automatic tile
  // Few workgroups over long rows: split-K (KHR path) into 8 column ranges (the
  // last one shorter for float and Q8_0 rows); with and without accumulation.
  const uint32_t k_long = fl ? 2056 : t == GgmlType::Q8_0 ? 2080 : 2304;
  check_dense(path(), rng_, t, k_long, 100, 70, {.split_k = true});
  check_dense(path(), rng_, t, k_long, 100, 70, {.accumulate = true, .split_k = true});
  check_dense(path(), rng_, t, k_long, 102, 70, {.accumulate = true, .split_k = true, .aligned_y = true});
  check_dense(path(), rng_, t, k_long, 102, 70,
              {.accumulate = true, .split_k = true, .aligned_y = true, .sums_later = true});
}

TEST_P(GemmCoopmat, Indexed) {
  SCOPED_TRACE("seed=" + std::to_string(seed_));
  const GgmlType t = type();
  REQUIRE_PATH(path(), t);
  for (const char* tile : path().ids_tiles) {
    TileScope scope(path(), tile);
    SCOPED_TRACE(std::string("tile ") + tile);
    check_ids(path(), rng_, t, 256, 200, 70, 4, 5, {.gather_x = true});
    check_ids(path(), rng_, t, 512, 72, 40, 2, 3, {.accumulate = true});
    check_ids(path(), rng_, t, 256, 70, 30, 2, 3, {.gather_x = true, .accumulate = true});
    check_ids(path(), rng_, t, 512, 72, 40, 2, 3, {.by_pair = true});
  }
}

// The KHR path's gate/up form: y = glu(W x, U x), both activations, every tile.
class GemmCoopmatKhr : public ::testing::TestWithParam<GgmlType> {};

TEST_P(GemmCoopmatKhr, GateUp) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  const GgmlType t = GetParam();
  REQUIRE_PATH(kCoopmat, t);
  for (const char* tile : kCoopmat.ids_tiles) {
    TileScope scope(kCoopmat, tile);
    SCOPED_TRACE(std::string("tile ") + tile);
    check_ids(kCoopmat, rng, t, 256, 200, 70, 4, 5, {.gather_x = true, .glu_act = 0});
    check_ids(kCoopmat, rng, t, 512, 72, 40, 2, 3, {.glu_act = 1});
  }
}

// The KHR path on f16 activation rows (GemmArgs::x_f16): dense, split-K,
// expert-grouped with and without gathering; the gate/up form writing f16 rows.
TEST_P(GemmCoopmatKhr, F16Rows) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  const GgmlType t = GetParam();
  REQUIRE_PATH(kCoopmat, t);
  const bool fl = t == GgmlType::F32 || t == GgmlType::F16 || t == GgmlType::BF16;
  const uint32_t k1 = fl ? 264 : (t == GgmlType::Q8_0 ? 288 : 512);
  for (const char* tile : kCoopmat.dense_tiles) {
    TileScope scope(kCoopmat, tile);
    SCOPED_TRACE(std::string("tile ") + tile);
    check_dense(kCoopmat, rng, t, k1, 200, 77, {.x_f16 = true});
  }
  const uint32_t k_long = fl ? 2056 : t == GgmlType::Q8_0 ? 2080 : 2304;
  check_dense(kCoopmat, rng, t, k_long, 102, 70,
              {.accumulate = true, .split_k = true, .aligned_y = true, .x_f16 = true});
  check_ids(kCoopmat, rng, t, 256, 200, 70, 4, 5, {.gather_x = true, .x_f16 = true});
  check_ids(kCoopmat, rng, t, 512, 72, 40, 2, 3, {.accumulate = true, .x_f16 = true});
  check_ids(kCoopmat, rng, t, 512, 72, 40, 2, 3, {.x_f16 = true, .by_pair = true});  // the down product's form
  check_ids(kCoopmat, rng, t, 256, 200, 70, 4, 5, {.gather_x = true, .glu_act = 0, .y_f16 = true});
  check_ids(kCoopmat, rng, t, 512, 72, 40, 2, 3, {.glu_act = 1, .y_f16 = true});
}

INSTANTIATE_TEST_SUITE_P(Types, GemmCoopmatKhr, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& i) { return std::string(type_name(i.param)); });

INSTANTIATE_TEST_SUITE_P(Paths, GemmCoopmat,
                         ::testing::Combine(::testing::Values(&kCoopmat, &kCoopmat2), ::testing::ValuesIn(kTypes)),
                         param_name);

// TFLOP/s of products with 512 tokens (dense 2048x768, 2048x4096, 4096x2048 and 2048x512, and an
// expert-grouped 128-expert top-8 layer of 2048x768 and 768x2048 experts, and
// the gate/up form of the first against two products), per path and
// tile; weights Q4_K or the type VKMOE_COOPMAT_BENCH_TYPE names (e.g. F16).
class GemmCoopmatBench : public ::testing::TestWithParam<const Path*> {};

TEST_P(GemmCoopmatBench, Throughput) {
  if (!std::getenv("VKMOE_COOPMAT_BENCH")) GTEST_SKIP() << "set VKMOE_COOPMAT_BENCH=1 to measure";
  const Path& path = *GetParam();
  GgmlType bt = GgmlType::Q4_K;
  if (const char* want = std::getenv("VKMOE_COOPMAT_BENCH_TYPE"))
    for (GgmlType t : kTypes)
      if (std::string(want) == type_name(t)) bt = t;  // e.g. F16, Q8_0
  REQUIRE_PATH(path, bt);
  Context& ctx = test::shared_context();
  std::printf("%s", ctx.info().summary().c_str());
  std::mt19937 rng(1);
  const uint32_t n_tokens = 512, ncols = 2048, reps = 20;
  auto time_ns = [&](auto&& record) {
    TimestampPool ts(ctx, 2);
    Recorder rec(ctx);
    for (int warm = 0; warm < 2; ++warm) {
      rec.begin();
      rec.reset_timestamps(ts, 0, 2);
      rec.timestamp(ts, 0);
      for (uint32_t i = 0; i < reps; ++i) {
        record(rec);
        rec.barrier();
      }
      rec.timestamp(ts, 1);
      rec.submit().wait();
    }
    const auto ns = ts.read_ns(0, 2);
    return (ns[1] - ns[0]) / reps;
  };
  std::normal_distribution<float> nd(0.f, 1.f);
  auto random_rows = [&](size_t rows, uint32_t cols) {
    std::vector<float> x(rows * cols);
    for (auto& v : x) v = nd(rng);
    return x;
  };
  auto random_x = [&](uint32_t cols) {
    const std::vector<float> x = random_rows(n_tokens, cols);
    return upload(ctx, x.data(), x.size() * 4, "x");
  };
  // The KHR path's products on f32 against f16 activation rows, alternated.
  auto f32_against_f16 = [&](const char* what, auto&& record_f32, auto&& record_f16) {
    if (path.cm2) return;
    for (int round = 0; round < 3; ++round) {
      const double a32 = time_ns(record_f32), a16 = time_ns(record_f16);
      std::printf("%s %s %s: f32 rows %8.1f us, f16 rows %8.1f us\n", path.name, type_name(bt), what, a32 / 1e3,
                  a16 / 1e3);
    }
  };
  const std::vector<float> xv = random_rows(n_tokens, ncols);
  Buffer xb = upload(ctx, xv.data(), xv.size() * 4, "x"), xhb = upload_f16(ctx, xv, "x f16");
  // Dense: the experts' shape, the q and output projections and the k/v shape (columns x rows).
  for (const auto& [dcols, nrows] : {std::pair{ncols, 768u}, {ncols, 4096u}, {4096u, ncols}, {ncols, 512u}}) {
    Buffer dxb = random_x(dcols);
    Buffer sb = ctx.create_buffer(gemm_scratch_bytes(dcols, n_tokens), MemoryKind::Device, "scratch");
    const test::QMatrix m = test::quantized_matrix(rng, bt, dcols, nrows);
    Buffer wb = upload(ctx, m.bytes.data(), m.bytes.size(), "w");
    Buffer yb = ctx.create_buffer(size_t(n_tokens) * nrows * 4, MemoryKind::Device, "y");
    GemmArgs a;
    a.type = bt;
    a.ncols = dcols;
    a.nrows = nrows;
    a.n_tokens = n_tokens;
    a.w = BufferRange(wb);
    a.x = BufferRange(dxb);
    a.x_stride = dcols;
    a.y = BufferRange(yb);
    a.y_stride = nrows;
    a.scratch = BufferRange(sb);
    std::vector<const char*> tiles = path.dense_tiles;
    tiles.insert(tiles.begin(), "auto");
    for (const char* tile : tiles) {
      TileScope scope(path, tile);
      const double ns = time_ns([&](Recorder& rec) { path.record(rec, a, nullptr); });
      std::printf("%s %s dense %ux%u x %u tokens, tile %-4s: %8.1f us  %6.1f TFLOP/s\n", path.name, type_name(bt), dcols,
                  nrows, n_tokens, tile, ns / 1e3, 2.0 * dcols * nrows * n_tokens / ns / 1e3);
    }
    const std::vector<float> dxv = random_rows(n_tokens, dcols);
    Buffer dxh = upload_f16(ctx, dxv, "x f16");
    GemmArgs h = a;
    h.x = BufferRange(dxh);
    h.x_f16 = true;
    const std::string what = "dense " + std::to_string(dcols) + "x" + std::to_string(nrows);
    f32_against_f16(what.c_str(), [&](Recorder& rec) { path.record(rec, a, nullptr); },
                    [&](Recorder& rec) { path.record(rec, h, nullptr); });
  }
  // The experts' gate (or up) shape over gathered token rows, and the down shape over slot rows.
  const uint32_t n_experts = 128, k = 8;
  const test::MoeTestTable table = test::random_moe_table(rng, n_tokens, k, n_experts, n_experts);
  const MoeTableLayout& L = table.layout;
  Buffer tb = upload(ctx, table.words.data(), L.bytes(), "t");
  for (const bool down : {false, true}) {
    const uint32_t icols = down ? 768 : ncols, nrows = down ? ncols : 768;
    std::vector<uint8_t> wbytes;
    const test::QMatrix m = test::quantized_matrix(rng, bt, icols, nrows);
    for (uint32_t e = 0; e < n_experts; ++e) wbytes.insert(wbytes.end(), m.bytes.begin(), m.bytes.end());
    Buffer wb = upload(ctx, wbytes.data(), wbytes.size(), "w");
    Buffer yb = ctx.create_buffer(size_t(L.max_slots()) * nrows * 4, MemoryKind::Device, "y");
    const std::vector<float> xs = random_rows(down ? L.max_slots() : 0, icols);
    Buffer sxb = down ? upload(ctx, xs.data(), xs.size() * 4, "slot x") : Buffer();
    Buffer sxh = down ? upload_f16(ctx, xs, "slot x f16") : Buffer();
    GemmIdsArgs a;
    a.type = bt;
    a.ncols = icols;
    a.nrows = nrows;
    a.w = BufferRange(wb);
    a.x = BufferRange(down ? sxb : xb);
    a.x_stride = icols;
    a.gather_x = !down;
    a.y = BufferRange(yb);
    a.y_stride = nrows;
    a.table = BufferRange(tb);
    a.layout = L;
    a.expert_stride = m.bytes.size();
    a.n_experts = n_experts;
    Buffer isb = ctx.create_buffer(gemm_scratch_bytes(icols, L.max_slots()), MemoryKind::Device, "scratch");
    a.scratch = BufferRange(isb);
    std::vector<const char*> tiles = path.ids_tiles;
    tiles.insert(tiles.begin(), "auto");
    for (const char* tile : tiles) {
      TileScope scope(path, tile);
      const double ns = time_ns([&](Recorder& rec) { path.record(rec, a, &a); });
      const double flops = 2.0 * icols * nrows * n_tokens * k;  // useful products only
      std::printf("%s %s ids %ux%u, %u experts top-%u x %u tokens, tile %-4s: %8.1f us  %6.1f TFLOP/s\n",
                  path.name, type_name(bt), icols, nrows, n_experts, k, n_tokens, tile, ns / 1e3, flops / ns / 1e3);
    }
    GemmIdsArgs h = a;
    h.x = BufferRange(down ? sxh : xhb);
    h.x_f16 = true;
    const std::string what = "ids " + std::to_string(icols) + "x" + std::to_string(nrows);
    f32_against_f16(what.c_str(), [&](Recorder& rec) { path.record(rec, a, &a); },
                    [&](Recorder& rec) { path.record(rec, h, &h); });
    if (path.cm2 || down) continue;
    // Gate and up (the same weights twice): two products (their activation pass not
    // timed) against the gate/up form.
    Buffer ub = ctx.create_buffer(size_t(L.max_slots()) * nrows * 4, MemoryKind::Device, "u");
    GemmIdsArgs up = a;
    up.y = BufferRange(ub);
    const double two = time_ns([&](Recorder& rec) {
      path.record(rec, a, &a);
      path.record(rec, up, &up);
    });
    GemmIdsArgs glu = a;
    glu.glu_up = BufferRange(wb);
    const double one = time_ns([&](Recorder& rec) { path.record(rec, glu, &glu); });
    std::printf("%s %s ids gate+up %ux%u: two products %8.1f us, gate/up form %8.1f us\n", path.name, type_name(bt),
                icols, nrows, two / 1e3, one / 1e3);
    Buffer hb = ctx.create_buffer(size_t(L.max_slots()) * nrows * 2, MemoryKind::Device, "h");
    GemmIdsArgs glu_h = glu;
    glu_h.y = BufferRange(hb);
    glu_h.glu_y_f16 = true;
    f32_against_f16("ids gate/up form (rows written)", [&](Recorder& rec) { path.record(rec, glu, &glu); },
                    [&](Recorder& rec) { path.record(rec, glu_h, &glu_h); });
  }
}

INSTANTIATE_TEST_SUITE_P(Paths, GemmCoopmatBench, ::testing::Values(&kCoopmat, &kCoopmat2),
                         [](const ::testing::TestParamInfo<const Path*>& i) { return std::string(i.param->name); });

// The dense tile and split-K choice on a device with an H100's limits (no GPU
// needed), for Qwen3-30B-A3B's products at 512 tokens (PERF.md run 31).
TEST(GemmCoopmatPlan, DenseTileAndSplitForQwen3Products) {
  DeviceInfo d;
  d.subgroup_size = 32;
  d.max_workgroup_invocations = 1024;
  d.max_workgroup_size[0] = 1024;
  d.max_shared_memory_bytes = 49152;
  CoopMatShape s;
  s.m = s.n = s.k = 16;
  s.a_type = s.b_type = kCoopMatF16;
  s.c_type = s.result_type = kCoopMatF32;
  s.scope = kCoopMatScopeSubgroup;
  d.coopmat_shapes = {s};
  const uint64_t room = 2ull * 2048 * 512 * 4;  // one half of the engine's split-K buffer
  auto plan = [&](uint32_t nrows, uint32_t ncols, uint64_t r) {
    const CoopmatPlan p = gemm_coopmat_plan(d, nrows, ncols, 512, r);
    return p.tile + "/" + std::to_string(p.splits);
  };
  EXPECT_EQ(plan(4096, 2048, 0), "L1/0");     // q: 256 workgroups, no split room
  EXPECT_EQ(plan(4096, 2048, room), "L1/0");  // ... nor split where it has room
  EXPECT_EQ(plan(512, 2048, room), "L1/8");   // k, v: 32 workgroups, 8 splits of 8 steps
  EXPECT_EQ(plan(2048, 4096, room), "L1/2");  // output projection: 128 workgroups
  EXPECT_EQ(plan(2048, 4096, 0), "L1/0");     // without room: the first tile giving 128
  EXPECT_EQ(plan(128, 2048, room), "XS32/8"); // router: 32 workgroups split in 8
  EXPECT_EQ(plan(2048, 4096, 4ull * 2048 * 512), "L1/0");  // room for one plane: no split
  d.coopmat_shapes.clear();
  EXPECT_EQ(plan(2048, 4096, room), "/0");  // no fragment
}
