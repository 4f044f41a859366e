#version 450
// y[r] = (accumulate ? y[r] : 0) + W[r] . x for Q8_0 / Q4_K / Q5_K / Q6_K weights, with x
// quantized to int8 per 32-element block in shared memory and packed 4x8-bit
// integer dot products (SPV_KHR_integer_dot_product, OpSDot) in the inner loop.
// Same bindings and push constants as matvec.comp.
// Compile-time: WTYPE (4 = Q8_0, 5 = Q4_K, 6 = Q5_K, 7 = Q6_K), INDEXED (MoE expert variant),
// GLU (the input is act(x, u) of a second vector u, as matvec.comp's, formed
// in f32 before it is quantized).
// Specialization: 0 = workgroup size, 1 = TPR lanes per row (power of 2, at
// most the subgroup size), 2 = RPT rows per lane (1..8), 3 = XQ_WORDS: int32
// words of quantized x held in shared memory (>= ncols / 4), 4 = GLU activation.
//
// Numerics: x_i is replaced by dx * round(x_i / dx) with dx = max|x| / 127
// over its 32-element block, so |error| <= sum_i |w_i| * dx(i) / 2 (the Q8
// activation rounding of llama.cpp-style CPU paths); the weight sum of a block
// uses the same rounded x, so the bound holds for the min terms as well.
#extension GL_EXT_control_flow_attributes : require
#extension GL_KHR_shader_subgroup_basic : require
#extension GL_KHR_shader_subgroup_shuffle : require
#extension GL_EXT_spirv_intrinsics : require

#define WT_Q8_0 4
#define WT_Q4_K 5
#define WT_Q5_K 6
#define WT_Q6_K 7
#ifndef INDEXED
#define INDEXED 0
#endif
// BLOCK_UNITS: block size in addressing units (uvec4 for Q4_K/Q5_K, which are
// 16-byte aligned; uint16 for Q8_0/Q6_K, which are only 2-byte aligned).
// UPB: units of work per block (a unit is what one lane decodes at once).
#if WTYPE == WT_Q4_K
#define BLOCK_UNITS 9   // 144 bytes
#define QK 256
#define UPB 4  // one 64-element group (32 qs bytes)
#elif WTYPE == WT_Q5_K
#define BLOCK_UNITS 11  // 176 bytes
#define QK 256
#define UPB 4
#elif WTYPE == WT_Q8_0
#define BLOCK_UNITS 17  // 34 bytes
#define QK 32
#define UPB 1
#define NEED_W16 1
#elif WTYPE == WT_Q6_K
#define BLOCK_UNITS 105  // 210 bytes
#define QK 256
#define UPB 4  // half n = k/2, positions l in [16 (k&1), +16) of its four 32-wide quarters
#define NEED_W16 1
#else
#error "matvec_q8x: unsupported WTYPE"
#endif
#ifdef NEED_W16
#define UNIT_BYTES 2
#else
#define UNIT_BYTES 16
#endif
#ifdef NEED_W16
#extension GL_EXT_shader_16bit_storage : require
#extension GL_EXT_shader_explicit_arithmetic_types_int16 : require
#endif

// OpSDot (4450) on two int32 words of 4 packed signed bytes (format 0 = 4x8Bit).
spirv_instruction(extensions = ["SPV_KHR_integer_dot_product"], capabilities = [6019, 6018], id = 4450)
int sdot4(int a, int b, spirv_literal int packed_format);

layout(local_size_x_id = 0) in;
layout(constant_id = 1) const uint TPR = 16;
layout(constant_id = 2) const uint RPT = 8;
layout(constant_id = 3) const uint XQ_WORDS = 512;

layout(set = 0, binding = 0) readonly buffer W4 { uvec4 w4[]; };
#ifdef NEED_W16
layout(set = 0, binding = 0) readonly buffer W2 { uint16_t w2[]; };
uint ld32(uint i) { return uint(w2[i]) | (uint(w2[i + 1]) << 16); }
#endif
layout(set = 0, binding = 1) readonly buffer X { vec4 x4[]; };
layout(set = 0, binding = 2) buffer Y { float y[]; };
#if INDEXED
layout(set = 0, binding = 3) readonly buffer Ids { int ids[]; };
#endif
#ifndef GLU
#define GLU 0
#endif
#if GLU
layout(set = 0, binding = 3 + INDEXED) readonly buffer U { vec4 u4[]; };
layout(constant_id = 4) const uint GLU_ACT = 0;
#include "glu.glsl"
#define XV(i) glu(x4[i], u4[i], GLU_ACT)
#else
#define XV(i) x4[i]
#endif

