// MoE routing over a ubatch (engine/vulkan/vk_moe.h) on the Vulkan device
// (lavapipe in CI): batched router top-k against route_topk, the GPU and host
// MoE tables against their structural invariants and each other, and the
// combine against a CPU loop. Fresh random inputs each run (seed printed).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "cpu/moe_route.h"
#include "cpu/quant.h"
#include "engine/forward/cpu_forward.h"
#include "engine/vulkan/vk_matvec.h"
#include "engine/vulkan/vk_moe.h"

#include "tests/vk_test_env.h"
using namespace vkmoe;
using namespace vkmoe::vk;

namespace {

struct Env : test::VkEnv {
  // Distinct expert ids per token; with skew, half the tokens pick experts 0..k-1.
  std::vector<int32_t> random_ids(uint32_t n_tokens, uint32_t k, uint32_t n_expert, bool skew) {
    std::vector<int32_t> ids(n_tokens * k), perm(n_expert);
    std::iota(perm.begin(), perm.end(), 0);
    for (uint32_t t = 0; t < n_tokens; ++t) {
      const bool hot = skew && rng() % 2;
      std::shuffle(perm.begin(), perm.end(), rng);
      for (uint32_t j = 0; j < k; ++j) ids[t * k + j] = hot ? int32_t(j) : perm[j];
    }
    return ids;
  }
};

constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Mirror of the shader's push constants, to run its shared-memory variant
// (and chosen workgroup sizes) directly; record_moe_topk picks subgroups on lavapipe.
struct TopkPush {
  uint32_t n_expert, k, logit_stride, normalize, gating, has_bias, n_group, topk_group;
  float scale;
  uint32_t splits, split_plane;
};
TopkPush topk_push(uint32_t n_expert, uint32_t k, uint32_t stride, const RouterParams& p, bool bias,
                   uint32_t splits = 1, uint32_t split_plane = 0) {
  return {n_expert, k,     stride, p.normalize, uint32_t(p.gating), bias, uint32_t(p.n_group), uint32_t(p.topk_group),
          p.scale,  splits, split_plane};
}

// The top-k kernel as record_moe_topk (shader "") or the named shader at workgroup wg.
struct Variant {
  const char* shader;
  uint32_t wg;
};
std::vector<Variant> topk_variants(Env& e) {
  std::vector<Variant> v = {{"", 0}, {"moe_topk_batch", 64}, {"moe_topk_batch", 256}};
  if (e.ctx->info().subgroup_arithmetic) v.push_back({"moe_topk_batch_sg", 256});
  return v;
}
void run_topk(Env& e, const Variant& v, const MoeTopkArgs& a) {
  Recorder rec(*e.ctx);
  rec.begin();
  if (!*v.shader) {
    record_moe_topk(rec, a);
  } else {
    const bool bias = a.bias.buffer != VK_NULL_HANDLE;
    const Pipeline& p = e.ctx->pipeline(v.shader, 4, sizeof(TopkPush), {v.wg});
    rec.dispatch(p, {a.logits, a.ids, a.weights, bias ? a.bias : a.logits},
                 topk_push(a.n_expert, a.k, a.logit_stride, a.router, bias, a.splits, a.split_plane), a.n_tokens);
  }
  rec.submit().wait();
}

TEST(ShaderMoe, TopkBatchMatchesRouteTopk) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  for (uint32_t n_expert : {8u, 64u, 128u, 256u, 1024u})
    for (uint32_t k : {1u, 2u, 8u})
      for (uint32_t norm : {0u, 1u}) {
        const uint32_t n_tokens = 8 + e.rng() % 40, stride = n_expert + e.rng() % 5;
        std::vector<float> l = e.randn(size_t(n_tokens) * stride, 2.f);
        float* r = l.data();
        // Row 0: ties at the top; 1: all equal; 2: all NaN; 3: all -inf;
        // 4: NaN mixed with finite values; 5: two +inf among NaN and finite.
        const float top = *std::max_element(r, r + n_expert) + 1.f;
        for (uint32_t i = 0; i < n_expert; i += 3) r[i] = top;
        std::fill(r + stride, r + stride + n_expert, 0.5f);
        std::fill(r + 2 * stride, r + 2 * stride + n_expert, kNaN);
        std::fill(r + 3 * stride, r + 3 * stride + n_expert, -kInf);
        for (uint32_t i = 0; i < n_expert; i += 2) r[4 * stride + i] = kNaN;
        for (uint32_t i = 0; i < n_expert; i += 3) r[5 * stride + i] = kNaN;
        r[5 * stride + n_expert - 1] = r[5 * stride + n_expert / 2] = kInf;
        for (uint32_t t = 6; t < n_tokens; t += 5) r[t * stride + n_expert - 1] = r[t * stride];  // random ties

        // route_topk reads NaN as -inf and p = exp(l - max) as exactly 1 where l == max.
        std::vector<int> want_ids(n_tokens * k);
        std::vector<float> want_w(n_tokens * k);
        const RouterParams rp{Gating::Softmax, norm != 0};
        for (uint32_t t = 0; t < n_tokens; ++t)
          route_topk(&l[t * stride], nullptr, int(n_expert), int(k), rp, &want_ids[t * k], &want_w[t * k]);

        for (const Variant& v : topk_variants(e)) {
          SCOPED_TRACE(std::string("variant ") + (*v.shader ? v.shader : "record_moe_topk") + " wg " +
                       std::to_string(v.wg) + " n_expert " + std::to_string(n_expert) + " k " + std::to_string(k) +
                       " normalize " + std::to_string(norm));
          Buffer bl = e.buf(l), bi = e.buf(std::vector<int32_t>(n_tokens * k, -7)),
                 bw = e.buf(std::vector<float>(n_tokens * k, kNaN));
          run_topk(e, v, MoeTopkArgs{bl, bi, bw, n_tokens, n_expert, k, stride, rp});
          const auto ids = e.read<int32_t>(bi, n_tokens * k);
          const auto w = e.read<float>(bw, n_tokens * k);
          for (uint32_t q = 0; q < n_tokens * k; ++q) {
            ASSERT_EQ(ids[q], want_ids[q]) << "token " << q / k << " rank " << q % k;
            // GPU exp and float sums against float exp and double sums: 2e-5 relative.
            ASSERT_TRUE(std::isfinite(w[q])) << "token " << q / k << " rank " << q % k;
            ASSERT_NEAR(w[q], want_w[q], 1e-7 + 2e-5 * want_w[q]) << "token " << q / k << " rank " << q % k;
          }
        }
      }
}

