// GPU matvec shaders vs. the scalar reference dot_row_f32 (runs on lavapipe).
// Tolerance per row: 1e-4 * sum_i |w_i x_i| + 1e-5 (f32 sums in another order);
// the int8-x path (MatvecConfig::quant_x) is checked against the reference on
// x rounded to int8 blocks as the shader does (see q8_rounded), so its only
// numeric change is the Q8 activation rounding, |error| <= sum_i |w_i| dx(i)/2.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>

#include "cpu/ffn_act.h"
#include "cpu/quant.h"
#include "engine/vulkan/vk_matvec.h"
#include "engine/vulkan/vk_runtime.h"
#include "tests/bench_test_util.h"
#include "tests/seed.h"

using namespace vkmoe;
using namespace vkmoe::vk;

namespace {

const GgmlType kTypes[] = {GgmlType::F32,  GgmlType::F16,  GgmlType::BF16, GgmlType::Q8_0,
                           GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q4_0,
                           GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL,
                           GgmlType::MXFP4, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_XS};

Context& shared_context() {
  static std::unique_ptr<Context> ctx = Context::create();
  return *ctx;
}

// A random quantized matrix: its bytes, and each row's dequantized values.
struct QMatrix {
  GgmlType type;
  uint32_t ncols = 0, nrows = 0;
  size_t row_bytes = 0;
  std::vector<uint8_t> bytes;
  std::vector<float> deq;  // nrows * ncols
};

QMatrix random_matrix(std::mt19937& rng, GgmlType t, uint32_t ncols, uint32_t nrows) {
  QMatrix m{t, ncols, nrows, row_bytes(t, ncols), {}, {}};
  m.bytes.resize(m.row_bytes * nrows);
  m.deq.resize(size_t(ncols) * nrows);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::uniform_real_distribution<float> scale(0.05f, 3.f);
  std::vector<float> row(ncols);
  for (uint32_t r = 0; r < nrows; ++r) {
    const float s = scale(rng), bias = 0.3f * nd(rng);  // varied scales and offsets per row
    for (auto& v : row) v = s * nd(rng) + bias;
    quantize_row(t, row.data(), m.bytes.data() + r * m.row_bytes, ncols);
    dequantize_row(t, m.bytes.data() + r * m.row_bytes, m.deq.data() + size_t(r) * ncols, ncols);
  }
  return m;
}

// Reference for one row: value and the tolerance scale sum |w_i x_i|.
void reference_row(const QMatrix& m, uint32_t r, const float* x, float& value, double& mag) {
  value = dot_row_f32(m.type, m.bytes.data() + r * m.row_bytes, x, m.ncols);
  mag = 0;
  for (uint32_t i = 0; i < m.ncols; ++i) mag += std::fabs(double(m.deq[size_t(r) * m.ncols + i]) * x[i]);
}

// The int8-x path (quant_x) computes W . x~ with x~ = dx * round(x / dx), dx =
// max|x| / 127 per 32-element block: returns x~ (its distance from x is the
// Q8 activation rounding, |x~_i - x_i| <= dx / 2). The shader may round an
// element the other way when x / dx lies within float rounding of a half;
// flip_slack bounds two such flips per row: 2 * max_i |w_i| dx(i).
bool has_q8x(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K;
}

std::vector<float> q8_rounded(const float* x, uint32_t n) {
  std::vector<float> out(n);
  for (uint32_t b = 0; b < n; b += 32) {
    float amax = 0;
    for (uint32_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    const float dx = amax / 127.f, inv = amax > 0 ? 127.f / amax : 0.f;
    for (uint32_t i = b; i < b + 32; ++i) out[i] = dx * std::round(x[i] * inv);
  }
  return out;
}

double flip_slack(const QMatrix& m, uint32_t r, const float* x) {
  double worst = 0;
  for (uint32_t b = 0; b < m.ncols; b += 32) {
    float amax = 0;
    for (uint32_t i = b; i < b + 32; ++i) amax = std::max(amax, std::fabs(x[i]));
    for (uint32_t i = b; i < b + 32; ++i)
      worst = std::max(worst, std::fabs(double(m.deq[size_t(r) * m.ncols + i])) * amax / 127.0);
  }
  return 2 * worst;
}

std::string config_name(const MatvecConfig& c) {
  return "wg=" + std::to_string(c.workgroup) + " tpr=" + std::to_string(c.threads_per_row) +
         " rpt=" + std::to_string(c.rows_per_thread) + " sg=" + std::to_string(c.subgroup) +
         " prefetch=" + std::to_string(c.prefetch) + " quant_x=" + std::to_string(c.quant_x);
}

// Records with `record`, waits, and returns y's first n floats.
std::vector<float> run_and_read(const Buffer& y, size_t n, const std::function<void(Recorder&)>& record) {
  Context& ctx = shared_context();
  Recorder rec(ctx);
  rec.begin();
  record(rec);
  rec.submit().wait();
  std::vector<float> out(n);
  ctx.read_buffer(y, 0, out.data(), n * 4);
  return out;
}

// Runs one plain matvec at the given offsets and checks every row.
void check_matvec(std::mt19937& rng, GgmlType t, uint32_t ncols, uint32_t nrows, bool accumulate,
                  const MatvecConfig& cfg, uint32_t w_off = 48) {
  Context& ctx = shared_context();
  const MatvecConfig used = matvec_config(ctx.info(), t, ncols, nrows, 1, cfg);
  SCOPED_TRACE(std::string(type_name(t)) + " " + std::to_string(ncols) + "x" + std::to_string(nrows) +
               (accumulate ? " accumulate " : " ") + config_name(used) + " w_off " + std::to_string(w_off));
  const QMatrix m = random_matrix(rng, t, ncols, nrows);
  std::normal_distribution<float> nd(0.f, 1.f);
  const uint32_t x_off = 12, y_off = 5;  // non-zero, aligned offsets
  std::vector<float> x(x_off + ncols), y0(y_off + nrows + 3);
  for (auto& v : x) v = nd(rng);
  for (auto& v : y0) v = nd(rng);

  Buffer wb = ctx.create_buffer(w_off + m.bytes.size(), MemoryKind::Device, "w");
  Buffer xb = ctx.create_buffer(x.size() * 4, MemoryKind::Device, "x");
  Buffer yb = ctx.create_buffer(y0.size() * 4, MemoryKind::Device, "y");
  ctx.write_buffer(wb, w_off, m.bytes.data(), m.bytes.size());
  ctx.write_buffer(xb, 0, x.data(), x.size() * 4);
  ctx.write_buffer(yb, 0, y0.data(), y0.size() * 4);

  MatvecArgs a;
  a.type = t;
  a.ncols = ncols;
  a.nrows = nrows;
  a.w = BufferRange(wb);
  a.w_offset = w_off;
  a.x = BufferRange(xb);
  a.x_offset = x_off;
  a.y = BufferRange(yb);
  a.y_offset = y_off;
  a.accumulate = accumulate;
  const std::vector<float> y = run_and_read(yb, y0.size(), [&](Recorder& r) { record_matvec(r, a, cfg); });

  for (uint32_t i = 0; i < y_off; ++i) ASSERT_EQ(y[i], y0[i]) << "y before the output was modified";
  for (uint32_t i = y_off + nrows; i < y.size(); ++i) ASSERT_EQ(y[i], y0[i]) << "y after the output was modified";
  for (uint32_t r = 0; r < nrows; ++r) {
    float ref;
    double mag;
    const bool q8x = used.quant_x == 1;
    const std::vector<float> xr = q8x ? q8_rounded(x.data() + x_off, ncols) : std::vector<float>();
    reference_row(m, r, q8x ? xr.data() : x.data() + x_off, ref, mag);
    const double expect = double(ref) + (accumulate ? y0[y_off + r] : 0.0);
    const double q8 = q8x ? flip_slack(m, r, x.data() + x_off) : 0.0;
    ASSERT_NEAR(y[y_off + r], expect, 1e-4 * (mag + (accumulate ? std::fabs(y0[y_off + r]) : 0.0)) + 1e-5 + q8)
        << "row " << r;
  }
}

// Indexed-expert arguments: n_experts experts of ncols x nrows, stride bytes
// apart from w_off in w, n_ids ids in ids, x and y items x_stride / y_stride floats apart.
MatvecIdsArgs ids_args(GgmlType t, uint32_t ncols, uint32_t nrows, const Buffer& w, uint32_t w_off, uint64_t stride,
                       uint32_t n_experts, const Buffer& ids, uint32_t n_ids, const Buffer& x, uint32_t x_stride,
                       const Buffer& y, uint32_t y_stride) {
  MatvecIdsArgs a;
  a.type = t;
  a.ncols = ncols;
  a.nrows = nrows;
  a.w = BufferRange(w);
  a.w_offset = w_off;
  a.x = BufferRange(x);
  a.y = BufferRange(y);
  a.ids = BufferRange(ids);
  a.n_ids = n_ids;
  a.n_experts = n_experts;
  a.expert_stride = stride;
  a.x_stride = x_stride;
  a.y_stride = y_stride;
  return a;
}

class ShaderMatvec : public ::testing::TestWithParam<GgmlType> {
 protected:
  void SetUp() override {
    seed_ = uint32_t(test::test_seed());
    rng_.seed(seed_);
  }
  uint32_t seed_ = 0;
  std::mt19937 rng_;
};

}  // namespace

// Automatic launch configuration over several shapes (rows not a multiple of
// any workgroup's rows; ncols 256..6400; >= 16384 rows selects the
// large-matrix launch shape).
TEST_P(ShaderMatvec, Shapes) {
  SCOPED_TRACE("seed=" + std::to_string(seed_));
  const GgmlType t = GetParam();
  const std::pair<uint32_t, uint32_t> shapes[] = {{256, 37}, {768, 69}, {2048, 130}, {4096, 19}, {6400, 9}, {256, 16390}};
  bool acc = false;
  for (auto [ncols, nrows] : shapes) {
    check_matvec(rng_, t, ncols, nrows, acc, {});
    acc = !acc;
  }
}

// Forced configurations covering each reduction path: shuffle (lanes per row
// below the subgroup size), subgroupAdd (equal), subgroupAdd + shared partials
// (above) and the shared-memory tree; 1..8 rows per lane.
TEST_P(ShaderMatvec, Configs) {
  SCOPED_TRACE("seed=" + std::to_string(seed_));
  const GgmlType t = GetParam();
  const uint32_t sg = shared_context().info().subgroup_size;
  std::vector<MatvecConfig> cfgs = {
      {64, 4, 3, 1, 0}, {64, 16, 8, 0, 1}, {128, 32, 4, 1, 0}, {256, 8, 1, 0, 1}, {64, 64, 2, 1, 1},
      {32, 32, 6, 1, 0}, {128, 16, 8, 1, 0}, {64, 8, 6, 1, 0}};
  if (sg >= 2 && sg <= 64) cfgs.push_back({std::max<uint32_t>(64, sg), sg, 2, 1});
  for (const auto& c : cfgs) check_matvec(rng_, t, 1024, 45, true, c);
  // int8-x path (Q8_0/Q4_K/Q5_K/Q6_K where the device has integer dot products): lanes
  // per row up to the subgroup size, 1..8 rows per lane, odd row counts.
  const DeviceInfo& dev = shared_context().info();
  if (has_q8x(t) && dev.integer_dot && dev.subgroup_shuffle && sg >= 4 && sg <= 64) {
    const std::vector<MatvecConfig> qcfgs = {{std::max<uint32_t>(64, sg), sg, 3, 1, 0, 1},
                                             {std::max<uint32_t>(32, sg), 4, 8, 1, 0, 1},
                                             {std::max<uint32_t>(128, sg), sg / 2, 1, 1, 0, 1}};
    for (const auto& c : qcfgs) {
      ASSERT_EQ(matvec_config(dev, t, 1024, 45, 1, c).quant_x, 1);
      check_matvec(rng_, t, 1024, 45, true, c);
      check_matvec(rng_, t, 2304, 19, false, c);
    }
  }
}

// MoE variant: skipped ids (negative and out of range), shared and per-item
// x, accumulate; skipped items leave y untouched.
TEST_P(ShaderMatvec, IndexedExperts) {
  SCOPED_TRACE("seed=" + std::to_string(seed_));
  const GgmlType t = GetParam();
  Context& ctx = shared_context();
  const uint32_t ncols = 512, nrows = 70, n_experts = 6;
  std::vector<QMatrix> experts;
  for (uint32_t e = 0; e < n_experts; ++e) experts.push_back(random_matrix(rng_, t, ncols, nrows));
  const size_t ebytes = experts[0].bytes.size();
  const size_t stride = (ebytes + 15) / 16 * 16 + 16;  // padded expert stride
  const uint32_t w_off = 32;
  Buffer wb = ctx.create_buffer(w_off + stride * n_experts, MemoryKind::Device, "experts");
  for (uint32_t e = 0; e < n_experts; ++e) ctx.write_buffer(wb, w_off + e * stride, experts[e].bytes.data(), ebytes);

  const std::vector<int32_t> ids = {-7, 3, 0, int32_t(n_experts), 5, 3, -1, 1};
  const uint32_t n_ids = static_cast<uint32_t>(ids.size()), ids_off = 2;
  std::vector<int32_t> ids_buf(ids_off, 99);
  ids_buf.insert(ids_buf.end(), ids.begin(), ids.end());
  Buffer ib = ctx.create_buffer(ids_buf.size() * 4, MemoryKind::Device, "ids");
  ctx.write_buffer(ib, 0, ids_buf.data(), ids_buf.size() * 4);

  std::normal_distribution<float> nd(0.f, 1.f);
  // Automatic configuration, the launch shape of large Q6_K expert products,
  // then (where the device has integer dot products) the int8-x path.
  const DeviceInfo& dev = ctx.info();
  const uint32_t sg = dev.subgroup_size;
  std::vector<MatvecConfig> cfgs = {MatvecConfig{}, {128, 8, 2, 1, 0}};
  if (has_q8x(t) && dev.integer_dot && dev.subgroup_shuffle && sg >= 2 && sg <= 64)
    cfgs.push_back({std::max<uint32_t>(64, sg), sg, 3, 1, 0, 1});
  for (const MatvecConfig& cfg : cfgs)
  for (bool shared_x : {true, false}) {
    for (bool accumulate : {false, true}) {
      const bool q8x = matvec_config(dev, t, ncols, nrows, n_ids, cfg).quant_x == 1;
      SCOPED_TRACE(std::string(type_name(t)) + (shared_x ? " shared x" : " per-item x") +
                   (accumulate ? " accumulate" : "") + (q8x ? " int8 x" : ""));
      const uint32_t x_off = 8, x_stride = shared_x ? 0 : ncols + 4, y_off = 3, y_stride = nrows + 2;
      std::vector<float> x(x_off + ncols + x_stride * n_ids), y0(y_off + y_stride * n_ids);
      for (auto& v : x) v = nd(rng_);
      for (auto& v : y0) v = nd(rng_);
      Buffer xb = ctx.create_buffer(x.size() * 4, MemoryKind::Device, "x");
      Buffer yb = ctx.create_buffer(y0.size() * 4, MemoryKind::Device, "y");
      ctx.write_buffer(xb, 0, x.data(), x.size() * 4);
      ctx.write_buffer(yb, 0, y0.data(), y0.size() * 4);

      MatvecIdsArgs a = ids_args(t, ncols, nrows, wb, w_off, stride, n_experts, ib, n_ids, xb, x_stride, yb, y_stride);
      a.x_offset = x_off;
      a.y_offset = y_off;
      a.accumulate = accumulate;
      a.ids_offset = ids_off;
      const std::vector<float> y = run_and_read(yb, y0.size(), [&](Recorder& r) { record_matvec_ids(r, a, cfg); });

      std::vector<bool> written(y.size(), false);
      for (uint32_t j = 0; j < n_ids; ++j) {
        const int e = ids[j];
        if (e < 0 || e >= int(n_experts)) continue;
        const float* xj = x.data() + x_off + j * x_stride;
        for (uint32_t r = 0; r < nrows; ++r) {
          const size_t yi = y_off + size_t(j) * y_stride + r;
          written[yi] = true;
          float ref;
          double mag;
          const std::vector<float> xr = q8x ? q8_rounded(xj, ncols) : std::vector<float>();
          reference_row(experts[e], r, q8x ? xr.data() : xj, ref, mag);
          const double expect = double(ref) + (accumulate ? y0[yi] : 0.0);
          const double q8 = q8x ? flip_slack(experts[e], r, xj) : 0.0;
          ASSERT_NEAR(y[yi], expect, 1e-4 * (mag + (accumulate ? std::fabs(y0[yi]) : 0.0)) + 1e-5 + q8)
              << "item " << j << " expert " << e << " row " << r;
        }
      }
      for (size_t i = 0; i < y.size(); ++i) {
        if (!written[i]) {
          ASSERT_EQ(y[i], y0[i]) << "y[" << i << "] changed but belongs to no computed row";
        }
      }
    }
  }
}

// Weights at offsets of the types' minimum alignment (MXFP4's 17-byte blocks
// at odd bytes, 2-byte-aligned blocks at 2 mod 4, 4-byte ones at 4 mod 16).
TEST(ShaderMatvecAlign, MinimallyAlignedWeights) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  const std::pair<GgmlType, uint32_t> cases[] = {{GgmlType::MXFP4, 49}, {GgmlType::MXFP4, 51}, {GgmlType::Q3_K, 50},
                                                 {GgmlType::Q4_0, 50}, {GgmlType::Q2_K, 52},  {GgmlType::IQ4_XS, 52}};
  for (auto [t, off] : cases) {
    check_matvec(rng, t, 512, 37, true, {}, off);
    check_matvec(rng, t, 512, 37, false, {64, 8, 3, 0, 1}, off);
  }
}

