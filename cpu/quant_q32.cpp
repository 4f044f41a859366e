// 32-element block types: Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4. Layouts and
// dequantization follow ggml-quants.c; the quantizers follow ggml's
// reference ones (quantize_row_*_ref) except IQ4_NL's search, which is a
// simplified version of ggml's (same objective, same candidate scales).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "cpu/quant_impl.h"

namespace vkmoe::quant_impl {
namespace {

// Quant j (0..31) of a 4-bit block: low nibbles first, then high nibbles.
inline int nibble(const uint8_t* qs, int j) { return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4); }
// Bit 4 of quant j of a Q5_0/Q5_1 block.
inline int high_bit(const uint8_t* qh, int j) { return ((qh[j / 8] >> (j % 8)) & 1) << 4; }

void pack_nibbles(const uint8_t* L, uint8_t* qs) {
  for (int j = 0; j < 16; ++j) qs[j] = static_cast<uint8_t>((L[j] & 0xF) | ((L[j + 16] & 0xF) << 4));
}
void pack_high_bits(const uint8_t* L, uint8_t* qh) {
  std::memset(qh, 0, 4);
  for (int j = 0; j < 32; ++j) qh[j / 8] |= static_cast<uint8_t>(((L[j] >> 4) & 1) << (j % 8));
}

// Value of largest magnitude (the first one on ties), ggml's "max".
float signed_absmax(const float* x, int n) {
  float amax = 0.f, vmax = 0.f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      vmax = x[i];
    }
  return vmax;
}

// Q4_0 (nmax 15, offset 8) and Q5_0 (31, 16): d = max / -offset.
void quant_symmetric(const float* x, int offset, uint16_t* d_out, uint8_t* L) {
  const float d = signed_absmax(x, 32) / static_cast<float>(-offset);
  const float id = d != 0.f ? 1.f / d : 0.f;
  *d_out = fp32_to_fp16(d);
  for (int j = 0; j < 32; ++j)
    L[j] = static_cast<uint8_t>(std::min(2 * offset - 1, static_cast<int>(x[j] * id + (offset + 0.5f))));
}

// Q4_1 (nmax 15) and Q5_1 (31): d = (max - min) / nmax, m = min.
void quant_affine(const float* x, int nmax, uint16_t* d_out, uint16_t* m_out, uint8_t* L) {
  float lo = x[0], hi = x[0];
  for (int j = 1; j < 32; ++j) {
    lo = std::min(lo, x[j]);
    hi = std::max(hi, x[j]);
  }
  const float d = (hi - lo) / static_cast<float>(nmax);
  const float id = d != 0.f ? 1.f / d : 0.f;
  *d_out = fp32_to_fp16(d);
  *m_out = fp32_to_fp16(lo);
  for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(std::min(nmax, static_cast<int>((x[j] - lo) * id + 0.5f)));
}

void quant_mxfp4(const float* x, BlockMXFP4& b) {
  float amax = 0.f;
  for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[j]));
  // Largest element lands in the top of the e2m1 range (|value| 4..12 of the doubled codebook).
  int e = 0;
  if (amax > 0.f) e = std::clamp(static_cast<int>(std::floor(std::log2(amax))) - 2 + 127, 0, 254);
  b.e = static_cast<uint8_t>(e);
  const float d = e8m0_to_fp32_half(b.e);
  uint8_t L[32];
  for (int j = 0; j < 32; ++j) {
    int best = 0;
    float best_err = std::fabs(kValuesMXFP4[0] * d - x[j]);
    for (int k = 1; k < 16; ++k) {
      const float err = std::fabs(kValuesMXFP4[k] * d - x[j]);
      if (err < best_err) {
        best = k;
        best_err = err;
      }
    }
    L[j] = static_cast<uint8_t>(best);
  }
  pack_nibbles(L, b.qs);
}

template <class Block, class Fn>
void each_block(const void* src, float* dst, int64_t nb, Fn fn) {
  const Block* b = static_cast<const Block*>(src);
  for (int64_t i = 0; i < nb; ++i, dst += 32) fn(b[i], dst);
}

}  // namespace

int nearest_index16(const int8_t* values, float v) {
  int best = 0;
  float best_err = std::fabs(v - values[0]);
  for (int k = 1; k < 16; ++k) {
    const float err = std::fabs(v - values[k]);
    if (err < best_err) {
      best = k;
      best_err = err;
    }
  }
  return best;
}