// Logits given as split-K partial planes: the kernel sums them in plane order
// (as gemm_split_sum does), so it routes exactly as route_topk on those sums.
TEST(ShaderMoe, TopkSumsSplitPlanes) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t n_tokens = 50, n_expert = 128, k = 8, stride = n_expert, splits = 3, plane = n_tokens * stride + 8;
  const auto parts = e.randn(size_t(splits) * plane, 2.f);
  std::vector<float> l(size_t(n_tokens) * stride);
  for (size_t i = 0; i < l.size(); ++i) {
    float sum = 0.f;
    for (uint32_t z = 0; z < splits; ++z) sum += parts[z * plane + i];
    l[i] = sum;
  }
  const RouterParams rp{Gating::Softmax, true};
  std::vector<int> want_ids(n_tokens * k);
  std::vector<float> want_w(n_tokens * k);
  for (uint32_t t = 0; t < n_tokens; ++t)
    route_topk(&l[t * stride], nullptr, int(n_expert), int(k), rp, &want_ids[t * k], &want_w[t * k]);
  for (const Variant& v : topk_variants(e)) {
    SCOPED_TRACE(std::string("variant ") + (*v.shader ? v.shader : "record_moe_topk") + " wg " + std::to_string(v.wg));
    Buffer bl = e.buf(parts), bi = e.buf(std::vector<int32_t>(n_tokens * k, -7)),
           bw = e.buf(std::vector<float>(n_tokens * k, kNaN));
    MoeTopkArgs a{bl, bi, bw, n_tokens, n_expert, k, stride, rp};
    a.splits = splits;
    a.split_plane = plane;
    run_topk(e, v, a);
    const auto ids = e.read<int32_t>(bi, n_tokens * k);
    const auto w = e.read<float>(bw, n_tokens * k);
    for (uint32_t q = 0; q < n_tokens * k; ++q) {
      ASSERT_EQ(ids[q], want_ids[q]) << "token " << q / k << " rank " << q % k;
      ASSERT_NEAR(w[q], want_w[q], 1e-7 + 2e-5 * want_w[q]) << "token " << q / k << " rank " << q % k;
    }
  }
}

// The smallest relative gap, in double, at a decision route_topk makes on one
// row: the topk_group-th against the next group score, the k-th against the
// next eligible expert score. The GPU's float scores (its exp and division)
// may order a pair closer than float rounding differently, so such rows are
// drawn again.
double decision_gap(const float* l, const float* bias, uint32_t n, uint32_t k, const RouterParams& p) {
  const double mx = *std::max_element(l, l + n);
  double z = 0;
  for (uint32_t e = 0; e < n; ++e) z += std::exp(l[e] - mx);
  std::vector<double> s(n);
  for (uint32_t e = 0; e < n; ++e) {
    const double pr = p.gating == Gating::Softmax ? std::exp(l[e] - mx) / z
                      : p.gating == Gating::Sigmoid ? 1 / (1 + std::exp(-double(l[e]))) : l[e];
    s[e] = bias || p.n_group > 1 ? pr + (bias ? bias[e] : 0) : l[e];
  }
  auto gap_after = [](std::vector<double> v, size_t m) {  // between the m-th and (m+1)-th largest
    std::sort(v.rbegin(), v.rend());
    return m < v.size() ? (v[m - 1] - v[m]) / (std::fabs(v[m - 1]) + std::fabs(v[m])) : kInf;
  };
  double gap = kInf;
  if (p.n_group > 1) {
    const uint32_t per = n / p.n_group;
    std::vector<double> gs(p.n_group);
    for (int g = 0; g < p.n_group; ++g) {
      std::vector<double> v(s.begin() + g * per, s.begin() + (g + 1) * per);
      std::sort(v.rbegin(), v.rend());
      gs[g] = v[0] + v[1];
    }
    gap = gap_after(gs, p.topk_group);
    std::vector<double> sorted = gs;
    std::sort(sorted.rbegin(), sorted.rend());
    std::vector<double> kept;
    for (uint32_t e = 0; e < n; ++e)
      if (gs[e / per] >= sorted[p.topk_group - 1]) kept.push_back(s[e]);
    s = kept;
  }
  return std::min(gap, gap_after(s, k));
}

