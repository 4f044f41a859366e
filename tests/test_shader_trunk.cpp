// Trunk shaders (norm, rope, attention, axpy, swiglu, router top-k) on the
// Vulkan device (lavapipe in CI) against scalar CPU references, fresh random inputs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "engine/forward/cpu_forward.h"
#include "cpu/moe_route.h"
#include "engine/vulkan/vk_runtime.h"

using namespace vkmoe;
using namespace vkmoe::vk;

namespace {

struct Env {
  std::unique_ptr<Context> ctx = Context::create();
  uint32_t seed = std::random_device{}();
  std::mt19937 rng{seed};
  std::vector<float> randn(size_t n, float sd = 1.f) {
    std::normal_distribution<float> nd(0, sd);
    std::vector<float> v(n);
    for (auto& x : v) x = nd(rng);
    return v;
  }
  Buffer buf(const std::vector<float>& v) {
    Buffer b = ctx->create_buffer(std::max<size_t>(v.size(), 1) * 4, MemoryKind::Upload, "test");
    std::memcpy(b.data(), v.data(), v.size() * 4);
    return b;
  }
  std::vector<float> read(const Buffer& b, size_t n) {
    std::vector<float> v(n);
    std::memcpy(v.data(), b.data(), n * 4);
    return v;
  }
  template <class Push>
  void run(const char* shader, std::initializer_list<BufferRange> bindings, const Push& pc, uint32_t groups) {
    const Pipeline& p = ctx->pipeline(shader, static_cast<uint32_t>(bindings.size()), sizeof(Push));
    Recorder r(*ctx);
    r.begin();
    r.dispatch(p, bindings, pc, groups);
    r.submit().wait();
  }
};

void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rel, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  double scale = 1e-6;
  for (float w : want) scale = std::max(scale, double(std::fabs(w)));
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(got[i], want[i], rel * scale) << what << " element " << i;
}

struct RmsNormPush { uint32_t n, x_off, w_off, y_off, row_stride, has_w; float eps; };
struct QkNormRopePush { uint32_t head_dim, n_head, q_off, k_off, pos, neox, norm; float theta, eps; };
struct AttentionPush { uint32_t head_dim, n_head, n_head_kv, n_kv, q_off, k_off, v_off, o_off, s_stride; float scale; };
struct AxpyPush { uint32_t n, items, x_off, a_off, y_off, mode; float scale; };
struct SwigluPush { uint32_t n, g_off, u_off; };
struct CombineNormPush { uint32_t n, items; float eps; };
struct TopkPush { uint32_t n_expert, k, normalize, l_off; };

}  // namespace

TEST(ShaderTrunk, RmsNormRowsWithAndWithoutWeights) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t n = 300, rows = 3;
  auto x = e.randn(n * rows, 3.f), w = e.randn(n);
  for (uint32_t has_w : {0u, 1u}) {
    Buffer bx = e.buf(x), bw = e.buf(w), by = e.buf(std::vector<float>(n * rows, NAN));
    e.run("rms_norm", {bx, bw, by}, RmsNormPush{n, 0, 0, 0, n, has_w, 1e-6f}, rows);
    std::vector<float> want(n * rows);
    for (uint32_t r = 0; r < rows; ++r) rms_norm(&x[r * n], has_w ? w.data() : nullptr, &want[r * n], n, 1e-6f);
    expect_close(e.read(by, n * rows), want, 1e-5, "rms_norm");
  }
}

TEST(ShaderTrunk, QkNormRopeMatchesReference) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t D = 128, NH = 6, NKV = 2, q_off = 4, k_off = 12;
  for (uint32_t norm : {0u, 1u})
    for (uint32_t neox : {0u, 1u}) {
      const uint32_t pos = e.rng() % 4096;
      auto q = e.randn(q_off + NH * D, 2.f), k = e.randn(k_off + NKV * D, 2.f);
      auto qw = e.randn(D), kw = e.randn(D);
      Buffer bq = e.buf(q), bk = e.buf(k), bqw = e.buf(qw), bkw = e.buf(kw);
      e.run("qk_norm_rope", {bq, bk, bqw, bkw}, QkNormRopePush{D, NH, q_off, k_off, pos, neox, norm, 1e6f, 1e-6f},
            NH + NKV);
      auto wq = q, wk = k;
      for (uint32_t h = 0; h < NH; ++h) {
        if (norm) rms_norm(&wq[q_off + h * D], qw.data(), &wq[q_off + h * D], D, 1e-6f);
        rope(&wq[q_off + h * D], D, pos, 1e6f, neox != 0);
      }
      for (uint32_t h = 0; h < NKV; ++h) {
        if (norm) rms_norm(&wk[k_off + h * D], kw.data(), &wk[k_off + h * D], D, 1e-6f);
        rope(&wk[k_off + h * D], D, pos, 1e6f, neox != 0);
      }
      // Angles reach 4096 rad, where one float ulp is 5e-4 rad, and GPU sin/cos
      // reduce such arguments less exactly than libm: allow 3e-3 of the range.
      expect_close(e.read(bq, q.size()), wq, 3e-3, "q");
      expect_close(e.read(bk, k.size()), wk, 3e-3, "k");
    }
}

