#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>
#include <stdexcept>

#include "base/error.h"
#include "engine/offload/slru_policy.h"
#include "tests/seed.h"

using namespace vkmoe;
using Seg = SlruPolicy::Segment;

namespace {

// Brute-force restatement of the rules in engine/offload/slru_policy.h: entries carry
// a recency stamp instead of list links, counts are halved eagerly, victims
// are found by sorting.
class ModelSlru {
 public:
  struct Entry {
    ExpertKey key;
    Seg seg = Seg::Probation;
    bool ready = false, pinned = false;
    uint64_t stamp = 0;
  };

  explicit ModelSlru(const SlruConfig& c)
      : cap_(c.slots),
        pcap_(int(c.protected_fraction * c.slots)),
        window_(c.eviction_window),
        period_(c.decay_period ? c.decay_period : 16ull * uint64_t(c.slots)) {}

  std::optional<int> lookup(ExpertKey k) {
    c_.lookups++;
    count_[k.packed()]++;
    if (++since_ == period_) {
      since_ = 0;
      for (auto& [key, n] : count_) n /= 2;
    }
    const int s = find(k);
    if (s < 0 || !slots_[s].ready) {
      c_.misses++;
      return std::nullopt;
    }
    c_.hits++;
    slots_[s].seg = Seg::Protected;
    slots_[s].stamp = ++clock_;
    while (in_segment(Seg::Protected).size() > size_t(pcap_)) {
      const int lru = in_segment(Seg::Protected).front();
      slots_[lru].seg = Seg::Probation;
      slots_[lru].stamp = ++clock_;
    }
    return s;
  }

  SlruPolicy::Acquire acquire(ExpertKey k) {
    SlruPolicy::Acquire r;
    if (int s = find(k); s >= 0) {
      r.slot = s;
      r.hit = true;
      return r;
    }
    int slot = -1;
    for (int s = 0; s < cap_ && slot < 0; ++s)
      if (!slots_.count(s)) slot = s;
    if (slot < 0) {
      slot = victim(Seg::Probation);
      if (slot < 0) slot = victim(Seg::Protected);
      if (slot < 0) return r;
      r.evicted = slots_[slot].key;
      c_.evictions++;
    }
    slots_[slot] = Entry{k, Seg::Probation, false, false, ++clock_};
    c_.fills++;
    r.slot = slot;
    return r;
  }

  void mark_ready(int s) { slots_.at(s).ready = true; }
  void release(int s) {
    slots_.erase(s);
    c_.releases++;
  }
  bool pin(ExpertKey k) {
    const int s = find(k);
    if (s < 0) return false;
    if (slots_[s].pinned) return true;
    int pinned = 0;
    for (auto& [id, e] : slots_) pinned += e.pinned;
    if (pinned + 1 >= cap_) return false;
    slots_[s].pinned = true;
    return true;
  }
  bool unpin(ExpertKey k) {
    const int s = find(k);
    if (s < 0 || !slots_[s].pinned) return false;
    slots_[s].pinned = false;
    return true;
  }

  int find(ExpertKey k) const {
    for (auto& [id, e] : slots_)
      if (e.key == k) return id;
    return -1;
  }
  std::vector<int> in_segment(Seg seg) const {
    std::vector<int> ids;
    for (auto& [id, e] : slots_)
      if (e.seg == seg) ids.push_back(id);
    std::sort(ids.begin(), ids.end(), [&](int a, int b) { return slots_.at(a).stamp < slots_.at(b).stamp; });
    return ids;
  }
  uint32_t count(ExpertKey k) const {
    auto it = count_.find(k.packed());
    return it == count_.end() ? 0 : it->second;
  }
  const std::map<int, Entry>& slots() const { return slots_; }
  const SlruPolicy::Counters& counters() const { return c_; }

 private:
  int victim(Seg seg) const {
    std::vector<int> cands;
    for (int id : in_segment(seg))
      if (!slots_.at(id).pinned && slots_.at(id).ready && int(cands.size()) < window_) cands.push_back(id);
    int best = -1;
    for (int id : cands)
      if (best < 0 || count(slots_.at(id).key) < count(slots_.at(best).key)) best = id;
    return best;
  }