// Every gating x bias x groups x normalize (random scale), against route_topk
// on fresh random rows: the same ids, weights within 1e-5 relative. Row 0 of
// the batch is all NaN and row 1 all -inf but two +inf (exact ties).
TEST(ShaderMoe, TopkRouterVariantsMatchRouteTopk) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  std::uniform_real_distribution<float> scale_dist(0.5f, 3.f);
  for (uint32_t n_expert : {64u, 256u})
    for (Gating gating : {Gating::Softmax, Gating::Sigmoid, Gating::SoftmaxWeight})
      for (bool has_bias : {false, true})
        for (bool groups : {false, true})
          for (bool norm : {false, true})
            for (uint32_t n_tokens : {1u, 37u}) {
              const uint32_t k = n_expert == 256 ? 8 : 6, stride = n_expert + 3;
              RouterParams rp{gating, norm, scale_dist(e.rng)};
              if (groups) rp.n_group = n_expert == 256 ? 8 : 4, rp.topk_group = n_expert == 256 ? 4 : 2;
              const std::vector<float> bias = has_bias ? e.randn(n_expert, 0.5f) : std::vector<float>{};
              const float* b = has_bias ? bias.data() : nullptr;
              std::vector<float> l(size_t(n_tokens) * stride);
              for (uint32_t t = 0; t < n_tokens; ++t) {
                float* r = &l[t * stride];
                do {
                  const auto row = e.randn(n_expert, 2.f);
                  std::copy(row.begin(), row.end(), r);
                } while (decision_gap(r, b, n_expert, k, rp) < 1e-5);
              }
              if (n_tokens > 2) {
                std::fill_n(&l[0], n_expert, kNaN);
                std::fill_n(&l[stride], n_expert, -kInf);
                l[stride + 5] = l[stride + n_expert - 1] = kInf;
              }
              std::vector<int> want_ids(n_tokens * k);
              std::vector<float> want_w(n_tokens * k);
              for (uint32_t t = 0; t < n_tokens; ++t)
                route_topk(&l[t * stride], b, int(n_expert), int(k), rp, &want_ids[t * k], &want_w[t * k]);
              for (const Variant& v : topk_variants(e)) {
                SCOPED_TRACE(std::string("variant ") + (*v.shader ? v.shader : "record_moe_topk") + " wg " +
                             std::to_string(v.wg) + " n_expert " + std::to_string(n_expert) + " gating " +
                             std::to_string(int(gating)) + (has_bias ? " bias" : "") + (groups ? " groups" : "") +
                             (norm ? " normalize" : "") + " scale " + std::to_string(rp.scale) + " tokens " +
                             std::to_string(n_tokens));
                Buffer bl = e.buf(l), bi = e.buf(std::vector<int32_t>(n_tokens * k, -7)),
                       bw = e.buf(std::vector<float>(n_tokens * k, kNaN)), bb = e.buf(has_bias ? bias : l);
                MoeTopkArgs a{bl, bi, bw, n_tokens, n_expert, k, stride, rp};
                if (has_bias) a.bias = bb;
                run_topk(e, v, a);
                const auto ids = e.read<int32_t>(bi, n_tokens * k);
                const auto w = e.read<float>(bw, n_tokens * k);
                for (uint32_t q = 0; q < n_tokens * k; ++q) {
                  ASSERT_EQ(ids[q], want_ids[q]) << "token " << q / k << " rank " << q % k;
                  ASSERT_NEAR(w[q], want_w[q], 1e-5 * std::fabs(want_w[q])) << "token " << q / k << " rank " << q % k;
                }
              }
            }
}

