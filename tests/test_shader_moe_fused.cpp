// One decoded token's MoE block in one dispatch (engine/vulkan/vk_moe_fused.h)
// on the Vulkan device (lavapipe in CI), against a host reference in double
// that rounds the activations to int8 blocks as the kernel does: the router
// logits, ids and weights (route_topk of the kernel's logits), the experts'
// activations h, x after the combine and the next layer's norm, for a grid of
// one workgroup and, on GPUs, of one per compute unit (they wait for each
// other at grid barriers); with the attention output projection before the
// block and the next layer's q/k/v after it, also those; the clock
// variant's stamps come in their steps' order. Also: non-finite inputs
// lower the flag, and a grid
// whose workgroups cannot all arrive gives up and poisons x instead of
// hanging. Fresh random inputs each run (seed printed).
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <optional>
#include <cmath>
#include <limits>

#include "cpu/ffn_act.h"
#include "cpu/moe_route.h"
#include "cpu/quant.h"
#include "cpu/rope.h"
#include "engine/forward/attention_ref.h"
#include "engine/vulkan/vk_moe_fused.h"
#include "tests/glu_bound.h"
#include "tests/vk_test_env.h"

using namespace vkmoe;
using namespace vkmoe::vk;

namespace {

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// x as the kernel rounds it (shaders/q8x_quant.glsl): per 32 values dx =
// max|x| / 127, x -> dx * round(x / dx). In `ambiguous`: where that
// rounding is ambiguous (the value within 1e-3 of a half step, where the
// kernel's float arithmetic may round the other way), the element's dx;
// elsewhere 0. A rounding that differs moves a product by |w| dx. With x_err
// (how far the kernel's x may be from x) the window widens by what the
// element and its block's step may move, and each element's bound adds that move.
std::vector<double> q8_round(const std::vector<double>& x, std::vector<double>& ambiguous,
                             const std::vector<double>& x_err = {}) {
  std::vector<double> r(x.size());
  ambiguous.assign(x.size(), 0);
  for (size_t b = 0; b < x.size(); b += 32) {
    double amax = 0, ea = 0;  // ea: how far the kernel's block maximum may be from amax
    for (size_t i = b; i < b + 32; ++i) {
      amax = std::max(amax, std::fabs(x[i]));
      if (!x_err.empty()) ea = std::max(ea, x_err[i]);
    }
    const double dx = amax / 127;
    for (size_t i = b; i < b + 32; ++i) {
      r[i] = amax > 0 ? dx * std::nearbyint(x[i] / dx) : 0;
      if (amax == 0) continue;
      // x off by x_err: the kernel's element may cross a rounding boundary (one step of its own dx),
      // and its step moves by ea / 127 (at most ea over 127 steps).
      const double moved = (x_err.empty() ? 0 : x_err[i] + std::fabs(x[i]) * ea / amax) / dx;
      if (std::fabs(std::fabs(x[i] / dx - std::floor(x[i] / dx)) - 0.5) < 1e-3 + moved) ambiguous[i] = dx + ea / 127;
      ambiguous[i] += ea;
    }
  }
  return r;
}

// The kernel's activation (glu_act 0: SiLU, 1: gpt-oss's), as the CPU's.
float act(double g, double u, uint32_t a) { return glu(a == 1 ? GluAct::OaiSwiGLU : GluAct::SiLU, float(g), float(u)); }

struct Expert {
  std::vector<uint8_t> q;  // rows x cols of its type
  std::vector<float> w;    // the same, dequantized
};

struct Case {
  GgmlType gu, dn;
  uint32_t E, F, N, K;
  RouterParams rp;
  uint32_t act;
};

struct Block {
  const Case& c;
  test::VkEnv& e;
  std::vector<float> norm_w, next_w, router;
  Expert gate, up, down;  // all experts stacked
  size_t gu_stride, dn_stride;

