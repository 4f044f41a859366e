// Bindings and push constants of the batched attention prologue kernels
// (attn_rope_store.comp, attn_rope_store_sg.comp; RopeStorePush in
// engine/vulkan/vk_attention.cpp). KV_F16 / KV_Q8: caches of packed uints; else f32.
layout(std430, binding = 0) buffer Q { float q[]; };
layout(std430, binding = 1) readonly buffer K { float k[]; };
layout(std430, binding = 2) readonly buffer V { float v[]; };
layout(std430, binding = 3) readonly buffer QW { float qw[]; };
layout(std430, binding = 4) readonly buffer KW { float kw[]; };
#if KV_F16 || KV_Q8
layout(std430, binding = 5) writeonly buffer KC { uint k_cache[]; };
layout(std430, binding = 6) writeonly buffer VC { uint v_cache[]; };
#else
layout(std430, binding = 5) writeonly buffer KC { float k_cache[]; };
layout(std430, binding = 6) writeonly buffer VC { float v_cache[]; };
#endif
layout(push_constant) uniform P {
  uint q_stride, kv_stride, pos0, head_dim, n_head, n_head_kv, neox, norm;
  float eps;
  uint kv_row, kv_scale_off;  // KV_Q8: uints per cache position, first scale uint of a row
  uint n_rot;                 // rotated dims (even, <= head_dim)
  uint store_v;
  float freq_scale, ext_factor, theta_scale, mscale, corr0, corr1;  // cpu/rope.h RopeParams / RopeConsts
  uint kv_splits, kv_plane;  // k and v as sums of split-K partial planes (1: the rows themselves)
} p;

// k[i] and v[i], from their partial planes when kv_splits > 1.
#include "split_planes.glsl"
SPLIT_PLANES_SUM(float, k_at, k, p.kv_splits, p.kv_plane)
SPLIT_PLANES_SUM(float, v_at, v, p.kv_splits, p.kv_plane)