  int cap_, pcap_, window_;
  uint64_t period_, since_ = 0, clock_ = 0;
  std::map<int, Entry> slots_;
  std::map<uint64_t, uint32_t> count_;
  SlruPolicy::Counters c_;
};

std::string describe(const SlruPolicy::Acquire& a) {
  std::string s = "{slot " + std::to_string(a.slot) + (a.hit ? ", hit" : "");
  if (a.evicted) s += ", evicted " + std::to_string(a.evicted->layer) + ":" + std::to_string(a.evicted->expert);
  return s + "}";
}

void expect_same_state(const SlruPolicy& p, const ModelSlru& m, const std::vector<ExpertKey>& keys) {
  ASSERT_EQ(p.check_invariants(), "");
  ASSERT_EQ(p.order(Seg::Probation), m.in_segment(Seg::Probation));
  ASSERT_EQ(p.order(Seg::Protected), m.in_segment(Seg::Protected));
  for (int s = 0; s < p.capacity(); ++s) {
    auto it = m.slots().find(s);
    ASSERT_EQ(p.key_at(s).has_value(), it != m.slots().end()) << "slot " << s;
    if (it == m.slots().end()) continue;
    ASSERT_EQ(*p.key_at(s), it->second.key) << "slot " << s;
    ASSERT_EQ(p.is_ready(s), it->second.ready) << "slot " << s;
    ASSERT_EQ(p.is_pinned(s), it->second.pinned) << "slot " << s;
  }
  for (const ExpertKey& k : keys) ASSERT_EQ(p.frequency(k), m.count(k));
  const auto &a = p.counters(), &b = m.counters();
  ASSERT_EQ(a.lookups, b.lookups);
  ASSERT_EQ(a.hits, b.hits);
  ASSERT_EQ(a.misses, b.misses);
  ASSERT_EQ(a.fills, b.fills);
  ASSERT_EQ(a.evictions, b.evictions);
  ASSERT_EQ(a.releases, b.releases);
}

}  // namespace