  Block(const Case& c_, test::VkEnv& e_) : c(c_), e(e_) {
    norm_w = e.randn(c.E, 0.2f);
    next_w = e.randn(c.E, 0.2f);
    for (float& v : norm_w) v += 1.f;
    for (float& v : next_w) v += 1.f;
    router = e.randn(size_t(c.N) * c.E, 0.05f);
    gu_stride = row_bytes(c.gu, c.E) * c.F;
    dn_stride = row_bytes(c.dn, c.F) * c.E;
    gate = make(c.gu, c.E, size_t(c.N) * c.F);
    up = make(c.gu, c.E, size_t(c.N) * c.F);
    down = make(c.dn, c.F, size_t(c.N) * c.E);
  }
  Expert make(GgmlType t, uint32_t cols, size_t rows) {
    Expert x;
    const std::vector<float> f = e.randn(rows * cols, 0.08f);
    const size_t rb = row_bytes(t, cols);
    x.q.resize(rb * rows);
    x.w.resize(rows * cols);
    for (size_t r = 0; r < rows; ++r) {
      quantize_row(t, &f[r * cols], &x.q[r * rb], cols);
      dequantize_row(t, &x.q[r * rb], &x.w[r * cols], cols);
    }
    return x;
  }
  // rmsnorm(xi) * w in double (eps 1e-6, as run_block passes).
  std::vector<double> xn_of(const std::vector<float>& xi, const std::vector<float>& w) const {
    double ss = 0;
    for (float v : xi) ss += double(v) * v;
    const double s = 1 / std::sqrt(ss / c.E + 1e-6);
    std::vector<double> r(c.E);
    for (uint32_t i = 0; i < c.E; ++i) r[i] = xi[i] * s * w[i];
    return r;
  }
};

// The attention output projection before the block and the next layer's
// q/k/v products after it.
struct Extra {
  GgmlType o, q, k, v;
  uint32_t A, Q, KV;  // wo's columns, q's and k's/v's rows
  Expert wo, wq, wk, wv;
  std::vector<float> att;
  // splits > 1: att comes as a one-token attention's split-K partials
  // (AttentionRecord's layout, pairs from float ml_off) for the kernel to combine.
  std::vector<float> parts;
  uint32_t splits = 1, ml_off = 0, head_dim = 0;
  // With attention (step A, at position pos): att is the attention of q_in
  // over the F16 caches (kv_len positions, pos's row written by the kernel),
  // with the inputs k_in, v_in in the next q/k/v's buffers.
  std::optional<MoeFusedAttention> attention;  // its buffers set by run_block
  std::vector<float> q_in, k_in, v_in, q_norm, k_norm;
  std::vector<uint16_t> k_cache, v_cache;
  Extra(Block& b, GgmlType o_, GgmlType q_, GgmlType k_, GgmlType v_, uint32_t A_, uint32_t Q_, uint32_t KV_)
      : o(o_), q(q_), k(k_), v(v_), A(A_), Q(Q_), KV(KV_) {
    wo = b.make(o, A, b.c.E);
    wq = b.make(q, b.c.E, Q);
    wk = b.make(k, b.c.E, KV);
    wv = b.make(v, b.c.E, KV);
    att = b.e.randn(A, 1.f);
  }
};

struct Out {
  std::vector<float> x, xn, logits, h, wts, q, k, v;
  std::vector<int32_t> ids;
  std::vector<uint32_t> counters, left;  // left: what the dispatch should leave there (left_counters)
  uint32_t flag;
  std::vector<uint64_t> stamps;  // with clocks: grid * kFusedClockSlots
  std::vector<float> att;        // with an output projection: att after the dispatch
  std::vector<uint16_t> k_cache, v_cache;  // with attention: the caches after it
};

// Chained layers (MoeFusedDecodeArgs::att_done, qkv_ready at counters 1 and
// 2): the attention's count preset to done, waited for until att_wgs.
struct Chain {
  uint32_t done, att_wgs, qkv_value;
  bool poll_loads = true;
};

// The counters run_block's dispatch should leave (its own pair at 5, 6, zero
// before): the grid barriers' arrivals (the router's and gate/up's; with an
// output projection its own, a split combine's and the down product's before
// q/k/v), and where a last workgroup has work (xn written, or q/k/v ready
// raised) the finished workgroups. Chained: the attention's preset count at 1
// and q/k/v ready at 2, raised to qkv_value.
std::vector<uint32_t> left_counters(uint32_t grid, const Extra* extra, const Chain* chain) {
  const bool att = extra && (extra->splits > 1 || (extra->attention && extra->attention->pos1 != 0));
  const uint32_t barriers = 2 + (extra ? 2 + (att ? 1 : 0) : 0);
  const bool counts_end = chain || !extra;  // run_block always passes next_norm
  return {0, chain ? chain->done : 0, chain ? chain->qkv_value : 0, 0, 0, barriers * grid, counts_end ? grid : 0, 0};
}

Out run_block(test::VkEnv& e, Block& b, const std::vector<float>& x, uint32_t grid, uint32_t check_in,
              uint32_t check_out, const Extra* extra = nullptr, std::array<uint32_t, 4> lanes = {},
              bool clocks = false, const Chain* chain = nullptr, uint32_t arrivals_before = 0,
              std::optional<bool> xq_swizzle = std::nullopt,
              const std::optional<MoeFusedTypeSets>& type_sets = std::nullopt) {
  const Case& c = b.c;
  Buffer bx = e.buf(x), bn = e.buf(b.norm_w), br = e.buf(b.router), bg = e.buf(b.gate.q), bu = e.buf(b.up.q),
         bd = e.buf(b.down.q), bl = e.buf(std::vector<float>(c.N, kNaN)),
         bh = e.buf(std::vector<float>(size_t(c.K) * c.F, kNaN)), bi = e.buf(std::vector<int32_t>(c.K, -7)),
         bw = e.buf(std::vector<float>(c.K, kNaN)),
         bc = e.buf(std::vector<uint32_t>{0, chain ? chain->done : 0u, 0, 0, 0, arrivals_before, 0, 0}),
         bnn = e.buf(b.next_w),
         bxn = e.buf(std::vector<float>(c.E, kNaN)), bf = e.buf(std::vector<uint32_t>(1, 99));
  MoeFusedDecodeArgs a;
  a.gate_up_type = c.gu;
  a.down_type = c.dn;
  a.n_embd = c.E;
  a.n_ff = c.F;
  a.n_expert = c.N;
  a.k = c.K;
  a.router = c.rp;
  a.glu_act = c.act;
  a.eps = 1e-6f;
  a.check_in = check_in;
  a.check_out = check_out;
  a.x = bx;
  a.ffn_norm = bn;
  a.router_w = br;
  a.gate = bg;
  a.up = bu;
  a.down = bd;
  a.gate_up_stride = b.gu_stride;
  a.down_stride = b.dn_stride;
  a.logits = bl;
  a.h = bh;
  a.ids = bi;
  a.weights = bw;
  a.counters = bc;
  a.counter = 5;
  a.next_norm = bnn;
  a.xn = bxn;
  a.flags = bf;
  a.grid = grid;
  a.lanes = lanes;
  a.xq_swizzle = xq_swizzle;
  a.type_sets = type_sets;
  if (chain) {
    a.att_done = 2;
    a.att_wgs = chain->att_wgs;
    a.qkv_ready = 3;
    a.qkv_value = chain->qkv_value;
    a.poll_loads = chain->poll_loads;
  }
  Buffer bo, batt, bparts, bwq, bwk, bwv, bq, bk, bv, bkc, bvc, bqn, bkn;
  if (extra) {
    bo = e.buf(extra->wo.q);
    const bool split = extra->splits > 1;
    batt = e.buf(split ? std::vector<float>(extra->A, kNaN) : extra->att);
    a.out_proj = MoeFusedOutProj{extra->o, bo, batt, extra->A};
    if (split) {
      bparts = e.buf(extra->parts);
      a.out_proj->parts = bparts;
      a.out_proj->splits = extra->splits;
      a.out_proj->ml_off = extra->ml_off;
      a.out_proj->head_dim = extra->head_dim;
    }
    bwq = e.buf(extra->wq.q);
    bwk = e.buf(extra->wk.q);
    bwv = e.buf(extra->wv.q);
    const bool att_in = extra->attention && extra->attention->pos1 != 0;
    bq = e.buf(att_in ? extra->q_in : std::vector<float>(extra->Q, kNaN));
    bk = e.buf(att_in ? extra->k_in : std::vector<float>(extra->KV, kNaN));
    bv = e.buf(att_in ? extra->v_in : std::vector<float>(extra->KV, kNaN));
    a.next_qkv = MoeFusedNextQkv{extra->q, extra->k, extra->v, bwq, bwk, bwv, bq, bk, bv, extra->Q, extra->KV};
    if (extra->attention) {
      MoeFusedAttention at = *extra->attention;
      bkc = e.buf(extra->k_cache);
      bvc = e.buf(extra->v_cache);
      at.q = bq;
      at.k = bk;
      at.v = bv;
      at.k_cache = bkc;
      at.v_cache = bvc;
      if (at.norm) {
        bqn = e.buf(extra->q_norm);
        bkn = e.buf(extra->k_norm);
        at.q_norm = bqn;
        at.k_norm = bkn;
      }
      a.attention = at;
    }
  }
  Buffer bclk;
  if (clocks) {
    bclk = e.buf(std::vector<uint64_t>(size_t(grid) * kFusedClockSlots + 3, 0));
    a.clocks = bclk;
    a.clock_base = 3;  // the dispatch's stamps start there
  }
  e.record([&](Recorder& r) { record_moe_fused_decode(r, a); });
  Out o{e.read<float>(bx, c.E),
        e.read<float>(bxn, c.E),
        e.read<float>(bl, c.N),
        e.read<float>(bh, size_t(c.K) * c.F),
        e.read<float>(bw, c.K),
        {},
        {},
        {},
        e.read<int32_t>(bi, c.K),
        e.read<uint32_t>(bc, 8),
        left_counters(grid, extra, chain),
        e.read<uint32_t>(bf, 1)[0]};
  if (extra) {
    if (extra->attention) {
      o.k_cache = e.read<uint16_t>(bkc, extra->k_cache.size());
      o.v_cache = e.read<uint16_t>(bvc, extra->v_cache.size());
    }
    o.att = e.read<float>(batt, extra->A);
    o.q = e.read<float>(bq, extra->Q);
    o.k = e.read<float>(bk, extra->KV);
    o.v = e.read<float>(bv, extra->KV);
  }
  if (clocks) {
    const std::vector<uint64_t> all = e.read<uint64_t>(bclk, size_t(grid) * kFusedClockSlots + 3);
    EXPECT_EQ(all[0] | all[1] | all[2], 0u) << "no stamp before clock_base";
    o.stamps.assign(all.begin() + 3, all.end());
  }
  return o;
}

// y = w . q8_round(x) for a [rows][cols] matrix, and each row's tolerance:
// 1e-4 of its magnitude sum plus what ambiguous roundings may move it.
void product(const Expert& w, uint32_t rows, uint32_t cols, const std::vector<double>& x, std::vector<double>& y,
             std::vector<double>& tol) {
  std::vector<double> amb;
  const std::vector<double> xq = q8_round(x, amb);
  y.assign(rows, 0);
  tol.assign(rows, 1e-6);
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t i = 0; i < cols; ++i) {
      const double wi = w.w[size_t(r) * cols + i];
      y[r] += wi * xq[i];
      tol[r] += 1e-4 * std::fabs(wi * xq[i]) + std::fabs(wi) * amb[i];
    }
}

