#pragma once
// What one transformer layer computes, as its architecture's file declares
// it (engine/model/arch/). The loader, synth, the CPU reference and the GPU
// layer program all follow the spec: none of them branches on the
// architecture's name or on which tensors a file happens to hold.
#include <cstdint>

namespace vkmoe {

// RMS norm of q and k after projection: per head (qwen3) or over the whole
// projection (olmoe).
enum class QkNorm : uint8_t { None, PerHead, Whole };

// A shared expert beside the routed ones: Gated scales its output by
// sigmoid(w . x) (qwen2moe); Plain adds it as is (glm4moe, deepseek2).
enum class SharedExpert : uint8_t { None, Gated, Plain };

// The gated activation of the FFNs: silu(g) * u, or gpt-oss's clamped variant
// (g clamped above at 7, u to [-7, 7]; g * sigmoid(1.702 g) * (u + 1)).
enum class FfnAct : uint8_t { SiLU, OaiSwiGLU };

struct LayerSpec {
  // attention: grouped-query, or multi-head latent (deepseek2; ModelConfig::mla)
  bool mla = false;
  bool qkv_bias = false;
  bool o_bias = false;      // attn_output.bias
  bool sinks = false;       // a learned per-head logit in every softmax (gpt-oss), its mass dropped
  uint32_t window = 0;      // sliding window: keys at positions p - window < j <= p (0: all)
  QkNorm qk_norm = QkNorm::None;
  // feed-forward: routed experts, else a dense SwiGLU FFN
  bool moe = false;
  bool probs_bias = false;  // exp_probs_b: a per-expert bias on the selection scores
  bool router_bias = false;  // ffn_gate_inp.bias, added to the router logits
  bool expert_bias = false;  // per-expert biases of the gate, up and down projections (gpt-oss)
  FfnAct act = FfnAct::SiLU;
  SharedExpert shared = SharedExpert::None;
  const char* ffn_norm = "ffn_norm";  // the FFN pre-norm's tensor name (glm4moe: post_attention_norm)
};

}  // namespace vkmoe
