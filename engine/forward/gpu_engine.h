#pragma once
// The Vulkan engine: owns the device, the weights in VRAM, the activations
// and the expert cache, and runs the layer program under one of two
// schedules: resident (everything in one command buffer per ubatch or
// token) and offload (per layer, the host routes between the GPU's attention
// and its experts; misses run on the CPU or are streamed into VRAM).
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "cpu/expert_ffn.h"
#include "engine/forward/activations.h"
#include "engine/forward/cpu_forward.h"
#include "engine/forward/engine_select.h"
#include "engine/forward/decode_clocks.h"
#include "engine/forward/gpu_ops.h"
#include "engine/forward/gpu_weights.h"
#include "engine/forward/layer_program.h"
#include "engine/offload/expert_cache.h"
#include "engine/offload/host_experts.h"
#include "engine/offload/prefill_split.h"
#include "engine/offload/route_stats.h"
#include "engine/vulkan/vk_runtime.h"
#include "planner/planner.h"

namespace vkmoe {

class ThreadPool;

// Throws a one-line Error naming the first matrix whose type has no GPU
// kernels, or whose kernels need a feature device `d` lacks (see
// vk::gpu_weight_type_missing_feature).
void check_gpu_weight_types(const Model& m, const vk::DeviceInfo& d);

class GpuEngine final : public Engine {
 public:
  GpuEngine(const Model& m, const EngineOptions& o);
  ~GpuEngine() override;
  void reset() override;
  void truncate(int n_keep) override;
  int n_past() const override { return pos_; }
  int n_ctx() const override { return n_ctx_; }
  std::string describe() const override;
  std::string stats_report() const override;
  uint64_t vram_bytes() const override;
  std::string moe_mode() const override { return plan_mode_name(c_.is_moe() ? plan_.mode : PlanMode::Resident); }

 protected:
  std::span<const float> forward(const std::vector<int32_t>& tokens) override;
  bool logits_finite(std::span<const float> logits) const override;
  uint32_t first_non_finite() const override { return act_->first_non_finite(); }

 private:
  // Schedules (gpu_engine.cpp: resident; gpu_offload.cpp: offload).
  void decode_resident(int32_t token);
  // logits: whether this ubatch's last token gives the logits (the prompt's last ubatch).
  void prefill_resident(const int32_t* tokens, uint32_t n, bool logits);
  void record_resident(vk::Recorder*& r, uint32_t pos0, uint32_t n, bool submit_early, bool logits = true);
  void create_pipelines_ahead();
  void decode_offload(int32_t token);
  void prefill_offload(const int32_t* tokens, uint32_t n, bool logits);
  // The rows layer il of a prompt ubatch computes past its attention: all but
  // in the last layer, there the last one (logits) or none (VKMOE_LAST_LAYER_ROWS=0: all).
  LayerProgram::Keep keep_rows(int il, bool logits) const;
  void record_offload_a(vk::Recorder& r, int il);
  void record_offload_b(vk::Recorder& r, int il);
  void record_offload_end(vk::Recorder& r, uint32_t n);
  void route_offload(int il, std::vector<vk::SyncPoint>& waits, std::vector<ExpertView>& cold,
                     std::vector<float>& cold_w, std::vector<int>& cold_ids);
  void cache_maintenance(int il, bool predict);
  // Whether layer il's pass predicts the routing of layer il + 1 (both MoE).
  bool predicts(int il) const {
    return opt_.predict_prefetch && il + 1 < c_.n_layer && m_.layers()[il].spec.moe && m_.layers()[il + 1].spec.moe;
  }
  ExpertView expert_view(int il, int e) const;
  // Layer il's expert-selection bias (exp_probs_b) for host-side routing; null when none.
  const float* probs_bias(int il) const { return host_biases_[il].probs.data(); }
  void calibrate_cpu_experts();

  // VRAM with fallbacks (gpu_vram.cpp): when expert buffers do not fit, fewer
  // slots, then cpu-moe, with one warning line; the trunk must fit.
  void allocate_trunk(uint64_t kv_bytes, const ActivationShape& shape);
  // The pool whose threads copy a load's weights (null: one thread).
  ThreadPool* load_pool() const;
  void allocate_resident_experts(PlanInput in);
  void allocate_expert_cache();
  void allocate_staging();
  void fit_offload_plan();
  void vram_shortfall(const vk::OutOfDeviceMemory& e, const char* what, uint64_t planned_bytes);
  void warn_vram_fallback(int planned_staging) const;