// Indexed experts of the 1-byte-aligned type (MXFP4) at odd weight offsets and
// odd expert strides, the last expert ending at the buffer's (unaligned) end,
// under the automatic and forced configurations.
TEST(ShaderMatvecAlign, OddExpertStrides) {
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  Context& ctx = shared_context();
  const GgmlType t = GgmlType::MXFP4;
  const uint32_t ncols = 384, nrows = 29, n_experts = 5;
  std::vector<QMatrix> experts;
  for (uint32_t e = 0; e < n_experts; ++e) experts.push_back(random_matrix(rng, t, ncols, nrows));
  const size_t ebytes = experts[0].bytes.size();
  const std::vector<int32_t> ids = {4, 1, -2, 3, 0, 4, 2};
  const uint32_t n_ids = static_cast<uint32_t>(ids.size());
  Buffer ib = ctx.create_buffer(ids.size() * 4, MemoryKind::Device, "ids");
  ctx.write_buffer(ib, 0, ids.data(), ids.size() * 4);
  std::normal_distribution<float> nd(0.f, 1.f);
  const std::vector<MatvecConfig> cfgs = {MatvecConfig{}, {64, 8, 3, 0, 1}, {128, 16, 8, 1, 0}, {64, 4, 1, 1, 1}};
  for (const auto& [w_off, pad] : {std::pair<uint32_t, uint32_t>{33, 3}, {50, 1}, {7, 2}})
    for (const MatvecConfig& cfg : cfgs) {
      const size_t stride = ebytes + pad;
      SCOPED_TRACE("w_off " + std::to_string(w_off) + " stride " + std::to_string(stride) + " " +
                   config_name(matvec_config(ctx.info(), t, ncols, nrows, n_ids, cfg)));
      Buffer wb = ctx.create_buffer(w_off + stride * (n_experts - 1) + ebytes, MemoryKind::Device, "experts");
      for (uint32_t e = 0; e < n_experts; ++e)
        ctx.write_buffer(wb, w_off + e * stride, experts[e].bytes.data(), ebytes);
      const uint32_t x_stride = ncols + 4, y_stride = nrows + 1;
      std::vector<float> x(ncols + x_stride * n_ids), y0(y_stride * n_ids);
      for (auto& v : x) v = nd(rng);
      for (auto& v : y0) v = nd(rng);
      Buffer xb = ctx.create_buffer(x.size() * 4, MemoryKind::Device, "x");
      Buffer yb = ctx.create_buffer(y0.size() * 4, MemoryKind::Device, "y");
      ctx.write_buffer(xb, 0, x.data(), x.size() * 4);
      ctx.write_buffer(yb, 0, y0.data(), y0.size() * 4);
      const MatvecIdsArgs a =
          ids_args(t, ncols, nrows, wb, w_off, stride, n_experts, ib, n_ids, xb, x_stride, yb, y_stride);
      const std::vector<float> y = run_and_read(yb, y0.size(), [&](Recorder& r) { record_matvec_ids(r, a, cfg); });
      for (uint32_t j = 0; j < n_ids; ++j)
        for (uint32_t r = 0; r < nrows; ++r) {
          const size_t yi = size_t(j) * y_stride + r;
          if (ids[j] < 0) {
            ASSERT_EQ(y[yi], y0[yi]);
            continue;
          }
          float ref;
          double mag;
          reference_row(experts[ids[j]], r, x.data() + j * x_stride, ref, mag);
          ASSERT_NEAR(y[yi], ref, 1e-4 * mag + 1e-5) << "item " << j << " expert " << ids[j] << " row " << r;
        }
    }
}

