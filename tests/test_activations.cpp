// Sizes of the forward pass's device buffers (engine/forward/activations.cpp).
#include <gtest/gtest.h>

#include "engine/forward/activations.h"

using namespace vkmoe;

namespace {

ModelConfig qwen3_30b_a3b() {
  ModelConfig c;
  c.n_layer = 48;
  c.n_embd = 2048;
  c.n_head = 32;
  c.n_head_kv = 4;
  c.head_dim = 128;
  c.n_vocab = 151936;
  c.n_expert = 128;
  c.n_expert_used = 8;
  c.n_ff_exp = 768;
  return c;
}

}  // namespace

// With every layer's gate and up products in one product, the up rows serve
// only decode: k rows instead of a ubatch's slots.
TEST(Activations, GateUpInOneKeepsOnlyTheDecodeUpRows) {
  ActivationShape s = ActivationShape::of(qwen3_30b_a3b(), 512, 4096);
  const uint64_t full = activation_bytes(s);
  s.gate_up_in_one = true;
  const uint64_t saved = full - activation_bytes(s);
  EXPECT_EQ(saved, uint64_t(s.table.max_slots() - s.k) * s.ff_exp * 4);
  EXPECT_GT(saved, uint64_t(30) << 20);  // 12288 slots x 768 floats: 36 MiB
  // Decode alone (one token) has no slot rows to drop.
  ActivationShape d = ActivationShape::of(qwen3_30b_a3b(), 1, 4096);
  const uint64_t decode = activation_bytes(d);
  d.gate_up_in_one = true;
  EXPECT_EQ(activation_bytes(d), decode);
}