layout(push_constant) uniform Push {
  uint ncols, nrows, w_offset, x_offset, y_offset, accumulate;
  uint row_blocks;
  uint expert_stride, n_experts, ids_offset, x_stride, y_stride;
} p;

const uint MAX_RPT = 8;
shared ivec4 xq[XQ_WORDS / 4];    // x as int8, 16 per entry
shared vec2 xds[XQ_WORDS / 8];    // per 32-block: (dx, dx * sum of its int8 values)

#if WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
// 6-bit scales and mins of sub-blocks 2j and 2j+1 from the 16-byte header h.
void k_scales(uvec4 h, uint j, out float sc0, out float sc1, out float m0, out float m1) {
  const uint sh = (j & 1u) * 16;
  uint sc_w, m_w;
  if (j < 2) {
    sc_w = (h.y >> sh) & 0x3F3Fu;
    m_w = (h.z >> sh) & 0x3F3Fu;
  } else {
    sc_w = ((h.w >> sh) & 0x0F0Fu) | ((h.y >> (sh + 2)) & 0x3030u);
    m_w = ((h.w >> (sh + 4)) & 0x0F0Fu) | ((h.z >> (sh + 2)) & 0x3030u);
  }
  sc0 = float(sc_w & 0xFFu);
  sc1 = float(sc_w >> 8);
  m0 = float(m_w & 0xFFu);
  m1 = float(m_w >> 8);
}
#endif

#if WTYPE == WT_Q4_K || WTYPE == WT_Q5_K
struct WData {
  uvec4 h, q0, q1;
#if WTYPE == WT_Q5_K
  uvec4 h0, h1;
#endif
};

// Unit k (group j = k) of the block starting at uvec4 index bi.
WData load_w(uint bi, uint k) {
  WData w;
  w.h = w4[bi];
#if WTYPE == WT_Q4_K
  w.q0 = w4[bi + 1 + 2 * k];
  w.q1 = w4[bi + 2 + 2 * k];
#else
  w.h0 = w4[bi + 1];  // qh[0..16)
  w.h1 = w4[bi + 2];  // qh[16..32)
  w.q0 = w4[bi + 3 + 2 * k];
  w.q1 = w4[bi + 4 + 2 * k];
#endif
  return w;
}

// Quantized x of unit k of block b: lo = elements 64k..+32, hi = 64k+32..+64.
struct XData {
  ivec4 lo0, lo1, hi0, hi1;
  vec2 dlo, dhi;
};

XData load_x(uint b, uint k) {
  XData d;
  const uint g = b * 4 + k;  // 64-element group
  d.lo0 = xq[g * 4];
  d.lo1 = xq[g * 4 + 1];
  d.hi0 = xq[g * 4 + 2];
  d.hi1 = xq[g * 4 + 3];
  d.dlo = xds[g * 2];
  d.dhi = xds[g * 2 + 1];
  return d;
}

float dot_w(WData w, uint k, XData x) {
  float sc0, sc1, m0, m1;
  k_scales(w.h, k, sc0, sc1, m0, m1);
  const vec2 dm = unpackHalf2x16(w.h.x);
  int ilo = 0, ihi = 0;
  [[unroll]] for (uint t = 0; t < 8; ++t) {
    const uint q = t < 4 ? w.q0[t] : w.q1[t - 4];
    uint lo = q & 0x0F0F0F0Fu, hi = (q >> 4) & 0x0F0F0F0Fu;
#if WTYPE == WT_Q5_K
    const uint hb = (t < 4 ? w.h0[t] : w.h1[t - 4]) >> (2 * k);
    lo |= (hb << 4) & 0x10101010u;
    hi |= (hb << 3) & 0x10101010u;
#endif
    const int xl = t < 4 ? x.lo0[t] : x.lo1[t - 4];
    const int xh = t < 4 ? x.hi0[t] : x.hi1[t - 4];
    ilo = ilo + sdot4(int(lo), xl, 0);
    ihi = ihi + sdot4(int(hi), xh, 0);
  }
  return dm.x * (sc0 * x.dlo.x * float(ilo) + sc1 * x.dhi.x * float(ihi)) - dm.y * (m0 * x.dlo.y + m1 * x.dhi.y);
}

