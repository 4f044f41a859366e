#include "engine/forward/activations.h"

#include <algorithm>

#include "engine/vulkan/gemm_paths.h"
#include "engine/vulkan/vk_attention.h"

namespace vkmoe {

ActivationShape ActivationShape::of(const ModelConfig& c, uint32_t n_ubatch, uint32_t n_ctx) {
  ActivationShape s;
  s.n_ubatch = std::max(1u, n_ubatch);
  s.n_ctx = n_ctx;
  s.embd = c.n_embd;
  s.q = c.q_dim();
  s.kv = c.kv_dim();
  s.v = c.v_dim();
  if (c.is_mla()) {
    s.q_lora = c.mla.q_lora;
    s.q_heads = c.n_head * c.mla.head_k;
    s.attn_out = c.attn_out_dim();
  }
  s.head_dim = c.head_dim;
  s.n_head = c.n_head;
  s.ff = std::max({c.n_ff, c.n_ff_shexp, 1});
  s.ff_exp = std::max(c.n_ff_exp, 1);
  s.k = std::max(c.n_expert_used, 1);
  s.n_expert = std::max(c.n_expert, 1);
  s.vocab = c.n_vocab;
  s.table = MoeTableLayout::make(s.n_ubatch, s.k, s.n_expert);
  return s;
}

// Decode uses k rows (one per selected expert); a ubatch's gate/up rows are the table's slots.
uint32_t ActivationShape::expert_rows() const { return std::max(k, n_ubatch > 1 ? table.max_slots() : 0u); }

// The router's largest split, or two planes of the attention projections' outputs
// (k and v split up to eight times, the output projection in two).
uint64_t ActivationShape::split_k_half_bytes() const {
  const uint64_t bytes =
      std::max(vk::gemm_split_k_bytes(n_expert, n_ubatch), uint64_t(2) * std::max(embd, kv) * n_ubatch * 4);
  return (bytes + 255) / 256 * 256;
}

namespace {

// The GEMM scratch: the widest product's converted rows (a ubatch's dense
// products, or the expert slots' gate/up/down inputs).
uint64_t gemm_scratch_bytes(const ActivationShape& s) {
  if (!s.gemm_converts_x) return 0;
  const uint32_t dense = std::max({s.embd, s.q, s.ff, s.ff_exp, s.q_lora, s.attn_out});
  return std::max(vk::gemm_scratch_bytes(dense, s.n_ubatch),
                  vk::gemm_scratch_bytes(std::max(s.embd, s.ff_exp), s.expert_rows()));
}

template <class F>
void for_each_buffer(const ActivationShape& s, F&& f) {
  const uint64_t T = s.n_ubatch, R = s.expert_rows();
  f(T * s.embd, "hidden state");
  f(T * s.embd, "normed state");
  f(T > 1 ? T * s.embd / 2 : 0, "normed state (f16)");
  f(T * s.q, "queries");
  f(T * s.kv, "keys");
  f(T * s.v, "values");
  f(T * s.q, "attention output");
  f(vk::attention_scratch_bytes(s.n_head, s.head_dim, s.n_ctx) / 4, "attention split-K scratch");
  f(T * s.q_lora, "q bottleneck");
  f(T * s.q_heads, "query heads");
  f(T * s.attn_out, "expanded attention output");
  f(T * s.ff, "ffn gate");
  f(T * s.ff, "ffn up");
  f(T * s.embd, "shared expert output");
  f(T, "shared expert gate");
  f(std::max<uint64_t>(2, T) * s.n_expert, "router logits");
  f(T * s.k, "expert ids");
  f(T * s.k, "expert weights");
  f(s.table.words, "expert grouping table");
  f(R * s.ff_exp, "expert gate");
  f((s.gate_up_in_one ? s.k : R) * s.ff_exp, "expert up");
  f(uint64_t(s.table.pairs()) * s.embd, "expert out");  // by routing pair (decode: k rows)
  f(s.vocab, "logits");
  f((gemm_scratch_bytes(s) + 3) / 4, "GEMM activation scratch");
  f(s.split_k_half_bytes() / 2, "GEMM split-K partials");
  f(Activations::kDispatchCounters, "fused-dispatch counters");
}

uint64_t padded(uint64_t floats) { return (std::max<uint64_t>(floats, 4) * 4 + 255) / 256 * 256; }

}  // namespace

uint64_t activation_bytes(const ActivationShape& s) {
  uint64_t total = 0;
  for_each_buffer(s, [&](uint64_t floats, const char*) { total += padded(floats); });
  return total;
}

Activations::Activations(vk::Context& ctx, const ActivationShape& s) : shape(s) {
  vk::Buffer* order[] = {&x, &xn, &xh, &q, &k, &v, &att, &attn_scratch, &qa, &qh, &ao, &g, &u, &so, &gate1, &rlog,
                         &ids, &wts, &table, &eg, &eu, &eo, &logits, &gemm_scratch, &gemm_split, &counters};
  size_t i = 0;
  for_each_buffer(s, [&](uint64_t floats, const char* what) {
    *order[i++] = ctx.create_buffer(padded(floats), vk::MemoryKind::Device, what);
  });
  non_finite = ctx.create_buffer(16, vk::MemoryKind::Readback, "non-finite flags");
  clear_non_finite();
  clear_logits_flag();
  // Rows no pass has written yet (skipped experts, padding slots) must stay finite.
  vk::Recorder r(ctx);
  r.begin();
  for (const vk::Buffer* b : {&eg, &eu, &eo, &counters}) r.fill(*b, 0, b->size(), 0);
  r.submit().wait();
}

uint32_t Activations::first_non_finite() const {
  const uint32_t site = *reinterpret_cast<const volatile uint32_t*>(non_finite.data());
  return site == kNoNonFinite ? 0 : site;
}

void Activations::clear_non_finite() { *reinterpret_cast<volatile uint32_t*>(non_finite.data()) = kNoNonFinite; }

bool Activations::logits_non_finite() const {
  return reinterpret_cast<const volatile uint32_t*>(non_finite.data())[kLogitsFlagWord] != 0;
}

void Activations::clear_logits_flag() { reinterpret_cast<volatile uint32_t*>(non_finite.data())[kLogitsFlagWord] = 0; }

}  // namespace vkmoe
