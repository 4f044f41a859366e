// Batched attention kernels (engine/vulkan/vk_attention.h) on the Vulkan
// device (lavapipe in CI) against scalar double-precision references on fresh
// random inputs. F16 and Q8_0 caches: the references use K/V rounded the same
// way (Q8_0: quantized and dequantized on the host).
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>

#include "cpu/quant.h"
#include "cpu/rope.h"
#include "engine/forward/attention_ref.h"
#include "engine/vulkan/vk_attention.h"

#include "tests/vk_test_env.h"
#include "tests/bench_test_util.h"
using namespace vkmoe;
using namespace vkmoe::vk;

namespace {

// Q8_0 cache rows as vk_attention.h lays them out, written independently:
// per position the int8 values of all heads (4 per uint, first in the low
// byte), then per head ceil(D / 64) uints of f16 scales (block b of head g:
// uint g * SU + b / 2, half b % 2), padded to a multiple of 4 uints.
struct Q8Layout {
  uint32_t D, NKV;
  uint32_t su() const { return (D + 63) / 64; }
  uint32_t scale_off() const { return NKV * D / 4; }
  uint32_t row() const { return (scale_off() + NKV * su() + 3) / 4 * 4; }
  int8_t q(const std::vector<uint32_t>& w, size_t pos, size_t i) const {  // i < NKV * D
    return int8_t(w[pos * row() + i / 4] >> (8 * (i % 4)));
  }
  float d(const std::vector<uint32_t>& w, size_t pos, size_t i) const {  // scale of value i's block
    const size_t g = i / D, b = i % D / 32, h = w[pos * row() + scale_off() + g * su() + b / 2] >> (16 * (b % 2));
    return fp16_to_fp32(uint16_t(h));
  }
  // ggml's Q8_0: d = amax / 127 (stored as f16), q = round(x / d) half away from zero.
  std::vector<uint32_t> pack(const std::vector<float>& x) const {
    const size_t kv = size_t(NKV) * D, n_pos = x.size() / kv;
    std::vector<uint32_t> w(n_pos * row(), 0);
    for (size_t pos = 0; pos < n_pos; ++pos)
      for (size_t b0 = 0; b0 < kv; b0 += 32) {
        const float* xb = &x[pos * kv + b0];
        float amax = 0;
        for (int i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(xb[i]));
        const float d = amax / 127, id = d != 0 ? 1 / d : 0;
        for (size_t i = 0; i < 32; ++i) {
          const uint32_t q = uint8_t(int8_t(std::clamp(std::round(xb[i] * id), -127.f, 127.f)));
          w[pos * row() + (b0 + i) / 4] |= q << (8 * ((b0 + i) % 4));
        }
        const size_t g = b0 / D, b = b0 % D / 32;
        w[pos * row() + scale_off() + g * su() + b / 2] |= uint32_t(fp32_to_fp16(d)) << (16 * (b % 2));
      }
    return w;
  }
  std::vector<float> unpack(const std::vector<uint32_t>& w) const {
    const size_t kv = size_t(NKV) * D, n_pos = w.size() / row();
    std::vector<float> x(n_pos * kv);
    for (size_t pos = 0; pos < n_pos; ++pos)
      for (size_t i = 0; i < kv; ++i) x[pos * kv + i] = q(w, pos, i) * d(w, pos, i);
    return x;
  }
};

struct Env : test::VkEnv {
  // A cache buffer holding x ([pos][NKV * D]) converted to type t.
  Buffer cache(const std::vector<float>& x, KvType t, uint32_t D, uint32_t NKV) {
    if (t == KvType::F32) return buf(x);
    if (t == KvType::Q8_0) return buf(Q8Layout{D, NKV}.pack(x));
    std::vector<uint16_t> h(x.size());
    for (size_t i = 0; i < x.size(); ++i) h[i] = fp32_to_fp16(x[i]);
    return buf(h);
  }
  std::vector<float> read_cache(const Buffer& b, size_t n, KvType t, uint32_t D, uint32_t NKV) {
    if (t == KvType::Q8_0) return Q8Layout{D, NKV}.unpack(read<uint32_t>(b, n / (NKV * D) * Q8Layout{D, NKV}.row()));
    std::vector<float> v(n);
    for (size_t i = 0; i < n; ++i) v[i] = t == KvType::F32 ? b.as<float>()[i] : fp16_to_fp32(b.as<uint16_t>()[i]);
    return v;
  }
};

// Values as stored in a cache of type t (rows of NKV * D values).
std::vector<float> as_stored(std::vector<float> x, KvType t, uint32_t D, uint32_t NKV) {
  if (t == KvType::F16)
    for (auto& v : x) v = fp16_to_fp32(fp32_to_fp16(v));
  if (t == KvType::Q8_0) return Q8Layout{D, NKV}.unpack(Q8Layout{D, NKV}.pack(x));
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

// o[t][h] = softmax(scale * q . k[lo..pos0+t]) v, in double; lo = 0, or
// with a window pos0 + t - window + 1 (when positive); sinks: sinks[h] joins
// the max and the denominator.
std::vector<float> ref_attention(const Shape& s, const std::vector<float>& q, uint32_t q_stride,
                                 const std::vector<float>& kc, const std::vector<float>& vc, uint32_t o_stride,
                                 float scale, uint32_t window = 0, const float* sinks = nullptr) {
  const uint32_t D = s.D, KV = s.NKV * D;
  std::vector<float> o(size_t(s.n_tokens) * o_stride, 0.f);
  std::vector<double> w, acc(D);
  for (uint32_t t = 0; t < s.n_tokens; ++t)
    for (uint32_t h = 0; h < s.NH; ++h) {
      const uint32_t g = h / (s.NH / s.NKV), n = s.pos0 + t + 1;
      const uint32_t lo = window > 0 && n > window ? n - window : 0;
      w.assign(n, 0);
      double mx = -1e300, sum = 0;
      for (uint32_t j = lo; j < n; ++j) {
        double d = 0;
        for (uint32_t i = 0; i < D; ++i) d += double(q[t * q_stride + h * D + i]) * kc[size_t(j) * KV + g * D + i];
        w[j] = d * scale;
        mx = std::max(mx, w[j]);
      }
      if (sinks) mx = std::max(mx, double(sinks[h]));
      for (uint32_t j = lo; j < n; ++j) sum += w[j] = std::exp(w[j] - mx);
      if (sinks) sum += std::exp(double(sinks[h]) - mx);
      std::fill(acc.begin(), acc.end(), 0.0);
      for (uint32_t j = lo; j < n; ++j)
        for (uint32_t i = 0; i < D; ++i) acc[i] += w[j] * vc[size_t(j) * KV + g * D + i];
      for (uint32_t i = 0; i < D; ++i) o[t * o_stride + h * D + i] = float(acc[i] / sum);
    }
  return o;
}

// Sliding window and sinks of a run (gpt-oss); sinks: one random logit per head.
// Latent attention: shared_kv reads the values from the key cache (one buffer);
// max_shared caps the tiles' shared memory (0: the device's).
struct Extras {
  uint32_t window = 0;
  bool sinks = false;
  bool shared_kv = false;
  uint32_t max_shared = 0;
  bool tail = false;  // counters for the split tail (the last split workgroup combines)
  bool subgroup_rows = true;  // AttentionArgs::subgroup_rows
  // Key row p of n scaled by 2 (p + 1) / n: scores near 0 in the first key tiles
  // and up to twice the usual at the end, so each row's maximum rises by more
  // than 2^8 along the keys (the one-pass kernel raises its reference and
  // rescales) while f16 keeps scores as precise as without the ramp, to 2x.
  bool key_ramp = false;
  bool o_f16 = false;  // AttentionArgs::o_f16 (the cooperative-matrix kernel only)
  std::string str() const {
    return "window=" + std::to_string(window) + (sinks ? " sinks" : "") + (shared_kv ? " k=v" : "") +
           (max_shared ? " shared<=" + std::to_string(max_shared) : "") + (tail ? " tail" : "") +
           (subgroup_rows ? "" : " no-subgroup-rows") +
           (key_ramp ? " key ramp" : "") + (o_f16 ? " f16 o" : "");
  }
};

// f32 accumulation over head_dim and a few hundred keys: relative error of
// order 1e-6 measured on lavapipe; 2e-5 leaves room for other devices' exp2.
constexpr double kAttnTol = 2e-5;
// The cooperative-matrix prompt kernel (attention_uses_coopmat) rounds the
// scaled q and the probabilities to f16 (2^-11 relative each): scores off by
// up to ~|q||k| 2^-11, of order 1e-3 in the outputs.
constexpr double kAttnCmTol = 4e-3;

struct AttnResult {
  std::vector<float> got, want, cpu;  // the heads of every token: GPU, double reference, attend_ref
  double tol = kAttnTol;              // of got against want / cpu: by the kernel that ran
  AttentionRecord rec;                // how it was recorded (splits, tail)
};

// Runs record_attention on fresh inputs (caches filled up to pos0 + n_tokens)
// split: pass a scratch buffer (else never split). With a window, the cache
// positions before the first token's window hold NaN: the kernel must not read them.
AttnResult run_attention_ex(Env& e, const Shape& s, KvType kt, bool split, uint32_t n_ctx, const Extras& x) {
  const uint32_t D = s.D, KV = s.NKV * D, n_kv = s.pos0 + s.n_tokens;
  const uint32_t q_stride = s.NH * D + 4, o_stride = s.NH * D + 8;
  auto q = e.randn(size_t(s.n_tokens) * q_stride, 2.f);
  auto kc = e.randn(size_t(n_kv) * KV), vc = as_stored(e.randn(size_t(n_kv) * KV), kt, D, s.NKV);
  if (x.key_ramp)
    for (size_t i = 0; i < kc.size(); ++i) kc[i] *= 2.f * float(i / KV + 1) / float(n_kv);
  kc = as_stored(kc, kt, D, s.NKV);
  if (x.shared_kv) vc = kc;
  const uint32_t unseen = x.window > 0 && s.pos0 + 1 > x.window ? s.pos0 + 1 - x.window : 0;
  std::fill(kc.begin(), kc.begin() + size_t(unseen) * KV, NAN);
  std::fill(vc.begin(), vc.begin() + size_t(unseen) * KV, NAN);
  auto sinks = e.randn(s.NH, 3.f);
  for (auto& v : sinks) v += 1;
  sinks[s.NH - 1] = 15;  // above every score: the sink sets the max
  const float scale = 1.f / std::sqrt(float(D));
  Buffer bq = e.buf(q), bk = e.cache(kc, kt, D, s.NKV), bv = e.cache(x.shared_kv ? std::vector<float>(4) : vc, kt, D, s.NKV),
         bsk = e.buf(sinks);
  const size_t o_size = size_t(s.n_tokens) * o_stride;
  Buffer bo = x.o_f16 ? e.buf(std::vector<uint16_t>(o_size, fp32_to_fp16(NAN)))
                      : e.buf(std::vector<float>(o_size, NAN));
  Buffer bs = e.ctx->create_buffer(attention_scratch_bytes(s.NH, D, n_ctx), MemoryKind::Device, "scratch");
  AttentionArgs a;
  a.q = bq;
  a.k_cache = bk;
  a.v_cache = x.shared_kv ? bk : bv;
  a.o = bo;
  a.max_shared_bytes = x.max_shared;
  a.subgroup_rows = x.subgroup_rows;
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
  a.window = x.window;
  a.o_f16 = x.o_f16;
  if (x.sinks) a.sinks = bsk;
  Buffer counters = e.buf(std::vector<uint32_t>(1024, 0));
  if (x.tail) {
    a.counters = counters;
    a.counter_index = 5;
  }
  AttentionRecord rec;
  e.record([&](Recorder& r) { rec = record_attention(r, a); });
  if (x.tail) {
    const auto c = e.read<uint32_t>(counters, 1024);
    EXPECT_EQ(std::count(c.begin(), c.end(), 0u), 1024) << "the split tail left a counter non-zero";
  }
  const double tol = attention_uses_coopmat(*e.ctx, a) ? kAttnCmTol : kAttnTol;
  std::vector<float> got(o_size);
  if (x.o_f16)
    for (size_t i = 0; i < o_size; ++i) got[i] = fp16_to_fp32(bo.as<uint16_t>()[i]);
  else
    got.assign(bo.as<float>(), bo.as<float>() + o_size);
  auto want = ref_attention(s, q, q_stride, kc, vc, o_stride, scale, x.window, x.sinks ? sinks.data() : nullptr);
  AttentionRefShape rs;
  rs.head_dim = int(D);
  rs.n_head = int(s.NH);
  rs.n_head_kv = int(s.NKV);
  rs.scale = scale;
  rs.window = x.window;
  rs.sinks = x.sinks ? sinks.data() : nullptr;
  std::vector<float> cpu(size_t(s.NH) * D), scratch;
  // Compare only the heads (the row padding must stay untouched: NaN).
  AttnResult res;
  res.tol = tol;
  res.rec = rec;
  for (uint32_t t = 0; t < s.n_tokens; ++t) {
    attend_ref(&q[size_t(t) * q_stride], kc.data(), vc.data(), int(KV), int(s.pos0 + t), rs, cpu.data(), scratch);
    res.cpu.insert(res.cpu.end(), cpu.begin(), cpu.end());
    for (uint32_t i = 0; i < s.NH * D; ++i) {
      res.got.push_back(got[t * o_stride + i]);
      res.want.push_back(want[t * o_stride + i]);
    }
    for (uint32_t i = s.NH * D; i < o_stride; ++i) EXPECT_TRUE(std::isnan(got[t * o_stride + i])) << "padding written";
  }
  return res;
}

// Without window or sinks.
AttnResult run_attention(Env& e, const Shape& s, KvType kt, bool split, uint32_t n_ctx) {
  return run_attention_ex(e, s, kt, split, n_ctx, {});
}

// rope_store of n_tokens rows of q (n_head heads) and k (n_head_kv) into
// k_cache at pos0: dense rows of head_dim-wide heads, no norm (the q_norm and
// k_norm bindings are placeholders), no values unless the caller sets v and v_cache.
RopeStoreArgs rope_store_args(const Buffer& q, const Buffer& k, const Buffer& k_cache, uint32_t n_tokens,
                              uint32_t pos0, uint32_t head_dim, uint32_t n_head, uint32_t n_head_kv,
                              const RopeParams& rp, KvType kv_type) {
  RopeStoreArgs a;
  a.q = q;
  a.k = k;
  a.q_norm = a.k_norm = q;
  a.k_cache = k_cache;
  a.q_stride = n_head * head_dim;
  a.kv_stride = n_head_kv * head_dim;
  a.n_tokens = n_tokens;
  a.pos0 = pos0;
  a.head_dim = head_dim;
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.rope = rp;
  a.kv_type = kv_type;
  return a;
}

// The folded attention's clock stamps at kClockBase (AttentionArgs::clocks):
// a prefix of workgroups stamped every edge in order (the split count only
// where a split tail ran, the inputs' wait only where chained), nothing else.
constexpr uint32_t kClockBase = 3 * kAttnClockSlots;
void expect_attention_stamps(const std::vector<uint64_t>& st, bool counted, bool waited = false) {
  using C = AttnClock;
  for (uint32_t i = 0; i < kClockBase; ++i) ASSERT_EQ(st[i], 0u) << "before the base: " << i;
  auto at = [&](uint32_t w, uint32_t slot) { return st[kClockBase + size_t(w) * kAttnClockSlots + slot]; };
  uint32_t n = 0;
  while (n < kAttnClockWorkgroups && at(n, uint32_t(C::Start))) ++n;
  ASSERT_GT(n, 0u) << "no workgroup stamped its start";
  const C order[] = {C::Start, C::Waited, C::Prologue, C::Tiles, C::Stored, C::Counted, C::End};
  static_assert(sizeof order / sizeof *order == size_t(C::Count));
  for (uint32_t w = 0; w < kAttnClockWorkgroups; ++w) {
    uint64_t prev = 0;
    for (uint32_t slot = 0; slot < kAttnClockSlots; ++slot) {
      const bool want = w < n && slot < uint32_t(C::Count) && (order[slot] != C::Counted || counted) &&
                        (order[slot] != C::Waited || waited);
      if (!want) {
        ASSERT_EQ(at(w, slot), 0u) << "workgroup " << w << " slot " << slot;
        continue;
      }
      ASSERT_NE(at(w, slot), 0u) << "workgroup " << w << " " << attn_clock_name(order[slot]);
      if (slot > 0) {  // Start comes first
        ASSERT_TRUE(test::clock_not_before(at(w, slot), prev))
            << "workgroup " << w << " " << attn_clock_name(order[slot]);
      }
      prev = at(w, slot);
    }
  }
}

}  // namespace

TEST(ShaderAttention, FlashMatchesReferenceOverShapesAndCacheTypes) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t gqa[][2] = {{8, 2}, {4, 4}, {8, 1}};  // ratios 4, 1, 8
  int i = 0;
  for (KvType kt : {KvType::F16, KvType::F32, KvType::Q8_0})
    for (uint32_t n_tokens : {1u, 5u, 37u, 130u})
      for (uint32_t pos0 : {0u, 200u})
        for (uint32_t D : {64u, 128u}) {
          const Shape s{D, gqa[i % 3][0], gqa[i % 3][1], n_tokens, pos0};
          ++i;
          if (kt == KvType::Q8_0 && (n_tokens == 5 || n_tokens == 130)) continue;  // keep the test fast
          SCOPED_TRACE(s.str() + " kv " + kv_type_name(kt));
          const AttnResult r = run_attention(e, s, kt, true, 4096);
          EXPECT_LT(rel_err(r.got, r.want), r.tol);
        }
}