#elif WTYPE == WT_Q8_0
struct WData {
  uvec4 q0, q1;
  uint d;
};

// The block starting at uint16 index bi: d (f16), then 32 int8 quants.
WData load_w(uint bi, uint k) {
  WData w;
  w.d = uint(w2[bi]);
  w.q0 = uvec4(ld32(bi + 1), ld32(bi + 3), ld32(bi + 5), ld32(bi + 7));
  w.q1 = uvec4(ld32(bi + 9), ld32(bi + 11), ld32(bi + 13), ld32(bi + 15));
  return w;
}

struct XData {
  ivec4 x0, x1;
  float dx;
};

XData load_x(uint b, uint k) {
  XData d;
  d.x0 = xq[b * 2];
  d.x1 = xq[b * 2 + 1];
  d.dx = xds[b].x;
  return d;
}

float dot_w(WData w, uint k, XData x) {
  int i = 0;
  [[unroll]] for (uint t = 0; t < 4; ++t) {
    i = i + sdot4(int(w.q0[t]), x.x0[t], 0);
    i = i + sdot4(int(w.q1[t]), x.x1[t], 0);
  }
  return unpackHalf2x16(w.d).x * x.dx * float(i);
}

#elif WTYPE == WT_Q6_K
struct WData {
  uvec4 a, b, h;  // ql[64n + 16h'..], ql[64n + 32 + 16h'..], qh[32n + 16h'..]
  uvec4 sc;       // u16 words holding scales[8n + 2m + h'] (byte h' of word m)
  uint d;
};

// Block: ql[128] @0, qh[64] @128, scales[16] (int8) @192, d (f16) @208.
WData load_w(uint bi, uint k) {
  WData w;
  const uint n = k >> 1, hh = k & 1u;
  const uint ia = bi + 32 * n + 8 * hh, ib = ia + 16, ih = bi + 64 + 16 * n + 8 * hh;
  w.a = uvec4(ld32(ia), ld32(ia + 2), ld32(ia + 4), ld32(ia + 6));
  w.b = uvec4(ld32(ib), ld32(ib + 2), ld32(ib + 4), ld32(ib + 6));
  w.h = uvec4(ld32(ih), ld32(ih + 2), ld32(ih + 4), ld32(ih + 6));
  const uint is = bi + 96 + 4 * n;
  w.sc = uvec4(uint(w2[is]), uint(w2[is + 1]), uint(w2[is + 2]), uint(w2[is + 3]));
  w.d = uint(w2[bi + 104]);
  return w;
}

// x of quarter m (elements 128n + 32m + 16h' .. +16) and their int8 sums.
struct XData {
  ivec4 v[4];
  ivec4 s;
  vec4 dx;
};

XData load_x(uint b, uint k) {
  XData d;
  const uint n = k >> 1, hh = k & 1u;
  [[unroll]] for (uint m = 0; m < 4; ++m) {
    const uint blk = b * 8 + 4 * n + m;  // 32-element x block
    d.v[m] = xq[blk * 2 + hh];
    d.dx[m] = xds[blk].x;
    const ivec4 v = d.v[m];
    d.s[m] = sdot4(v.x, 0x01010101, 0) + sdot4(v.y, 0x01010101, 0) + sdot4(v.z, 0x01010101, 0) +
             sdot4(v.w, 0x01010101, 0);
  }
  return d;
}