// ---- Fused decode variants ----

// A SwiGLU fused into the product's input (MatvecArgs::glu_up), both
// activations, single and indexed (per-item g/u rows), on f32 and (where the
// type has it) int8 activations, vs. the reference on h = act(g, u) computed on
// the CPU (cpu/ffn_act.h), int8-rounded for the int8 path. Values cross
// gpt-oss's clamps. Tolerance as above with the magnitudes of h.
TEST_P(ShaderMatvec, GluInput) {
  SCOPED_TRACE("seed=" + std::to_string(seed_));
  const GgmlType t = GetParam();
  Context& ctx = shared_context();
  // 512 columns: the input staged in shared memory (GLU_SH); for a few types
  // also a row too wide for it, formed per row group as it is read.
  std::vector<uint32_t> widths = {512};
  if (t == GgmlType::F32 || t == GgmlType::Q4_K || t == GgmlType::Q6_K)
    widths.push_back((ctx.info().max_shared_memory_bytes / 4 + 256) / 256 * 256);
  const uint32_t nrows = 45, n_experts = 3;
  const std::vector<int32_t> ids = {2, -1, 0, 2};
  Buffer ib = ctx.create_buffer(ids.size() * 4, MemoryKind::Device, "ids");
  ctx.write_buffer(ib, 0, ids.data(), ids.size() * 4);
  std::normal_distribution<float> nd(0.f, 4.f);
  for (const uint32_t ncols : widths) {
    SCOPED_TRACE("ncols " + std::to_string(ncols));
    std::vector<QMatrix> experts;
    for (uint32_t e = 0; e < n_experts; ++e) experts.push_back(random_matrix(rng_, t, ncols, nrows));
    const size_t ebytes = experts[0].bytes.size(), stride = (ebytes + 15) / 16 * 16;
    Buffer wb = ctx.create_buffer(stride * n_experts, MemoryKind::Device, "experts");
    for (uint32_t e = 0; e < n_experts; ++e) ctx.write_buffer(wb, e * stride, experts[e].bytes.data(), ebytes);
    for (int quant_x : {0, 1})
      for (GluAct act : {GluAct::SiLU, GluAct::OaiSwiGLU})
        for (bool indexed : {false, true}) {
          if (quant_x && !has_q8x(t)) continue;
          if (ncols != 512 && (quant_x || act != GluAct::SiLU)) continue;  // the wide row tests the f32-x input path
          SCOPED_TRACE(std::string(type_name(t)) + (act == GluAct::SiLU ? " silu" : " oai") +
                       (indexed ? " indexed" : " single") + (quant_x ? " int8-x" : " f32-x"));
          const uint32_t n_items = indexed ? uint32_t(ids.size()) : 1, x_off = 4, x_stride = ncols + 8;
          MatvecConfig cfg;
          cfg.quant_x = quant_x;
          const bool q8x = matvec_config(ctx.info(), t, ncols, nrows, n_items, cfg).quant_x == 1;
          if (quant_x && !q8x) GTEST_SKIP() << "no int8-x matvec on this device";
          const uint32_t y_stride = nrows + 1;
          std::vector<float> g(x_off + x_stride * n_items), u(g.size()), y0(y_stride * n_items);
          for (auto& v : g) v = nd(rng_);
          for (auto& v : u) v = nd(rng_);
          for (auto& v : y0) v = nd(rng_);
          Buffer gb = ctx.create_buffer(g.size() * 4, MemoryKind::Device, "g");
          Buffer ub = ctx.create_buffer(u.size() * 4, MemoryKind::Device, "u");
          Buffer yb = ctx.create_buffer(y0.size() * 4, MemoryKind::Device, "y");
          ctx.write_buffer(gb, 0, g.data(), g.size() * 4);
          ctx.write_buffer(ub, 0, u.data(), u.size() * 4);
          ctx.write_buffer(yb, 0, y0.data(), y0.size() * 4);
          MatvecIdsArgs a =
              ids_args(t, ncols, nrows, wb, 0, stride, n_experts, ib, n_items, gb, x_stride, yb, y_stride);
          a.x_offset = x_off;
          a.glu_up = BufferRange(ub);
          a.glu_act = act == GluAct::OaiSwiGLU ? 1 : 0;
          const std::vector<float> y = run_and_read(yb, y0.size(), [&](Recorder& r) {
            if (indexed)
              record_matvec_ids(r, a, cfg);
            else
              record_matvec(r, a, cfg);
          });
          for (uint32_t j = 0; j < n_items; ++j) {
            const int e = indexed ? ids[j] : 0;
            std::vector<float> h(ncols);
            for (uint32_t i = 0; i < ncols; ++i) {
              const size_t xi = x_off + size_t(j) * x_stride + i;
              h[i] = glu(act, g[xi], u[xi]);
            }
            const std::vector<float> hr = q8x ? q8_rounded(h.data(), ncols) : h;
            for (uint32_t r = 0; r < nrows; ++r) {
              const size_t yi = size_t(j) * y_stride + r;
              if (e < 0) {
                ASSERT_EQ(y[yi], y0[yi]) << "skipped item " << j << " was written";
                continue;
              }
              float ref;
              double mag;
              reference_row(experts[e], r, hr.data(), ref, mag);
              const double q8 = q8x ? flip_slack(experts[e], r, h.data()) : 0.0;
              ASSERT_NEAR(y[yi], ref, 1e-4 * mag + 1e-5 + q8) << "item " << j << " row " << r;
            }
          }
        }
  }
}