// The router product fused with its top-k (record_matvec_topk, the resident
// decode's router): for router weight types F32/F16/BF16/Q8_0 and the three
// gatings (bias, groups, normalize, scale) and both launch shapes of float rows, two dispatches in one submission
// sharing one counter. The logits must match the scalar product (1e-4 of
// sum |w x| + 1e-5) and the routing must be route_topk's of those logits
// (ids exact, weights within 1e-5 relative); inputs whose decision is within
// 1e-4 of a tie are redrawn. The counter must be left at 0. The second
// dispatch folds an RMS norm into its input (MatvecTopkTail::norm_w): its
// logits are checked against the product with the normalized x computed
// here, and the normalized x it writes against that (1e-5 relative + 1e-6);
// a finite x must leave the non-finite flag.
TEST(ShaderMoe, RouterMatvecTopkMatchesRouteTopk) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  struct Case {
    uint32_t n_expert, k;
    RouterParams rp;
    bool bias;
  };
  const Case cases[] = {{128, 8, {Gating::Softmax, true, 1.f}, false},
                        {256, 8, {Gating::Sigmoid, true, 2.5f, 8, 4}, true},
                        {64, 6, {Gating::SoftmaxWeight, true, 1.f}, false},
                        {32, 4, {Gating::Softmax, false, 1.f}, false}};
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0})
    for (const Case& c : cases) {
      // F32 and BF16 rows of 1024 take the launch shape of long float rows
      // (128 lanes per row, 128-thread workgroups), the others the general one.
      const uint32_t ncols = t == GgmlType::F32 || t == GgmlType::BF16 ? 1024 : 512;
      SCOPED_TRACE(std::string(type_name(t)) + " n_expert " + std::to_string(c.n_expert) + " gating " +
                   std::to_string(int(c.rp.gating)));
      const size_t rb = row_bytes(t, ncols);
      std::vector<uint8_t> w(rb * c.n_expert);
      const std::vector<float> wf = e.randn(size_t(ncols) * c.n_expert, 0.1f);
      for (uint32_t r = 0; r < c.n_expert; ++r) quantize_row(t, &wf[size_t(r) * ncols], &w[r * rb], ncols);
      const std::vector<float> bias = c.bias ? e.randn(c.n_expert, 0.5f) : std::vector<float>{};
      // Two inputs whose decisions are clear of ties.
      std::vector<float> x, logits_ref(2 * c.n_expert), xn_ref;
      std::vector<double> mags(2 * c.n_expert);
      std::vector<float> norm_w = e.randn(ncols, 0.3f);
      for (float& v : norm_w) v += 1.f;
      const float eps = 1e-6f;
      for (uint32_t d = 0; d < 2; ++d) {
        std::vector<float> xd, xin;
        do {
          xd = e.randn(ncols, d == 1 ? 7.f : 1.f);
          xin = xd;
          if (d == 1) {
            double ss = 0;
            for (float v : xd) ss += double(v) * v;
            const double scale = 1.0 / std::sqrt(ss / ncols + eps);
            for (uint32_t i = 0; i < ncols; ++i) xin[i] = float(xd[i] * scale * norm_w[i]);
            xn_ref = xin;
          }
          for (uint32_t r = 0; r < c.n_expert; ++r) {
            logits_ref[d * c.n_expert + r] = dot_row_f32(t, &w[r * rb], xin.data(), ncols);
            std::vector<float> deq(ncols);
            dequantize_row(t, &w[r * rb], deq.data(), ncols);
            double m = 0;
            for (uint32_t i = 0; i < ncols; ++i) m += std::fabs(double(deq[i]) * xin[i]);
            mags[d * c.n_expert + r] = m;
          }
        } while (decision_gap(&logits_ref[d * c.n_expert], c.bias ? bias.data() : nullptr, c.n_expert, c.k, c.rp) <
                 1e-4);
        x.insert(x.end(), xd.begin(), xd.end());
      }
      // Without a bias, x stands in for the unused bias binding.
      Buffer bw = e.buf(w), bx = e.buf(x), by = e.buf(std::vector<float>(2 * c.n_expert, kNaN)),
             bi = e.buf(std::vector<int32_t>(2 * c.k, -7)), bwt = e.buf(std::vector<float>(2 * c.k, kNaN)),
             bb = e.buf(c.bias ? bias : x), bc = e.buf(std::vector<uint32_t>(4, 0)), bn = e.buf(norm_w),
             bf = e.buf(std::vector<uint32_t>(1, 99)), bxn = e.buf(std::vector<float>(ncols + 8, kNaN));
      Recorder rec(*e.ctx);
      rec.begin();
      for (uint32_t d = 0; d < 2; ++d) {
        MatvecArgs a;
        a.type = t;
        a.ncols = ncols;
        a.nrows = c.n_expert;
        a.w = bw;
        a.x = bx;
        a.x_offset = d * ncols;
        a.y = BufferRange(by, d * c.n_expert * 4, c.n_expert * 4);
        MatvecTopkTail tail;
        tail.ids = bi;
        tail.weights = bwt;
        if (c.bias) tail.bias = bb;
        tail.out_offset = d * c.k;
        tail.k = c.k;
        tail.router = c.rp;
        tail.counter = bc;
        tail.counter_index = 3;
        if (d == 1) {
          tail.norm_w = bn;
          tail.norm_flag = bf;
          tail.norm_out = bxn;
          tail.norm_out_offset = 8;
          tail.norm_eps = eps;
          tail.norm_check = 5;
        }
        ASSERT_TRUE(record_matvec_topk(rec, a, tail)) << "lavapipe has subgroup reductions";
        rec.barrier();
      }
      rec.submit().wait();
      const auto y = e.read<float>(by, 2 * c.n_expert);
      const auto ids = e.read<int32_t>(bi, 2 * c.k);
      const auto wts = e.read<float>(bwt, 2 * c.k);
      EXPECT_EQ(e.read<uint32_t>(bc, 4), std::vector<uint32_t>(4, 0)) << "the counter must be left at 0";
      EXPECT_EQ(e.read<uint32_t>(bf, 1)[0], 99u) << "a finite input must leave the non-finite flag";
      const auto xn = e.read<float>(bxn, ncols + 8);
      for (uint32_t i = 0; i < 8; ++i) ASSERT_TRUE(std::isnan(xn[i])) << "xn before its offset was written";
      for (uint32_t i = 0; i < ncols; ++i)
        ASSERT_NEAR(xn[8 + i], xn_ref[i], 1e-5 * std::fabs(xn_ref[i]) + 1e-6) << "normalized x " << i;
      for (uint32_t d = 0; d < 2; ++d) {
        for (uint32_t r = 0; r < c.n_expert; ++r) {
          const uint32_t q = d * c.n_expert + r;
          ASSERT_NEAR(y[q], logits_ref[q], 1e-4 * mags[q] + 1e-5) << "dispatch " << d << " logit " << r;
        }
        std::vector<int> want_ids(c.k);
        std::vector<float> want_w(c.k);
        route_topk(&y[d * c.n_expert], c.bias ? bias.data() : nullptr, int(c.n_expert), int(c.k), c.rp,
                   want_ids.data(), want_w.data());
        for (uint32_t j = 0; j < c.k; ++j) {
          ASSERT_EQ(ids[d * c.k + j], want_ids[j]) << "dispatch " << d << " rank " << j;
          ASSERT_NEAR(wts[d * c.k + j], want_w[j], 1e-5 * std::fabs(want_w[j])) << "dispatch " << d << " rank " << j;
        }
      }
    }
}