TEST(ShaderAttention, FlashOddAndLargeHeadDims) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  for (KvType kt : {KvType::F16, KvType::F32, KvType::Q8_0})
    for (const Shape& s : {Shape{80, 8, 2, 19, 33}, Shape{256, 4, 2, 21, 50}, Shape{256, 16, 2, 1, 300},
                           Shape{96, 6, 3, 40, 0}}) {
      if (kt == KvType::Q8_0 && s.D % 32 != 0) continue;  // Q8_0 blocks of 32
      SCOPED_TRACE(s.str() + " kv " + kv_type_name(kt));
      const AttnResult r = run_attention(e, s, kt, true, 4096);
      EXPECT_LT(rel_err(r.got, r.want), r.tol);
    }
}

// Latent attention (deepseek2): one kv head whose rows are also the values
// (k_cache == v_cache), head_dim 96 (the tests' models) and 576 (DeepSeek's
// 512 + 64: the query tile stays out of shared memory at 48 KiB or less),
// decode (split) and prefill, against attend_ref with the key cache passed
// as the values.
TEST(ShaderAttention, LatentSharedKvLargeHeadDimMatchesCpuReference) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  double worst = 0;
  for (KvType kt : {KvType::F16, KvType::F32, KvType::Q8_0})
    for (const Shape& s : {Shape{576, 16, 1, 1, 300}, Shape{576, 8, 1, 9, 20}, Shape{576, 4, 1, 1, 70},
                           Shape{96, 16, 1, 1, 200},
                           Shape{96, 16, 1, 13, 5}, Shape{256, 16, 1, 5, 30}})
      for (uint32_t max_shared : {0u, 48u << 10, 28u << 10, 24u << 10}) {
        // 576: the device's and 48 KiB (lavapipe: both 32 KiB, 8-key tiles), then 24 KiB;
        // 256 at 28 KiB: 16-key tiles with the queries read from q.
        if (s.D == 96 ? max_shared != 0 : s.D == 256 ? max_shared != (28u << 10) : max_shared == (28u << 10))
          continue;
        Extras x;
        x.shared_kv = true;
        x.max_shared = max_shared;
        SCOPED_TRACE(s.str() + " kv " + kv_type_name(kt) + " " + x.str());
        const AttnResult r = run_attention_ex(e, s, kt, true, 4096, x);
        EXPECT_LT(rel_err(r.got, r.want), r.tol);
        EXPECT_LT(rel_err(r.got, r.cpu), r.tol);
        worst = std::max(worst, rel_err(r.got, r.cpu));
      }
  std::printf("worst relative error: gpu vs attend_ref (k = v) %.3g\n", worst);
}

