// Q2_K, Q3_K and IQ4_XS super-blocks (256 elements). Dequantization is
// ggml's; the quantizers are straightforward least-squares fits (not ggml's
// search, so the bits differ from llama-quantize's, but any reader
// dequantizes them the same way).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/quant_impl.h"

namespace vkmoe::quant_impl {
namespace {

// Position of element i (0..255) in a Q2_K/Q3_K block: qs byte and shift.
inline int qs_index(int i) { return 32 * (i / 128) + i % 32; }
inline int qs_shift(int i) { return 2 * ((i % 128) / 32); }

void dequant_q2_k(const BlockQ2_K& b, float* y) {
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  for (int i = 0; i < QK_K; ++i) {
    const uint8_t sc = b.scales[i / 16];
    const int q = (b.qs[qs_index(i)] >> qs_shift(i)) & 3;
    y[i] = d * static_cast<float>(sc & 0xF) * static_cast<float>(q) - dmin * static_cast<float>(sc >> 4);
  }
}

void dequant_q3_k(const BlockQ3_K& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int i = 0; i < QK_K; ++i) {
    const float dl = d * static_cast<float>(q3_k_scale(b.scales, i / 16) - 32);
    const int q = (b.qs[qs_index(i)] >> qs_shift(i)) & 3;
    const int h = (b.hmask[i % 32] >> (i / 32)) & 1;
    y[i] = dl * static_cast<float>(q - (h ? 0 : 4));
  }
}

int iq4_xs_scale(const BlockIQ4_XS& b, int ib) {
  return ((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4);
}

void dequant_iq4_xs(const BlockIQ4_XS& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int ib = 0; ib < QK_K / 32; ++ib, y += 32) {
    const float dl = d * static_cast<float>(iq4_xs_scale(b, ib) - 32);
    const uint8_t* qs = b.qs + 16 * ib;
    for (int j = 0; j < 16; ++j) {
      y[j] = dl * kValuesIQ4NL[qs[j] & 0xF];
      y[j + 16] = dl * kValuesIQ4NL[qs[j] >> 4];
    }
  }
}

void pack_2bit(const uint8_t* L, uint8_t* qs) {
  std::memset(qs, 0, QK_K / 4);
  for (int i = 0; i < QK_K; ++i) qs[qs_index(i)] |= static_cast<uint8_t>((L[i] & 3) << qs_shift(i));
}

void quant_q2_k(const float* x, BlockQ2_K& b) {
  float scale[16], mn[16], max_scale = 0.f, max_min = 0.f;
  for (int g = 0; g < 16; ++g) {
    fit_scale_min(x + 16 * g, 16, 3, &scale[g], &mn[g]);
    max_scale = std::max(max_scale, scale[g]);
    max_min = std::max(max_min, mn[g]);
  }
  b.d = fp32_to_fp16(max_scale / 15.f);
  b.dmin = fp32_to_fp16(max_min / 15.f);
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  uint8_t L[QK_K];
  for (int g = 0; g < 16; ++g) {
    const int ls = d > 0.f ? std::clamp(nearest_int(scale[g] / d), 0, 15) : 0;
    const int lm = dmin > 0.f ? std::clamp(nearest_int(mn[g] / dmin), 0, 15) : 0;
    b.scales[g] = static_cast<uint8_t>(ls | (lm << 4));
    const float dl = d * ls, ml = dmin * lm;
    for (int j = 0; j < 16; ++j)
      L[16 * g + j] = dl == 0.f ? 0 : static_cast<uint8_t>(std::clamp(nearest_int((x[16 * g + j] + ml) / dl), 0, 3));
  }
  pack_2bit(L, b.qs);
}

void quant_q3_k(const float* x, BlockQ3_K& b) {
  float scale[16], smax = 0.f;
  for (int g = 0; g < 16; ++g) {
    scale[g] = fit_scale_signed(x + 16 * g, 16, 4);
    if (std::fabs(scale[g]) > std::fabs(smax)) smax = scale[g];
  }
  std::memset(&b, 0, sizeof(b));
  uint8_t L[QK_K];
  std::memset(L, 4, sizeof(L));  // value 0
  int ls[16];
  if (smax == 0.f) {
    std::fill(ls, ls + 16, 0);
  } else {
    const float iscale = -32.f / smax;
    b.d = fp32_to_fp16(1.f / iscale);
    const float d = fp16_to_fp32(b.d);
    for (int g = 0; g < 16; ++g) {
      ls[g] = std::clamp(nearest_int(iscale * scale[g]), -32, 31);
      const float dl = d * ls[g];
      if (dl == 0.f) continue;
      for (int j = 0; j < 16; ++j)
        L[16 * g + j] = static_cast<uint8_t>(std::clamp(nearest_int(x[16 * g + j] / dl), -4, 3) + 4);
    }
  }
  for (int j = 0; j < 16; ++j) {
    const int s = ls[j] + 32;
    b.scales[j % 8] |= static_cast<uint8_t>((s & 0xF) << (4 * (j / 8)));
    b.scales[8 + j % 4] |= static_cast<uint8_t>((s >> 4) << (2 * (j / 4)));
  }
  for (int i = 0; i < QK_K; ++i)
    if (L[i] >= 4) b.hmask[i % 32] |= static_cast<uint8_t>(1u << (i / 32));
  uint8_t low[QK_K];
  for (int i = 0; i < QK_K; ++i) low[i] = L[i] & 3;
  pack_2bit(low, b.qs);
}

void quant_iq4_xs(const float* x, BlockIQ4_XS& b) {
  float scale[8], smax = 0.f;
  uint8_t L[QK_K];
  for (int ib = 0; ib < 8; ++ib) {
    scale[ib] = fit_iq4_group(x + 32 * ib, 32, L + 32 * ib);
    if (std::fabs(scale[ib]) > std::fabs(smax)) smax = scale[ib];
  }
  std::memset(&b, 0, sizeof(b));
  b.d = fp32_to_fp16(-smax / 32.f);
  const float d = fp16_to_fp32(b.d);
  for (int ib = 0; ib < 8; ++ib) {
    const int l = d != 0.f ? std::clamp(nearest_int(scale[ib] / d), -32, 31) : 0;
    const float dl = d * l;
    const float idl = dl != 0.f ? 1.f / dl : 0.f;
    for (int j = 0; j < 32; ++j) L[32 * ib + j] = static_cast<uint8_t>(nearest_index16(kValuesIQ4NL, idl * x[32 * ib + j]));
    const int s = l + 32;
    b.scales_l[ib / 2] |= static_cast<uint8_t>((s & 0xF) << (4 * (ib % 2)));
    b.scales_h = static_cast<uint16_t>(b.scales_h | ((s >> 4) << (2 * ib)));
    for (int j = 0; j < 16; ++j)
      b.qs[16 * ib + j] = static_cast<uint8_t>(L[32 * ib + j] | (L[32 * ib + 16 + j] << 4));
  }
}

}  // namespace

bool dequantize_lowk(GgmlType t, const void* src, float* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, dst += QK_K) {
    switch (t) {
      case GgmlType::Q2_K: dequant_q2_k(static_cast<const BlockQ2_K*>(src)[i], dst); break;
      case GgmlType::Q3_K: dequant_q3_k(static_cast<const BlockQ3_K*>(src)[i], dst); break;
      case GgmlType::IQ4_XS: dequant_iq4_xs(static_cast<const BlockIQ4_XS*>(src)[i], dst); break;
      default: return false;
    }
  }
  return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::IQ4_XS;
}

bool quantize_lowk(GgmlType t, const float* src, void* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, src += QK_K) {
    switch (t) {
      case GgmlType::Q2_K: quant_q2_k(src, static_cast<BlockQ2_K*>(dst)[i]); break;
      case GgmlType::Q3_K: quant_q3_k(src, static_cast<BlockQ3_K*>(dst)[i]); break;
      case GgmlType::IQ4_XS: quant_iq4_xs(src, static_cast<BlockIQ4_XS*>(dst)[i]); break;
      default: return false;
    }
  }
  return t == GgmlType::Q2_K || t == GgmlType::Q3_K || t == GgmlType::IQ4_XS;
}

}  // namespace vkmoe::quant_impl
