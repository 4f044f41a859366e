// Batched attention kernels (engine/vulkan/vk_attention.h) on the Vulkan
// device (lavapipe in CI) against scalar double-precision references on fresh
// random inputs. F16 caches: the references use K/V rounded to f16 too.
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstring>
#include <random>

#include "cpu/quant.h"
#include "engine/vulkan/vk_attention.h"

#include "tests/vk_test_env.h"
using namespace vkmoe;
using namespace vkmoe::vk;

namespace {

struct Env : test::VkEnv {
  // A cache buffer holding x converted to type t.
  Buffer cache(const std::vector<float>& x, KvType t) {
    if (t == KvType::F32) return buf(x);
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) h[i] = fp32_to_fp16(x[i]);
    return buf(h);
  }
  std::vector<float> read_cache(const Buffer& b, size_t n, KvType t) {
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = t == KvType::F32 ? b.as<float>()[i] : fp16_to_fp32(b.as<uint16_t>()[i]);
    return v;
  }
};

// Values as stored in a cache of type t.
std::vector<float> as_stored(std::vector<float> x, KvType t) {
  if (t == KvType::F16)
    for (auto& v : x) v = fp16_to_fp32(fp32_to_fp16(v));
  return x;
}

// max |got - want| / max |want| over the elements; NaN counts as infinite.
double rel_err(const std::vector<float>& got, const std::vector<float>& want) {
  double err = 0, scale = 1e-30;
  for (size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(double(got[i]) - want[i]);
    err = std::isnan(d) ? INFINITY : std::max(err, d);
    scale = std::max(scale, double(std::fabs(want[i])));
  }
  return err / scale;
}

struct Shape {
  uint32_t D, NH, NKV, n_tokens, pos0;
  std::string str() const {
    return "D=" + std::to_string(D) + " heads=" + std::to_string(NH) + "/" + std::to_string(NKV) +
           " tokens=" + std::to_string(n_tokens) + " pos0=" + std::to_string(pos0);
  }
};

// o[t][h] = softmax(scale * q . k[0..pos0+t]) v, in double.
std::vector<float> ref_attention(const Shape& s, const std::vector<float>& q, uint32_t q_stride,
                                 const std::vector<float>& kc, const std::vector<float>& vc, uint32_t o_stride,
                                 float scale) {
  const uint32_t D = s.D, KV = s.NKV * D;
  std::vector<float> o(size_t(s.n_tokens) * o_stride, 0.f);
  std::vector<double> w, acc(D);
  for (uint32_t t = 0; t < s.n_tokens; ++t)
    for (uint32_t h = 0; h < s.NH; ++h) {
      const uint32_t g = h / (s.NH / s.NKV), n = s.pos0 + t + 1;
      w.assign(n, 0);
      double mx = -1e300, sum = 0;
      for (uint32_t j = 0; j < n; ++j) {
        double d = 0;
        for (uint32_t i = 0; i < D; ++i) d += double(q[t * q_stride + h * D + i]) * kc[size_t(j) * KV + g * D + i];
        w[j] = d * scale;
        mx = std::max(mx, w[j]);
      }
      for (auto& x : w) sum += x = std::exp(x - mx);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (uint32_t j = 0; j < n; ++j)
        for (uint32_t i = 0; i < D; ++i) acc[i] += w[j] * vc[size_t(j) * KV + g * D + i];
      for (uint32_t i = 0; i < D; ++i) o[t * o_stride + h * D + i] = float(acc[i] / sum);
    }
  return o;
}

// Runs record_attention on fresh inputs (caches filled up to pos0 + n_tokens)
// and returns {got, want}; split: pass a scratch buffer (else never split).
std::pair<std::vector<float>, std::vector<float>> run_attention(Env& e, const Shape& s, KvType kt, bool split,
                                                                 uint32_t n_ctx) {
  const uint32_t D = s.D, KV = s.NKV * D, n_kv = s.pos0 + s.n_tokens;
  const uint32_t q_stride = s.NH * D + 4, o_stride = s.NH * D + 8;
  auto q = e.randn(size_t(s.n_tokens) * q_stride, 2.f);
  auto kc = as_stored(e.randn(size_t(n_kv) * KV), kt), vc = as_stored(e.randn(size_t(n_kv) * KV), kt);
  const float scale = 1.f / std::sqrt(float(D));
  Buffer bq = e.buf(q), bk = e.cache(kc, kt), bv = e.cache(vc, kt);
  Buffer bo = e.buf(std::vector<float>(size_t(s.n_tokens) * o_stride, NAN));
  Buffer bs = e.ctx->create_buffer(attention_scratch_bytes(s.NH, D, n_ctx), MemoryKind::Device, "scratch");
  AttentionArgs a;
  a.q = bq;
  a.k_cache = bk;
  a.v_cache = bv;
  a.o = bo;
  if (split) a.scratch = bs;
  a.q_stride = q_stride;
  a.o_stride = o_stride;
  a.n_tokens = s.n_tokens;
  a.pos0 = s.pos0;
  a.head_dim = D;
  a.n_head = s.NH;
  a.n_head_kv = s.NKV;
  a.scale = scale;
  a.kv_type = kt;
  e.record([&](Recorder& r) { record_attention(r, a); });
  std::vector<float> got(bo.as<float>(), bo.as<float>() + size_t(s.n_tokens) * o_stride);
  auto want = ref_attention(s, q, q_stride, kc, vc, o_stride, scale);
  // Compare only the heads (the row padding must stay untouched: NaN).
  std::vector<float> g2, w2;
  for (uint32_t t = 0; t < s.n_tokens; ++t) {
    for (uint32_t i = 0; i < s.NH * D; ++i) {
      g2.push_back(got[t * o_stride + i]);
      w2.push_back(want[t * o_stride + i]);
    }
    for (uint32_t i = s.NH * D; i < o_stride; ++i) EXPECT_TRUE(std::isnan(got[t * o_stride + i])) << "padding written";
  }
  return {g2, w2};
}