// Grids to try: one workgroup, and on a GPU with compute units reported
// (moe_fused_grid) that many, whose workgroups then wait for each other.
// lavapipe runs a small grid's workgroups one after another (and ends any loop
// after 65535 iterations), so there a second workgroup would never arrive.
std::vector<uint32_t> grids(test::VkEnv& e) {
  std::vector<uint32_t> g{1};
  if (const uint32_t n = moe_fused_grid(e.ctx->info()); n > 1) g.push_back(n);
  return g;
}

bool fused_available(test::VkEnv& e, const Case& c) {
  return moe_fused_decode_supported(e.ctx->info(), c.gu, c.dn, c.E, c.F, c.N, c.K, c.rp,
                                    row_bytes(c.gu, c.E) * c.F, row_bytes(c.dn, c.F) * c.E);
}

const Case kCases[] = {
    {GgmlType::Q4_K, GgmlType::Q6_K, 512, 256, 32, 4, {Gating::Softmax, true, 1.f}, 0},
    {GgmlType::Q4_K, GgmlType::Q4_K, 256, 512, 16, 2, {Gating::Softmax, false, 1.f}, 0},
    {GgmlType::Q8_0, GgmlType::Q8_0, 256, 96, 64, 6, {Gating::Sigmoid, true, 2.5f}, 1},
    {GgmlType::Q5_K, GgmlType::Q8_0, 512, 160, 8, 8, {Gating::SoftmaxWeight, true, 1.f}, 0},
    {GgmlType::Q6_K, GgmlType::Q5_K, 256, 256, 24, 3, {Gating::Softmax, true, 1.f}, 1},
};

// Two runs of the same block wrote the same x and next q, k, v, bit for bit.
void expect_same_products(const Out& got, const Out& want) {
  EXPECT_EQ(got.x, want.x);
  EXPECT_EQ(got.q, want.q);
  EXPECT_EQ(got.k, want.k);
  EXPECT_EQ(got.v, want.v);
}

// The kernel's outputs o of the block on entry x (x_err: how far x may be
// from the kernel's own, per row) against the host reference; with
// next_norm, the next layer's norm it wrote.
void expect_block(const Block& b, const std::vector<double>& x, const std::vector<double>& x_err, const Out& o,
                  bool next_norm) {
  const Case& c = b.c;
  const uint32_t E = c.E, F = c.F, K = c.K;
  EXPECT_EQ(o.flag, 99u) << "a finite block must leave the non-finite flag";
  EXPECT_EQ(o.counters, o.left) << "arrivals and finished workgroups, nothing else";
  // Router logits.
  const std::vector<float> xf(x.begin(), x.end());
  const std::vector<double> xn = b.xn_of(xf, b.norm_w);
  // The kernel's x may be x_err away from x: each xn_i moves by up to inv_rms |w_i| x_err_i
  // and by the norm's own change, xn_i times sum |x_i| x_err_i / sum x_i^2 (first order).
  double ss = 0, sx = 0;
  for (uint32_t i = 0; i < E; ++i) {
    ss += x[i] * x[i];
    sx += std::fabs(x[i]) * x_err[i];
  }
  const double inv_rms = 1 / std::sqrt(ss / E + 1e-6), rel = ss > 0 ? sx / ss : 0;
  std::vector<double> xn_err(E);
  for (uint32_t i = 0; i < E; ++i)
    xn_err[i] = 1.5 * (inv_rms * std::fabs(b.norm_w[i]) * x_err[i] + std::fabs(xn[i]) * rel);
  for (uint32_t r = 0; r < c.N; ++r) {
    double want = 0, mag = 0, moved = 0;
    for (uint32_t i = 0; i < E; ++i) {
      const double wr = b.router[size_t(r) * E + i];
      want += wr * xn[i];
      mag += std::fabs(wr * xn[i]);
      moved += std::fabs(wr) * xn_err[i];
    }
    ASSERT_NEAR(o.logits[r], want, 1e-5 * mag + moved + 1e-6) << "logit " << r;
  }
  // Routing of the kernel's logits.
  std::vector<int> ids(K);
  std::vector<float> wts(K);
  route_topk(o.logits.data(), nullptr, int(c.N), int(K), c.rp, ids.data(), wts.data());
  for (uint32_t j = 0; j < K; ++j) {
    ASSERT_EQ(o.ids[j], ids[j]) << "rank " << j;
    ASSERT_NEAR(o.wts[j], wts[j], 1e-5 * std::fabs(wts[j]) + 1e-7) << "rank " << j;
  }
  // The experts' activations on int8-rounded xn.
  std::vector<double> xa;
  const std::vector<double> xq = q8_round(xn, xa, xn_err);
  for (uint32_t j = 0; j < K; ++j)
    for (uint32_t f = 0; f < F; ++f) {
      const size_t row = (size_t(ids[j]) * F + f) * E;
      double g = 0, u = 0, eg = 1e-6, eu = 1e-6;
      for (uint32_t i = 0; i < E; ++i) {
        g += b.gate.w[row + i] * xq[i];
        u += b.up.w[row + i] * xq[i];
        eg += 1e-4 * std::fabs(b.gate.w[row + i] * xq[i]) + std::fabs(b.gate.w[row + i]) * xa[i];
        eu += 1e-4 * std::fabs(b.up.w[row + i] * xq[i]) + std::fabs(b.up.w[row + i]) * xa[i];
      }
      // glu's slope in g is at most 1.1 times its u factor (u, or gpt-oss's u + 1).
      const test::GluFactors gf = test::glu_factors(g, u, eg, eu, c.act);
      const double tol = 1.2 * (eg * gf.u + eu * gf.g) + 1e-6;
      ASSERT_NEAR(o.h[j * F + f], act(g, u, c.act), tol) << "expert rank " << j << " row " << f;
    }
  // Down products of the kernel's h, weighted into x.
  std::vector<double> h(o.h.begin(), o.h.end());
  std::vector<double> ha;
  const std::vector<double> hq = q8_round(h, ha);
  for (uint32_t r = 0; r < E; ++r) {
    double s = x[r], tol = 2e-5 * std::fabs(x[r]) + x_err[r] + 1e-6;
    for (uint32_t j = 0; j < K; ++j) {
      const size_t row = (size_t(ids[j]) * E + r) * F;
      for (uint32_t i = 0; i < F; ++i) {
        const double wd = o.wts[j] * b.down.w[row + i];
        s += wd * hq[j * F + i];
        tol += 2e-5 * std::fabs(wd * hq[j * F + i]) + std::fabs(wd) * ha[j * F + i];
      }
    }
    ASSERT_NEAR(o.x[r], s, tol) << "x row " << r;
  }
  if (!next_norm) return;
  // The next layer's norm of the kernel's x.
  const std::vector<double> xn2 = b.xn_of(o.x, b.next_w);
  for (uint32_t i = 0; i < E; ++i) ASSERT_NEAR(o.xn[i], xn2[i], 1e-5 * std::fabs(xn2[i]) + 1e-6) << "xn " << i;
}