TEST(ShaderMoe, TopkRejectsUnsupportedShapes) {
  Env e;
  Buffer b = e.buf(std::vector<float>(4096));
  Recorder rec(*e.ctx);
  rec.begin();
  EXPECT_THROW(record_moe_topk(rec, MoeTopkArgs{b, b, b, 1, 8, 9, 8}), Error);      // k > n_expert
  EXPECT_THROW(record_moe_topk(rec, MoeTopkArgs{b, b, b, 1, 2048, 8, 2048}), Error);  // n_expert > 1024
  EXPECT_THROW(record_moe_topk(rec, MoeTopkArgs{b, b, b, 1, 128, 65, 128}), Error);   // k > 64
  RouterParams g;
  g.n_group = 3;  // does not divide 128
  EXPECT_THROW(record_moe_topk(rec, MoeTopkArgs{b, b, b, 1, 128, 8, 128, g}), Error);
  g.n_group = 8;
  g.topk_group = 9;
  EXPECT_THROW(record_moe_topk(rec, MoeTopkArgs{b, b, b, 1, 128, 8, 128, g}), Error);
  g.n_group = 128;  // > 64
  g.topk_group = 1;
  EXPECT_THROW(record_moe_topk(rec, MoeTopkArgs{b, b, b, 1, 128, 8, 128, g}), Error);
  rec.discard();
}

// Checks every structural property of a MoE table: group_of_pair[q] is the
// weight group pair q must be routed to (-1: kMoeNoSlot). Also checks that the
// tiles are minimal (each group's padding < one tile).
void check_table(const std::vector<uint32_t>& words, const MoeTableLayout& L, const std::vector<int32_t>& group_of_pair) {
  const uint32_t pairs = L.n_tokens * L.k, used = words[L.count_off];
  ASSERT_LE(used, L.max_tiles);
  auto tile_group = [&](uint32_t i) { return int32_t(words[L.tile_expert_off + i]); };
  auto slot_token = [&](uint32_t s) { return int32_t(words[L.slot_token_off + s]); };
  auto slot_pair = [&](uint32_t s) { return int32_t(words[L.slot_pair_off + s]); };
  for (uint32_t i = 0; i < L.max_tiles; ++i) {
    if (i < used) {
      ASSERT_GE(tile_group(i), 0) << "tile " << i;
    } else {
      ASSERT_EQ(tile_group(i), -1) << "unused tile " << i;
    }
  }
  for (uint32_t s = used * kMoeTileRows; s < L.max_slots(); ++s) {
    ASSERT_EQ(slot_token(s), -1) << "unused slot " << s;
    ASSERT_EQ(slot_pair(s), -1) << "unused slot " << s;
  }
  std::vector<int> claims(L.max_slots(), 0);
  std::map<int32_t, uint32_t> pairs_of_group;
  for (uint32_t q = 0; q < pairs; ++q) {
    const uint32_t s = words[L.pair_slot_off + q];
    if (group_of_pair[q] < 0) {
      ASSERT_EQ(s, kMoeNoSlot) << "pair " << q;
      continue;
    }
    ++pairs_of_group[group_of_pair[q]];
    ASSERT_LT(s, used * kMoeTileRows) << "pair " << q;
    ASSERT_EQ(claims[s]++, 0) << "slot " << s << " claimed twice";
    ASSERT_EQ(slot_token(s), int32_t(q / L.k)) << "pair " << q << " slot " << s;
    ASSERT_EQ(slot_pair(s), int32_t(q)) << "pair " << q << " slot " << s;
    ASSERT_EQ(tile_group(s / kMoeTileRows), group_of_pair[q]) << "pair " << q << " slot " << s;
  }
  for (uint32_t s = 0; s < used * kMoeTileRows; ++s)
    if (slot_token(s) != -1 || slot_pair(s) != -1) {
      ASSERT_EQ(claims[s], 1) << "slot " << s << " has a token or pair but no pair names it";
    }
  std::map<int32_t, uint32_t> tiles_of_group;
  for (uint32_t i = 0; i < used; ++i) ++tiles_of_group[tile_group(i)];
  uint32_t want_used = 0;
  for (auto [g, n] : pairs_of_group) {
    ASSERT_EQ(tiles_of_group[g], (n + kMoeTileRows - 1) / kMoeTileRows) << "group " << g;
    want_used += (n + kMoeTileRows - 1) / kMoeTileRows;
  }
  ASSERT_EQ(used, want_used);
}