INSTANTIATE_TEST_SUITE_P(ShaderMatvec, ShaderMatvec, ::testing::ValuesIn(kTypes),
                         [](const ::testing::TestParamInfo<GgmlType>& i) { return std::string(type_name(i.param)); });

TEST(ShaderMatvecErrors, RejectsBadArguments) {
  Context& ctx = shared_context();
  Buffer wb = ctx.create_buffer(1 << 16, MemoryKind::Device, "w");
  Buffer xb = ctx.create_buffer(4096, MemoryKind::Device, "x");
  Buffer yb = ctx.create_buffer(4096, MemoryKind::Device, "y");
  Recorder rec(ctx);
  rec.begin();
  MatvecArgs a;
  a.type = GgmlType::Q4_K;
  a.ncols = 256;
  a.nrows = 4;
  a.w = BufferRange(wb);
  a.x = BufferRange(xb);
  a.y = BufferRange(yb);
  EXPECT_NO_THROW(record_matvec(rec, a));
  MatvecArgs bad = a;
  bad.ncols = 200;  // not a multiple of the block size
  EXPECT_THROW(record_matvec(rec, bad), Error);
  bad = a;
  bad.w_offset = 8;  // Q4_K needs 16-byte alignment
  EXPECT_THROW(record_matvec(rec, bad), Error);
  bad = a;
  bad.nrows = 1000;  // past the end of the weights
  EXPECT_THROW(record_matvec(rec, bad), Error);
  bad = a;
  bad.type = GgmlType::Q8_K;  // an activation type: no kernel
  EXPECT_THROW(record_matvec(rec, bad), Error);
  EXPECT_FALSE(matvec_supported(GgmlType::Q8_K));
  EXPECT_TRUE(matvec_supported(GgmlType::Q2_K));
  EXPECT_TRUE(matvec_supported(GgmlType::Q6_K));
  rec.submit().wait();
}

