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
struct TopkPush { uint32_t n_expert, k, logit_stride, normalize; };

// The documented top-k of one row: NaN read as -inf, ids as route_topk, and
// p = exp(l - max), exactly 1 where l == max (finite weights for -inf/+inf rows).
void reference_topk(const float* row, uint32_t n_expert, uint32_t k, bool normalize, int* ids, float* w) {
  std::vector<float> l(row, row + n_expert);
  bool finite = true;
  for (float& x : l) {
    if (std::isnan(x)) x = -kInf;
    finite = finite && std::isfinite(x);
  }
  route_topk(l.data(), int(n_expert), int(k), normalize, ids, w);
  if (finite) return;
  const float mx = *std::max_element(l.begin(), l.end());
  auto p = [&](float x) { return x == mx ? 1.0 : std::exp(double(x) - mx); };
  double sum = 0, sel = 0;
  for (float x : l) sum += p(x);
  for (uint32_t j = 0; j < k; ++j) sel += p(l[ids[j]]);
  for (uint32_t j = 0; j < k; ++j) w[j] = float(p(l[ids[j]]) / (normalize ? sel : sum));
}

TEST(ShaderMoe, TopkBatchMatchesRouteTopk) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const bool sg = e.ctx->info().subgroup_arithmetic;
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

        std::vector<int> want_ids(n_tokens * k);
        std::vector<float> want_w(n_tokens * k);
        for (uint32_t t = 0; t < n_tokens; ++t)
          reference_topk(&l[t * stride], n_expert, k, norm != 0, &want_ids[t * k], &want_w[t * k]);

        // variant: "" = record_moe_topk, else the named shader at workgroup wg.
        struct Variant { const char* shader; uint32_t wg; };
        std::vector<Variant> variants = {{"", 0}, {"moe_topk_batch", 64}, {"moe_topk_batch", 256}};
        if (sg) variants.push_back({"moe_topk_batch_sg", 256});
        for (const Variant& v : variants) {
          SCOPED_TRACE(std::string("variant ") + (*v.shader ? v.shader : "record_moe_topk") + " wg " +
                       std::to_string(v.wg) + " n_expert " + std::to_string(n_expert) + " k " + std::to_string(k) +
                       " normalize " + std::to_string(norm));
          Buffer bl = e.buf(l), bi = e.buf(std::vector<int32_t>(n_tokens * k, -7)),
                 bw = e.buf(std::vector<float>(n_tokens * k, kNaN));
          Recorder rec(*e.ctx);
          rec.begin();
          if (!*v.shader) {
            record_moe_topk(rec, MoeTopkArgs{bl, bi, bw, n_tokens, n_expert, k, stride, norm != 0});
          } else {
            const Pipeline& p = e.ctx->pipeline(v.shader, 3, sizeof(TopkPush), {v.wg});
            rec.dispatch(p, {bl, bi, bw}, TopkPush{n_expert, k, stride, norm}, n_tokens);
          }
          rec.submit().wait();
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

TEST(ShaderMoe, TopkRejectsUnsupportedShapes) {
  Env e;
  Buffer b = e.buf(std::vector<float>(4096));
  Recorder rec(*e.ctx);
  rec.begin();
  EXPECT_THROW(record_moe_topk(rec, MoeTopkArgs{b, b, b, 1, 8, 9, 8, false}), Error);      // k > n_expert
  EXPECT_THROW(record_moe_topk(rec, MoeTopkArgs{b, b, b, 1, 2048, 8, 2048, false}), Error);  // n_expert > 1024
  EXPECT_THROW(record_moe_topk(rec, MoeTopkArgs{b, b, b, 1, 128, 65, 128, false}), Error);   // k > 64
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
  for (uint32_t i = 0; i < L.max_tiles; ++i) {
    if (i < used) {
      ASSERT_GE(tile_group(i), 0) << "tile " << i;
    } else {
      ASSERT_EQ(tile_group(i), -1) << "unused tile " << i;
    }
  }
  for (uint32_t s = used * kMoeTileRows; s < L.max_slots(); ++s) ASSERT_EQ(slot_token(s), -1) << "unused slot " << s;
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
    ASSERT_EQ(tile_group(s / kMoeTileRows), group_of_pair[q]) << "pair " << q << " slot " << s;
  }
  for (uint32_t s = 0; s < used * kMoeTileRows; ++s)
    if (slot_token(s) != -1) {
      ASSERT_EQ(claims[s], 1) << "slot " << s << " has a token but no pair";
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

TEST(ShaderMoe, CombineAddsWeightedSlotRowsInOrder) {
  Env e;
  SCOPED_TRACE("seed " + std::to_string(e.seed));
  const uint32_t n_tokens = 37, k = 8, n_expert = 64, n = 300, x_stride = n + 4, y_stride = n + 8;
  const auto ids = e.random_ids(n_tokens, k, n_expert, false);
  std::vector<int32_t> group_of_expert(n_expert);
  for (uint32_t x = 0; x < n_expert; ++x) group_of_expert[x] = x % 5 == 0 ? -1 : int32_t(x);  // some pairs skipped
  const MoeTableLayout L = MoeTableLayout::make(n_tokens, k, n_expert);
  std::vector<uint32_t> table(L.words);
  build_moe_table(ids.data(), L, group_of_expert.data(), n_expert, table.data());
  const auto y = e.randn(size_t(L.max_slots()) * y_stride), w = e.randn(n_tokens * k), x = e.randn(n_tokens * x_stride);
  std::vector<float> want = x;
  for (uint32_t t = 0; t < n_tokens; ++t)
    for (uint32_t j = 0; j < k; ++j) {
      const uint32_t s = table[L.pair_slot_off + t * k + j];
      if (s == kMoeNoSlot) continue;
      for (uint32_t i = 0; i < n; ++i) want[t * x_stride + i] += w[t * k + j] * y[s * y_stride + i];
    }
  Buffer by = e.buf(y), bw = e.buf(w), bt = e.buf(table);
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
  record_moe_topk(rec, MoeTopkArgs{bl, bi, bw, n_tokens, n_expert, k, n_expert, true});
  rec.barrier();
  record_moe_group(rec, MoeGroupArgs{bi, bt, L, n_expert});
  rec.submit().wait();
  const auto ids = e.read<int32_t>(bi, n_tokens * k);
  const auto table = e.read<uint32_t>(bt, L.words);
  check_table(table, L, ids);
  auto expert_out = [](uint32_t t, uint32_t ex, uint32_t i) { return std::sin(0.37f * t + 1.3f * ex + 0.11f * i); };
  std::vector<float> y(size_t(L.max_slots()) * n, 0.f);
  for (uint32_t s = 0; s < table[L.count_off] * kMoeTileRows; ++s) {
    const int32_t t = int32_t(table[L.slot_token_off + s]);
    if (t < 0) continue;
    for (uint32_t i = 0; i < n; ++i) y[s * n + i] = expert_out(t, table[L.tile_expert_off + s / kMoeTileRows], i);
  }
  Buffer by = e.buf(y), bx = e.buf(x);
  rec.begin();
  record_moe_combine(rec, MoeCombineArgs{by, bw, bt, bx, L, n, n, n});
  rec.submit().wait();
  const auto got = e.read<float>(bx, x.size());
  std::vector<int> rid(k);
  std::vector<float> rw(k);
  for (uint32_t t = 0; t < n_tokens; ++t) {
    route_topk(&logits[t * n_expert], int(n_expert), int(k), true, rid.data(), rw.data());
    for (uint32_t i = 0; i < n; ++i) {
      double want = x[t * n + i];
      for (uint32_t j = 0; j < k; ++j) want += double(rw[j]) * expert_out(t, rid[j], i);
      ASSERT_NEAR(got[t * n + i], want, 1e-5 * (1 + std::fabs(want))) << "token " << t << " col " << i;
    }
  }
}

}  // namespace