float fit_iq4_group(const float* x, int n, uint8_t* L) {
  const float vmax = signed_absmax(x, n);
  if (vmax == 0.f) {
    std::fill(L, L + n, static_cast<uint8_t>(nearest_index16(kValuesIQ4NL, 0.f)));
    return 0.f;
  }
  // Weighted least squares (weights x^2) over candidate inverse scales that
  // map the largest value near the codebook's ends; best by sumqx^2 / sumq2.
  float best_d = vmax / kValuesIQ4NL[0], best_score = -1.f;
  for (int itry = -7; itry <= 7; ++itry) {
    const float id = (itry + kValuesIQ4NL[0]) / vmax;
    float sumqx = 0.f, sumq2 = 0.f;
    for (int j = 0; j < n; ++j) {
      const float q = kValuesIQ4NL[nearest_index16(kValuesIQ4NL, id * x[j])];
      const float w = x[j] * x[j];
      sumqx += w * q * x[j];
      sumq2 += w * q * q;
    }
    if (sumq2 > 0.f && sumqx * sumqx / sumq2 > best_score) {
      best_score = sumqx * sumqx / sumq2;
      best_d = sumqx / sumq2;
    }
  }
  const float id = best_d != 0.f ? 1.f / best_d : 0.f;
  for (int j = 0; j < n; ++j) L[j] = static_cast<uint8_t>(nearest_index16(kValuesIQ4NL, id * x[j]));
  return best_d;
}

bool dequantize_q32(GgmlType t, const void* src, float* dst, int64_t nb) {
  switch (t) {
    case GgmlType::Q4_0:
      each_block<BlockQ4_0>(src, dst, nb, [](const BlockQ4_0& b, float* y) {
        const float d = fp16_to_fp32(b.d);
        for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(nibble(b.qs, j) - 8) * d;
      });
      return true;
    case GgmlType::Q4_1:
      each_block<BlockQ4_1>(src, dst, nb, [](const BlockQ4_1& b, float* y) {
        const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
        for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(nibble(b.qs, j)) * d + m;
      });
      return true;
    case GgmlType::Q5_0:
      each_block<BlockQ5_0>(src, dst, nb, [](const BlockQ5_0& b, float* y) {
        const float d = fp16_to_fp32(b.d);
        for (int j = 0; j < 32; ++j) y[j] = static_cast<float>((nibble(b.qs, j) | high_bit(b.qh, j)) - 16) * d;
      });
      return true;
    case GgmlType::Q5_1:
      each_block<BlockQ5_1>(src, dst, nb, [](const BlockQ5_1& b, float* y) {
        const float d = fp16_to_fp32(b.d), m = fp16_to_fp32(b.m);
        for (int j = 0; j < 32; ++j) y[j] = static_cast<float>(nibble(b.qs, j) | high_bit(b.qh, j)) * d + m;
      });
      return true;
    case GgmlType::IQ4_NL:
      each_block<BlockIQ4_NL>(src, dst, nb, [](const BlockIQ4_NL& b, float* y) {
        const float d = fp16_to_fp32(b.d);
        for (int j = 0; j < 32; ++j) y[j] = d * kValuesIQ4NL[nibble(b.qs, j)];
      });
      return true;
    case GgmlType::MXFP4:
      each_block<BlockMXFP4>(src, dst, nb, [](const BlockMXFP4& b, float* y) {
        const float d = e8m0_to_fp32_half(b.e);
        for (int j = 0; j < 32; ++j) y[j] = kValuesMXFP4[nibble(b.qs, j)] * d;
      });
      return true;
    default: return false;
  }
}

bool quantize_q32(GgmlType t, const float* src, void* dst, int64_t nb) {
  uint8_t L[32];
  for (int64_t i = 0; i < nb; ++i) {
    const float* x = src + 32 * i;
    switch (t) {
      case GgmlType::Q4_0: {
        BlockQ4_0& b = static_cast<BlockQ4_0*>(dst)[i];
        quant_symmetric(x, 8, &b.d, L);
        pack_nibbles(L, b.qs);
        break;
      }
      case GgmlType::Q4_1: {
        BlockQ4_1& b = static_cast<BlockQ4_1*>(dst)[i];
        quant_affine(x, 15, &b.d, &b.m, L);
        pack_nibbles(L, b.qs);
        break;
      }
      case GgmlType::Q5_0: {
        BlockQ5_0& b = static_cast<BlockQ5_0*>(dst)[i];
        quant_symmetric(x, 16, &b.d, L);
        pack_nibbles(L, b.qs);
        pack_high_bits(L, b.qh);
        break;
      }
      case GgmlType::Q5_1: {
        BlockQ5_1& b = static_cast<BlockQ5_1*>(dst)[i];
        quant_affine(x, 31, &b.d, &b.m, L);
        pack_nibbles(L, b.qs);
        pack_high_bits(L, b.qh);
        break;
      }
      case GgmlType::IQ4_NL: {
        BlockIQ4_NL& b = static_cast<BlockIQ4_NL*>(dst)[i];
        b.d = fp32_to_fp16(fit_iq4_group(x, 32, L));
        // Re-pick the indices against the stored fp16 scale.
        const float d = fp16_to_fp32(b.d), id = d != 0.f ? 1.f / d : 0.f;
        if (d != 0.f)
          for (int j = 0; j < 32; ++j) L[j] = static_cast<uint8_t>(nearest_index16(kValuesIQ4NL, id * x[j]));
        pack_nibbles(L, b.qs);
        break;
      }
      case GgmlType::MXFP4: quant_mxfp4(x, static_cast<BlockMXFP4*>(dst)[i]); break;
      default: return false;
    }
  }
  return true;
}

}  // namespace vkmoe::quant_impl