TEST(ShaderAttention, SplitKeysEqualUnsplitForLongContexts) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  for (KvType kt : {KvType::F16, KvType::Q8_0})
    for (const Shape& s : {Shape{128, 16, 2, 1, 2999}, Shape{64, 8, 8, 1, 3000}, Shape{128, 8, 2, 5, 2000},
                           Shape{64, 8, 2, 1, 6000}}) {  // the last: 46 splits, twice any other shape's
      SCOPED_TRACE(s.str() + " kv " + kv_type_name(kt));
      const uint32_t seed = e.rng();
      e.rng.seed(seed);
      const AttnResult split = run_attention(e, s, kt, true, 8192);
      e.rng.seed(seed);  // the same inputs without scratch: one dispatch
      const AttnResult whole = run_attention(e, s, kt, false, 8192);
      e.rng.seed(seed);  // split, combined by the last split workgroup
      Extras xt;
      xt.tail = true;
      const AttnResult tail = run_attention_ex(e, s, kt, true, 8192, xt);
      if (s.pos0 == 6000) {
        EXPECT_GT(tail.rec.splits, 32u);
      }
      ASSERT_EQ(split.want, whole.want);
      ASSERT_EQ(split.want, tail.want);
      EXPECT_GT(split.rec.splits, 1u);
      EXPECT_FALSE(split.rec.split_tail);
      EXPECT_EQ(whole.rec.splits, 1u);
      EXPECT_EQ(tail.rec.splits, split.rec.splits);
      EXPECT_TRUE(tail.rec.split_tail);
      EXPECT_LT(rel_err(tail.got, split.want), tail.tol);
      EXPECT_LT(rel_err(split.got, split.want), split.tol);
      EXPECT_LT(rel_err(whole.got, split.want), whole.tol);
      EXPECT_LT(rel_err(split.got, whole.got), std::max(split.tol, whole.tol));
    }
}

// Sliding windows (1, 3, shorter and longer than the context) and sinks, GPU
// against the CPU reference attend_ref and the double reference. Prefill:
// several tokens after pos0 > 0 (the last shape is split over the keys).
TEST(ShaderAttention, SinksAndWindowPrefillMatchCpuReference) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  double worst = 0, worst_cpu = 0;
  for (KvType kt : {KvType::F16, KvType::F32})
    for (const Shape& s : {Shape{64, 8, 2, 37, 200}, Shape{128, 4, 4, 5, 100}, Shape{64, 8, 1, 130, 70},
                           Shape{128, 8, 2, 3, 2500}})
      for (uint32_t window : {0u, 1u, 3u, 50u, 1000000u})
        for (bool sinks : {false, true}) {
          const Extras x{window, sinks};
          SCOPED_TRACE(s.str() + " kv " + kv_type_name(kt) + " " + x.str());
          const AttnResult r = run_attention_ex(e, s, kt, true, 4096, x);
          EXPECT_LT(rel_err(r.got, r.cpu), r.tol);
          EXPECT_LT(rel_err(r.got, r.want), r.tol);
          EXPECT_LT(rel_err(r.cpu, r.want), kAttnTol);
          worst = std::max(worst, rel_err(r.got, r.cpu));
          worst_cpu = std::max(worst_cpu, rel_err(r.cpu, r.want));
        }
  std::printf("worst relative error: gpu vs attend_ref %.3g, attend_ref vs double %.3g\n", worst, worst_cpu);
}