// f32 accumulation over head_dim and a few hundred keys: relative error of
// order 1e-6 measured on lavapipe; 2e-5 leaves room for other devices' exp2.
constexpr double kAttnTol = 2e-5;

}  // namespace

TEST(ShaderAttention, FlashMatchesReferenceOverShapesAndCacheTypes) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t gqa[][2] = {{8, 2}, {4, 4}, {8, 1}};  // ratios 4, 1, 8
  int i = 0;
  for (KvType kt : {KvType::F16, KvType::F32})
    for (uint32_t n_tokens : {1u, 5u, 37u, 130u})
      for (uint32_t pos0 : {0u, 200u})
        for (uint32_t D : {64u, 128u}) {
          const Shape s{D, gqa[i % 3][0], gqa[i % 3][1], n_tokens, pos0};
          ++i;
          SCOPED_TRACE(s.str() + " kv " + kv_type_name(kt));
          auto [got, want] = run_attention(e, s, kt, true, 4096);
          EXPECT_LT(rel_err(got, want), kAttnTol);
        }
}

TEST(ShaderAttention, FlashOddAndLargeHeadDims) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  for (KvType kt : {KvType::F16, KvType::F32})
    for (const Shape& s : {Shape{80, 8, 2, 19, 33}, Shape{256, 4, 2, 21, 50}, Shape{256, 16, 2, 1, 300},
                           Shape{96, 6, 3, 40, 0}}) {
      SCOPED_TRACE(s.str() + " kv " + kv_type_name(kt));
      auto [got, want] = run_attention(e, s, kt, true, 4096);
      EXPECT_LT(rel_err(got, want), kAttnTol);
    }
}

TEST(ShaderAttention, SplitKeysEqualUnsplitForLongContexts) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  for (const Shape& s : {Shape{128, 16, 2, 1, 2999}, Shape{64, 8, 8, 1, 3000}, Shape{128, 8, 2, 5, 2000}}) {
    SCOPED_TRACE(s.str());
    const uint32_t seed = e.rng();
    e.rng.seed(seed);
    auto [split, want] = run_attention(e, s, KvType::F16, true, 4096);
    e.rng.seed(seed);  // the same inputs without scratch: one dispatch
    auto [whole, want2] = run_attention(e, s, KvType::F16, false, 4096);
    ASSERT_EQ(want, want2);
    EXPECT_LT(rel_err(split, want), kAttnTol);
    EXPECT_LT(rel_err(whole, want), kAttnTol);
    EXPECT_LT(rel_err(split, whole), kAttnTol);
  }
}

TEST(ShaderAttention, ScratchSizeCoversSplits) {
  // Decode at a long context splits the keys; the scratch size accounts for it.
  EXPECT_EQ(attention_scratch_bytes(32, 128, 64), uint64_t(32) * 1 * 130 * 4);
  EXPECT_GT(attention_scratch_bytes(32, 128, 32768), attention_scratch_bytes(32, 128, 1024));
  EXPECT_STREQ(kv_type_name(KvType::F16), "f16");
  EXPECT_STREQ(kv_type_name(KvType::F32), "f32");
  EXPECT_EQ(kv_type_bytes(KvType::F16), 2u);
  EXPECT_EQ(kv_type_bytes(KvType::F32), 4u);
}

