#pragma once
// The layer program: what one transformer layer records for a ubatch of n
// tokens at positions pos0.., written once for decode (n = 1: matrix-vector
// kernels) and prompt processing (n > 1: GEMM, expert grouping, flash
// attention). Schedules (resident, offload) compose these blocks.
#include <cstdint>
#include <functional>

#include "engine/forward/activations.h"
#include "engine/forward/decode_clocks.h"
#include "engine/forward/gpu_ops.h"
#include "engine/forward/gpu_weights.h"
#include "engine/model/model.h"
#include "engine/vulkan/vk_attention.h"
#include "engine/vulkan/vk_moe_fused.h"

namespace vkmoe {

// Expert weights a routed-expert pass reads: one stacked buffer per matrix,
// experts (or cache slots) expert_stride bytes apart.
struct ExpertBuffers {
  const vk::Buffer* gate = nullptr;
  const vk::Buffer* up = nullptr;
  const vk::Buffer* down = nullptr;
  uint32_t count = 0;  // experts or slots in the buffers
};

// Whether a prompt runs lw's expert gate and up products as one product with
// their activation (the coopmat path under gemm; not with expert biases;
// VKMOE_EXPERT_GLU=0: never).
bool experts_gate_up_in_one(const vk::Context& ctx, const vk::GemmConfig& gemm, const LayerWeights& lw);

class LayerProgram {
 public:
  using Mark = std::function<void(vk::Recorder&, const char*)>;
  LayerProgram(const Model& m, const GpuModel& g, Activations& a, const GpuOps& ops, vk::KvType kv, Mark mark);

