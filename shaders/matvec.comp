#version 450
// y[r] = (accumulate ? y[r] : 0) + W[r] . x   for ggml-layout weight rows.
// Compile-time: WTYPE (weight type, see below), INDEXED (MoE expert variant).
// Specialization: 0 = workgroup size, 1 = TPR lanes per row (power of 2),
// 2 = RPT rows per lane (1..4), 3 = subgroup reductions (1) or shared memory (0).
//
// A row is a sequence of "units": fixed slices of a block that one lane
// decodes at once (e.g. 32 quants of a Q4_K block). The TPR lanes of a row
// group walk the units of RPT consecutive rows together, so each x slice is
// loaded once and reused for RPT rows, then the lanes reduce their sums.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_arithmetic : require
#extension GL_KHR_shader_subgroup_shuffle : require

#define WT_F32 1
#define WT_F16 2
#define WT_BF16 3
#define WT_Q8_0 4
#define WT_Q4_K 5
#define WT_Q5_K 6
#define WT_Q6_K 7

#ifndef INDEXED
#define INDEXED 0
#endif

#if WTYPE == WT_F32
#define QK 8
#define BLOCK_BYTES 32
#define UPB 1
#define NXV 2
#elif WTYPE == WT_F16 || WTYPE == WT_BF16
#define QK 8
#define BLOCK_BYTES 16
#define UPB 1
#define NXV 2
#elif WTYPE == WT_Q8_0
#define QK 32
#define BLOCK_BYTES 34
#define UPB 4
#define NXV 2
#define NEED_W16 1
#elif WTYPE == WT_Q4_K
#define QK 256
#define BLOCK_BYTES 144
#define UPB 8
#define NXV 8
#elif WTYPE == WT_Q5_K
#define QK 256
#define BLOCK_BYTES 176
#define UPB 8
#define NXV 8
#elif WTYPE == WT_Q6_K
#define QK 256
#define BLOCK_BYTES 210
#define UPB 8
#define NXV 8
#define NEED_W16 1
#else
#error "unknown WTYPE"
#endif

#ifdef NEED_W16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TPR = 32;
layout(constant_id = 2) const uint RPT = 2;
layout(constant_id = 3) const uint USE_SUBGROUP = 1;