// Decode (one token) at long contexts: split-K with the sinks added once in
// the reduce (or the split tail), windows shorter than a split, than the
// context, and longer; split, split-tail and unsplit runs on the same inputs agree.
TEST(ShaderAttention, SinksAndWindowDecodeSplitMatchCpuReference) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  double worst = 0;
  int split_runs = 0;
  for (KvType kt : {KvType::F16, KvType::F32})
    for (const Shape& s : {Shape{128, 16, 2, 1, 2999}, Shape{64, 8, 8, 1, 4000}})
      for (uint32_t window : {0u, 128u, 333u, 1000u, 8000u})
        for (bool sinks : {false, true}) {
          const Extras x{window, sinks};
          SCOPED_TRACE(s.str() + " kv " + kv_type_name(kt) + " " + x.str());
          const uint32_t seed = e.rng();
          e.rng.seed(seed);
          const AttnResult split = run_attention_ex(e, s, kt, true, 4096, x);
          e.rng.seed(seed);
          const AttnResult whole = run_attention_ex(e, s, kt, false, 4096, x);
          e.rng.seed(seed);
          Extras xt = x;
          xt.tail = true;
          const AttnResult tail = run_attention_ex(e, s, kt, true, 4096, xt);
          ASSERT_EQ(split.cpu, whole.cpu);
          ASSERT_EQ(split.cpu, tail.cpu);
          EXPECT_EQ(tail.rec.splits, split.rec.splits);
          EXPECT_EQ(tail.rec.split_tail, split.rec.splits > 1);  // short windows are not split
          split_runs += split.rec.splits > 1;
          EXPECT_LT(rel_err(tail.got, split.cpu), tail.tol);
          EXPECT_LT(rel_err(tail.got, split.got), tail.tol);
          EXPECT_LT(rel_err(split.got, split.cpu), split.tol);
          EXPECT_LT(rel_err(whole.got, split.cpu), whole.tol);
          EXPECT_LT(rel_err(split.got, whole.got), std::max(split.tol, whole.tol));
          EXPECT_LT(rel_err(split.cpu, split.want), kAttnTol);
          worst = std::max({worst, rel_err(split.got, split.cpu), rel_err(whole.got, split.cpu), rel_err(tail.got, split.cpu)});
        }
  EXPECT_GE(split_runs, 24);  // windows of 333 keys and more, or none
  std::printf("worst relative error: gpu vs attend_ref %.3g\n", worst);
}

// One token over an F16 cache: one subgroup per query row (where the device's
// subgroups have 8-32 lanes with arithmetic: the softmax in registers) against
// the shared-memory softmax, on the same inputs; head dims whose vec4 columns
// span several lanes or leave lanes idle, 1-8 query heads per kv head, split
// (with the tail and with the reduce) and whole, windows, sinks, keys = values.
TEST(ShaderAttention, DecodeSubgroupRowsMatchSharedSoftmax) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const DeviceInfo& dev = e.ctx->info();
  const bool rows_expected = dev.subgroup_arithmetic && (dev.subgroup_size == 8 || dev.subgroup_size == 16 ||
                                                         dev.subgroup_size == 32);
  std::printf("subgroup %u%s: subgroup rows %s\n", dev.subgroup_size, dev.subgroup_arithmetic ? " arithmetic" : "",
              rows_expected ? "expected" : "not expected");
  int i = 0;
  for (const Shape& s : {Shape{64, 8, 1, 1, 0}, Shape{72, 8, 2, 1, 37}, Shape{128, 32, 4, 1, 700},
                         Shape{256, 4, 4, 1, 1500}, Shape{128, 16, 2, 1, 2999}})
    for (bool split : {false, true})
      for (int extra = 0; extra < 4; ++extra) {
        Extras x;
        x.tail = split && extra % 2 == 0;
        x.window = extra == 1 ? 333 : 0;
        x.sinks = extra >= 2;
        x.shared_kv = extra == 3 && ++i % 2 == 0;
        SCOPED_TRACE(s.str() + (split ? " split " : " whole ") + x.str());
        const uint32_t seed = e.rng();
        e.rng.seed(seed);
        const AttnResult rows = run_attention_ex(e, s, KvType::F16, split, 8192, x);
        e.rng.seed(seed);
        x.subgroup_rows = false;
        const AttnResult shared = run_attention_ex(e, s, KvType::F16, split, 8192, x);
        ASSERT_EQ(rows.want, shared.want);
        EXPECT_EQ(rows.rec.subgroup_rows, rows_expected);
        EXPECT_FALSE(shared.rec.subgroup_rows);
        EXPECT_EQ(rows.rec.split_tail, x.tail && rows.rec.splits > 1);
        EXPECT_EQ(shared.rec.split_tail, x.tail && shared.rec.splits > 1);
        EXPECT_LT(rel_err(rows.got, rows.want), rows.tol);
        EXPECT_LT(rel_err(shared.got, rows.want), shared.tol);
        EXPECT_LT(rel_err(rows.got, shared.got), rows.tol);
      }
}

// The cooperative-matrix prompt kernel on shapes it takes (grids of at least
// 64 workgroups): head_dim 64, 112 and 128, grouped-query ratios 1 to 8, 8
// and 4 subgroups per workgroup (512 and 200 tokens of Qwen3-30B-A3B's
// heads), row blocks straddling tokens, pos0 > 0, windows, sinks; skipped
// where it does not run.
TEST(ShaderAttention, CoopmatPromptMatchesReference) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  Buffer kb = e.buf(std::vector<float>(4)), vb = e.buf(std::vector<float>(4));
  AttentionArgs probe;
  probe.k_cache = kb;
  probe.v_cache = vb;
  probe.kv_type = KvType::F16;
  probe.head_dim = 128;
  probe.n_head = 32;
  probe.n_head_kv = 4;
  probe.n_tokens = 512;
  if (!attention_uses_coopmat(*e.ctx, probe))
    GTEST_SKIP() << "no cooperative-matrix attention on " << e.ctx->info().name
                 << " (needs VK_KHR_cooperative_matrix f16 16x16x16 and shaders built with glslang 15)";
  // Both kernels: one pass with a lazily raised maximum (default) and two passes.
  for (bool one_pass : {true, false}) {
    setenv("VKMOE_ATTN_CM_ONE_PASS", one_pass ? "1" : "0", 1);
    double worst = 0;
    for (const Shape& s : {Shape{128, 32, 4, 512, 0}, Shape{128, 32, 4, 200, 0}, Shape{128, 128, 16, 70, 300},
                           Shape{64, 64, 64, 130, 33}, Shape{112, 96, 32, 100, 7}, Shape{128, 96, 24, 65, 300}})
      for (uint32_t window : {0u, 20u})
        for (bool sinks : {false, true})
          for (bool ramp : {false, true}) {
            if (s.NH == 32 && (window || sinks)) continue;  // the Qwen3 head layout: plain causal only
            if (ramp && window != 0) continue;
            Extras x{window, sinks};
            x.key_ramp = ramp;
            SCOPED_TRACE(s.str() + " " + x.str() + (one_pass ? " one pass" : " two passes"));
            const AttnResult r = run_attention_ex(e, s, KvType::F16, true, 4096, x);
            ASSERT_EQ(r.tol, kAttnCmTol) << "the cooperative-matrix kernel did not run";
            EXPECT_LT(rel_err(r.got, r.want), kAttnCmTol);
            EXPECT_LT(rel_err(r.got, r.cpu), kAttnCmTol);
            worst = std::max(worst, rel_err(r.got, r.want));
          }
    {  // Qwen3's heads with f16 output rows
      Extras x;
      x.o_f16 = true;
      SCOPED_TRACE(x.str() + (one_pass ? " one pass" : " two passes"));
      const AttnResult r = run_attention_ex(e, Shape{128, 32, 4, 512, 0}, KvType::F16, true, 4096, x);
      EXPECT_LT(rel_err(r.got, r.want), kAttnCmTol);
      worst = std::max(worst, rel_err(r.got, r.want));
    }
    std::printf("worst relative error: cooperative-matrix kernel (%s) vs double reference %.3g\n",
                one_pass ? "one pass" : "two passes", worst);
  }
  unsetenv("VKMOE_ATTN_CM_ONE_PASS");
}