  // The token rows of n tokens for the GPU: for a prompt ubatch whose table
  // type has a get_rows kernel, the raw rows (in_rows_); else decoded here (in_x_).
  void embed(const int32_t* tokens, uint32_t n);
  bool rows_on_gpu(uint32_t n) const { return n > 1 && in_rows_.size() > 0; }
  // Records their move into the hidden state x: get_rows, or a copy.
  void record_embed(vk::Recorder& r, uint32_t n) const;
  vk::Recorder& next_recorder();
  void drop_prepared();
  void mark(vk::Recorder& r, const char* label);
  void begin_profile(vk::Recorder& r);
  void collect_profile(bool prompt, uint32_t n_tokens);
  std::span<const float> read_logits() const;
  void record_logits_readback(vk::Recorder& r) const;

  const Model& m_;
  const ModelConfig& c_;
  EngineOptions opt_;
  int n_ctx_;
  uint32_t n_ubatch_;
  vk::KvType kv_type_;
  int pos_ = 0;
  std::unique_ptr<vk::Context> ctx_;
  Plan plan_;
  GpuModel w_;
  std::unique_ptr<Activations> act_;
  std::unique_ptr<GpuOps> ops_;
  std::unique_ptr<LayerProgram> prog_;
  // Host-visible buffers: token embeddings in, logits / routing out, and the
  // offload schedule's host-written inputs.
  vk::Buffer in_x_, in_rows_, readback_;
  uint64_t rb_logits_ = 0, rb_rlog_ = 0, rb_xn_ = 0, rb_plog_ = 0;
  std::vector<std::unique_ptr<vk::Recorder>> recorders_;
  size_t rec_cur_ = 0;
  vk::Recorder* prepared_ = nullptr;  // the next decode token's commands, recorded ahead
  int prepared_pos_ = -1;

  // Offload state.
  bool offload_ = false;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<ExpertCache> cache_;
  vk::Buffer host_ids_, host_wts_[2], host_table_[2][2], cpu_out_;  // [parity][cache|staging]
  // Per-expert biases in offload modes: the expert of each decode item
  // (host_ids_ holds slots) and of each group of a prefill table.
  vk::Buffer host_eids_, host_group_expert_[2][2];  // [parity][cache|staging]
  // Each layer's biases the host reads in offload modes: exp_probs_b for
  // routing, the expert bias tables [gate|up|down] for the CPU's ExpertViews.
  struct HostBiases {
    HostFloats probs;
    HostFloats experts[3];
  };
  std::vector<HostBiases> host_biases_;
  const float* expert_bias(int il, int which, int e) const;
  std::vector<std::vector<int>> prev_route_, predicted_;
  std::vector<std::pair<int, int>> pending_admit_;
  // Prompt processing in offload modes: staging slots (two halves used by
  // alternate layers) filled from pinned host copies of the experts.
  std::unique_ptr<HostExperts> host_experts_;
  struct Staging {
    vk::Buffer gate, up, down;
  } staging_[2];
  int staging_slots_ = 0;
  uint64_t slice_max_[3] = {1, 1, 1};  // the largest gate / up / down slice of one expert
  std::string vram_shortfall_;         // the first expert allocation that failed, for the warning
  std::unique_ptr<vk::Recorder> staging_copies_;  // transfer-queue copies into staging slots
  SplitCosts split_costs_;
  struct PrefillStats {
    uint64_t ubatches = 0, layer_passes = 0, cached = 0, uploaded = 0, on_cpu = 0, bytes_uploaded = 0;
    double cpu_seconds = 0;
  } prefill_stats_;
  RouteStats stats_;

  // GPU time per step of the resident decode and prompt ubatches (env VKMOE_PROFILE=1).
  struct StepTimes {
    std::vector<std::pair<std::string, double>> ns;  // summed per label, in first-seen order
    uint64_t passes = 0, tokens = 0;
  };
  std::unique_ptr<vk::TimestampPool> prof_;
  bool prof_each_ = false;  // VKMOE_PROFILE=2: each prompt ubatch's GPU and host time
  std::vector<const char*> prof_labels_;
  StepTimes prof_decode_, prof_prompt_;
  bool profiling_ = false;  // the command buffer being recorded takes timestamps
  std::unique_ptr<DecodeClocks> clocks_;  // VKMOE_FUSED_CLOCKS=1
  uint32_t chained_waits_ = 0;  // the last recorded token's dispatches chained (LayerProgram::FusedDecode)
};

}  // namespace vkmoe
