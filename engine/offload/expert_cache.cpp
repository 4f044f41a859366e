#include "engine/offload/expert_cache.h"

#include <algorithm>

#include "engine/offload/host_experts.h"

namespace vkmoe {

ExpertCache::ExpertCache(vk::Context& ctx, const Model& m, int slots, bool fill_on_miss, RouteStats& stats)
    : m_(m), slots_(std::max(slots, 0)), fill_on_miss_(fill_on_miss), stats_(stats), ctx_(ctx) {
  const int L = m.config().n_layer;
  pools_.resize(L);
  policy_.resize(L);
  slot_ready_.assign(L, std::vector<vk::SyncPoint>(slots_));
  if (slots_ == 0) return;
  for (int il = 0; il < L; ++il) {
    const LayerWeights& w = m.layers()[il];
    if (!w.gate_exps) continue;  // a dense layer of a MoE model
    const std::string p = "blk." + std::to_string(il) + ".";
    pools_[il].gate = ctx.create_buffer(w.gate_exps.expert_bytes() * slots_, vk::MemoryKind::Device, p + "gate expert slots");
    pools_[il].up = ctx.create_buffer(w.up_exps.expert_bytes() * slots_, vk::MemoryKind::Device, p + "up expert slots");
    pools_[il].down = ctx.create_buffer(w.down_exps.expert_bytes() * slots_, vk::MemoryKind::Device, p + "down expert slots");
    SlruConfig sc;
    sc.slots = slots_;
    policy_[il] = std::make_unique<SlruPolicy>(sc);
  }
  thread_ = std::thread([this] { upload_loop(); });
}

ExpertCache::~ExpertCache() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }
}

std::optional<int> ExpertCache::lookup(int il, int expert, std::vector<vk::SyncPoint>& waits) {
  SlruPolicy* p = policy_[il].get();
  if (!p) return std::nullopt;
  std::optional<int> slot = p->lookup({il, expert});
  if (slot && !slot_ready_[il][*slot].reached()) waits.push_back(slot_ready_[il][*slot]);
  return slot;
}

void ExpertCache::admit(int il, int expert) {
  SlruPolicy* p = policy_[il].get();
  if (!p || p->contains({il, expert})) return;
  // cpu-moe mode keeps only pinned experts: fill the slots once, then stop.
  if (!fill_on_miss_ && (pinned_ || p->size() >= p->capacity())) return;
  // Decode misses are admitted only when more used than the expert they would
  // evict: with little token-to-token reuse, admitting every miss streams
  // experts over PCIe that are evicted before their next use.
  SlruPolicy::Acquire a = p->acquire({il, expert}, SlruPolicy::Admission::IfMoreFrequent);
  if (!a) return;
  const LayerWeights& lw = m_.layers()[il];
  stats_.record_upload(il, lw.routed_expert_bytes());
  {
    std::lock_guard<std::mutex> lock(mu_);
    jobs_.push_back({il, expert, a.slot});
  }
  cv_.notify_one();
}

std::optional<int> ExpertCache::reserve(int il, int expert) {
  SlruPolicy* p = policy_[il].get();
  if (!p || !fill_on_miss_ || p->contains({il, expert})) return std::nullopt;
  SlruPolicy::Acquire a = p->acquire({il, expert});
  if (!a) return std::nullopt;
  return a.slot;
}

void ExpertCache::filled(int il, int slot, vk::SyncPoint done) {
  slot_ready_[il][slot] = done;
  policy_[il]->mark_ready(slot);
}

void ExpertCache::copy_from(const HostExperts& host) {
  if (slots_ == 0) return;
  std::vector<std::unique_ptr<vk::Recorder>> copiers;
  for (int i = 0; i < 4; ++i) copiers.push_back(std::make_unique<vk::Recorder>(ctx_, &ctx_.transfer_queue()));
  std::lock_guard<std::mutex> lock(mu_);
  copiers_ = std::move(copiers);
  host_ = &host;
}

vk::SyncPoint ExpertCache::upload(const Job& j) {
  const LayerWeights& lw = m_.layers()[j.layer];
  const Pools& p = pools_[j.layer];
  if (host_) {
    vk::Recorder& r = *copiers_[next_copier_++ % copiers_.size()];
    r.begin();  // waits for the copies it recorded last
    host_->record_copy(r, j.layer, j.expert, p.gate, p.up, p.down, j.slot);
    return r.submit();
  }
  // Without a host copy (-ub 1 keeps none) experts go through staging memory,
  // allocated at the first such fill.
  if (!uploader_) uploader_ = std::make_unique<vk::Uploader>(ctx_, 64ull << 20, 4);
  for (auto [w, dst] : {std::pair{&lw.gate_exps, &p.gate}, {&lw.up_exps, &p.up}, {&lw.down_exps, &p.down}})
    uploader_->enqueue(*dst, w->expert_bytes() * j.slot, w->expert(j.expert), w->expert_bytes());
  return uploader_->flush();
}

void ExpertCache::upload_loop() {
  for (;;) {
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !jobs_.empty(); });
      if (stop_) return;
      job = jobs_.front();
      jobs_.pop_front();
    }
    try {
      vk::SyncPoint done = upload(job);
      std::lock_guard<std::mutex> lock(mu_);
      done_.push_back({job, done});
    } catch (...) {  // e.g. a lost device: drain() rethrows it on the engine's thread
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
      return;
    }
  }
}

void ExpertCache::drain() {
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
  for (auto& [job, done] : done_) filled(job.layer, job.slot, done);
  done_.clear();
}

void ExpertCache::pin_hot(int pin_per_layer) {
  drain();
  for (auto& pp : policy_) {
    SlruPolicy* p = pp.get();
    if (!p) continue;
    std::vector<ExpertKey> resident;
    for (int slot = 0; slot < p->capacity(); ++slot)
      if (auto k = p->key_at(slot)) resident.push_back(*k);
    std::stable_sort(resident.begin(), resident.end(),
                     [&](ExpertKey a, ExpertKey b) { return p->frequency(a) > p->frequency(b); });
    for (int i = 0; i < int(resident.size()) && p->pinned_count() < pin_per_layer; ++i) p->pin(resident[i]);
  }
  pinned_ = true;
}

}  // namespace vkmoe