// The shader microbenchmark on tiny settings: it must print a positive,
// finite bandwidth and one sane row per kernel.
TEST(ShaderMatvecBench, PrintsSaneNumbers) {
  const auto [rc, out] = vkmoe::test::run_bench_shaders(
      {"bench-shaders", "--kernels", "q4_k,q6_k,f16,mxfp4,q4_k_ids,mxfp4_ids,f32_topk", "--shapes", "512x40,1024x16",
       "--iters", "3", "--bw-mib", "8", "--pool-mib", "1", "--experts", "16"});
  ASSERT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  std::string line;
  double bw = -1;
  int rows = 0;
  while (std::getline(lines, line)) {
    if (line.rfind("read bandwidth:", 0) == 0) bw = std::stod(line.substr(15));
    std::istringstream ls(line);
    std::vector<std::string> tok;
    for (std::string t; ls >> t;) tok.push_back(t);
    if (tok.size() != 7 || (tok[0] != "q4_k" && tok[0] != "q6_k" && tok[0] != "f16" && tok[0] != "mxfp4" &&
                            tok[0] != "q4_k_ids" && tok[0] != "mxfp4_ids" && tok[0] != "f32_topk"))
      continue;
    ++rows;
    for (int i = 3; i < 7; ++i) {
      const double v = std::stod(tok[i]);
      EXPECT_TRUE(std::isfinite(v) && v > 0) << line;
    }
  }
  EXPECT_TRUE(std::isfinite(bw) && bw > 0) << out;
  EXPECT_EQ(rows, 5 * 2 + 2) << out;  // 5 kernels x 2 shapes, 2 expert kernels
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(vkmoe::test::run_bench_shaders({"bench-shaders", "--kernels", "q7_k"}).first, 1);
  EXPECT_NE(::testing::internal::GetCapturedStderr().find("unknown kernel"), std::string::npos);
}