TEST(ShaderMoeFused, BlockMatchesHostReference) {
  test::VkEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  for (const Case& c : kCases) {
    SCOPED_TRACE(std::string(type_name(c.gu)) + "/" + type_name(c.dn) + " E " + std::to_string(c.E) + " F " +
                 std::to_string(c.F) + " N " + std::to_string(c.N) + " K " + std::to_string(c.K));
    if (!fused_available(e, c)) GTEST_SKIP() << "the device lacks int8 dot products or subgroup operations";
    Block b(c, e);
    for (uint32_t grid : grids(e)) {
      SCOPED_TRACE("grid " + std::to_string(grid));
      const std::vector<float> x = e.randn(c.E, 1.5f);
      const Out o = run_block(e, b, x, grid, 5, 7);
      expect_block(b, std::vector<double>(x.begin(), x.end()), std::vector<double>(c.E, 0), o, true);
    }
  }
}

// With the output projection before the block and the next q/k/v after it:
// x enters as x + wo . att, and q, k, v are the products of the next norm of
// the kernel's x (int8-rounded); xn is not written.
TEST(ShaderMoeFused, OutProjAndNextQkvMatchHostReference) {
  test::VkEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  struct ExtraCase {
    const Case& c;
    GgmlType o, q, k, v;
    uint32_t A, Q, KV;
  };
  const ExtraCase cases[] = {
      {kCases[0], GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::Q6_K, 1024, 1024, 256},
      {kCases[2], GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q4_K, GgmlType::Q5_K, 512, 256, 64},
      {kCases[3], GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q5_K, GgmlType::Q4_K, 256, 768, 96},
  };
  for (const ExtraCase& ec : cases) {
    const Case& c = ec.c;
    SCOPED_TRACE(std::string("o ") + type_name(ec.o) + " q " + type_name(ec.q) + " k " + type_name(ec.k) + " v " +
                 type_name(ec.v));
    if (!fused_available(e, c)) GTEST_SKIP() << "the device lacks int8 dot products or subgroup operations";
    const DeviceInfo& d = e.ctx->info();
    ASSERT_TRUE(moe_fused_takes_out_proj(d, ec.o, c.E, c.F, c.K, ec.A));
    ASSERT_TRUE(moe_fused_takes_qkv(ec.q, ec.k, ec.v, c.E, ec.Q, ec.KV));
    Block b(c, e);
    const Extra x_(b, ec.o, ec.q, ec.k, ec.v, ec.A, ec.Q, ec.KV);
    // Also with fewer lanes per row than the subgroup's (more rows at once).
    const std::array<uint32_t, 4> fewer{2, 4, 1, 2};
    for (uint32_t grid : grids(e))
      for (const std::array<uint32_t, 4>& lanes : {std::array<uint32_t, 4>{}, fewer}) {
        SCOPED_TRACE("grid " + std::to_string(grid) + " lanes " + std::to_string(lanes[0]));
        const std::vector<float> x = e.randn(c.E, 1.5f);
        const Out o = run_block(e, b, x, grid, 5, 7, &x_, lanes);
        std::vector<double> att(x_.att.begin(), x_.att.end()), proj, x0_err;
        product(x_.wo, c.E, ec.A, att, proj, x0_err);
        std::vector<double> x0(c.E);
        for (uint32_t r = 0; r < c.E; ++r) x0[r] = x[r] + proj[r];
        expect_block(b, x0, x0_err, o, false);
        for (float v : o.xn) ASSERT_TRUE(std::isnan(v)) << "with q/k/v, xn is not written";
        const std::vector<double> xn2 = b.xn_of(o.x, b.next_w);
        auto expect_rows = [&](const Expert& w, uint32_t rows, const std::vector<float>& got, const char* what) {
          std::vector<double> want, tol;
          product(w, rows, c.E, xn2, want, tol);
          for (uint32_t r = 0; r < rows; ++r) ASSERT_NEAR(got[r], want[r], tol[r]) << what << " row " << r;
        };
        expect_rows(x_.wq, ec.Q, o.q, "q");
        expect_rows(x_.wk, ec.KV, o.k, "k");
        expect_rows(x_.wv, ec.KV, o.v, "v");
      }
  }
}