// Per group: the sorted slot tokens (padding included) over its tiles.
std::map<int32_t, std::vector<int32_t>> slot_tokens_by_group(const std::vector<uint32_t>& words, const MoeTableLayout& L) {
  std::map<int32_t, std::vector<int32_t>> m;
  for (uint32_t s = 0; s < words[L.count_off] * kMoeTileRows; ++s)
    m[int32_t(words[L.tile_expert_off + s / kMoeTileRows])].push_back(int32_t(words[L.slot_token_off + s]));
  for (auto& [g, v] : m) std::sort(v.begin(), v.end());
  return m;
}

std::vector<uint32_t> run_group(Env& e, const std::vector<int32_t>& ids, const MoeTableLayout& L, uint32_t n_expert) {
  Buffer bi = e.buf(ids), bt = e.buf(std::vector<uint32_t>(L.words, 0xdeadbeefu));
  Recorder rec(*e.ctx);
  rec.begin();
  record_moe_group(rec, MoeGroupArgs{bi, bt, L, n_expert});
  rec.submit().wait();
  return e.read<uint32_t>(bt, L.words);
}

TEST(ShaderMoe, GroupTableIsValidAndMatchesHostBuilder) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  struct Case { uint32_t n_tokens, k, n_expert; bool skew; };
  for (const Case& c : {Case{1, 1, 8, false}, Case{7, 2, 64, false}, Case{100, 8, 128, true}, Case{512, 8, 128, false},
                        Case{512, 8, 1024, false}, Case{300, 8, 256, true}, Case{64, 8, 8, false}, Case{33, 1, 1000, true}}) {
    SCOPED_TRACE("n_tokens " + std::to_string(c.n_tokens) + " k " + std::to_string(c.k) + " n_expert " +
                 std::to_string(c.n_expert));
    const auto ids = e.random_ids(c.n_tokens, c.k, c.n_expert, c.skew);
    const MoeTableLayout L = MoeTableLayout::make(c.n_tokens, c.k, c.n_expert);
    const auto gpu = run_group(e, ids, L, c.n_expert);
    check_table(gpu, L, ids);
    std::vector<int32_t> identity(c.n_expert);
    std::iota(identity.begin(), identity.end(), 0);
    std::vector<uint32_t> host(L.words);
    build_moe_table(ids.data(), L, identity.data(), c.n_expert, host.data());
    check_table(host, L, ids);
    // Equivalent up to the slot order within an expert.
    ASSERT_EQ(gpu[L.count_off], host[L.count_off]);
    for (uint32_t i = 0; i < L.max_tiles; ++i) ASSERT_EQ(gpu[L.tile_expert_off + i], host[L.tile_expert_off + i]) << i;
    ASSERT_EQ(slot_tokens_by_group(gpu, L), slot_tokens_by_group(host, L));
  }
}

TEST(ShaderMoe, HostTableSkipsUnmappedExpertsAndKeepsTokenOrder) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t n_tokens = 200, k = 8, n_expert = 128, n_slots = 40;
  const auto ids = e.random_ids(n_tokens, k, n_expert, true);
  // Experts 0, 3, 6, ... are not on this pass; the others go to a shuffled
  // subset of the cache slots.
  std::vector<int32_t> slot_perm(n_slots), group_of_expert(n_expert, -1);
  std::iota(slot_perm.begin(), slot_perm.end(), 0);
  std::shuffle(slot_perm.begin(), slot_perm.end(), e.rng);
  for (uint32_t x = 0, next = 0; x < n_expert && next < n_slots; ++x)
    if (x % 3 != 0) group_of_expert[x] = slot_perm[next++];
  std::vector<int32_t> group_of_pair(ids.size());
  for (size_t q = 0; q < ids.size(); ++q) group_of_pair[q] = group_of_expert[ids[q]];
  const MoeTableLayout L = MoeTableLayout::make(n_tokens, k, n_slots);
  std::vector<uint32_t> w(L.words, 0xdeadbeefu);
  build_moe_table(ids.data(), L, group_of_expert.data(), n_expert, w.data());
  check_table(w, L, group_of_pair);
  for (uint32_t q = 0; q < ids.size(); ++q)
    if (ids[q] % 3 == 0) {
      ASSERT_EQ(w[L.pair_slot_off + q], kMoeNoSlot) << q;
    }
  // Deterministic: tiles by ascending group, each group's slots in token order.
  for (uint32_t s = 1; s < w[L.count_off] * kMoeTileRows; ++s) {
    const int32_t g0 = int32_t(w[L.tile_expert_off + (s - 1) / kMoeTileRows]), g1 = int32_t(w[L.tile_expert_off + s / kMoeTileRows]);
    const int32_t t0 = int32_t(w[L.slot_token_off + s - 1]), t1 = int32_t(w[L.slot_token_off + s]);
    ASSERT_LE(g0, g1) << s;
    if (g0 == g1 && t1 >= 0) {
      ASSERT_TRUE(t0 >= 0 && t0 <= t1) << "slot " << s;
    }
  }
  // Too few tiles for the groups used, and out-of-range ids, are errors.
  const std::vector<int32_t> four = {0, 1, 2, 3};
  const MoeTableLayout small = MoeTableLayout::make(2, 2, 1);
  std::vector<uint32_t> ws(small.words);
  EXPECT_THROW(build_moe_table(four.data(), small, four.data(), 4, ws.data()), Error);
  const std::vector<int32_t> bad = {0, 4};
  EXPECT_THROW(build_moe_table(bad.data(), MoeTableLayout::make(1, 2, 4), four.data(), 4, ws.data()), Error);
}