  // Which rows an attention block leaves for the rest of its layer: all n, the
  // last one (moved to row 0; e.g. the last layer of a prompt whose last token
  // gives the logits) or none (its keys and values stored, nothing else).
  enum class Keep { All, Last, None };
  // What the previous layer left for an attention block: x only, xn =
  // attn_norm(x) too, or (one token) its q, k and v rows.
  enum class AttnIn { X, Normed, Qkv };
  // Attention block; leaves x += attention for the rows `keep` names and
  // returns how many rows that is. With ffn_normed, a ubatch's output
  // projection may also write xn = ffn_norm(x) (in its split-K sum) and then
  // sets *ffn_normed. With fused->out_proj the attention output stays in att
  // (f32) for the fused MoE block to project, or, where one token's keys split,
  // in its partials for the block to combine first (fused->att_splits).
  struct FusedDecode;
  uint32_t attention(vk::Recorder& r, int il, uint32_t pos0, uint32_t n, AttnIn in, Keep keep = Keep::All,
                     bool* ffn_normed = nullptr, FusedDecode* fused = nullptr) const;
  // xn = ffn_norm(x), for the FFN blocks that read xn.
  void ffn_norm(vk::Recorder& r, int il, uint32_t n) const;
  // x += dense SwiGLU FFN of ffn_norm(x) (computed here).
  void dense_ffn(vk::Recorder& r, int il, uint32_t n) const;
  // x += sigmoid(gate . xn) * shared expert(xn), when the layer has one (after ffn_norm).
  void shared_expert(vk::Recorder& r, int il, uint32_t n) const;
  // rlog[t] = router . xn[t] (rows of n_expert, starting at row `row0`).
  void router(vk::Recorder& r, int il, uint32_t n, uint32_t row0 = 0) const;
  // Layer il's router logits of the rows x (e.g. a prediction from another layer's state).
  // sums_later: a split product leaves its sum there (no router bias).
  void router_of(vk::Recorder& r, int il, Rows x, uint32_t n, uint32_t row0,
                 std::vector<vk::GemmSplitSum>* sums_later = nullptr) const;
  // Resident MoE (ffn norm, router, top-k, experts, combine, shared expert;
  // one token without a router bias folds the norm into the router). With
  // next_norm and no shared expert, the combine also writes xn = rmsnorm(x) *
  // next_norm (for a ubatch: the attention norm of layer il + 1, with the f16
  // copy that layer's q/k/v take); returns whether it did. ffn_normed: xn
  // already holds ffn_norm(x) (see attention).
  // fused: what a decoded token's fused block takes (fused_decode(il)).
  bool moe_resident(vk::Recorder& r, int il, uint32_t n, const GpuTensor* next_norm, bool ffn_normed = false,
                    const FusedDecode* fused = nullptr) const;
  // A decoded token's resident MoE block in one dispatch of workgroups that
  // wait for each other (vk_moe_fused.h): ffn norm to combine, and with
  // next_norm the next layer's norm. Where it can, the same dispatch also
  // takes the layer's output projection before the block (out_proj) and
  // layer il + 1's q/k/v products after it (next_qkv; that layer's attention
  // then starts from AttnIn::Qkv). VKMOE_MOE_FUSED=0: no block;
  // VKMOE_FUSED_OUT_PROJ=0, VKMOE_FUSED_QKV=0: without those steps.
  struct FusedDecode {
    bool block = false, out_proj = false, next_qkv = false;
    uint32_t grid = 0;  // workgroups (vk::moe_fused_grid)
    // Set by attention(): > 1 where it left its split-K partials in
    // attn_scratch (pairs from float att_ml_off) for the block to combine
    // (VKMOE_FUSED_ATT_SPLITS=0: the attention's split tail combines them).
    uint32_t att_splits = 1, att_ml_off = 0;
    // Chained layers (fused_decode's `chain`): dispatches that wait for the
    // one before by a counter (Activations::kChainReady, kChainDone, zeroed
    // at the token's start) instead of a barrier between them.
    // chain_out (with chain_qkv): the block raises kChainReady to il + 2 once
    // layer il + 1's q/k/v are written, and no barrier follows it.
    // qkv_chained (the caller sets it from the previous layer's chain_out):
    // this layer's q/k/v came so; qkv_waited: its attention waited for them
    // (no barrier before it). chain_att: the attention counts its workgroups
    // done into kChainDone (att_chained: it did, no barrier follows it) and
    // the block waits for att_wgs, the token's chained attention workgroups
    // so far (the caller carries it from layer to layer). poll_loads: the
    // waits poll by loads, else by atomics.
    // chain_split: only where the attention's keys split: with few attention
    // workgroups the next block's launch early and poll through it, which
    // slowed it more than the barrier cost (docs/PERF.md run 41).
    bool chain_qkv = false, chain_att = false, chain_split = true, poll_loads = true;
    bool chain_out = false, qkv_chained = false, qkv_waited = false, att_chained = false;
    uint32_t att_wgs = 0;
    // attention: the block's pipeline can take the layer's one-token
    // attention (vk::MoeFusedAttention); att_pos1 != 0: it does for this
    // token (at position att_pos1 - 1), and attention() records none.
    bool attention = false;
    uint32_t att_pos1 = 0;
  };
  // chain: dispatches may be chained (not while profiling: its timestamps
  // need the barriers), where the attention's keys split. VKMOE_CHAIN_LAYERS=0:
  // never; =1: at any depth; =qkv, =att: at any depth, only the attention's
  // wait for the q/k/v, only the block's for the attention;
  // VKMOE_CHAIN_POLL=atomics: the waits poll by atomics.
  // pos: the decoded token's position; qkv_in: the layer's q/k/v come from
  // the block before (AttnIn::Qkv), as the block's attention needs.
  FusedDecode fused_decode(int il, bool chain = false, uint32_t pos = 0, bool qkv_in = false) const;
  // Whether a token at pos may have its attention in the fused blocks
  // (VKMOE_FUSED_ATTENTION=0: never; VKMOE_FUSED_ATTENTION_MAX: the most
  // positions it reads, default 640), and whether one of this model's does
  // (its layers are then not chained).
  static bool token_folds_attention(uint32_t pos);
  bool folds_attention(uint32_t pos) const;
  // Where set, the fused block's dispatches of clocks->grid() workgroups
  // (vk::MoeFusedDecodeArgs::clocks) and the one-token attention
  // (vk::AttentionArgs::clocks) stamp their steps' edges there.
  void set_clocks(const DecodeClocks* clocks) { clocks_ = clocks; }
  // Decode: the k experts named by `ids` (expert or slot indices; < 0 skipped)
  // into eo rows; the caller combines. expert_ids: the expert of each item
  // when ids are slots (for the per-expert biases; null: ids are experts).
  void experts_decode(vk::Recorder& r, int il, const ExpertBuffers& w, const vk::Buffer& ids,
                      const vk::Buffer* expert_ids = nullptr) const;
  // Decode: x += sum_j wts[j] * eo[j] over the k expert rows.
  void combine_decode(vk::Recorder& r, const vk::Buffer& wts) const;
  // Ubatch: the experts of a MoeTable (tile groups index w) into eo slot rows,
  // then x += weighted combine with weights wts[t][k]. group_expert: int32
  // expert of each group (w.count entries, -1: none) for the per-expert
  // biases; null: groups are experts. next_norm: the combine also writes layer
  // il + 1's attention norm (see moe_resident).
  void experts_grouped(vk::Recorder& r, int il, const ExpertBuffers& w, const vk::Buffer& table,
                       const vk::Buffer& wts, uint32_t n, const vk::Buffer* group_expert = nullptr,
                       const GpuTensor* next_norm = nullptr) const;
  // logits = output(norm(x[last])); normed: xn[0] already holds it.
  void output(vk::Recorder& r, uint32_t last, bool normed) const;