float dot_w(WData w, uint k, XData x) {
  const uint hh = k & 1u;
  ivec4 i = ivec4(0);
  [[unroll]] for (uint t = 0; t < 4; ++t) {
    const uint A = w.a[t], B = w.b[t], H = w.h[t];
    i.x = i.x + sdot4(int((A & 0x0F0F0F0Fu) | ((H << 4) & 0x30303030u)), x.v[0][t], 0);
    i.y = i.y + sdot4(int((B & 0x0F0F0F0Fu) | ((H << 2) & 0x30303030u)), x.v[1][t], 0);
    i.z = i.z + sdot4(int(((A >> 4) & 0x0F0F0F0Fu) | (H & 0x30303030u)), x.v[2][t], 0);
    i.w = i.w + sdot4(int(((B >> 4) & 0x0F0F0F0Fu) | ((H >> 2) & 0x30303030u)), x.v[3][t], 0);
  }
  // sum (q - 32) x~ = i - 32 s per quarter
  const ivec4 sc = bitfieldExtract(ivec4(w.sc), int(8 * hh), 8);
  const vec4 part = vec4(i - 32 * x.s) * x.dx;
  return unpackHalf2x16(w.d).x * dot(vec4(sc), part);
}
#endif

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
  const uint tid = gl_SubgroupID * gl_SubgroupSize + gl_SubgroupInvocationID;
  const uint lane = tid % TPR;
  const uint grp = tid / TPR;
  const uint row0 = wg * rows_per_wg + grp * RPT;
  const uint nb = p.ncols / QK;
  const uint units = nb * UPB;
  const uint row_units = nb * BLOCK_UNITS;

  uint rowb[MAX_RPT];
  float acc[MAX_RPT];
  [[unroll]] for (uint r = 0; r < MAX_RPT; ++r) {
    rowb[r] = wbase / UNIT_BYTES + min(row0 + r, p.nrows - 1) * row_units;  // tail rows recompute the last row
    acc[r] = 0.0;
  }

  // Issue the first unit's weight loads, then quantize x while they are in flight.
  uint u = lane;
  WData w[MAX_RPT];
  if (u < units) {
    [[unroll]] for (uint r = 0; r < MAX_RPT; ++r)
      if (r < RPT) w[r] = load_w(rowb[r] + (u / UPB) * BLOCK_UNITS, u % UPB);
  }

  // x -> int8 per 32-element block: one block per thread.
  const uint xb = xbase / 4;
  for (uint blk = tid; blk < p.ncols / 32; blk += WG) {
    vec4 v[8];
    float amax = 0.0;
    [[unroll]] for (uint i = 0; i < 8; ++i) {
      v[i] = XV(xb + blk * 8 + i);
      const vec4 a = abs(v[i]);
      amax = max(amax, max(max(a.x, a.y), max(a.z, a.w)));
    }
    const float dx = amax / 127.0;
    const float inv = amax > 0.0 ? 127.0 / amax : 0.0;
    int isum = 0;
    [[unroll]] for (uint i = 0; i < 8; ++i) {
      const ivec4 q = ivec4(round(v[i] * inv));
      isum += (q.x + q.y) + (q.z + q.w);
      const uvec4 b = uvec4(q) & 0xFFu;
      const int packed = int(b.x | (b.y << 8) | (b.z << 16) | (b.w << 24));
      xq[blk * 2 + i / 4][i % 4] = packed;
    }
    xds[blk] = vec2(dx, dx * float(isum));
  }
  barrier();

  while (u < units) {
    const uint k = u % UPB;
    const XData xd = load_x(u / UPB, k);
    [[unroll]] for (uint r = 0; r < MAX_RPT; ++r)
      if (r < RPT) acc[r] += dot_w(w[r], k, xd);
    u += TPR;
    if (u < units) {
      [[unroll]] for (uint r = 0; r < MAX_RPT; ++r)
        if (r < RPT) w[r] = load_w(rowb[r] + (u / UPB) * BLOCK_UNITS, u % UPB);
    }
  }

  // Reduce over the TPR lanes of each row group (TPR <= subgroup size).
  for (uint o = TPR / 2; o > 0; o >>= 1) {
    [[unroll]] for (uint r = 0; r < MAX_RPT; ++r)
      if (r < RPT) acc[r] += subgroupShuffleXor(acc[r], o);
  }
  if (lane == 0) {
    [[unroll]] for (uint r = 0; r < MAX_RPT; ++r) {
      const uint row = row0 + r;
      if (r < RPT && row < p.nrows) {
        const uint yi = ybase + row;
        y[yi] = p.accumulate != 0 ? y[yi] + acc[r] : acc[r];
      }
    }
  }
}