TEST(ShaderAttention, ScratchSizeCoversSplits) {
  // Decode at a long context splits the keys; the scratch size accounts for it.
  EXPECT_EQ(attention_scratch_bytes(32, 128, 64), uint64_t(32) * 1 * 130 * 4);
  EXPECT_GT(attention_scratch_bytes(32, 128, 32768), attention_scratch_bytes(32, 128, 1024));
  EXPECT_STREQ(kv_type_name(KvType::F16), "f16");
  EXPECT_STREQ(kv_type_name(KvType::F32), "f32");
  EXPECT_STREQ(kv_type_name(KvType::Q8_0), "q8_0");
  EXPECT_EQ(kv_cache_bytes(KvType::F16, 10, 128, 2), 10u * 256 * 2);
  EXPECT_EQ(kv_cache_bytes(KvType::F32, 10, 128, 2), 10u * 256 * 4);
  EXPECT_EQ(kv_cache_bytes(KvType::Q8_0, 10, 128, 2), 10u * 256 / 32 * 34);  // ggml's Q8_0 size
  EXPECT_EQ(kv_cache_bytes(KvType::Q8_0, 10, 96, 3), 10u * 80 * 4);  // 72 value + 6 scale uints, padded
  try {
    kv_cache_bytes(KvType::Q8_0, 10, 80, 2);
    FAIL() << "no error";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("multiple of 32"), std::string::npos) << err.what();
  }
}

TEST(ShaderAttention, RopeStoreMatchesReference) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const float theta = 1e6f, eps = 1e-6f;
  const uint32_t gqa[][2] = {{4, 4}, {8, 2}, {16, 2}};  // ratios 1, 4, 8
  int iter = 0;
  // Both kernels: one subgroup per head (where it applies) and one workgroup per head.
  for (bool sg : {true, false})
  for (KvType kt : {KvType::F16, KvType::F32, KvType::Q8_0})
    for (uint32_t D : {kt == KvType::Q8_0 ? 96u : 64u, 128u})  // 96: an odd number of Q8_0 blocks
      for (bool norm : {false, true})
        for (bool neox : {false, true}) {
          const uint32_t NH = gqa[iter % 3][0], NKV = gqa[iter % 3][1], KV = NKV * D;
          const uint32_t pos0 = std::array<uint32_t, 4>{0, 7, 1000, 3000}[iter % 4], n_tokens = 3 + iter % 3;
          const uint32_t n_rot = iter % 5 == 2 ? D / 2 : D;  // partial rotary: the first n_rot dims turn
          ++iter;
          SCOPED_TRACE("D=" + std::to_string(D) + " n_rot " + std::to_string(n_rot) + " heads " + std::to_string(NH) +
                       "/" + std::to_string(NKV) + " pos0 " + std::to_string(pos0) + (norm ? " norm" : "") +
                       (neox ? " neox" : "") + " kv " + kv_type_name(kt) + (sg ? " subgroup kernel" : ""));
          setenv("VKMOE_ROPE_STORE_SG", sg ? "1" : "0", 1);
          const uint32_t q_stride = NH * D + 4, kv_stride = KV + 8, n_ctx = pos0 + n_tokens + 2;
          auto q = e.randn(n_tokens * q_stride, 2.f), k = e.randn(n_tokens * kv_stride, 2.f),
               v = e.randn(n_tokens * kv_stride, 2.f), qw = e.randn(D), kw = e.randn(D);
          const std::vector<float> sentinel(size_t(n_ctx) * KV, 1234.f);
          Buffer bq = e.buf(q), bk = e.buf(k), bv = e.buf(v), bqw = e.buf(qw), bkw = e.buf(kw);
          Buffer bkc = e.cache(sentinel, kt, D, NKV), bvc = e.cache(sentinel, kt, D, NKV);
          const size_t row_bytes = kv_cache_bytes(kt, 1, D, NKV), cache_bytes = n_ctx * row_bytes;
          ASSERT_EQ(bkc.size(), cache_bytes);
          const auto before = e.read<uint8_t>(bkc, cache_bytes);
          RopeStoreArgs a = rope_store_args(bq, bk, bkc, n_tokens, pos0, D, NH, NKV, RopeParams{}, kt);
          a.v = bv;
          a.v_cache = bvc;
          a.q_norm = bqw;
          a.k_norm = bkw;
          a.q_stride = q_stride;
          a.kv_stride = kv_stride;
          a.rope.n_rot = int(n_rot);
          a.rope.neox = neox;
          a.rope.theta = theta;
          a.norm = norm;
          a.eps = eps;
          EXPECT_EQ(rope_store_uses_subgroups(*e.ctx, a),
                    sg && kt != KvType::Q8_0 && e.ctx->info().subgroup_arithmetic);
          e.record([&](Recorder& r) { record_rope_store(r, a); });
          unsetenv("VKMOE_ROPE_STORE_SG");

          // Reference: per-head RMS norm, then rotation of the first n_rot dims by pos * theta^(-2i/n_rot), in double.
          auto head = [&](const float* x, const float* w, uint32_t pos, float* out) {
            std::vector<double> h(x, x + D);
            if (norm) {
              double ss = 0;
              for (double y : h) ss += y * y;
              const double r = 1 / std::sqrt(ss / D + eps);
              for (uint32_t i = 0; i < D; ++i) h[i] *= r * w[i];
            }
            for (uint32_t i = n_rot; i < D; ++i) out[i] = float(h[i]);
            for (uint32_t i = 0; i < n_rot / 2; ++i) {
              const double ang = pos * std::pow(double(theta), -2.0 * i / n_rot);
              const uint32_t ia = neox ? i : 2 * i, ib = neox ? i + n_rot / 2 : 2 * i + 1;
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
          std::vector<float> got_q(bq.as<float>(), bq.as<float>() + q.size());
          // Angles reach 3000 rad, where a float ulp is 2.4e-4 rad: 2e-3 of the range.
          EXPECT_LT(rel_err(got_q, want_q), 2e-3);
          // Rows other than the written positions keep their bytes.
          const auto after_k = e.read<uint8_t>(bkc, cache_bytes), after_v = e.read<uint8_t>(bvc, cache_bytes);
          for (size_t i = 0; i < cache_bytes; ++i) {
            if (i / row_bytes >= pos0 && i / row_bytes < pos0 + n_tokens) continue;
            ASSERT_EQ(after_k[i], before[i]) << "k cache byte " << i << " overwritten";
            ASSERT_EQ(after_v[i], before[i]) << "v cache byte " << i << " overwritten";
          }
          const size_t w0 = size_t(pos0) * KV, w1 = size_t(pos0 + n_tokens) * KV;
          auto slice = [&](const std::vector<float>& x) { return std::vector<float>(x.begin() + w0, x.begin() + w1); };
          const auto got_k = slice(e.read_cache(bkc, sentinel.size(), kt, D, NKV));
          const auto got_v = slice(e.read_cache(bvc, sentinel.size(), kt, D, NKV));
          const auto exact_k = slice(want_k);  // before rounding to the cache type
          want_k = slice(as_stored(want_k, kt, D, NKV));
          want_v = slice(as_stored(want_v, kt, D, NKV));
          if (kt != KvType::Q8_0) {
            EXPECT_LT(rel_err(got_k, want_k), 2e-3);
            // v is stored unchanged (f16: one rounding; allow an ulp for the rounding mode).
            if (kt == KvType::F32)
              EXPECT_EQ(got_v, want_v);
            else
              EXPECT_LT(rel_err(got_v, want_v), 1e-3);
            continue;
          }
          // Q8_0 v (the same f32 inputs): the same int8 values, or one step off where the
          // device's division rounds a tie the other way; scales within an f16 ulp.
          const Q8Layout L{D, NKV};
          const auto raw_v = e.read<uint32_t>(bvc, cache_bytes / 4);
          std::vector<float> v_rows(size_t(n_tokens) * KV);
          for (uint32_t t = 0; t < n_tokens; ++t) std::copy_n(&v[t * kv_stride], KV, &v_rows[t * KV]);
          const auto want_raw = L.pack(v_rows);
          size_t exact = 0;
          for (uint32_t t = 0; t < n_tokens; ++t)
            for (size_t i = 0; i < KV; ++i) {
              const int gq = L.q(raw_v, pos0 + t, i), wq = L.q(want_raw, t, i);
              const float gd = L.d(raw_v, pos0 + t, i), wd = L.d(want_raw, t, i);
              ASSERT_LE(std::abs(gq - wq), 1) << "v value " << i << " of token " << t;
              ASSERT_LE(std::fabs(gd - wd), wd * 0x1p-10f) << "v scale of value " << i << " of token " << t;
              exact += gq == wq;
            }
          EXPECT_GT(exact, v_rows.size() * 99 / 100) << "int8 values equal to the reference's";
          // Q8_0 k (rotated: within 2e-3 of the range of the reference): one quantization
          // step of its block plus twice the rotation error.
          double range = 0;
          for (float x : exact_k) range = std::max(range, double(std::fabs(x)));
          for (size_t i = 0; i < got_k.size(); ++i) {
            float amax = 0;
            for (size_t j = i / 32 * 32; j < i / 32 * 32 + 32; ++j) amax = std::max(amax, std::fabs(exact_k[j]));
            ASSERT_LE(std::fabs(got_k[i] - want_k[i]), amax / 127 + 4e-3 * range) << "k value " << i;
          }
        }
}

// k and v given as split-K partial planes: both kernels add them in plane
// order, as gemm_split_sum does, so the caches and q equal those written from
// the summed rows bit for bit.
TEST(ShaderAttention, RopeStoreSumsSplitPlanes) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t D = 128, NH = 8, NKV = 2, KV = NKV * D, n_tokens = 5, pos0 = 9, splits = 3;
  const uint32_t q_stride = NH * D, plane = n_tokens * KV + 16, n_ctx = pos0 + n_tokens;
  const auto q = e.randn(n_tokens * q_stride, 2.f), kp = e.randn(splits * plane, 2.f),
             vp = e.randn(splits * plane, 2.f);
  const auto qw = e.randn(D), kw = e.randn(D);
  std::vector<float> k(n_tokens * KV), v(n_tokens * KV);
  for (size_t i = 0; i < k.size(); ++i) {
    float sk = 0.f, sv = 0.f;
    for (uint32_t z = 0; z < splits; ++z) {
      sk += kp[z * plane + i];
      sv += vp[z * plane + i];
    }
    k[i] = sk;
    v[i] = sv;
  }
  RopeParams rp;
  rp.n_rot = int(D);
  rp.theta = 1e6f;
  for (bool sg : {true, false})
    for (KvType kt : {KvType::F16, KvType::F32, KvType::Q8_0}) {
      SCOPED_TRACE(std::string("kv ") + kv_type_name(kt) + (sg ? " subgroup kernel" : ""));
      setenv("VKMOE_ROPE_STORE_SG", sg ? "1" : "0", 1);
      const std::vector<float> sentinel(size_t(n_ctx) * KV, 1234.f);
      const size_t cache_bytes = kv_cache_bytes(kt, n_ctx, D, NKV);
      std::vector<std::vector<uint8_t>> out;  // q, k cache, v cache of the rows, then of the planes
      for (bool planes : {false, true}) {
        Buffer bq = e.buf(q), bk = e.buf(planes ? kp : k), bv = e.buf(planes ? vp : v), bqw = e.buf(qw),
               bkw = e.buf(kw);
        Buffer bkc = e.cache(sentinel, kt, D, NKV), bvc = e.cache(sentinel, kt, D, NKV);
        RopeStoreArgs a = rope_store_args(bq, bk, bkc, n_tokens, pos0, D, NH, NKV, rp, kt);
        a.v = bv;
        a.v_cache = bvc;
        a.q_norm = bqw;
        a.k_norm = bkw;
        a.norm = true;
        if (planes) {
          a.kv_splits = splits;
          a.kv_plane = plane;
        }
        e.record([&](Recorder& r) { record_rope_store(r, a); });
        out.push_back(e.read<uint8_t>(bq, q.size() * 4));
        out.push_back(e.read<uint8_t>(bkc, cache_bytes));
        out.push_back(e.read<uint8_t>(bvc, cache_bytes));
      }
      unsetenv("VKMOE_ROPE_STORE_SG");
      EXPECT_TRUE(out[0] == out[3]) << "q differs";
      EXPECT_TRUE(out[1] == out[4]) << "k cache differs";
      EXPECT_TRUE(out[2] == out[5]) << "v cache differs";
    }
}