// att given as split-K attention partials (heads of head_dim, 2 to 64
// splits): the kernel's combined att matches the double-precision combination
// within 1e-5, and the rest of the dispatch computes exactly what it does from
// that att given whole.
TEST(ShaderMoeFused, SplitAttentionCombinedBeforeOutProj) {
  test::VkEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const Case& c = kCases[0];
  if (!fused_available(e, c)) GTEST_SKIP() << "the device lacks int8 dot products or subgroup operations";
  Block b(c, e);
  const uint32_t A = 1024;
  std::uniform_real_distribution<float> um(-6.f, 6.f), ul(0.5f, 20.f);
  Extra split(b, GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::Q6_K, A, 1024, 256);
  for (uint32_t D : {64u, 128u})
    for (uint32_t n : {2u, 33u, 64u}) {
      SCOPED_TRACE("head_dim " + std::to_string(D) + " splits " + std::to_string(n));
      if (!moe_fused_combines_att(e.ctx->info(), A, D, n)) GTEST_SKIP() << "the device's subgroups or workgroups";
      const uint32_t rows = A / D * n;
      split.splits = n;
      split.head_dim = D;
      split.ml_off = rows * D + 4;  // not right after the partials
      split.parts = e.randn(size_t(split.ml_off) + 2 * rows, 3.f);
      std::vector<double> want(A);
      for (uint32_t h = 0; h < A / D; ++h) {
        double big = -1e300;
        for (uint32_t s = 0; s < n; ++s) {
          float& m = split.parts[split.ml_off + 2 * (h * n + s)];
          m = um(e.rng);
          split.parts[split.ml_off + 2 * (h * n + s) + 1] = ul(e.rng);
          big = std::max(big, double(m));
        }
        for (uint32_t d = 0; d < D; ++d) {
          double acc = 0, sum = 0;
          for (uint32_t s = 0; s < n; ++s) {
            const size_t pr = h * n + s;
            const double w = std::exp2(split.parts[split.ml_off + 2 * pr] - big);
            acc += w * split.parts[pr * D + d];
            sum += w * split.parts[split.ml_off + 2 * pr + 1];
          }
          want[h * D + d] = acc / sum;
        }
      }
      for (uint32_t grid : grids(e)) {
        SCOPED_TRACE("grid " + std::to_string(grid));
        const std::vector<float> x = e.randn(c.E, 1.5f);
        const Out o = run_block(e, b, x, grid, 5, 7, &split);
        double scale = 0;
        for (double v : want) scale = std::max(scale, std::fabs(v));
        for (uint32_t i = 0; i < A; ++i) ASSERT_NEAR(o.att[i], want[i], 1e-5 * scale) << "att " << i;
        Extra whole = split;
        whole.splits = 1;
        whole.att = o.att;
        const Out w = run_block(e, b, x, grid, 5, 7, &whole);
        expect_same_products(o, w);
        EXPECT_EQ(o.ids, w.ids);
        EXPECT_EQ(o.counters, o.left);
        EXPECT_EQ(w.counters, w.left);
        EXPECT_EQ(o.flag, 99u);
      }
    }
}

// An output projection and next q/k/v with step A at position pos: heads of
// D, random q/k/v inputs, norm weights and F16 caches of pos + 3 positions.
Extra attention_extra(test::VkEnv& e, Block& b, uint32_t D, uint32_t heads, uint32_t kv_heads, bool norm,
                      const RopeParams& rope, uint32_t pos) {
  const uint32_t A = heads * D, KV = kv_heads * D;
  Extra x(b, GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::Q6_K, A, A, KV);
  MoeFusedAttention at;
  at.head_dim = D;
  at.n_head = heads;
  at.n_head_kv = kv_heads;
  at.rope = rope;
  at.norm = norm;
  at.scale = 1.f / std::sqrt(float(D));
  at.pos1 = pos + 1;
  x.attention = at;
  x.q_in = e.randn(A);
  x.k_in = e.randn(KV);
  x.v_in = e.randn(KV);
  x.q_norm = e.randn(D, 0.2f);
  x.k_norm = e.randn(D, 0.2f);
  for (float& v : x.q_norm) v += 1.f;
  for (float& v : x.k_norm) v += 1.f;
  auto halves = [&](size_t n) {
    std::vector<uint16_t> h(n);
    const std::vector<float> f = e.randn(n);
    for (size_t i = 0; i < n; ++i) h[i] = fp32_to_fp16(f[i]);
    return h;
  };
  x.k_cache = halves(size_t(pos + 3) * KV);  // rows past pos stay as given
  x.v_cache = halves(size_t(pos + 3) * KV);
  return x;
}