// A combine problem: a host MoE table of random routing in which the pairs
// of every fifth expert are skipped, pair rows y (stride y_stride), weights w.
struct CombineCase {
  static constexpr uint32_t n_tokens = 37, k = 8, n_expert = 64, n = 300, x_stride = n + 4, y_stride = n + 8;
  MoeTableLayout L = MoeTableLayout::make(n_tokens, k, n_expert);
  std::vector<uint32_t> table = std::vector<uint32_t>(L.words);
  std::vector<float> y, w;
  explicit CombineCase(Env& e) {
    const auto ids = e.random_ids(n_tokens, k, n_expert, false);
    std::vector<int32_t> group_of_expert(n_expert);
    for (uint32_t x = 0; x < n_expert; ++x) group_of_expert[x] = x % 5 == 0 ? -1 : int32_t(x);
    build_moe_table(ids.data(), L, group_of_expert.data(), n_expert, table.data());
    y = e.randn(size_t(L.pairs()) * y_stride);
    w = e.randn(n_tokens * k);
  }
  // x plus the weighted pair rows of each token on this pass, j ascending.
  std::vector<float> combined(const std::vector<float>& x) const {
    std::vector<float> want = x;
    for (uint32_t t = 0; t < n_tokens; ++t)
      for (uint32_t j = 0; j < k; ++j) {
        const uint32_t q = t * k + j;
        if (table[L.pair_slot_off + q] == kMoeNoSlot) continue;
        for (uint32_t i = 0; i < n; ++i) want[t * x_stride + i] += w[q] * y[q * y_stride + i];
      }
    return want;
  }
};

TEST(ShaderMoe, CombineAddsWeightedPairRowsInOrder) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const CombineCase c(e);
  const MoeTableLayout& L = c.L;
  const uint32_t n_tokens = c.n_tokens, n = c.n, x_stride = c.x_stride, y_stride = c.y_stride;
  const auto x = e.randn(n_tokens * x_stride);
  const std::vector<float> want = c.combined(x);
  Buffer by = e.buf(c.y), bw = e.buf(c.w), bt = e.buf(c.table);
  std::vector<float> first;
  for (int run = 0; run < 2; ++run) {
    Buffer bx = e.buf(x);
    Recorder rec(*e.ctx);
    rec.begin();
    record_moe_combine(rec, MoeCombineArgs{by, bw, bt, bx, L, n, y_stride, x_stride});
    rec.submit().wait();
    const auto got = e.read<float>(bx, x.size());
    for (size_t i = 0; i < got.size(); ++i)  // columns n..x_stride stay untouched (exact)
      ASSERT_NEAR(got[i], want[i], 1e-5 * (1 + std::fabs(want[i]))) << "token " << i / x_stride << " col " << i % x_stride;
    if (run == 0) {
      first = got;
    } else {
      ASSERT_EQ(0, std::memcmp(first.data(), got.data(), got.size() * 4)) << "combine is not deterministic";
    }
  }
}