// One token's attention with the norm, rotation and cache store folded into
// the kernel (AttentionArgs::rope) against record_rope_store, a barrier and
// record_attention on the same inputs: the same outputs (the q rows' sums of
// squares are added in another order: rounding) and the same cache bytes,
// the new position's row included. The cache row at the new position holds
// garbage before the call, so a kernel that read it instead of the key and
// value it formed itself would fail. Shapes cover 1, 4 and 8 query heads per
// kv head, full and partial rotary (NeoX and adjacent pairs, YaRN), norms,
// sinks, a window, and positions unsplit, split with the tail and split
// combined by the reduce dispatch.
TEST(ShaderAttention, FoldedRopeStoreMatchesSeparateDispatch) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t gqa[][2] = {{8, 2}, {32, 4}, {4, 4}};
  int iter = 0;
  for (uint32_t D : {64u, 128u})
    for (bool norm : {false, true})
      for (bool neox : {false, true})
        for (uint32_t pos0 : {0u, 37u, 700u, 1500u}) {
          const uint32_t NH = gqa[iter % 3][0], NKV = gqa[iter % 3][1], KV = NKV * D, n_ctx = 2048;
          const bool partial = iter % 2 == 1, yarn = iter % 5 == 2, sinks = iter % 4 == 1, tail = pos0 != 1500;
          const uint32_t window = iter % 7 == 3 ? 300 : 0;
          ++iter;
          SCOPED_TRACE("D=" + std::to_string(D) + " heads " + std::to_string(NH) + "/" + std::to_string(NKV) +
                       " pos0 " + std::to_string(pos0) + (norm ? " norm" : "") + (neox ? " neox" : "") +
                       (partial ? " partial" : "") + (yarn ? " yarn" : "") + (sinks ? " sinks" : "") +
                       " window " + std::to_string(window) + (tail ? " tail" : ""));
          const auto q = e.randn(NH * D, 2.f), k = e.randn(KV, 2.f), v = e.randn(KV, 2.f), qw = e.randn(D),
                     kw = e.randn(D), sk = e.randn(NH, 2.f);
          auto cache_k = e.randn(size_t(n_ctx) * KV), cache_v = e.randn(size_t(n_ctx) * KV);
          for (uint32_t i = 0; i < KV; ++i) cache_k[size_t(pos0) * KV + i] = cache_v[size_t(pos0) * KV + i] = 3e4f;
          struct Run {
            std::vector<float> o;
            std::vector<uint8_t> kc, vc;
            AttentionRecord rec;
            std::vector<uint64_t> stamps;
            std::array<uint32_t, 2> counts;  // the chained inputs' and done counters
          };
          // Chained (AttentionArgs::wait_counter, done_counter at counters 40 and
          // 41): the inputs' counter preset to 5 (ready), 4 (never raised) or 6
          // (left from an earlier token), waited for until 5.
          enum class Chain { None, Ready, Never, Past };
          auto run = [&](bool fold, bool clocks = false, Chain chain = Chain::None) {
            Buffer bq = e.buf(q), bk = e.buf(k), bv = e.buf(v), bqw = e.buf(qw), bkw = e.buf(kw), bsk = e.buf(sk);
            Buffer bkc = e.cache(cache_k, KvType::F16, D, NKV), bvc = e.cache(cache_v, KvType::F16, D, NKV);
            Buffer bo = e.buf(std::vector<float>(NH * D, NAN));
            Buffer bs = e.ctx->create_buffer(attention_scratch_bytes(NH, D, n_ctx), MemoryKind::Device, "scratch");
            Buffer counters = e.buf(std::vector<uint32_t>(64, 0));
            RopeStoreArgs rs = rope_store_args(bq, bk, bkc, 1, pos0, D, NH, NKV, RopeParams{}, KvType::F16);
            rs.v = bv;
            rs.v_cache = bvc;
            rs.rope.n_rot = int(partial ? D / 2 + D / 4 : D);
            rs.rope.neox = neox;
            rs.rope.theta = 1e6f;
            if (yarn) {
              rs.rope.freq_scale = 0.25f;
              rs.rope.ext_factor = 1.f;
              rs.rope.n_ctx_orig = 4096;
            }
            rs.norm = norm;
            rs.eps = 1e-6f;
            rs.q_norm = bqw;
            rs.k_norm = bkw;
            AttentionArgs a;
            a.q = bq;
            a.k_cache = bkc;
            a.v_cache = bvc;
            a.o = bo;
            a.q_stride = a.o_stride = NH * D;
            a.n_tokens = 1;
            a.pos0 = pos0;
            a.head_dim = D;
            a.n_head = NH;
            a.n_head_kv = NKV;
            a.scale = 1.f / std::sqrt(float(D));
            a.kv_type = KvType::F16;
            a.scratch = bs;
            a.window = window;
            if (sinks) a.sinks = bsk;
            if (tail) {
              a.counters = counters;
              a.counter_index = 3;
            }
            if (chain != Chain::None) {
              std::vector<uint32_t> c(64, 0);
              c[40] = chain == Chain::Ready ? 5 : chain == Chain::Never ? 4 : 6;
              counters = e.buf(c);
              a.counters = counters;
              a.wait_counter = 41;
              a.wait_value = 5;
              a.done_counter = 42;
              a.poll_loads = iter % 2 == 0;  // both ways across the cases
            }
            Run res;
            if (fold) {
              EXPECT_TRUE(attention_folds_rope_store(*e.ctx, a, rs));
              a.rope = &rs;
            }
            Buffer bclk;
            if (clocks) {
              bclk = e.buf(std::vector<uint64_t>(kClockBase + kAttnClockWorkgroups * kAttnClockSlots, 0));
              a.clocks = bclk;
              a.clock_base = kClockBase;
            }
            e.record([&](Recorder& r) {
              if (!fold) {
                record_rope_store(r, rs);
                r.barrier();
              }
              res.rec = record_attention(r, a);
            });
            res.o = e.read(bo, NH * D);
            res.kc = e.read<uint8_t>(bkc, bkc.size());
            res.vc = e.read<uint8_t>(bvc, bvc.size());
            if (clocks) res.stamps = e.read<uint64_t>(bclk, bclk.size() / 8);
            const auto c = e.read<uint32_t>(counters, 64);
            if (tail) {
              EXPECT_EQ(std::count(c.begin(), c.begin() + 40, 0u), 40) << "the split tail left a counter non-zero";
            }
            res.counts = {c[40], c[41]};
            return res;
          };
          const Run sep = run(false), fold = run(true);
          EXPECT_TRUE(fold.rec.rope_folded);
          EXPECT_FALSE(sep.rec.rope_folded);
          EXPECT_EQ(fold.rec.splits, sep.rec.splits);
          EXPECT_EQ(fold.rec.split_tail, sep.rec.split_tail);
          if (pos0 >= 700) {
            EXPECT_GT(fold.rec.splits, 1u);
          }
          EXPECT_LT(rel_err(fold.o, sep.o), 1e-4);
          // The value row is the same conversion of the same floats; the key row
          // within an f16 rounding (its norm's sum ran in another order).
          ASSERT_EQ(fold.vc, sep.vc);
          const size_t row = size_t(pos0) * KV * 2;
          for (size_t i = 0; i < fold.kc.size(); ++i)
            if (i < row || i >= row + KV * 2) {
              ASSERT_EQ(fold.kc[i], sep.kc[i]) << "k cache byte " << i;
            }
          std::vector<float> fk(KV), sk16(KV);
          for (uint32_t i = 0; i < KV; ++i) {
            uint16_t a, b;
            std::memcpy(&a, &fold.kc[row + 2 * i], 2);
            std::memcpy(&b, &sep.kc[row + 2 * i], 2);
            fk[i] = fp16_to_fp32(a);
            sk16[i] = fp16_to_fp32(b);
          }
          EXPECT_LT(rel_err(fk, sk16), 2e-3);
          // The _clock variant computes what the plain one does; its workgroups stamp their edges in order.
          if (e.ctx->info().device_clock) {
            const Run clk = run(true, true);
            EXPECT_LT(rel_err(clk.o, fold.o), 1e-6);
            ASSERT_EQ(clk.kc, fold.kc);
            ASSERT_EQ(clk.vc, fold.vc);
            expect_attention_stamps(clk.stamps, clk.rec.splits > 1 && clk.rec.split_tail);
          }
          // Chained (counters bound as for the split tail): one dispatch waits for its inputs,
          // computes what it does after a barrier and counts its workgroups done; a split
          // reduce gets the barrier instead.
          if (!tail) continue;
          const bool one_dispatch = fold.rec.splits == 1 || fold.rec.split_tail;
          const Run chained = run(true, false, Chain::Ready);
          EXPECT_EQ(chained.o, fold.o);
          ASSERT_EQ(chained.kc, fold.kc);
          ASSERT_EQ(chained.vc, fold.vc);
          EXPECT_EQ(chained.counts[0], 5u);
          EXPECT_EQ(chained.counts[1], chained.rec.counted_workgroups);
          EXPECT_EQ(chained.rec.waited, one_dispatch);
          if (e.ctx->info().device_clock && one_dispatch) {  // the wait's edge too
            const Run clk = run(true, true, Chain::Ready);
            EXPECT_LT(rel_err(clk.o, chained.o), 1e-6);
            expect_attention_stamps(clk.stamps, clk.rec.splits > 1 && clk.rec.split_tail, true);
          }
          if (one_dispatch) {
            EXPECT_GE(chained.rec.counted_workgroups, fold.rec.splits * NKV);
          } else {
            EXPECT_EQ(chained.rec.counted_workgroups, 0u);
          }
          if (one_dispatch && iter % 3 == 0) {
            for (Chain bad : {Chain::Never, Chain::Past}) {
              const Run lost = run(true, false, bad);
              EXPECT_TRUE(std::all_of(lost.o.begin(), lost.o.end(), [](float v) { return std::isnan(v); }))
                  << "a wait that gave up leaves NaN outputs (" << (bad == Chain::Never ? "never raised" : "past")
                  << ")";
            }
          }
        }
}