// Step A, the layer's one-token attention in the block (a q head a
// workgroup, grouped kv heads; per-head q/k norms and NeoX pairs, or neither
// with adjacent pairs, a rotated part and YaRN; 1, 8 and 301 positions, more
// than one pass of keys): the new key and value the kernel stored at pos are
// the host's (normed, rotated) within f16 rounding and every other cache row
// is left as it was; att matches the CPU reference attention (attend_ref)
// over the caches within 2e-4 of the values' largest magnitude; the rest of the
// dispatch computes exactly what it does from that att given whole; and with
// pos1 = 0 the same pipeline leaves the step out. Both ways: q/k and the
// combine by subgroups (lavapipe's of 8 too) and by the workgroup.
TEST(ShaderMoeFused, AttentionInTheBlockMatchesHostReference) {
  test::VkEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const Case& c = kCases[0];
  if (!fused_available(e, c)) GTEST_SKIP() << "the device lacks int8 dot products or subgroup operations";
  Block b(c, e);
  struct AttCase {
    uint32_t D, heads, kv_heads;
    bool norm;
    RopeParams rope;
  };
  RopeParams neox, yarn;
  neox.n_rot = 128;
  neox.neox = true;
  neox.theta = 1e6f;
  yarn.n_rot = 32;
  yarn.theta = 1e4f;
  yarn.freq_scale = 0.25f;
  yarn.ext_factor = 1.f;
  yarn.n_ctx_orig = 4096;
  const AttCase cases[] = {{128, 8, 2, true, neox}, {64, 8, 4, false, yarn}};
  for (const AttCase& ac : cases)
    for (uint32_t pos : {0u, 7u, 300u}) {
      const uint32_t D = ac.D, H = ac.heads, A = H * D, KV = ac.kv_heads * D, G = H / ac.kv_heads;
      SCOPED_TRACE("head_dim " + std::to_string(D) + " pos " + std::to_string(pos));
      if (!moe_fused_takes_attention(e.ctx->info(), c.E, c.F, c.K, A, D, H, ac.kv_heads, ac.rope))
        GTEST_SKIP() << "the device's workgroups or shared memory";
      const Extra x_ = attention_extra(e, b, D, H, ac.kv_heads, ac.norm, ac.rope, pos);
      const MoeFusedAttention& at = *x_.attention;
      // q or k head (normed, rotated) as the host computes it.
      auto head = [&](const std::vector<float>& in, uint32_t i, const std::vector<float>& w) {
        std::vector<float> r(in.begin() + size_t(i) * D, in.begin() + size_t(i + 1) * D);
        if (ac.norm) {
          double ss = 0;
          for (float v : r) ss += double(v) * v;
          const double s = 1 / std::sqrt(ss / D + 1e-6);
          for (uint32_t d = 0; d < D; ++d) r[d] = float(r[d] * s * w[d]);
        }
        rope(r.data(), int(D), int(pos), ac.rope);
        return r;
      };
      for (uint32_t grid : grids(e))
      for (bool by_subgroups : {false, true}) {
        SCOPED_TRACE("grid " + std::to_string(grid) + (by_subgroups ? " by subgroups" : " by the workgroup"));
        Extra xv = x_;
        xv.attention->by_subgroups = by_subgroups;
        const std::vector<float> x = e.randn(c.E, 1.5f);
        const Out o = run_block(e, b, x, grid, 5, 7, &xv);
        EXPECT_EQ(o.flag, 99u);
        EXPECT_EQ(o.counters, o.left);
        for (size_t i = 0; i < x_.k_cache.size(); ++i) {
          if (i / KV == pos) continue;
          ASSERT_EQ(o.k_cache[i], x_.k_cache[i]) << "k cache " << i;
          ASSERT_EQ(o.v_cache[i], x_.v_cache[i]) << "v cache " << i;
        }
        for (uint32_t g = 0; g < ac.kv_heads; ++g) {
          const std::vector<float> k = head(x_.k_in, g, x_.k_norm);
          for (uint32_t d = 0; d < D; ++d) {
            const size_t at_i = size_t(pos) * KV + g * D + d;
            const float v = x_.v_in[g * D + d];
            ASSERT_NEAR(fp16_to_fp32(o.k_cache[at_i]), k[d], 1e-3 * std::fabs(k[d]) + 1e-5) << "new key " << g << "," << d;
            ASSERT_NEAR(fp16_to_fp32(o.v_cache[at_i]), v, 1e-3 * std::fabs(v) + 1e-5) << "new value " << g << "," << d;
          }
        }
        // The CPU reference attention of the host's q over the caches the kernel left.
        std::vector<float> q(A), kc(o.k_cache.size()), vc(o.v_cache.size()), want(A), scratch;
        for (uint32_t h = 0; h < H; ++h) {
          const std::vector<float> qh = head(x_.q_in, h, x_.q_norm);
          std::copy(qh.begin(), qh.end(), q.begin() + size_t(h) * D);
        }
        for (size_t i = 0; i < kc.size(); ++i) {
          kc[i] = fp16_to_fp32(o.k_cache[i]);
          vc[i] = fp16_to_fp32(o.v_cache[i]);
        }
        AttentionRefShape shape;
        shape.head_dim = int(D);
        shape.n_head = int(H);
        shape.n_head_kv = int(ac.kv_heads);
        shape.scale = at.scale;
        attend_ref(q.data(), kc.data(), vc.data(), int(KV), int(pos), shape, want.data(), scratch);
        for (uint32_t h = 0; h < H; ++h) {
          const uint32_t g = h / G;
          double vmax = 0;
          for (uint32_t j = 0; j <= pos; ++j)
            for (uint32_t d = 0; d < D; ++d) vmax = std::max(vmax, double(std::fabs(vc[size_t(j) * KV + g * D + d])));
          for (uint32_t d = 0; d < D; ++d)
            ASSERT_NEAR(o.att[h * D + d], want[h * D + d], 2e-4 * vmax) << "att head " << h << " dim " << d;
        }
        Extra whole = x_;
        whole.attention.reset();
        whole.att = o.att;
        const Out w = run_block(e, b, x, grid, 5, 7, &whole);
        expect_same_products(o, w);
        EXPECT_EQ(o.ids, w.ids);
        Extra off = whole;
        off.attention = at;
        off.attention->pos1 = 0;
        const Out f = run_block(e, b, x, grid, 5, 7, &off);
        expect_same_products(f, w);
        EXPECT_EQ(f.k_cache, x_.k_cache) << "pos1 0: no step A";
        EXPECT_EQ(f.counters, f.left);
      }
    }
}

TEST(ShaderMoeFused, NonFiniteInputLowersTheFlag) {
  test::VkEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const Case& c = kCases[0];
  if (!fused_available(e, c)) GTEST_SKIP() << "the device lacks int8 dot products or subgroup operations";
  Block b(c, e);
  std::vector<float> x = e.randn(c.E, 1.f);
  x[3] = std::numeric_limits<float>::infinity();
  for (uint32_t grid : grids(e)) {
    EXPECT_EQ(run_block(e, b, x, grid, 5, 7).flag, 5u) << "the entry check comes first; grid " << grid;
    const Out o = run_block(e, b, x, grid, 0, 7);
    EXPECT_EQ(o.flag, 7u) << "without an entry check, the exit check; grid " << grid;
    for (int32_t id : o.ids) EXPECT_TRUE(id >= 0 && uint32_t(id) < c.N) << "ids stay in range; grid " << grid;
    EXPECT_EQ(o.counters, o.left);
  }
}

// The clock variant: each workgroup stamps the edges of the steps it passes,
// in their order, and computes what the plain kernel does; with step A too.
TEST(ShaderMoeFused, ClockStampsFollowTheSteps) {
  test::VkEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  if (!e.ctx->info().device_clock) GTEST_SKIP() << "the device has no shader device clock";
  const Case& c = kCases[0];
  if (!fused_available(e, c)) GTEST_SKIP() << "the device lacks int8 dot products or subgroup operations";
  Block b(c, e);
  RopeParams rope;
  rope.n_rot = 128;
  rope.neox = true;
  const Extra plain_x(b, GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::Q6_K, 1024, 1024, 256),
      att_x = attention_extra(e, b, 128, 8, 2, true, rope, 7);
  using C = FusedClock;
  for (uint32_t grid : grids(e))
    for (const Extra* xp : {&plain_x, &att_x}) {
      const Extra& x_ = *xp;
      const bool att = x_.attention.has_value();
      SCOPED_TRACE("grid " + std::to_string(grid) + (att ? " with step A" : ""));
      if (att && !moe_fused_takes_attention(e.ctx->info(), c.E, c.F, c.K, 1024, 128, 8, 2, rope)) continue;
      const std::vector<float> x = e.randn(c.E, 1.5f);
      const Out plain = run_block(e, b, x, grid, 5, 7, &x_);
      const Out o = run_block(e, b, x, grid, 5, 7, &x_, {}, true);
      ASSERT_EQ(o.ids, plain.ids);
      for (uint32_t i = 0; i < c.E; ++i) ASSERT_NEAR(o.x[i], plain.x[i], 1e-5 * std::fabs(plain.x[i]) + 1e-6) << i;
      for (uint32_t i = 0; i < x_.Q; ++i) ASSERT_NEAR(o.q[i], plain.q[i], 1e-5 * std::fabs(plain.q[i]) + 1e-6) << i;
      // Without step A or attention splits to combine, no att edges; not chained, no wait.
      const std::vector<C> steps = {C::Start,       C::OutProjArrive, C::OutProjLeave, C::RouterArrive, C::RouterLeave,
                                    C::TopK,        C::GateUpArrive,  C::GateUpLeave,  C::HQuantized,   C::DownArrive,
                                    C::DownLeave,   C::NextNorm,      C::End};
      for (uint32_t w = 0; w < grid; ++w) {
        std::vector<C> order = steps;  // workgroups with a head (8) also stamp inside step A
        if (att && w < 8) order.insert(order.begin() + 1, {C::AttRotated, C::AttKeys, C::AttArrive, C::AttLeave});
        if (att && w >= 8) order.insert(order.begin() + 1, {C::AttArrive, C::AttLeave});
        const uint64_t* st = &o.stamps[size_t(w) * kFusedClockSlots];
        uint32_t stamped = 0;
        for (size_t i = 0; i < std::size(order); ++i) {
          ASSERT_NE(st[uint32_t(order[i])], 0u) << "workgroup " << w << " " << fused_clock_name(order[i]);
          if (i > 0) {
            ASSERT_TRUE(test::clock_not_before(st[uint32_t(order[i])], st[uint32_t(order[i - 1])]))
                << fused_clock_name(order[i]);
          }
        }
        for (uint32_t k = 0; k < kFusedClockSlots; ++k) stamped += st[k] != 0;
        EXPECT_EQ(stamped, std::size(order)) << "workgroup " << w << ": slots stamped";
      }
    }
}