// The ubatch combine that also writes the next layer's attention norm: x as
// the plain combine, xn = rms_norm(x) * w and its f16 copy at x's offset and
// stride; a row that went non-finite lowers the flag to the check value.
TEST(ShaderMoe, CombineWithNormWritesTheNextNormAndItsF16Copy) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const CombineCase c(e);
  const MoeTableLayout& L = c.L;
  const uint32_t n_tokens = c.n_tokens, n = c.n, x_stride = c.x_stride, y_stride = c.y_stride;
  const auto nw = e.randn(n);
  for (bool poison : {false, true}) {
    auto x = e.randn(n_tokens * x_stride);
    if (poison) x[5 * x_stride + 17] = kNaN;  // token 5's row
    const std::vector<float> want = c.combined(x);
    Buffer by = e.buf(c.y), bw = e.buf(c.w), bt = e.buf(c.table), bx = e.buf(x), bnw = e.buf(nw);
    Buffer bxn = e.buf(std::vector<float>(x.size(), 7.f)), bh = e.buf(std::vector<uint16_t>(x.size(), 0x4700));
    Buffer flag = e.buf(std::vector<uint32_t>{~0u});
    MoeCombineArgs a{by, bw, bt, bx, L, n, y_stride, x_stride};
    a.norm_w = bnw;
    a.xn = bxn;
    a.xh = bh;
    a.flags = flag;
    a.eps = 1e-6f;
    a.check = 9;
    Recorder rec(*e.ctx);
    rec.begin();
    record_moe_combine(rec, a);
    rec.submit().wait();
    EXPECT_EQ(e.read<uint32_t>(flag, 1)[0], poison ? 9u : ~0u);
    if (poison) continue;
    const auto gx = e.read<float>(bx, x.size()), gxn = e.read<float>(bxn, x.size());
    const auto gh = e.read<uint16_t>(bh, x.size());
    std::vector<float> norm(n);
    for (uint32_t t = 0; t < n_tokens; ++t) {
      rms_norm(&want[t * x_stride], nw.data(), norm.data(), n, 1e-6f);
      for (uint32_t i = 0; i < x_stride; ++i) {
        const size_t at = t * x_stride + i;
        ASSERT_NEAR(gx[at], want[at], 1e-5 * (1 + std::fabs(want[at]))) << "x, token " << t << " col " << i;
        if (i >= n) {  // past the row: untouched
          ASSERT_EQ(gxn[at], 7.f) << "token " << t << " col " << i;
          ASSERT_EQ(gh[at], 0x4700) << "token " << t << " col " << i;
          continue;
        }
        ASSERT_NEAR(gxn[at], norm[i], 1e-5 * std::fabs(norm[i]) + 1e-6) << "xn, token " << t << " col " << i;
        ASSERT_NEAR(fp16_to_fp32(gh[at]), gxn[at], std::ldexp(std::fabs(gxn[at]), -11) + 1e-7)
            << "f16 copy, token " << t << " col " << i;
      }
    }
  }
}

// topk -> group on the GPU, expert outputs filled per slot from the GPU
// table, combine: the result must equal the per-token CPU sum whatever the
// slot order the grouping chose.
TEST(ShaderMoe, TopkGroupCombineChainMatchesCpu) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t n_tokens = 150, n_expert = 128, k = 8, n = 64;
  const auto logits = e.randn(n_tokens * n_expert, 2.f), x = e.randn(n_tokens * n);
  const MoeTableLayout L = MoeTableLayout::make(n_tokens, k, n_expert);
  Buffer bl = e.buf(logits), bi = e.buf(std::vector<int32_t>(n_tokens * k)), bw = e.buf(std::vector<float>(n_tokens * k)),
         bt = e.buf(std::vector<uint32_t>(L.words, 0xdeadbeefu));
  Recorder rec(*e.ctx);
  rec.begin();
  record_moe_topk(rec, MoeTopkArgs{bl, bi, bw, n_tokens, n_expert, k, n_expert, RouterParams{Gating::Softmax, true}});
  rec.barrier();
  record_moe_group(rec, MoeGroupArgs{bi, bt, L, n_expert});
  rec.submit().wait();
  const auto ids = e.read<int32_t>(bi, n_tokens * k);
  const auto table = e.read<uint32_t>(bt, L.words);
  check_table(table, L, ids);
  auto expert_out = [](uint32_t t, uint32_t ex, uint32_t i) { return std::sin(0.37f * t + 1.3f * ex + 0.11f * i); };
  // Each slot's output in its pair's row, as the down product writes it.
  std::vector<float> y(size_t(L.pairs()) * n, 0.f);
  for (uint32_t s = 0; s < table[L.count_off] * kMoeTileRows; ++s) {
    const int32_t t = int32_t(table[L.slot_token_off + s]), q = int32_t(table[L.slot_pair_off + s]);
    if (t < 0) continue;
    for (uint32_t i = 0; i < n; ++i) y[q * n + i] = expert_out(t, table[L.tile_expert_off + s / kMoeTileRows], i);
  }
  Buffer by = e.buf(y), bx = e.buf(x);
  rec.begin();
  record_moe_combine(rec, MoeCombineArgs{by, bw, bt, bx, L, n, n, n});
  rec.submit().wait();
  const auto got = e.read<float>(bx, x.size());
  std::vector<int> rid(k);
  std::vector<float> rw(k);
  for (uint32_t t = 0; t < n_tokens; ++t) {
    route_topk(&logits[t * n_expert], nullptr, int(n_expert), int(k), RouterParams{Gating::Softmax, true}, rid.data(),
               rw.data());
    for (uint32_t i = 0; i < n; ++i) {
      double want = x[t * n + i];
      for (uint32_t j = 0; j < k; ++j) want += double(rw[j]) * expert_out(t, rid[j], i);
      ASSERT_NEAR(got[t * n + i], want, 1e-5 * (1 + std::fabs(want))) << "token " << t << " col " << i;
    }
  }
}

}  // namespace