 private:
  // Attention inputs of n tokens from xn: q rows (q_dim) and cache rows k
  // (kv_dim) and v (grouped-query only).
  // f16_rows: from the f16 copy of xn (xh). With leave_kv_sums, k's and v's
  // split-K sums may be left unrecorded and returned (k's, then v's) for the
  // rope/store kernel, which adds the planes itself.
  std::vector<vk::GemmSplitSum> project_gqa(vk::Recorder& r, int il, uint32_t n, bool f16_rows,
                                            bool leave_kv_sums) const;
  void moe_fused_decode(vk::Recorder& r, int il, const GpuTensor* next_norm, const FusedDecode& f) const;
  // The weight types of every layer's fused block, so that all take one
  // pipeline (VKMOE_FUSED_ONE_PIPELINE=0: each its own types'); computed once.
  const std::optional<vk::MoeFusedTypeSets>& fused_type_sets() const;
  void add_fused_types(vk::MoeFusedTypeSets& t, int il, const FusedDecode& f) const;
  mutable std::optional<std::optional<vk::MoeFusedTypeSets>> fused_type_sets_;
  // Whether layer il's q, k and v products of n tokens all take f16 rows.
  bool qkv_take_f16_rows(int il, uint32_t n) const;
  // Latent attention (layer_mla.cpp): q heads [rope part | attn_k_b . no-rope
  // part], k rows [rope key | normalized latent]; then each head's output
  // latent expanded by attn_v_b into ao.
  void project_mla(vk::Recorder& r, int il, uint32_t n) const;
  void expand_mla(vk::Recorder& r, int il, uint32_t n) const;
  void swiglu_ffn(vk::Recorder& r, const GpuTensor& gate, const GpuTensor& up, const GpuTensor& down, uint32_t width,
                  const vk::Buffer& out, uint32_t n, bool acc, FfnAct act) const;
  // The layer's per-expert biases added to eg/eu (gate/up) or eo (down):
  // rows picked by ids[id_off + row / rows_per_id], mapped through map when given;
  // down_row_map: eo's rows (GpuOps::BiasRows::y_row_map), 0: as they are.
  void expert_biases(vk::Recorder& r, int il, bool down, const vk::Buffer& ids, uint32_t id_off,
                     uint32_t rows_per_id, const vk::Buffer* map, uint32_t rows, uint32_t down_row_map = 0) const;
  const Model& m_;
  const ModelConfig& c_;
  const GpuModel& g_;
  Activations& a_;
  const GpuOps& ops_;
  vk::KvType kv_;
  Mark mark_;
  const DecodeClocks* clocks_ = nullptr;
};

}  // namespace vkmoe