// Chained layers: the block first waits until the attention's count reaches
// att_wgs, then computes exactly what it does after a barrier, and raises the
// q/k/v counter once they are written; a count that never comes, or one past
// att_wgs (left from an earlier token), gives up and poisons x.
TEST(ShaderMoeFused, ChainedWaitsForTheAttentionAndRaisesQkvReady) {
  test::VkEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const Case& c = kCases[0];
  if (!fused_available(e, c)) GTEST_SKIP() << "the device lacks int8 dot products or subgroup operations";
  Block b(c, e);
  const Extra x_(b, GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q8_0, GgmlType::Q6_K, 1024, 1024, 256);
  for (uint32_t grid : grids(e)) {
    SCOPED_TRACE("grid " + std::to_string(grid));
    const std::vector<float> x = e.randn(c.E, 1.5f);
    const Out plain = run_block(e, b, x, grid, 5, 7, &x_);
    for (bool loads : {true, false}) {
      SCOPED_TRACE(loads ? "polled by loads" : "polled by atomics");
      const Chain ready{37, 37, 9, loads};
      const Out o = run_block(e, b, x, grid, 5, 7, &x_, {}, false, &ready);
      expect_same_products(o, plain);
      EXPECT_EQ(o.flag, plain.flag);
      EXPECT_EQ(o.counters, o.left) << "q/k/v ready raised to 9";
      EXPECT_EQ(o.counters[2], 9u);
    }
    for (const Chain& bad : {Chain{36, 37, 9}, Chain{38, 37, 9}}) {
      SCOPED_TRACE("count " + std::to_string(bad.done));
      const Out lost = run_block(e, b, x, grid, 5, 7, &x_, {}, false, &bad);
      EXPECT_EQ(lost.flag, 1u) << "the lost wait lowers the flag to 1";
      EXPECT_TRUE(std::any_of(lost.x.begin(), lost.x.end(), [](float v) { return std::isnan(v); })) << "and poisons x";
    }
  }
}

// The int8 x in the swizzled shared-memory layout (each 64-value group's parts
// apart) reads the same values as adjacent: bit-equal results for every
// weight type the kernel reads (Q4_K, Q6_K, Q8_0 and Q5_K products).
TEST(ShaderMoeFused, SwizzledXqEqualsAdjacent) {
  test::VkEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  for (const auto& [gu, dn, o, q] : {std::array{GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q8_0, GgmlType::Q5_K},
                                     std::array{GgmlType::Q8_0, GgmlType::Q4_K, GgmlType::Q6_K, GgmlType::Q4_K}}) {
    const Case c{gu, dn, 256, 512, 16, 8, {Gating::Softmax, true, 1.f}, 0};
    if (!fused_available(e, c)) GTEST_SKIP() << "the device lacks int8 dot products or subgroup operations";
    Block b(c, e);
    const Extra x_(b, o, q, GgmlType::Q8_0, GgmlType::Q6_K, 4096, 1024, 256);
    for (uint32_t grid : grids(e)) {
      SCOPED_TRACE("grid " + std::to_string(grid) + ", gate/up type " + std::to_string(int(gu)));
      const std::vector<float> x = e.randn(c.E, 1.5f);
      const Out adjacent = run_block(e, b, x, grid, 5, 7, &x_, {}, false, nullptr, 0, false);
      const Out swizzled = run_block(e, b, x, grid, 5, 7, &x_, {}, false, nullptr, 0, true);
      ASSERT_EQ(adjacent.flag, 99u);
      expect_same_products(swizzled, adjacent);
      EXPECT_EQ(swizzled.h, adjacent.h);
      EXPECT_EQ(swizzled.ids, adjacent.ids);
      EXPECT_EQ(swizzled.counters, swizzled.left);
      EXPECT_EQ(swizzled.flag, 99u);
    }
  }
}