TEST(ShaderAttention, RopeStoreMatchesReference) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const float theta = 1e6f, eps = 1e-6f;
  const uint32_t gqa[][2] = {{4, 4}, {8, 2}, {16, 2}};  // ratios 1, 4, 8
  int iter = 0;
  for (KvType kt : {KvType::F16, KvType::F32})
    for (uint32_t D : {64u, 128u})
      for (bool norm : {false, true})
        for (bool neox : {false, true}) {
          const uint32_t NH = gqa[iter % 3][0], NKV = gqa[iter % 3][1], KV = NKV * D;
          const uint32_t pos0 = std::array<uint32_t, 4>{0, 7, 1000, 3000}[iter % 4], n_tokens = 3 + iter % 3;
          ++iter;
          SCOPED_TRACE("D=" + std::to_string(D) + " heads " + std::to_string(NH) + "/" + std::to_string(NKV) +
                       " pos0 " + std::to_string(pos0) + (norm ? " norm" : "") + (neox ? " neox" : "") + " kv " +
                       kv_type_name(kt));
          const uint32_t q_stride = NH * D + 4, kv_stride = KV + 8, n_ctx = pos0 + n_tokens + 2;
          auto q = e.randn(n_tokens * q_stride, 2.f), k = e.randn(n_tokens * kv_stride, 2.f),
               v = e.randn(n_tokens * kv_stride, 2.f), qw = e.randn(D), kw = e.randn(D);
          const std::vector<float> sentinel(size_t(n_ctx) * KV, 1234.f);  // exact in f16
          Buffer bq = e.buf(q), bk = e.buf(k), bv = e.buf(v), bqw = e.buf(qw), bkw = e.buf(kw);
          Buffer bkc = e.cache(sentinel, kt), bvc = e.cache(sentinel, kt);
          RopeStoreArgs a;
          a.q = bq;
          a.k = bk;
          a.v = bv;
          a.q_norm = bqw;
          a.k_norm = bkw;
          a.k_cache = bkc;
          a.v_cache = bvc;
          a.q_stride = q_stride;
          a.kv_stride = kv_stride;
          a.n_tokens = n_tokens;
          a.pos0 = pos0;
          a.head_dim = D;
          a.n_head = NH;
          a.n_head_kv = NKV;
          a.neox = neox;
          a.norm = norm;
          a.theta = theta;
          a.eps = eps;
          a.kv_type = kt;
          e.record([&](Recorder& r) { record_rope_store(r, a); });

          // Reference: per-head RMS norm, then rotation by pos * theta^(-2i/D), in double.
          auto head = [&](const float* x, const float* w, uint32_t pos, float* out) {
            std::vector<double> h(x, x + D);
            if (norm) {
              double ss = 0;
              for (double y : h) ss += y * y;
              const double r = 1 / std::sqrt(ss / D + eps);
              for (uint32_t i = 0; i < D; ++i) h[i] *= r * w[i];
            }
            for (uint32_t i = 0; i < D / 2; ++i) {
              const double ang = pos * std::pow(double(theta), -2.0 * i / D);
              const uint32_t ia = neox ? i : 2 * i, ib = neox ? i + D / 2 : 2 * i + 1;
              out[ia] = float(h[ia] * std::cos(ang) - h[ib] * std::sin(ang));
              out[ib] = float(h[ia] * std::sin(ang) + h[ib] * std::cos(ang));
            }
          };
          auto want_q = q;
          auto want_k = sentinel, want_v = sentinel;
          for (uint32_t t = 0; t < n_tokens; ++t) {
            for (uint32_t h = 0; h < NH; ++h) head(&q[t * q_stride + h * D], qw.data(), pos0 + t, &want_q[t * q_stride + h * D]);
            for (uint32_t h = 0; h < NKV; ++h) {
              head(&k[t * kv_stride + h * D], kw.data(), pos0 + t, &want_k[(pos0 + t) * KV + h * D]);
              std::copy_n(&v[t * kv_stride + h * D], D, &want_v[(pos0 + t) * KV + h * D]);
            }
          }
          want_k = as_stored(want_k, kt);
          want_v = as_stored(want_v, kt);
          std::vector<float> got_q(bq.as<float>(), bq.as<float>() + q.size());
          // Angles reach 3000 rad, where a float ulp is 2.4e-4 rad: 2e-3 of the range.
          EXPECT_LT(rel_err(got_q, want_q), 2e-3);
          // Sentinels (1234) dominate the range: compare the written rows separately.
          auto got_k = e.read_cache(bkc, sentinel.size(), kt), got_v = e.read_cache(bvc, sentinel.size(), kt);
          for (size_t i = 0; i < sentinel.size(); ++i) {
            const bool written = i >= size_t(pos0) * KV && i < size_t(pos0 + n_tokens) * KV;
            if (!written) {
              ASSERT_EQ(got_k[i], 1234.f) << "k cache element " << i << " overwritten";
              ASSERT_EQ(got_v[i], 1234.f) << "v cache element " << i << " overwritten";
            }
          }
          const size_t w0 = size_t(pos0) * KV, w1 = size_t(pos0 + n_tokens) * KV;
          auto slice = [&](const std::vector<float>& x) { return std::vector<float>(x.begin() + w0, x.begin() + w1); };
          EXPECT_LT(rel_err(slice(got_k), slice(want_k)), 2e-3);
          // v is stored unchanged (f16: one rounding; allow an ulp for the rounding mode).
          if (kt == KvType::F32)
            EXPECT_EQ(slice(got_v), slice(want_v));
          else
            EXPECT_LT(rel_err(slice(got_v), slice(want_v)), 1e-3);
        }
}