layout(set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };
#ifdef NEED_W16
layout(set = 0, binding = 0) readonly buffer W2 { uint16_t w2[]; };
#endif
layout(set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
layout(set = 0, binding = 2) buffer Y { float y[]; };
#if INDEXED
layout(set = 0, binding = 3) readonly buffer Ids { int ids[]; };
#endif

layout(push_constant) uniform Push {
  uint ncols, nrows, w_offset, x_offset, y_offset, accumulate;
  uint row_blocks;
  uint expert_stride, n_experts, ids_offset, x_stride, y_stride;
} p;

const uint MAX_WG = 256;
shared float red[MAX_WG * 4];

// float(2^23 + byte) for each byte of w: exact integer decode without I2F.
vec4 magic4(uint w) {
  return vec4(uintBitsToFloat((w & 0xFFu) | 0x4B000000u), uintBitsToFloat(((w >> 8) & 0xFFu) | 0x4B000000u),
              uintBitsToFloat(((w >> 16) & 0xFFu) | 0x4B000000u), uintBitsToFloat((w >> 24) | 0x4B000000u));
}

struct XData {
  vec4 v[NXV];
  float s0, s1;  // sums of the low/high halves (K-quants with mins)
};

#ifdef NEED_W16
uint ld32(uint i) { return uint(w2[i]) | (uint(w2[i + 1]) << 16); }
#endif

// x slice of unit k of block b; xb = x base in vec4 units.
XData load_x(uint xb, uint b, uint k) {
  XData d;
#if WTYPE == WT_F32 || WTYPE == WT_F16 || WTYPE == WT_BF16
  const uint e = b * 8;
  d.v[0] = x4[xb + e / 4];
  d.v[1] = x4[xb + e / 4 + 1];
#elif WTYPE == WT_Q8_0
  const uint e = b * 32 + k * 8;
  d.v[0] = x4[xb + e / 4];
  d.v[1] = x4[xb + e / 4 + 1];
#elif WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
  // unit k: quants [16*(k&1), +16) of the 32-quant group j = k/2; low nibbles
  // are elements 64j + l, high nibbles 64j + 32 + l.
  const uint e = b * 256 + (k >> 1) * 64 + (k & 1u) * 16;
  [[unroll]] for (uint i = 0; i < 4; ++i) {
    d.v[i] = x4[xb + e / 4 + i];
    d.v[4 + i] = x4[xb + (e + 32) / 4 + i];
  }
  const vec4 one = vec4(1.0);
  d.s0 = dot(d.v[0] + d.v[1] + d.v[2] + d.v[3], one);
  d.s1 = dot(d.v[4] + d.v[5] + d.v[6] + d.v[7], one);
#elif WTYPE == WT_Q6_K
  // unit k: half n = k/4, positions l = 8*(k&3) .. +8 of its 32-wide quarters.
  const uint e = b * 256 + (k >> 2) * 128 + (k & 3u) * 8;
  [[unroll]] for (uint m = 0; m < 4; ++m) {
    d.v[2 * m] = x4[xb + (e + 32 * m) / 4];
    d.v[2 * m + 1] = x4[xb + (e + 32 * m) / 4 + 1];
  }
#endif
  return d;
}

#if WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
// 6-bit scales and mins of sub-blocks 2j and 2j+1 from the 16-byte header h.
void k_scales(uvec4 h, uint j, out float sc0, out float sc1, out float m0, out float m1) {
  const uint sc_w = j < 2 ? (h.y & 0x3F3F3F3Fu) : ((h.w & 0x0F0F0F0Fu) | ((h.y >> 2) & 0x30303030u));
  const uint m_w = j < 2 ? (h.z & 0x3F3F3F3Fu) : (((h.w >> 4) & 0x0F0F0F0Fu) | ((h.z >> 2) & 0x30303030u));
  const uint sh = (j & 1u) * 16;
  const vec4 f = magic4(((sc_w >> sh) & 0xFFFFu) | (((m_w >> sh) & 0xFFFFu) << 16)) - 8388608.0;
  sc0 = f.x;
  sc1 = f.y;
  m0 = f.z;
  m1 = f.w;
}
#endif

// Dot of unit k of the block at byte bb with its x slice.
float unit_dot(uint bb, uint k, XData xd) {
#if WTYPE == WT_F32
  const uint i = bb >> 4;
  return dot(uintBitsToFloat(w4[i]), xd.v[0]) + dot(uintBitsToFloat(w4[i + 1]), xd.v[1]);
#elif WTYPE == WT_F16
  const uvec4 w = w4[bb >> 4];
  return dot(vec4(unpackHalf2x16(w.x), unpackHalf2x16(w.y)), xd.v[0]) +
         dot(vec4(unpackHalf2x16(w.z), unpackHalf2x16(w.w)), xd.v[1]);
#elif WTYPE == WT_BF16
  const uvec4 w = w4[bb >> 4];
  const vec4 a = uintBitsToFloat(uvec4(w.x << 16, w.x & 0xFFFF0000u, w.y << 16, w.y & 0xFFFF0000u));
  const vec4 c = uintBitsToFloat(uvec4(w.z << 16, w.z & 0xFFFF0000u, w.w << 16, w.w & 0xFFFF0000u));
  return dot(a, xd.v[0]) + dot(c, xd.v[1]);
#elif WTYPE == WT_Q8_0
  const uint hw = bb >> 1;
  const float d = unpackHalf2x16(uint(w2[hw])).x;
  const uint i = hw + 1 + 4 * k;
  // signed byte s -> (s ^ 0x80) = s + 128 as unsigned
  const vec4 q0 = magic4(ld32(i) ^ 0x80808080u) - 8388736.0;
  const vec4 q1 = magic4(ld32(i + 2) ^ 0x80808080u) - 8388736.0;
  return d * (dot(q0, xd.v[0]) + dot(q1, xd.v[1]));
#elif WTYPE == WT_Q4_K
  const uint i = bb >> 4;
  const uvec4 h = w4[i];
  const uvec4 q = w4[i + 1 + k];  // qs bytes [16k, 16k+16)
  float sc0, sc1, m0, m1;
  k_scales(h, k >> 1, sc0, sc1, m0, m1);
  const vec2 dm = unpackHalf2x16(h.x);
  float slo = 0.0, shi = 0.0;
  [[unroll]] for (uint t = 0; t < 4; ++t) {
    slo += dot(magic4(q[t] & 0x0F0F0F0Fu) - 8388608.0, xd.v[t]);
    shi += dot(magic4((q[t] >> 4) & 0x0F0F0F0Fu) - 8388608.0, xd.v[4 + t]);
  }
  return dm.x * (sc0 * slo + sc1 * shi) - dm.y * (m0 * xd.s0 + m1 * xd.s1);
#elif WTYPE == WT_Q5_K
  const uint i = bb >> 4;
  const uint j = k >> 1;
  const uvec4 h = w4[i];
  const uvec4 qh = w4[i + 1 + (k & 1u)];  // qh bytes [16*(k&1), +16)
  const uvec4 q = w4[i + 3 + k];          // qs bytes [32j + 16*(k&1), +16)
  float sc0, sc1, m0, m1;
  k_scales(h, j, sc0, sc1, m0, m1);
  const vec2 dm = unpackHalf2x16(h.x);
  float slo = 0.0, shi = 0.0;
  [[unroll]] for (uint t = 0; t < 4; ++t) {
    const uint lo = (q[t] & 0x0F0F0F0Fu) | (((qh[t] >> (2 * j)) & 0x01010101u) << 4);
    const uint hi = ((q[t] >> 4) & 0x0F0F0F0Fu) | (((qh[t] >> (2 * j + 1)) & 0x01010101u) << 4);
    slo += dot(magic4(lo) - 8388608.0, xd.v[t]);
    shi += dot(magic4(hi) - 8388608.0, xd.v[4 + t]);
  }
  return dm.x * (sc0 * slo + sc1 * shi) - dm.y * (m0 * xd.s0 + m1 * xd.s1);
#elif WTYPE == WT_Q6_K
  // Block: ql[128] @0, qh[64] @128, scales[16] (int8) @192, d (f16) @208.
  const uint hw = bb >> 1;
  const uint n = k >> 2, g = k & 3u;
  const uint ia = hw + 32 * n + 4 * g;       // ql[64n + 8g]
  const uint ib = ia + 16;                   // ql[64n + 32 + 8g]
  const uint ih = hw + 64 + 16 * n + 4 * g;  // qh[32n + 8g]
  const uint A[2] = uint[2](ld32(ia), ld32(ia + 2));
  const uint B[2] = uint[2](ld32(ib), ld32(ib + 2));
  const uint H[2] = uint[2](ld32(ih), ld32(ih + 2));
  const int is = int(g >> 1);
  float s[4];
  [[unroll]] for (uint m = 0; m < 4; ++m) s[m] = 0.0;
  [[unroll]] for (uint t = 0; t < 2; ++t) {
    const uint q1 = (A[t] & 0x0F0F0F0Fu) | ((H[t] << 4) & 0x30303030u);
    const uint q2 = (B[t] & 0x0F0F0F0Fu) | ((H[t] << 2) & 0x30303030u);
    const uint q3 = ((A[t] >> 4) & 0x0F0F0F0Fu) | (H[t] & 0x30303030u);
    const uint q4 = ((B[t] >> 4) & 0x0F0F0F0Fu) | ((H[t] >> 2) & 0x30303030u);
    s[0] += dot(magic4(q1) - 8388640.0, xd.v[t]);
    s[1] += dot(magic4(q2) - 8388640.0, xd.v[2 + t]);
    s[2] += dot(magic4(q3) - 8388640.0, xd.v[4 + t]);
    s[3] += dot(magic4(q4) - 8388640.0, xd.v[6 + t]);
  }
  float acc = 0.0;
  [[unroll]] for (uint m = 0; m < 4; ++m) {
    // scales[8n + is + 2m]: byte `is` of u16 word 96 + 4n + m
    const int sc = bitfieldExtract(int(uint(w2[hw + 96 + 4 * n + m])), 8 * is, 8);
    acc += float(sc) * s[m];
  }
  return unpackHalf2x16(uint(w2[hw + 104])).x * acc;
#endif
}

void main() {
  const uint WG = gl_WorkGroupSize.x;
  const uint rows_per_wg = (WG / TPR) * RPT;
  const uint wg = gl_WorkGroupID.x + gl_WorkGroupID.z * gl_NumWorkGroups.x;
  if (wg >= p.row_blocks) return;
  uint wbase = p.w_offset, xbase = p.x_offset, ybase = p.y_offset;
#if INDEXED
  const uint item = gl_WorkGroupID.y;
  const int e = ids[p.ids_offset + item];
  if (e < 0 || uint(e) >= p.n_experts) return;
  wbase += uint(e) * p.expert_stride;
  xbase += item * p.x_stride;
  ybase += item * p.y_stride;
#endif
  // Linear thread index in subgroup order, so a row group never straddles subgroups.
  const uint tid = USE_SUBGROUP != 0 ? gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID
                                     : gl_LocalInvocationID.x;
  const uint lane = tid % TPR;
  const uint grp = tid / TPR;
  const uint row0 = wg * rows_per_wg + grp * RPT;
  const uint nb = p.ncols / QK;
  const uint units = nb * UPB;
  const uint row_bytes = nb * BLOCK_BYTES;
  const uint xb = xbase / 4;

  uint rowb[4];
  float acc[4];
  [[unroll]] for (uint r = 0; r < 4; ++r) {
    rowb[r] = wbase + min(row0 + r, p.nrows - 1) * row_bytes;  // clamped: tail rows recompute the last row
    acc[r] = 0.0;
  }
  for (uint u = lane; u < units; u += TPR) {
    const uint b = u / UPB, k = u % UPB;
    const XData xd = load_x(xb, b, k);
    [[unroll]] for (uint r = 0; r < 4; ++r)
      if (r < RPT) acc[r] += unit_dot(rowb[r] + b * BLOCK_BYTES, k, xd);
  }

  // Reduce over the TPR lanes of each row group; lane 0 ends with the sums.
  if (USE_SUBGROUP != 0 && TPR <= gl_SubgroupSize) {
    if (TPR == gl_SubgroupSize) {
      [[unroll]] for (uint r = 0; r < 4; ++r)
        if (r < RPT) acc[r] = subgroupAdd(acc[r]);
    } else {
      for (uint o = TPR / 2; o > 0; o >>= 1) {
        [[unroll]] for (uint r = 0; r < 4; ++r)
          if (r < RPT) acc[r] += subgroupShuffleXor(acc[r], o);
      }
    }
  } else if (USE_SUBGROUP != 0) {
    // TPR spans several subgroups: reduce each, then combine their partials.
    const uint parts = TPR / gl_SubgroupSize;
    [[unroll]] for (uint r = 0; r < 4; ++r)
      if (r < RPT) {
        acc[r] = subgroupAdd(acc[r]);
        if (gl_SubgroupInvocationID == 0) red[(grp * RPT + r) * parts + lane / gl_SubgroupSize] = acc[r];
      }
    barrier();
    if (lane == 0) {
      [[unroll]] for (uint r = 0; r < 4; ++r)
        if (r < RPT) {
          float s = 0.0;
          for (uint i = 0; i < parts; ++i) s += red[(grp * RPT + r) * parts + i];
          acc[r] = s;
        }
    }
  } else {
    [[unroll]] for (uint r = 0; r < 4; ++r)
      if (r < RPT) red[r * WG + tid] = acc[r];
    barrier();
    for (uint s = TPR / 2; s > 0; s >>= 1) {
      if (lane < s) {
        [[unroll]] for (uint r = 0; r < 4; ++r)
          if (r < RPT) red[r * WG + tid] += red[r * WG + tid + s];
      }
      barrier();
    }
    [[unroll]] for (uint r = 0; r < 4; ++r)
      if (r < RPT) acc[r] = red[r * WG + tid];
  }

  if (lane == 0) {
    [[unroll]] for (uint r = 0; r < 4; ++r) {
      const uint row = row0 + r;
      if (r < RPT && row < p.nrows) {
        const uint yi = ybase + row;
        y[yi] = p.accumulate != 0 ? y[yi] + acc[r] : acc[r];
      }
    }
  }
}