// rope_store with partial rotary, NeoX / adjacent pairs, linear scaling and
// YaRN at positions up to 1e5 against cpu/rope.h's rope of the same inputs
// (no norm, f32 cache). Both form the same float angles, so what differs is
// the GPU's argument reduction and sin/cos: within 4e-6 of the head's range
// (lavapipe: 3e-7).
TEST(ShaderAttention, RopeStoreMatchesCpuRope) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t NH = 2, NKV = 1, n_tokens = 3;
  int iter = 0;
  for (uint32_t D : {64u, 128u, 256u})
    for (uint32_t n_rot : {D, D / 2 + D / 4})  // full and partial rotary
      for (bool neox : {false, true})
        for (int scaling : {0, 1, 2}) {  // none, linear (with attn_factor), YaRN
          RopeParams rp;
          rp.n_rot = int(n_rot);
          rp.neox = neox;
          rp.theta = iter % 2 ? 1e6f : 1e4f;
          if (scaling == 1) rp.freq_scale = 0.5f, rp.attn_factor = 0.8f;
          if (scaling == 2) rp.freq_scale = 0.25f, rp.ext_factor = 1.f, rp.n_ctx_orig = 4096;
          uint32_t pos0 = std::array<uint32_t, 6>{0, 1000, 4093, 32768, 65531, 99990}[(iter + iter / 6) % 6];
          if (D == 256) pos0 = std::min(pos0, 4093u);  // keeps the caches small
          ++iter;
          SCOPED_TRACE("D=" + std::to_string(D) + " n_rot " + std::to_string(n_rot) + (neox ? " neox" : "") +
                       " scaling " + std::to_string(scaling) + " theta " + std::to_string(rp.theta) + " pos0 " +
                       std::to_string(pos0));
          const uint32_t Q = NH * D, KV = NKV * D;
          auto q = e.randn(n_tokens * Q, 2.f), k = e.randn(n_tokens * KV, 2.f), v = e.randn(n_tokens * KV);
          Buffer bq = e.buf(q), bk = e.buf(k), bv = e.buf(v);
          const uint64_t cache_bytes = kv_cache_bytes(KvType::F32, pos0 + n_tokens, D, NKV);
          Buffer bkc = e.ctx->create_buffer(cache_bytes, MemoryKind::Upload, "test"),
                 bvc = e.ctx->create_buffer(cache_bytes, MemoryKind::Upload, "test");
          RopeStoreArgs a = rope_store_args(bq, bk, bkc, n_tokens, pos0, D, NH, NKV, rp, KvType::F32);
          a.v = bv;
          a.v_cache = bvc;
          e.record([&](Recorder& r) { record_rope_store(r, a); });
          const auto got_q = e.read<float>(bq, q.size());
          std::vector<float> got_k(k.size());
          std::memcpy(got_k.data(), bkc.as<uint8_t>() + uint64_t(pos0) * KV * 4, k.size() * 4);
          for (uint32_t t = 0; t < n_tokens; ++t)
            for (uint32_t h = 0; h < NH + NKV; ++h) {
              const bool is_q = h < NH;
              const size_t off = is_q ? t * Q + h * D : t * KV + (h - NH) * D;
              const float* in = is_q ? &q[off] : &k[off];
              const float* out = is_q ? &got_q[off] : &got_k[off];
              std::vector<float> want(in, in + D);
              rope(want.data(), int(D), int(pos0 + t), rp);
              const std::vector<float> got(out, out + D);
              // lavapipe stays below 4e-6; on the H100 the error grows with the position
              // (4.7e-6 at 4093, 5.9e-5 at 65531, 1.05e-4 at 65532): 2.5e-9 per position allowed.
              ASSERT_LT(rel_err(got, want), 4e-6 + 2.5e-9 * (pos0 + t)) << "token " << t << " head " << h;
              for (uint32_t i = n_rot; i < D; ++i)  // the tail passes through
                ASSERT_EQ(got[i], in[i]) << "token " << t << " head " << h << " dim " << i;
            }
        }
}