TEST(ShaderTrunk, AttentionMatchesNaiveSoftmax) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t D = 64, NH = 8, NKV = 2, n_kv = 1 + e.rng() % 300, KV = NKV * D;
  auto q = e.randn(NH * D), k = e.randn(n_kv * KV), v = e.randn(n_kv * KV);
  const float scale = 1.0f / std::sqrt(float(D));
  Buffer bq = e.buf(q), bk = e.buf(k), bv = e.buf(v), bs = e.buf(std::vector<float>(NH * 512)),
         bo = e.buf(std::vector<float>(NH * D, NAN));
  e.run("attention", {bq, bk, bv, bs, bo}, AttentionPush{D, NH, NKV, n_kv, 0, 0, 0, 0, 512, scale}, NH);
  std::vector<float> want(NH * D);
  for (uint32_t h = 0; h < NH; ++h) {
    const uint32_t g = h / (NH / NKV);
    std::vector<double> s(n_kv);
    double mx = -1e300, sum = 0;
    for (uint32_t j = 0; j < n_kv; ++j) {
      double d = 0;
      for (uint32_t i = 0; i < D; ++i) d += double(q[h * D + i]) * k[j * KV + g * D + i];
      s[j] = d * scale;
      mx = std::max(mx, s[j]);
    }
    for (auto& x : s) sum += x = std::exp(x - mx);
    for (uint32_t i = 0; i < D; ++i) {
      double o = 0;
      for (uint32_t j = 0; j < n_kv; ++j) o += s[j] / sum * v[j * KV + g * D + i];
      want[h * D + i] = float(o);
    }
  }
  expect_close(e.read(bo, NH * D), want, 1e-5, "attention");
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
  e.run("swiglu", {bg, bu}, SwigluPush{n, 0, 0}, (n + 255) / 256);
  std::vector<float> want(n);
  for (uint32_t i = 0; i < n; ++i) want[i] = silu(g[i]) * u[i];
  expect_close(e.read(bg, n), want, 1e-5, "swiglu");
}

TEST(ShaderTrunk, MoeCombineThenNorm) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t n = 2048, items = 8;
  auto y = e.randn(n * items), w = e.randn(items), x = e.randn(n), nw = e.randn(n);
  Buffer by = e.buf(y), bw = e.buf(w), bx = e.buf(x), bnw = e.buf(nw), bxn = e.buf(std::vector<float>(n, NAN));
  e.run("moe_combine_norm", {by, bw, bx, bnw, bxn}, CombineNormPush{n, items, 1e-6f}, 1);
  auto want_x = x;
  for (uint32_t j = 0; j < items; ++j)
    for (uint32_t i = 0; i < n; ++i) want_x[i] += w[j] * y[j * n + i];
  std::vector<float> want_xn(n);
  rms_norm(want_x.data(), nw.data(), want_xn.data(), n, 1e-6f);
  expect_close(e.read(bx, n), want_x, 1e-5, "x");
  expect_close(e.read(bxn, n), want_xn, 1e-5, "xn");
}

TEST(ShaderTrunk, RouterTopKBothVariantsMatchHost) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  std::vector<const char*> shaders = {"moe_topk"};
  if (e.ctx->info().subgroup_arithmetic) shaders.push_back("moe_topk_sg");
  for (int iter = 0; iter < 20; ++iter) {
    const uint32_t n = 4 + e.rng() % 300, k = 1 + e.rng() % std::min<uint32_t>(n, 16);
    auto l = e.randn(n, 2.f);
    if (iter % 4 == 0) l[n - 1] = l[0];  // a tie: the lower index wins
    for (uint32_t norm : {0u, 1u}) {
      std::vector<int> ids(k);
      std::vector<float> w(k);
      route_topk(l.data(), int(n), int(k), norm != 0, ids.data(), w.data());
      for (const char* s : shaders) {
        Buffer bl = e.buf(l), bi = e.buf(std::vector<float>(k, -1.f)), bw = e.buf(std::vector<float>(k, NAN));
        e.run(s, {bl, bi, bw}, TopkPush{n, k, norm, 0}, 1);
        const int32_t* got = bi.as<int32_t>();
        for (uint32_t j = 0; j < k; ++j) {
          ASSERT_EQ(got[j], ids[j]) << s << " n=" << n << " k=" << k << " rank " << j;
          ASSERT_NEAR(bw.as<float>()[j], w[j], 1e-5) << s;
        }
      }
    }
  }
}
