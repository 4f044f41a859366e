#include "engine/offload/host_experts.h"

#include <chrono>
#include <cstdio>
#include <cstring>

#include "base/progress.h"
#include "cpu/thread_pool.h"

namespace vkmoe {

HostExperts::HostExperts(vk::Context& ctx, const Model& m, ThreadPool* pool) : m_(m) {
  uint64_t total = 0;
  for (const LayerWeights& w : m.layers())
    if (w.gate_exps) total += w.gate_exps.t->nbytes + w.up_exps.t->nbytes + w.down_exps.t->nbytes;
  ProgressLine progress("copying experts to pinned host memory", total, 1ull << 30);
  layers_.resize(m.layers().size());
  for (size_t il = 0; il < layers_.size(); ++il) {
    const LayerWeights& w = m.layers()[il];
    if (!w.gate_exps) continue;
    const std::string p = "blk." + std::to_string(il) + ".";
    for (auto [src, dst, name] : {std::tuple{&w.gate_exps, &layers_[il].gate, "ffn_gate_exps (host)"},
                                  {&w.up_exps, &layers_[il].up, "ffn_up_exps (host)"},
                                  {&w.down_exps, &layers_[il].down, "ffn_down_exps (host)"}}) {
      *dst = ctx.create_buffer(src->t->nbytes, vk::MemoryKind::Readback, p + name);
      parallel_memcpy(pool, dst->data(), src->t->data, src->t->nbytes);
      progress.advance(src->t->nbytes);
    }
  }
  progress.finish();
}

void HostExperts::record_copy(vk::Recorder& r, int il, int e, const vk::Buffer& gate_pool, const vk::Buffer& up_pool,
                              const vk::Buffer& down_pool, int slot) const {
  const LayerWeights& w = m_.layers()[il];
  const Layer& h = layers_[il];
  for (auto [wt, src, dst] : {std::tuple{&w.gate_exps, &h.gate, &gate_pool}, {&w.up_exps, &h.up, &up_pool},
                              {&w.down_exps, &h.down, &down_pool}}) {
    const uint64_t b = wt->expert_bytes();
    r.copy(*src, b * e, *dst, b * slot, b);
  }
}

double measure_upload_rate(vk::Context& ctx) {
  const uint64_t bytes = 32ull << 20;
  vk::Buffer src = ctx.create_buffer(bytes, vk::MemoryKind::Readback, "upload rate probe (host)");
  vk::Buffer dst = ctx.create_buffer(bytes, vk::MemoryKind::Device, "upload rate probe");
  std::memset(src.data(), 1, bytes);
  vk::Recorder r(ctx, &ctx.transfer_queue());
  double best = 0;
  for (int i = 0; i < 3; ++i) {
    r.begin();
    r.copy(src, 0, dst, 0, bytes);
    const auto t0 = std::chrono::steady_clock::now();
    r.submit().wait();
    const double s = seconds_since(t0);
    best = std::max(best, bytes / std::max(s, 1e-9));
  }
  return best;
}

}  // namespace vkmoe
