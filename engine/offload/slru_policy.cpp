#include "engine/offload/slru_policy.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <stdexcept>

#include "base/error.h"

namespace vkmoe {

namespace {
constexpr uint32_t kMaxCount = 1u << 30;
}

SlruPolicy::SlruPolicy(const SlruConfig& cfg) {
  if (cfg.slots < 1) throw Error("expert cache needs at least 1 slot, got " + std::to_string(cfg.slots));
  if (!(cfg.protected_fraction >= 0.0 && cfg.protected_fraction <= 1.0))
    throw Error("protected fraction must be within [0, 1]");
  if (cfg.eviction_window < 1) throw Error("eviction window must be at least 1");
  slots_.resize(size_t(cfg.slots));
  for (int i = 0; i < cfg.slots; ++i) free_.insert(i);
  protected_cap_ = int(std::floor(cfg.protected_fraction * cfg.slots));
  window_ = cfg.eviction_window;
  decay_period_ = cfg.decay_period ? cfg.decay_period : 16ull * uint64_t(cfg.slots);
}

void SlruPolicy::unlink(int slot) {
  Slot& s = slots_[size_t(slot)];
  List& l = list_of(s.seg);
  (s.prev >= 0 ? slots_[size_t(s.prev)].next : l.head) = s.next;
  (s.next >= 0 ? slots_[size_t(s.next)].prev : l.tail) = s.prev;
  s.prev = s.next = -1;
  l.size--;
}

void SlruPolicy::push_mru(int slot, Segment seg) {
  Slot& s = slots_[size_t(slot)];
  List& l = list_of(seg);
  s.seg = seg;
  s.prev = l.tail;
  s.next = -1;
  (l.tail >= 0 ? slots_[size_t(l.tail)].next : l.head) = slot;
  l.tail = slot;
  l.size++;
}

void SlruPolicy::touch(int slot) {
  unlink(slot);
  push_mru(slot, Segment::Protected);
  while (protected_.size > protected_cap_) {
    const int lru = protected_.head;
    unlink(lru);
    push_mru(lru, Segment::Probation);
  }
}

uint32_t SlruPolicy::decayed(const Freq& f) const {
  const uint64_t age = epoch_ - f.epoch;
  return age >= 32 ? 0 : f.count >> age;
}

void SlruPolicy::count_access(ExpertKey k) {
  Freq& f = freq_[k.packed()];
  f.count = std::min(decayed(f) + 1, kMaxCount);
  f.epoch = epoch_;
  if (++since_decay_ < decay_period_) return;
  since_decay_ = 0;
  ++epoch_;
  // Forget keys whose count reached zero (resident ones read as 0 anyway).
  for (auto it = freq_.begin(); it != freq_.end();)
    it = decayed(it->second) == 0 ? freq_.erase(it) : std::next(it);
}

uint32_t SlruPolicy::frequency(ExpertKey k) const {
  auto it = freq_.find(k.packed());
  return it == freq_.end() ? 0 : decayed(it->second);
}

std::optional<int> SlruPolicy::lookup(ExpertKey k) {
  counters_.lookups++;
  count_access(k);
  auto it = map_.find(k.packed());
  if (it == map_.end() || !slots_[size_t(it->second)].ready) {
    counters_.misses++;
    return std::nullopt;
  }
  counters_.hits++;
  touch(it->second);
  return it->second;
}

int SlruPolicy::pick_victim(Segment seg) const {
  const List& l = seg == Segment::Protected ? protected_ : probation_;
  int best = -1, seen = 0;
  uint32_t best_count = 0;
  for (int s = l.head; s >= 0 && seen < window_; s = slots_[size_t(s)].next) {
    const Slot& e = slots_[size_t(s)];
    if (e.pinned || !e.ready) continue;
    ++seen;
    const uint32_t c = frequency(e.key);
    if (best < 0 || c < best_count) {
      best = s;
      best_count = c;
    }
  }
  return best;
}

SlruPolicy::Acquire SlruPolicy::acquire(ExpertKey k, Admission admission) {
  Acquire r;
  if (auto it = map_.find(k.packed()); it != map_.end()) {
    r.slot = it->second;
    r.hit = true;
    return r;
  }
  int slot;
  if (!free_.empty()) {
    slot = *free_.begin();
    free_.erase(free_.begin());
  } else {
    slot = pick_victim(Segment::Probation);
    if (slot < 0) slot = pick_victim(Segment::Protected);
    if (slot < 0) return r;
    Slot& victim = slots_[size_t(slot)];
    if (admission == Admission::IfMoreFrequent && frequency(k) <= frequency(victim.key)) {
      counters_.rejections++;
      r.rejected = true;
      return r;
    }
    r.evicted = victim.key;
    map_.erase(victim.key.packed());
    unlink(slot);
    counters_.evictions++;
  }
  Slot& s = slots_[size_t(slot)];
  s.key = k;
  s.ready = false;
  s.pinned = false;
  push_mru(slot, Segment::Probation);
  map_[k.packed()] = slot;
  in_flight_++;
  counters_.fills++;
  r.slot = slot;
  return r;
}

const SlruPolicy::Slot& SlruPolicy::in_flight_slot(int slot, const char* what) const {
  if (slot < 0 || slot >= capacity() || slots_[size_t(slot)].seg == Segment::Free ||
      slots_[size_t(slot)].ready)
    throw std::logic_error(std::string("SlruPolicy::") + what + ": slot " + std::to_string(slot) +
                           " is not being filled");
  return slots_[size_t(slot)];
}

void SlruPolicy::mark_ready(int slot) {
  in_flight_slot(slot, "mark_ready");
  slots_[size_t(slot)].ready = true;
  in_flight_--;
}

void SlruPolicy::release(int slot) {
  const Slot& s = in_flight_slot(slot, "release");
  if (s.pinned) pinned_--;
  map_.erase(s.key.packed());
  unlink(slot);
  slots_[size_t(slot)] = Slot{};
  free_.insert(slot);
  in_flight_--;
  counters_.releases++;
}

bool SlruPolicy::pin(ExpertKey k) {
  auto it = map_.find(k.packed());
  if (it == map_.end()) return false;
  Slot& s = slots_[size_t(it->second)];
  if (s.pinned) return true;
  if (pinned_ + 1 >= capacity()) return false;
  s.pinned = true;
  pinned_++;
  return true;
}

bool SlruPolicy::unpin(ExpertKey k) {
  auto it = map_.find(k.packed());
  if (it == map_.end() || !slots_[size_t(it->second)].pinned) return false;
  slots_[size_t(it->second)].pinned = false;
  pinned_--;
  return true;
}

bool SlruPolicy::contains(ExpertKey k) const { return map_.count(k.packed()) != 0; }

std::optional<int> SlruPolicy::slot_of(ExpertKey k) const {
  auto it = map_.find(k.packed());
  if (it == map_.end()) return std::nullopt;
  return it->second;
}

std::optional<ExpertKey> SlruPolicy::key_at(int slot) const {
  if (slot < 0 || slot >= capacity() || slots_[size_t(slot)].seg == Segment::Free) return std::nullopt;
  return slots_[size_t(slot)].key;
}

SlruPolicy::Segment SlruPolicy::segment(int slot) const { return slots_.at(size_t(slot)).seg; }
bool SlruPolicy::is_ready(int slot) const { return slots_.at(size_t(slot)).ready; }
bool SlruPolicy::is_pinned(int slot) const { return slots_.at(size_t(slot)).pinned; }

std::vector<int> SlruPolicy::order(Segment seg) const {
  std::vector<int> out;
  if (seg == Segment::Free) return {free_.begin(), free_.end()};
  const List& l = seg == Segment::Protected ? protected_ : probation_;
  for (int s = l.head; s >= 0; s = slots_[size_t(s)].next) out.push_back(s);
  return out;
}

std::string SlruPolicy::check_invariants() const {
  int n_prob = 0, n_prot = 0, n_pinned = 0, n_flight = 0;
  for (Segment seg : {Segment::Probation, Segment::Protected}) {
    const List& l = seg == Segment::Protected ? protected_ : probation_;
    int count = 0, prev = -1;
    for (int s = l.head; s >= 0; s = slots_[size_t(s)].next) {
      const Slot& e = slots_[size_t(s)];
      if (e.seg != seg) return "slot " + std::to_string(s) + " is linked into the wrong segment";
      if (e.prev != prev) return "broken back link at slot " + std::to_string(s);
      auto it = map_.find(e.key.packed());
      if (it == map_.end() || it->second != s)
        return "slot " + std::to_string(s) + " holds a key the map does not point back to";
      if (++count > capacity()) return "cycle in a segment list";
      prev = s;
    }
    if (prev != l.tail || count != l.size) return "segment size or tail mismatch";
  }
  for (int s = 0; s < capacity(); ++s) {
    const Slot& e = slots_[size_t(s)];
    const bool is_free = free_.count(s) != 0;
    if (is_free != (e.seg == Segment::Free)) return "free set disagrees at slot " + std::to_string(s);
    if (e.seg == Segment::Probation) n_prob++;
    if (e.seg == Segment::Protected) n_prot++;
    if (e.seg != Segment::Free && e.pinned) n_pinned++;
    if (e.seg != Segment::Free && !e.ready) n_flight++;
    if (e.seg == Segment::Protected && !e.ready) return "in-flight slot in the protected segment";
  }
  if (size_t(n_prob + n_prot) != map_.size()) return "map size differs from the resident slots";
  if (n_prob + n_prot + int(free_.size()) != capacity()) return "slots do not add up";
  if (n_prot > protected_cap_) return "protected segment over capacity";
  if (n_pinned != pinned_ || n_flight != in_flight_) return "pinned/in-flight counts drifted";
  if (pinned_ >= capacity()) return "no unpinned slot left";
  const Counters& c = counters_;
  if (c.hits + c.misses != c.lookups) return "hits + misses != lookups";
  if (c.fills != c.evictions + c.releases + map_.size()) return "fills != evictions + releases + resident";
  return {};
}

}  // namespace vkmoe
