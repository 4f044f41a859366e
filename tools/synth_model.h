#pragma once
// Synthetic GGUF models: valid files of any supported architecture and size
// with random weights, for tests, benchmarks and the built-in default model.
#include <cstdint>
#include <string>
#include <vector>

#include "cpu/quant.h"

namespace vkmoe {

struct SynthSpec {
  std::string arch = "qwen3moe";  // llama (dense, or Mixtral with n_expert > 0), qwen3, qwen3moe, olmoe, qwen2moe, glm4moe, gpt-oss, deepseek2
  int n_layer = 2;
  int n_embd = 256;
  int n_head = 4;
  int n_head_kv = 2;
  int head_dim = 64;
  int n_ff = 512;        // dense FFN width
  int n_expert = 8;      // ignored for qwen3; 0 makes llama dense
  int n_expert_used = 2;
  int n_ff_exp = 256;
  int n_ff_shexp = 512;  // shared expert width (qwen2moe; glm4moe: a multiple of n_ff_exp)
  int n_rot = 0;         // rotated dimensions per head (0: all)
  int n_layer_dense_lead = 0;  // glm4moe: leading dense layers
  bool qk_norm = false;  // glm4moe: per-head q/k norms
  float expert_weights_scale = 1.f;  // glm4moe: routed scaling factor
  int n_swa = 128;       // gpt-oss: sliding window of the sliding layers
  // deepseek2's latent attention (0: 2 x head_dim, head_dim, head_dim; n_rot 0: head_dim / 2):
  int q_lora = 0, kv_lora = 0, head_k_mla = 0, head_v_mla = 0;
  bool sigmoid_router = false;  // deepseek2: sigmoid scores with a selection bias, renormalized (V3)
  int n_group = 1, topk_group = 1;  // deepseek2: group-limited top-k
  // > 0: each router row scaled by exp(N(0, router_skew^2)), skewing expert
  // popularity as in trained MoEs (0: every expert equally likely).
  float router_skew = 0;
  // Scales the random weights of the matrices that write the residual stream
  // (attention output, FFN down projections). Below 1 each layer changes the
  // stream less, as in trained models: routing stays tied to the token rather
  // than collapsing onto the few experts of a depth-grown common direction, and
  // the next layer's routes become predictable from this layer's state.
  float branch_scale = 1;
  float yarn_log_mul = 0;  // deepseek2: rope.scaling.yarn_log_multiplier (0.1 * mscale_all_dim)
  float yarn_factor = 0;  // > 0: YaRN context extension by this factor from n_ctx_orig
  int n_ctx_orig = 4096;
  int n_vocab = 1024;
  int n_ctx = 4096;
  float rope_theta = 1e6f;
  // llama.cpp-style mixes Q4_K_M, Q5_K_M, Q3_K_M, Q2_K, IQ4_XS, MXFP4 (MXFP4_MOE),
  // or one type for all matrices: F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q5_0, Q5_1,
  // Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL.
  std::string quant = "Q4_K_M";
  std::string vec_type = "F32";  // norm weights and biases: F32, F16, BF16 or Q8_0 (all legal GGUF)
  bool tied_output = false;
  bool fast = false;     // big models: tensors tiled from a pool of pre-quantized random blocks
  uint64_t seed = 1;
  static SynthSpec qwen3_30b_a3b();  // Qwen3-30B-A3B shapes
  // A real model's shapes by name (qwen3-30b-a3b, glm-4.5-air, gpt-oss-20b,
  // gpt-oss-120b, deepseek-v2-lite, deepseek-v3); throws Error listing them.
  static SynthSpec preset(const std::string& name);
};

// Parses "key=value,key=value" overrides (keys as the field names above).
void apply_synth_overrides(SynthSpec& s, const std::string& overrides);
std::string describe(const SynthSpec& s);

// Builds the whole file in memory (small models) / streams it to disk.
std::vector<uint8_t> synth_model_bytes(const SynthSpec& s);
void write_synth_model(const SynthSpec& s, const std::string& path);
// Metadata and tensor shapes only (GgufFile::shapes_from_memory), for any size.
std::vector<uint8_t> synth_model_header(const SynthSpec& s);

// The ggml type the preset gives tensor `name` (a row length of n0).
GgmlType synth_tensor_type(const SynthSpec& s, const std::string& name, int64_t n0, int layer);

}  // namespace vkmoe
