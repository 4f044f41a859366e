#version 450
#extension GL_EXT_control_flow_attributes : require
// Read-bandwidth probe: each workgroup streams a contiguous chunk of
// WG * UNROLL uvec4s (coalesced, UNROLL loads in flight per lane) and folds
// them with XOR. The result is stored only when it equals p.sentinel, which
// keeps the loads alive while writing (almost) nothing.
layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint UNROLL = 8;

layout(set = 0, binding = 0) readonly buffer Src { uvec4 src[]; };
layout(set = 0, binding = 1) writeonly buffer Dst { uint dst[]; };
layout(push_constant) uniform Push { uint n_vec4, sentinel; } p;

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x;
  const uint base = wg * WG * UNROLL + gl_LocalInvocationID.x;
  uvec4 v[UNROLL];
  [[unroll]] for (uint i = 0; i < UNROLL; ++i) {
    const uint idx = base + i * WG;
    v[i] = idx < p.n_vec4 ? src[idx] : uvec4(0);
  }
  uvec4 acc = uvec4(0);
  [[unroll]] for (uint i = 0; i < UNROLL; ++i) acc ^= v[i];
  const uint r = acc.x ^ acc.y ^ acc.z ^ acc.w;
  if (r == p.sentinel) dst[gl_LocalInvocationID.x] = r;
}