TEST(Slru, DifferentialAgainstBruteForceModel) {
  const unsigned seed = unsigned(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  auto uni = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const double fractions[] = {0.0, 0.5, 0.8, 1.0};
  uint64_t evictions = 0, hits = 0, protected_entries = 0;

  for (int round = 0; round < 120; ++round) {
    SlruConfig cfg;
    cfg.slots = uni(1, 20);
    cfg.protected_fraction = uni(0, 4) == 4 ? uni(0, 100) / 100.0 : fractions[uni(0, 3)];
    cfg.eviction_window = uni(1, 6);
    cfg.decay_period = uni(0, 3) == 0 ? 0 : uint64_t(uni(1, 60));
    SCOPED_TRACE("round " + std::to_string(round) + " slots " + std::to_string(cfg.slots) +
                 " fraction " + std::to_string(cfg.protected_fraction) + " window " +
                 std::to_string(cfg.eviction_window) + " decay " + std::to_string(cfg.decay_period));
    SlruPolicy policy(cfg);
    ModelSlru model(cfg);
    std::vector<ExpertKey> keys;
    const int n_expert = 2 * cfg.slots + 3;
    for (int l = 0; l < 2; ++l)
      for (int e = 0; e < n_expert; ++e) keys.push_back({l, e});
    const int hot = cfg.slots / 2 + 1;
    auto pick_key = [&] { return uni(0, 9) < 7 ? keys[size_t(uni(0, hot - 1))] : keys[size_t(uni(0, int(keys.size()) - 1))]; };
    std::vector<int> in_flight;

    for (int step = 0; step < 1500; ++step) {
      SCOPED_TRACE("step " + std::to_string(step));
      const int op = uni(0, 99);
      if (op < 60 || (op < 85 && in_flight.empty())) {
        const ExpertKey k = pick_key();
        const auto got = policy.lookup(k);
        ASSERT_EQ(got, model.lookup(k));
        if (!got && uni(0, 99) < 85) {
          // Evictable before the call: ready and unpinned.
          std::vector<bool> evictable(size_t(cfg.slots), false);
          for (auto& [id, e] : model.slots()) evictable[size_t(id)] = e.ready && !e.pinned;
          const auto a = policy.acquire(k), b = model.acquire(k);
          ASSERT_EQ(describe(a), describe(b));
          if (a.evicted) {
            ASSERT_TRUE(evictable[size_t(a.slot)]) << "evicted a pinned or in-flight slot";
          }
          if (a && !a.hit) in_flight.push_back(a.slot);
          if (a) {
            ASSERT_EQ(policy.slot_of(k), a.slot);
          }
        }
      } else if (op < 80) {
        const size_t i = size_t(uni(0, int(in_flight.size()) - 1));
        policy.mark_ready(in_flight[i]);
        model.mark_ready(in_flight[i]);
        in_flight.erase(in_flight.begin() + long(i));
      } else if (op < 85) {
        const size_t i = size_t(uni(0, int(in_flight.size()) - 1));
        policy.release(in_flight[i]);
        model.release(in_flight[i]);
        in_flight.erase(in_flight.begin() + long(i));
      } else if (op < 93) {
        const ExpertKey k = pick_key();
        ASSERT_EQ(policy.pin(k), model.pin(k));
      } else if (op < 97) {
        const ExpertKey k = pick_key();
        ASSERT_EQ(policy.unpin(k), model.unpin(k));
      } else {
        const ExpertKey k = keys[size_t(uni(0, int(keys.size()) - 1))];
        const auto a = policy.acquire(k), b = model.acquire(k);
        ASSERT_EQ(describe(a), describe(b));
        if (a && !a.hit) in_flight.push_back(a.slot);
      }
      ASSERT_EQ(policy.in_flight_count(), int(in_flight.size()));
      expect_same_state(policy, model, keys);
    }
    evictions += policy.counters().evictions;
    hits += policy.counters().hits;
    protected_entries += policy.order(Seg::Protected).size();
  }
  // The traces did exercise the interesting paths.
  EXPECT_GT(evictions, 1000u);
  EXPECT_GT(hits, 1000u);
  EXPECT_GT(protected_entries, 100u);
}

TEST(Slru, ScanDoesNotEvictHotProtectedSet) {
  const unsigned seed = unsigned(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  SlruPolicy p({16, 0.8, 4, 0});  // protected capacity 12
  EXPECT_EQ(p.protected_capacity(), 12);
  std::vector<ExpertKey> hot;
  for (int i = 0; i < 8; ++i) hot.push_back({3, int(rng() % 1000)});
  std::sort(hot.begin(), hot.end(), [](auto a, auto b) { return a.packed() < b.packed(); });
  hot.erase(std::unique(hot.begin(), hot.end()), hot.end());
  for (int round = 0; round < 4; ++round)
    for (const auto& k : hot)
      if (!p.lookup(k)) {
        const auto a = p.acquire(k);
        ASSERT_TRUE(a);
        p.mark_ready(a.slot);
      }
  for (const auto& k : hot) EXPECT_EQ(p.segment(*p.slot_of(k)), Seg::Protected);

  // 2000 one-time keys from another layer, each looked up, filled and used once.
  const int base = int(rng() % 100000);
  for (int i = 0; i < 2000; ++i) {
    const ExpertKey k{7, base + i};
    if (p.lookup(k)) continue;
    const auto a = p.acquire(k);
    ASSERT_TRUE(a);
    if (a.evicted) {
      ASSERT_EQ(a.evicted->layer, 7) << "a hot key was evicted by the scan";
    }
    p.mark_ready(a.slot);
  }
  for (const auto& k : hot) EXPECT_TRUE(p.lookup(k).has_value()) << k.expert;
  EXPECT_EQ(p.check_invariants(), "");
}

TEST(Slru, EvictionPrefersLowFrequencyWithinWindow) {
  SlruPolicy p({4, 0.0, 4, 1000});  // no protected segment: pure probation order
  auto fill = [&](ExpertKey k) {
    EXPECT_FALSE(p.lookup(k));
    const auto a = p.acquire(k);
    EXPECT_TRUE(a);
    p.mark_ready(a.slot);
    return a;
  };
  const ExpertKey a{0, 1}, b{0, 2}, c{0, 3}, d{0, 4}, e{0, 5};
  fill(a);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(p.lookup(a));  // count 4, then b, c, d follow it
  fill(b);
  fill(c);
  fill(d);
  EXPECT_EQ(p.order(Seg::Probation).front(), *p.slot_of(a));  // a is the LRU entry
  const auto r = fill(e);
  ASSERT_TRUE(r.evicted);
  EXPECT_EQ(*r.evicted, b);  // lowest count; among equal counts the least recent
  EXPECT_TRUE(p.contains(a));

  // Window 1 degenerates to plain LRU.
  SlruPolicy lru({2, 0.0, 1, 1000});
  for (ExpertKey k : {a, a, a, b}) {
    if (!lru.lookup(k)) lru.mark_ready(lru.acquire(k).slot);
  }
  EXPECT_EQ(*lru.acquire(c).evicted, a);
}

TEST(Slru, PinsAndInFlightSlotsAreNeverEvicted) {
  SlruPolicy p({3, 0.8, 4, 0});
  const ExpertKey k0{1, 0}, k1{1, 1}, k2{1, 2}, k3{1, 3};
  EXPECT_FALSE(p.pin(k0));  // not resident
  const auto a0 = p.acquire(k0);
  const auto a1 = p.acquire(k1);
  EXPECT_TRUE(p.pin(k0));   // an in-flight key may be pinned
  EXPECT_TRUE(p.pin(k0));   // idempotent
  EXPECT_TRUE(p.pin(k1));
  const auto a2 = p.acquire(k2);
  EXPECT_FALSE(p.pin(k2));  // would leave no unpinned slot
  EXPECT_EQ(p.pinned_count(), 2);
  // k2 is in flight, k0/k1 pinned: nothing is evictable.
  EXPECT_FALSE(p.acquire(k3));
  EXPECT_FALSE(p.lookup(k2));  // in flight reads as a miss
  EXPECT_TRUE(p.acquire(k2).hit);
  p.mark_ready(a0.slot);
  p.mark_ready(a1.slot);
  EXPECT_FALSE(p.acquire(k3));
  p.mark_ready(a2.slot);
  const auto a3 = p.acquire(k3);
  ASSERT_TRUE(a3);
  EXPECT_EQ(*a3.evicted, k2);
  EXPECT_TRUE(p.unpin(k0));
  EXPECT_FALSE(p.unpin(k0));
  p.release(a3.slot);  // abandoned fill frees the slot
  EXPECT_FALSE(p.contains(k3));
  EXPECT_EQ(p.acquire(k3).slot, a3.slot);
  EXPECT_THROW(p.mark_ready(a0.slot), std::logic_error);  // already ready
  EXPECT_THROW(p.release(7), std::logic_error);
  EXPECT_EQ(p.check_invariants(), "");
  const auto& c = p.counters();
  EXPECT_EQ(c.fills, 5u);
  EXPECT_EQ(c.evictions, 1u);
  EXPECT_EQ(c.releases, 1u);
  EXPECT_EQ(c.hits + c.misses, c.lookups);

  EXPECT_THROW(SlruPolicy({0}), Error);
  EXPECT_THROW(SlruPolicy({4, 1.5}), Error);
  SlruPolicy one({1});
  EXPECT_FALSE(one.pin(ExpertKey{}));
  one.acquire(ExpertKey{});
  EXPECT_FALSE(one.pin(ExpertKey{}));  // the only slot cannot be pinned
}

TEST(Slru, FrequenciesDecay) {
  SlruPolicy p({2, 0.5, 2, 4});
  const ExpertKey k{0, 9};
  for (int i = 0; i < 3; ++i) p.lookup(k);
  EXPECT_EQ(p.frequency(k), 3u);
  p.lookup(k);  // 4th lookup: count 4, then halved
  EXPECT_EQ(p.frequency(k), 2u);
  for (int i = 0; i < 8; ++i) p.lookup(ExpertKey{1, i});
  EXPECT_EQ(p.frequency(k), 0u);  // halved twice more
}

TEST(Slru, FrequencyAdmissionKeepsPopularKeys) {
  SlruPolicy p({2, 0.5, 4, 1000});
  using A = SlruPolicy::Admission;
  const ExpertKey hot{0, 1}, warm{0, 2}, once{0, 3}, rising{0, 4};
  auto use = [&](ExpertKey k, int n) {
    for (int i = 0; i < n; ++i)
      if (!p.lookup(k)) {
        const auto a = p.acquire(k, A::IfMoreFrequent);
        if (a) p.mark_ready(a.slot);
      }
  };
  use(hot, 3);   // free slots are always taken
  use(warm, 2);
  EXPECT_TRUE(p.contains(hot) && p.contains(warm));
  // A key seen once does not displace keys seen more often.
  EXPECT_FALSE(p.lookup(once));
  const auto r = p.acquire(once, A::IfMoreFrequent);
  EXPECT_FALSE(r);
  EXPECT_TRUE(r.rejected);
  EXPECT_FALSE(r.evicted);
  EXPECT_FALSE(p.contains(once));
  EXPECT_EQ(p.counters().rejections, 1u);
  // Once its count passes the victim's, it is admitted. The victim is the
  // probationary entry: hot (count 3), demoted when warm's hit took the one
  // protected place.
  EXPECT_EQ(p.segment(*p.slot_of(hot)), SlruPolicy::Segment::Probation);
  use(rising, 3);  // counts 1, 2, 3: not above 3
  EXPECT_FALSE(p.contains(rising));
  EXPECT_EQ(p.counters().rejections, 4u);
  use(rising, 1);  // count 4
  EXPECT_TRUE(p.contains(rising));
  EXPECT_FALSE(p.contains(hot));
  EXPECT_TRUE(p.contains(warm));
  // Admission::Always still evicts.
  EXPECT_FALSE(p.lookup(once));
  const auto forced = p.acquire(once);
  ASSERT_TRUE(forced);
  EXPECT_TRUE(forced.evicted);
  EXPECT_EQ(p.check_invariants(), "");
}
