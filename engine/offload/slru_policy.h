#pragma once
// Slot-assignment policy of the VRAM expert cache: a frequency-aware
// segmented LRU over a fixed pool of slots. Pure bookkeeping, no Vulkan.
//
// One instance manages one pool of `slots` slots (ids 0..slots-1). Keys are
// (layer, expert). The engine uses one instance per MoE layer, sized by
// Plan::expert_slots_per_layer, so a slot id indexes that layer's slot
// buffer; a single global instance over all layers works the same way.
//
// Rules:
//  * Segments: new entries enter the probationary segment (MRU end). A hit
//    on a probationary entry moves it to the protected MRU end; a hit on a
//    protected entry moves it to the protected MRU end. While the protected
//    segment holds more than floor(protected_fraction * slots) entries its
//    LRU entry is demoted to the probationary MRU end.
//  * Frequencies: every lookup (hit or miss) adds 1 to the key's access
//    count; every `decay_period` lookups all counts are halved (integer).
//    Counts are kept for keys that are not resident as well.
//  * Eviction (acquire of an absent key with no free slot): take the first
//    `eviction_window` evictable entries from the probationary LRU end and
//    evict the one with the lowest count (ties: the least recent). If the
//    probationary segment has no evictable entry, the protected segment is
//    searched the same way. Pinned and in-flight entries are never evicted.
//  * Admission (acquire with Admission::IfMoreFrequent): when a slot would
//    have to be evicted, the key is admitted only if its count exceeds the
//    victim's (TinyLFU); otherwise nothing changes and `rejected` is set.
//    Rarely used experts then stop evicting popular ones, so the pool holds
//    the most used experts instead of cycling through every miss.
//  * Free slots are handed out lowest id first.
//  * In flight: acquire() of an absent key returns a slot that is being
//    filled; lookup() misses on it until mark_ready(slot). release(slot)
//    abandons the fill (the key is dropped, the slot becomes free).
//  * Pinning: pin() needs a resident key and fails (false) if afterwards
//    no slot would be left unpinned.
// Not thread-safe.
#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

namespace vkmoe {

struct ExpertKey {
  int layer = 0;
  int expert = 0;
  bool operator==(const ExpertKey&) const = default;
  uint64_t packed() const { return (uint64_t(uint32_t(layer)) << 32) | uint32_t(expert); }
};

struct SlruConfig {
  int slots = 0;
  double protected_fraction = 0.8;
  int eviction_window = 4;    // candidates compared by frequency
  uint64_t decay_period = 0;  // lookups between halvings; 0 -> 16 * slots
};

class SlruPolicy {
 public:
  enum class Segment { Free, Probation, Protected };

  enum class Admission { Always, IfMoreFrequent };

  struct Acquire {
    int slot = -1;    // -1: rejected by admission, or every slot is pinned or in flight
    bool rejected = false;  // Admission::IfMoreFrequent kept the victim
    bool hit = false; // the key was already resident (ready or in flight); nothing changed
    std::optional<ExpertKey> evicted;  // key whose slot was taken
    explicit operator bool() const { return slot >= 0; }
  };

  struct Counters {
    uint64_t lookups = 0;
    uint64_t hits = 0;       // lookups that found a ready entry
    uint64_t misses = 0;     // lookups of absent or in-flight keys
    uint64_t fills = 0;      // acquires that assigned a slot to an absent key
    uint64_t evictions = 0;
    uint64_t releases = 0;   // abandoned fills
    uint64_t rejections = 0; // acquires refused by admission
  };

  explicit SlruPolicy(const SlruConfig& cfg);  // throws Error on slots < 1 or bad fractions

  // A hit (ready entry) returns its slot and touches it. Counts an access.
  std::optional<int> lookup(ExpertKey k);
  // Reserves a slot for filling k (call after a missing lookup).
  Acquire acquire(ExpertKey k, Admission admission = Admission::Always);
  void mark_ready(int slot);  // the fill finished; std::logic_error unless in flight
  void release(int slot);     // the fill was abandoned; std::logic_error unless in flight

  bool pin(ExpertKey k);
  bool unpin(ExpertKey k);  // false if k was not pinned

  bool contains(ExpertKey k) const;  // resident, ready or in flight
  std::optional<int> slot_of(ExpertKey k) const;
  std::optional<ExpertKey> key_at(int slot) const;
  Segment segment(int slot) const;
  bool is_ready(int slot) const;
  bool is_pinned(int slot) const;
  uint32_t frequency(ExpertKey k) const;  // decayed access count
  // Slots of a segment from LRU to MRU.
  std::vector<int> order(Segment s) const;

  int capacity() const { return int(slots_.size()); }
  int size() const { return int(map_.size()); }
  int protected_capacity() const { return protected_cap_; }
  int pinned_count() const { return pinned_; }
  int in_flight_count() const { return in_flight_; }
  const Counters& counters() const { return counters_; }

  // Empty when every internal invariant holds, else a description.
  std::string check_invariants() const;

 private:
  struct Slot {
    ExpertKey key;
    Segment seg = Segment::Free;
    bool ready = false;
    bool pinned = false;
    int prev = -1, next = -1;  // within the segment list
  };
  struct List {
    int head = -1, tail = -1, size = 0;  // head = LRU, tail = MRU
  };
  struct Freq {
    uint32_t count = 0;
    uint64_t epoch = 0;
  };

  List& list_of(Segment s) { return s == Segment::Protected ? protected_ : probation_; }
  void unlink(int slot);
  void push_mru(int slot, Segment s);
  void touch(int slot);
  int pick_victim(Segment s) const;
  void count_access(ExpertKey k);
  uint32_t decayed(const Freq& f) const;
  const Slot& in_flight_slot(int slot, const char* what) const;

  std::vector<Slot> slots_;
  List probation_, protected_;
  std::unordered_map<uint64_t, int> map_;  // packed key -> slot
  std::set<int> free_;
  std::unordered_map<uint64_t, Freq> freq_;
  uint64_t epoch_ = 0, since_decay_ = 0, decay_period_ = 0;
  int protected_cap_ = 0, window_ = 1, pinned_ = 0, in_flight_ = 0;
  Counters counters_;
};

}  // namespace vkmoe