// Latent attention's rows: head_dim 576 with 64 rotated dims (adjacent
// pairs), one kv head, no values (an empty v stores none): q rotated in place,
// the key row rotated into the cache of each type (as that type stores it).
TEST(ShaderAttention, RopeStoreLatentRowsWithoutValues) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t D = 576, NH = 3, NKV = 1, n_tokens = 2, pos0 = 37;
  RopeParams rp;
  rp.n_rot = 64;
  rp.freq_scale = 0.25f, rp.ext_factor = 1.f, rp.n_ctx_orig = 64;
  for (KvType kt : {KvType::F32, KvType::F16, KvType::Q8_0}) {
    SCOPED_TRACE(kv_type_name(kt));
    const uint32_t Q = NH * D;
    auto q = e.randn(n_tokens * Q, 2.f), k = e.randn(n_tokens * D, 2.f);
    Buffer bq = e.buf(q), bk = e.buf(k);
    const uint64_t cache_bytes = kv_cache_bytes(kt, pos0 + n_tokens, D, NKV);
    Buffer bkc = e.ctx->create_buffer(cache_bytes, MemoryKind::Upload, "test");
    const RopeStoreArgs a = rope_store_args(bq, bk, bkc, n_tokens, pos0, D, NH, NKV, rp, kt);
    e.record([&](Recorder& r) { record_rope_store(r, a); });
    const auto got_q = e.read<float>(bq, q.size());
    const auto cache = e.read_cache(bkc, size_t(pos0 + n_tokens) * D, kt, D, NKV);
    for (uint32_t t = 0; t < n_tokens; ++t) {
      for (uint32_t h = 0; h < NH; ++h) {
        std::vector<float> want(&q[t * Q + h * D], &q[t * Q + h * D] + D);
        rope(want.data(), int(D), int(pos0 + t), rp);
        ASSERT_LT(rel_err(std::vector<float>(&got_q[t * Q + h * D], &got_q[t * Q + h * D] + D), want), 4e-6)
            << "token " << t << " q head " << h;
      }
      std::vector<float> want(&k[t * D], &k[t * D] + D);
      rope(want.data(), int(D), int(pos0 + t), rp);
      want = as_stored(want, kt, D, NKV);
      const std::vector<float> got(&cache[size_t(pos0 + t) * D], &cache[size_t(pos0 + t) * D] + D);
      ASSERT_LT(rel_err(got, want), kt == KvType::F32 ? 4e-6 : 1e-2) << "token " << t << " key row";
    }
  }
}

TEST(ShaderAttention, RopeStoreRejectsBadRotaryDims) {
  Env e;
  Buffer b = e.buf(std::vector<float>(4096));
  RopeStoreArgs a;
  a.q = a.k = a.v = a.q_norm = a.k_norm = a.k_cache = a.v_cache = b;
  a.q_stride = a.kv_stride = 64;
  a.n_tokens = a.n_head = a.n_head_kv = 1;
  a.head_dim = 64;
  a.kv_type = KvType::F32;
  Recorder rec(*e.ctx);
  rec.begin();
  for (int n_rot : {-2, 63, 66}) {
    a.rope.n_rot = n_rot;
    EXPECT_THROW(record_rope_store(rec, a), Error) << "n_rot " << n_rot;
  }
  rec.discard();
}

// The decode attention benchmark on tiny settings: a sane row per depth
// (300 keys split, 40 not).
TEST(ShaderAttentionBench, PrintsSaneNumbers) {
  const auto [rc, out] = vkmoe::test::run_bench_shaders({"bench-shaders", "--kernels", "attn_decode", "--attn-depths",
                                                          "40,300", "--iters", "2", "--bw-mib", "8", "--pool-mib", "4"});
  ASSERT_EQ(rc, 0) << out;
  std::istringstream lines(out);
  std::vector<uint32_t> depths;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream ls(line);
    std::vector<std::string> tok;
    for (std::string s; ls >> s;) tok.push_back(s);
    if (tok.size() < 7 || tok[0] != "attn_decode" || tok[1] != "depth") continue;
    depths.push_back(uint32_t(std::stoul(tok[2])));
    for (int i : {3, 5}) {
      const double v = std::stod(tok[i]);
      EXPECT_TRUE(std::isfinite(v) && v > 0) << line;
    }
  }
  EXPECT_EQ(depths, (std::vector<uint32_t>{40, 300})) << out;
}