// Layers of different weight types share one pipeline (MoeFusedTypeSets:
// each product's type then read from a push constant): the same results, bit
// for bit, as the pipeline of the dispatch's own types, with and without the
// output projection and q/k/v products; sets without the dispatch's types
// are refused.
TEST(ShaderMoeFused, OnePipelineForSeveralTypesEqualsItsOwn) {
  test::VkEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  using T = GgmlType;
  auto bits = [](std::initializer_list<T> ts) {
    uint32_t m = 0;
    for (T t : ts) m |= MoeFusedTypeSets::bit(t);
    return m;
  };
  MoeFusedTypeSets all;
  all.gate_up = all.down = all.wo = all.wq = all.wk = all.wv = bits({T::Q8_0, T::Q4_K, T::Q5_K, T::Q6_K});
  all.without_wo = all.without_qkv = true;
  MoeFusedTypeSets pair;  // Q4_K_M's: Q4_K, with Q6_K down and v in some layers
  pair.gate_up = pair.wo = pair.wq = pair.wk = bits({T::Q4_K});
  pair.down = pair.wv = bits({T::Q4_K, T::Q6_K});
  pair.without_qkv = true;
  for (const auto& [gu, dn, o, q, k, v] :
       {std::array{T::Q4_K, T::Q6_K, T::Q4_K, T::Q4_K, T::Q4_K, T::Q6_K},
        std::array{T::Q4_K, T::Q4_K, T::Q4_K, T::Q4_K, T::Q4_K, T::Q4_K},
        std::array{T::Q8_0, T::Q5_K, T::Q6_K, T::Q8_0, T::Q5_K, T::Q4_K}}) {
    const Case c{gu, dn, 256, 512, 16, 4, {Gating::Softmax, true, 1.f}, 0};
    if (!fused_available(e, c)) GTEST_SKIP() << "the device lacks int8 dot products or subgroup operations";
    Block b(c, e);
    const Extra x_(b, o, q, k, v, 512, 512, 128);
    const bool q4km = gu == T::Q4_K && o == T::Q4_K && q == T::Q4_K && k == T::Q4_K;
    for (uint32_t grid : grids(e)) {
      SCOPED_TRACE("grid " + std::to_string(grid) + ", down " + type_name(dn) + ", wo " + type_name(o));
      const std::vector<float> x = e.randn(c.E, 1.5f);
      for (const Extra* xp : {&x_, static_cast<const Extra*>(nullptr)}) {
        const Out own = run_block(e, b, x, grid, 5, 7, xp);
        ASSERT_EQ(own.flag, 99u);
        std::vector<const MoeFusedTypeSets*> sets = {&all};
        if (q4km) sets.push_back(&pair);
        for (const MoeFusedTypeSets* ts : sets) {
          if (!xp && ts == &pair) continue;  // no absent output projection in it
          const Out shared = run_block(e, b, x, grid, 5, 7, xp, {}, false, nullptr, 0, std::nullopt, *ts);
          EXPECT_EQ(shared.x, own.x);
          if (!xp) {  // with q/k/v xn is not written
            EXPECT_EQ(shared.xn, own.xn);
          }
          EXPECT_EQ(shared.h, own.h);
          EXPECT_EQ(shared.ids, own.ids);
          EXPECT_EQ(shared.wts, own.wts);
          if (xp) expect_same_products(shared, own);
          EXPECT_EQ(shared.counters, shared.left);
          EXPECT_EQ(shared.flag, 99u);
        }
      }
    }
  }
  // A set that lacks the dispatch's down type, or its absent output projection.
  const Case c{T::Q4_K, T::Q8_0, 256, 512, 16, 4, {Gating::Softmax, true, 1.f}, 0};
  if (!fused_available(e, c)) return;
  Block b(c, e);
  const std::vector<float> x = e.randn(c.E, 1.f);
  EXPECT_THROW(run_block(e, b, x, 1, 5, 7, nullptr, {}, false, nullptr, 0, std::nullopt, pair), Error);
  MoeFusedTypeSets no_absent = all;
  no_absent.without_wo = false;
  EXPECT_THROW(run_block(e, b, x, 1, 5, 7, nullptr, {}, false, nullptr, 0, std::nullopt, no_absent), Error);
}

// A dispatch whose counters were not zeroed (left as an earlier one ended, or
// just the router's barrier's share) gives up at once instead of passing its
// barriers before the other workgroups' writes.
TEST(ShaderMoeFused, CountersNotZeroedGiveUpAndPoisonX) {
  test::VkEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const Case& c = kCases[0];
  if (!fused_available(e, c)) GTEST_SKIP() << "the device lacks int8 dot products or subgroup operations";
  Block b(c, e);
  for (uint32_t grid : grids(e)) {
    SCOPED_TRACE("grid " + std::to_string(grid));
    const std::vector<float> x = e.randn(c.E, 1.5f);
    const Out first = run_block(e, b, x, grid, 5, 7);
    ASSERT_EQ(first.flag, 99u);
    for (uint32_t left : {first.counters[5], grid}) {
      SCOPED_TRACE("arrivals before " + std::to_string(left));
      const Out o = run_block(e, b, x, grid, 5, 7, nullptr, {}, false, nullptr, left);
      EXPECT_EQ(o.flag, 1u) << "a count left from an earlier dispatch lowers the flag to 1";
      EXPECT_TRUE(std::any_of(o.x.begin(), o.x.end(), [](float v) { return std::isnan(v); })) << "and poisons x";
    }
  }
}

// The kernel's push constants (shaders/moe_decode_fused.comp), to launch fewer
// workgroups than the grid it waits for.
struct Push {
  uint32_t n_embd, n_ff, n_expert, k;
  float eps;
  uint32_t check_in, check_out, gu_stride, dn_stride, grid, counter, spin_limit, topk_normalize, topk_gating;
  float topk_scale;
  uint32_t glu_act, next_norm, att_dim, q_dim, kv_dim, att_splits, att_ml_off, head_dim, clock_base;
  uint32_t att_done, att_wgs, qkv_ready, qkv_value, poll_loads;
};

TEST(ShaderMoeFused, AGridThatCannotGatherGivesUpAndPoisonsX) {
  test::VkEnv e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const Case& c = kCases[1];
  if (!fused_available(e, c)) GTEST_SKIP() << "the device lacks int8 dot products or subgroup operations";
  Block b(c, e);
  const DeviceInfo& d = e.ctx->info();
  const uint32_t wg = std::min<uint32_t>(512, std::bit_floor(d.max_workgroup_invocations));
  const uint32_t lanes = std::min<uint32_t>(32, std::bit_floor(d.subgroup_size));
  const Pipeline& p = e.ctx->pipeline(
      "moe_decode_fused", 23, sizeof(Push),
      {wg, std::max(c.E, c.K * c.F) / 4, c.E / 4, /*Q4_K*/ 5, 5, 0, 0, 0, 0, lanes, lanes, lanes, lanes});
  Buffer bx = e.buf(e.randn(c.E)), bn = e.buf(b.norm_w), br = e.buf(b.router), bg = e.buf(b.gate.q),
         bu = e.buf(b.up.q), bd = e.buf(b.down.q), bl = e.buf(std::vector<float>(c.N)),
         bh = e.buf(std::vector<float>(c.K * c.F)), bi = e.buf(std::vector<int32_t>(c.K)),
         bw = e.buf(std::vector<float>(c.K)), bc = e.buf(std::vector<uint32_t>(2, 0)),
         bf = e.buf(std::vector<uint32_t>(1, 99));
  const Push push{c.E, c.F, c.N, c.K, 1e-6f, 0, 0, uint32_t(b.gu_stride), uint32_t(b.dn_stride),
                  /*grid*/ 2, 0, /*spin_limit*/ 1000, 0, 0, 1.f, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  e.record([&](Recorder& r) {
    r.dispatch(p, {bx, bn, br, bg, bu, bd, bl, bh, bi, bw, bc, bx, bx, bf, bx, bx, bx, bx, bx, bx, bx, bx, bx}, push,
               1);
  });
  EXPECT_EQ(e.read<uint32_t>(bf, 1)[0], 1u) << "the lost wait lowers the flag to 1";
  EXPECT_TRUE(std::isnan(e.read<float>(bx, 1)[0])) << "and poisons x";
}

}  // namespace
