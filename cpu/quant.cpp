// Reference (scalar) ggml block formats: traits, fp16/bf16, dequantize,
// quantize and dot. Bit layouts follow ggml-quants.c exactly.
#include "cpu/quant.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "cpu/quant_impl.h"

namespace vkmoe {

namespace quant_impl {

int nearest_int(float v) { return static_cast<int>(std::lrintf(v)); }

// Fit x[i] ~= scale * L[i] - min with L in [0, nmax], scale >= 0, min >= 0,
// minimizing the squared error over a small sweep of candidate step sizes.
void fit_scale_min(const float* x, int n, int nmax, float* scale, float* min) {
  float lo = x[0], hi = x[0];
  for (int i = 1; i < n; ++i) {
    lo = std::min(lo, x[i]);
    hi = std::max(hi, x[i]);
  }
  lo = std::min(lo, 0.f);
  if (hi <= lo) {
    *scale = 0.f;
    *min = -lo;
    return;
  }
  float best_scale = (hi - lo) / nmax, best_min = -lo;
  auto error_of = [&](float s, float m) {
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int((x[i] + m) / s), 0, nmax);
      const double e = s * l - m - x[i];
      err += e * e;
    }
    return err;
  };
  double best_err = error_of(best_scale, best_min);
  for (int step = -10; step <= 10; ++step) {
    const float iscale = (nmax + 0.1f * step) / (hi - lo);
    double sl = 0, sll = 0, sx = 0, sxl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * (x[i] - lo)), 0, nmax);
      sl += l;
      sll += double(l) * l;
      sx += x[i];
      sxl += double(x[i]) * l;
    }
    const double det = n * sll - sl * sl;
    if (det <= 0) continue;
    double a = (n * sxl - sl * sx) / det;
    double b = (sll * sx - sl * sxl) / det;  // offset: x ~= a*L + b
    if (b > 0) {
      b = 0;
      a = sxl / sll;
    }
    if (a <= 0) continue;
    const double err = error_of(static_cast<float>(a), static_cast<float>(-b));
    if (err < best_err) {
      best_err = err;
      best_scale = static_cast<float>(a);
      best_min = static_cast<float>(-b);
    }
  }
  *scale = best_scale;
  *min = best_min;
}

float fit_scale_signed(const float* x, int n, int nlo) {
  float amax = 0.f, vmax = 0.f;
  for (int i = 0; i < n; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      vmax = x[i];
    }
  if (amax == 0.f) return 0.f;
  float best_scale = vmax / static_cast<float>(-nlo);
  double best_err = -1;
  for (int step = -8; step <= 8; ++step) {
    const float iscale = -(static_cast<float>(nlo) + 0.1f * step) / vmax;
    double sll = 0, sxl = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(iscale * x[i]), -nlo, nlo - 1);
      sll += double(l) * l;
      sxl += double(x[i]) * l;
    }
    if (sll <= 0) continue;
    const float s = static_cast<float>(sxl / sll);
    double err = 0;
    for (int i = 0; i < n; ++i) {
      const int l = std::clamp(nearest_int(x[i] / s), -nlo, nlo - 1);
      const double e = double(s) * l - x[i];
      err += e * e;
    }
    if (best_err < 0 || err < best_err) {
      best_err = err;
      best_scale = s;
    }
  }
  return best_scale;
}

}  // namespace quant_impl

namespace {

using namespace quant_impl;

const TypeTraits kUnknown = {"?", 0, 0, false};

const TypeTraits* find_traits(GgmlType t) {
  static const TypeTraits f32 = {"F32", 1, 4, true};
  static const TypeTraits f16 = {"F16", 1, 2, true};
  static const TypeTraits bf16 = {"BF16", 1, 2, true};
  static const TypeTraits q4_0 = {"Q4_0", 32, 18, true};
  static const TypeTraits q4_1 = {"Q4_1", 32, 20, true};
  static const TypeTraits q5_0 = {"Q5_0", 32, 22, true};
  static const TypeTraits q5_1 = {"Q5_1", 32, 24, true};
  static const TypeTraits q8_0 = {"Q8_0", 32, 34, true};
  static const TypeTraits q8_1 = {"Q8_1", 32, 36, false};
  static const TypeTraits q2_k = {"Q2_K", 256, 84, true};
  static const TypeTraits q3_k = {"Q3_K", 256, 110, true};
  static const TypeTraits q4_k = {"Q4_K", 256, 144, true};
  static const TypeTraits q5_k = {"Q5_K", 256, 176, true};
  static const TypeTraits q6_k = {"Q6_K", 256, 210, true};
  static const TypeTraits q8_k = {"Q8_K", 256, 292, true};
  static const TypeTraits iq4_nl = {"IQ4_NL", 32, 18, true};
  static const TypeTraits iq4_xs = {"IQ4_XS", 256, 136, true};
  static const TypeTraits mxfp4 = {"MXFP4", 32, 17, true};
  switch (t) {
    case GgmlType::F32: return &f32;
    case GgmlType::F16: return &f16;
    case GgmlType::BF16: return &bf16;
    case GgmlType::Q4_0: return &q4_0;
    case GgmlType::Q4_1: return &q4_1;
    case GgmlType::Q5_0: return &q5_0;
    case GgmlType::Q5_1: return &q5_1;
    case GgmlType::Q8_0: return &q8_0;
    case GgmlType::Q8_1: return &q8_1;
    case GgmlType::Q2_K: return &q2_k;
    case GgmlType::Q3_K: return &q3_k;
    case GgmlType::Q4_K: return &q4_k;
    case GgmlType::Q5_K: return &q5_k;
    case GgmlType::Q6_K: return &q6_k;
    case GgmlType::Q8_K: return &q8_k;
    case GgmlType::IQ4_NL: return &iq4_nl;
    case GgmlType::IQ4_XS: return &iq4_xs;
    case GgmlType::MXFP4: return &mxfp4;
  }
  return nullptr;
}

uint32_t float_bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float bits_float(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

[[noreturn]] void throw_unsupported(GgmlType t, const char* what) {
  throw Error(std::string(what) + ": tensor type " + type_name(t) + " (id " +
              std::to_string(static_cast<uint32_t>(t)) + ") is not supported");
}

// 6-bit scale j and min j of a Q4_K/Q5_K block (ggml get_scale_min_k4).
void get_scale_min_k4(int j, const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Inverse of get_scale_min_k4 for 8 six-bit scales and mins.
void pack_scale_min_k4(const uint8_t* ls, const uint8_t* lm, uint8_t* q) {
  for (int j = 0; j < 4; ++j) {
    q[j] = static_cast<uint8_t>((ls[j] & 63) | ((ls[j + 4] >> 4) << 6));
    q[j + 4] = static_cast<uint8_t>((lm[j] & 63) | ((lm[j + 4] >> 4) << 6));
    q[j + 8] = static_cast<uint8_t>((ls[j + 4] & 0xF) | ((lm[j + 4] & 0xF) << 4));
  }
}

// ---- dequantizers (one block) ----

void dequant_q8_0(const BlockQ8_0& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int i = 0; i < QK8_0; ++i) y[i] = d * b.qs[i];
}

void dequant_q4_k(const BlockQ4_K& b, float* y) {
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  const uint8_t* q = b.qs;
  for (int j = 0; j < 8; j += 2, q += 32) {
    uint8_t sc, mn;
    get_scale_min_k4(j, b.scales, &sc, &mn);
    const float d1 = d * sc, m1 = dmin * mn;
    get_scale_min_k4(j + 1, b.scales, &sc, &mn);
    const float d2 = d * sc, m2 = dmin * mn;
    for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
  }
}

void dequant_q5_k(const BlockQ5_K& b, float* y) {
  const float d = fp16_to_fp32(b.d), dmin = fp16_to_fp32(b.dmin);
  const uint8_t* ql = b.qs;
  for (int j = 0; j < 8; j += 2, ql += 32) {
    uint8_t sc, mn;
    get_scale_min_k4(j, b.scales, &sc, &mn);
    const float d1 = d * sc, m1 = dmin * mn;
    get_scale_min_k4(j + 1, b.scales, &sc, &mn);
    const float d2 = d * sc, m2 = dmin * mn;
    const uint8_t lo_bit = static_cast<uint8_t>(1u << j), hi_bit = static_cast<uint8_t>(2u << j);
    for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + ((b.qh[l] & lo_bit) ? 16 : 0)) - m1;
    for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + ((b.qh[l] & hi_bit) ? 16 : 0)) - m2;
  }
}

// 6-bit quant (0..63) of element i of a Q6_K block.
int q6_k_quant(const BlockQ6_K& b, int i) {
  const int half = i / 128, p = i % 128, l = p % 32, quarter = p / 32;
  const uint8_t* ql = b.ql + 64 * half;
  const uint8_t* qh = b.qh + 32 * half;
  const int low = (quarter & 1) ? ql[l + 32] : ql[l];
  const int low4 = (quarter < 2) ? (low & 0xF) : (low >> 4);
  const int high2 = (qh[l] >> (2 * quarter)) & 3;
  return low4 | (high2 << 4);
}

void dequant_q6_k(const BlockQ6_K& b, float* y) {
  const float d = fp16_to_fp32(b.d);
  for (int i = 0; i < QK_K; ++i) y[i] = d * b.scales[i / 16] * (q6_k_quant(b, i) - 32);
}

void dequant_q8_k(const BlockQ8_K& b, float* y) {
  for (int i = 0; i < QK_K; ++i) y[i] = b.d * b.qs[i];
}

// ---- quantizers (one block) ----

void quant_q8_0(const float* x, BlockQ8_0& b) {
  float amax = 0.f;
  for (int i = 0; i < QK8_0; ++i) amax = std::max(amax, std::fabs(x[i]));
  const float d = amax / 127.f;
  const float id = d != 0.f ? 1.f / d : 0.f;
  b.d = fp32_to_fp16(d);
  for (int i = 0; i < QK8_0; ++i) b.qs[i] = static_cast<int8_t>(std::roundf(x[i] * id));
}

// Shared by Q4_K (nmax 15) and Q5_K (nmax 31): per 32-value sub-block
// scale/min quantized to 6 bits against fp16 super-block d/dmin; L receives
// the final quants.
void quant_k_scale_min(const float* x, int nmax, uint16_t* d_out, uint16_t* dmin_out,
                       uint8_t* scales12, uint8_t* L) {
  float scale[8], mn[8], max_scale = 0.f, max_min = 0.f;
  for (int j = 0; j < 8; ++j) {
    fit_scale_min(x + 32 * j, 32, nmax, &scale[j], &mn[j]);
    max_scale = std::max(max_scale, scale[j]);
    max_min = std::max(max_min, mn[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  uint8_t ls[8], lm[8];
  for (int j = 0; j < 8; ++j) {
    ls[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_scale * scale[j])));
    lm[j] = static_cast<uint8_t>(std::min(63, nearest_int(inv_min * mn[j])));
  }
  *d_out = fp32_to_fp16(max_scale / 63.f);
  *dmin_out = fp32_to_fp16(max_min / 63.f);
  pack_scale_min_k4(ls, lm, scales12);
  const float d = fp16_to_fp32(*d_out), dmin = fp16_to_fp32(*dmin_out);
  for (int j = 0; j < 8; ++j) {
    const float dl = d * ls[j], dm = dmin * lm[j];
    for (int i = 0; i < 32; ++i) {
      L[32 * j + i] =
          dl == 0.f ? 0 : static_cast<uint8_t>(std::clamp(nearest_int((x[32 * j + i] + dm) / dl), 0, nmax));
    }
  }
}

void quant_q4_k(const float* x, BlockQ4_K& b) {
  uint8_t L[QK_K];
  quant_k_scale_min(x, 15, &b.d, &b.dmin, b.scales, L);
  for (int j = 0; j < QK_K; j += 64)
    for (int l = 0; l < 32; ++l) b.qs[j / 2 + l] = static_cast<uint8_t>(L[j + l] | (L[j + 32 + l] << 4));
}

void quant_q5_k(const float* x, BlockQ5_K& b) {
  uint8_t L[QK_K];
  quant_k_scale_min(x, 31, &b.d, &b.dmin, b.scales, L);
  std::memset(b.qh, 0, sizeof(b.qh));
  for (int j = 0; j < 8; j += 2) {
    for (int l = 0; l < 32; ++l) {
      const int lo = L[32 * j + l], hi = L[32 * (j + 1) + l];
      b.qs[16 * j + l] = static_cast<uint8_t>((lo & 0xF) | ((hi & 0xF) << 4));
      b.qh[l] |= static_cast<uint8_t>(((lo >> 4) << j) | ((hi >> 4) << (j + 1)));
    }
  }
}

void quant_q6_k(const float* x, BlockQ6_K& b) {
  float scale[QK_K / 16], smax = 0.f, samax = 0.f;
  for (int j = 0; j < QK_K / 16; ++j) {
    scale[j] = fit_scale_signed(x + 16 * j, 16, 32);
    if (std::fabs(scale[j]) > samax) {
      samax = std::fabs(scale[j]);
      smax = scale[j];
    }
  }
  uint8_t L[QK_K];
  if (samax == 0.f) {
    std::memset(&b, 0, sizeof(b));
    std::memset(L, 32, sizeof(L));
  } else {
    const float iscale = -128.f / smax;
    b.d = fp32_to_fp16(1.f / iscale);
    for (int j = 0; j < QK_K / 16; ++j)
      b.scales[j] = static_cast<int8_t>(std::clamp(nearest_int(iscale * scale[j]), -128, 127));
    const float d = fp16_to_fp32(b.d);
    for (int j = 0; j < QK_K / 16; ++j) {
      const float dl = d * b.scales[j];
      for (int i = 0; i < 16; ++i) {
        const int l = dl == 0.f ? 0 : std::clamp(nearest_int(x[16 * j + i] / dl), -32, 31);
        L[16 * j + i] = static_cast<uint8_t>(l + 32);
      }
    }
  }
  for (int half = 0; half < 2; ++half) {
    const uint8_t* Lh = L + 128 * half;
    uint8_t* ql = b.ql + 64 * half;
    uint8_t* qh = b.qh + 32 * half;
    for (int l = 0; l < 32; ++l) {
      const int q1 = Lh[l], q2 = Lh[l + 32], q3 = Lh[l + 64], q4 = Lh[l + 96];
      ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
  }
}

void quant_q8_k(const float* x, BlockQ8_K& b) {
  float amax = 0.f, vmax = 0.f;
  for (int i = 0; i < QK_K; ++i)
    if (std::fabs(x[i]) > amax) {
      amax = std::fabs(x[i]);
      vmax = x[i];
    }
  if (amax == 0.f) {
    std::memset(&b, 0, sizeof(b));
    return;
  }
  const float iscale = -127.f / vmax;
  for (int i = 0; i < QK_K; ++i) b.qs[i] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[i])));
  for (int g = 0; g < QK_K / 16; ++g) {
    int sum = 0;
    for (int i = 0; i < 16; ++i) sum += b.qs[16 * g + i];
    b.bsums[g] = static_cast<int16_t>(sum);
  }
  b.d = 1.f / iscale;
}

// Apply fn(block_index, block_pointer) over the blocks of a row.
template <typename Block, typename Fn>
void for_blocks(const void* row, int64_t nblocks, Fn fn) {
  const Block* blocks = static_cast<const Block*>(row);
  for (int64_t i = 0; i < nblocks; ++i) fn(i, blocks[i]);
}

}  // namespace

const TypeTraits& type_traits(GgmlType t) {
  const TypeTraits* tr = find_traits(t);
  return tr ? *tr : kUnknown;
}

bool is_known_type(uint32_t id) { return find_traits(static_cast<GgmlType>(id)) != nullptr; }

const char* type_name(GgmlType t) { return type_traits(t).name; }

size_t row_bytes(GgmlType t, int64_t n) {
  const TypeTraits& tr = type_traits(t);
  if (tr.block_size == 0)
    throw Error("unknown tensor type id " + std::to_string(static_cast<uint32_t>(t)));
  if (n < 0 || n % tr.block_size != 0)
    throw Error(std::string("row of ") + std::to_string(n) + " elements is not a multiple of the " +
                tr.name + " block size " + std::to_string(tr.block_size));
  return static_cast<size_t>(n / tr.block_size) * tr.type_size;
}

float fp16_to_fp32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000) << 16;
  const uint32_t exp = (h >> 10) & 0x1F, mant = h & 0x3FF;
  if (exp == 0) {
    const float mag = std::ldexp(static_cast<float>(mant), -24);  // zero or subnormal, exact
    return sign ? -mag : mag;
  }
  if (exp == 31) return bits_float(sign | 0x7F800000u | (mant << 13));
  return bits_float(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t fp32_to_fp16(float f) {
  const uint32_t bits = float_bits(f);
  const uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000);
  const uint32_t abs = bits & 0x7FFFFFFFu;
  if (abs > 0x7F800000u)  // NaN: keep it quiet and keep the top payload bits
    return static_cast<uint16_t>(sign | 0x7E00 | ((abs >> 13) & 0x3FF));
  if (abs >= 0x477FF000u) return sign | 0x7C00;  // >= 65520 rounds to inf
  auto round_shift = [](uint32_t m, int shift) {
    uint32_t q = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (q & 1))) ++q;
    return q;
  };
  if (abs < 0x38800000u) {  // below 2^-14: fp16 subnormal or zero
    const int e = static_cast<int>(abs >> 23);
    const int shift = 126 - e;  // value * 2^24 = m * 2^-shift
    if (e == 0 || shift > 24) return sign;
    return static_cast<uint16_t>(sign | round_shift((abs & 0x7FFFFFu) | 0x800000u, shift));
  }
  const uint32_t rebased = abs - (112u << 23);  // exponent bias 127 -> 15
  return static_cast<uint16_t>(sign | round_shift(rebased, 13));  // mantissa carry may bump exponent
}

float e8m0_to_fp32_half(uint8_t e) {
  // 2^(e - 128): subnormal bit patterns for e = 0, 1, else biased exponent e - 1.
  return bits_float(e < 2 ? (0x00200000u << e) : (static_cast<uint32_t>(e - 1) << 23));
}

int q3_k_scale(const uint8_t* scales12, int j) {
  const int low = (scales12[j % 8] >> (4 * (j / 8))) & 0xF;
  const int high = (scales12[8 + j % 4] >> (2 * (j / 4))) & 3;
  return low | (high << 4);
}

float bf16_to_fp32(uint16_t h) { return bits_float(static_cast<uint32_t>(h) << 16); }

uint16_t fp32_to_bf16(float f) {
  const uint32_t bits = float_bits(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);  // quiet NaN
  return static_cast<uint16_t>((bits + 0x7FFFu + ((bits >> 16) & 1)) >> 16);
}

void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n) {
  const int64_t nb = static_cast<int64_t>(row_bytes(t, n)) / std::max(1, type_traits(t).type_size);
  switch (t) {
    case GgmlType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case GgmlType::F16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_fp32(s[i]);
      return;
    }
    case GgmlType::BF16: {
      const uint16_t* s = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_fp32(s[i]);
      return;
    }
    case GgmlType::Q8_0:
      for_blocks<BlockQ8_0>(src, nb, [&](int64_t i, const BlockQ8_0& b) { dequant_q8_0(b, dst + i * QK8_0); });
      return;
    case GgmlType::Q4_K:
      for_blocks<BlockQ4_K>(src, nb, [&](int64_t i, const BlockQ4_K& b) { dequant_q4_k(b, dst + i * QK_K); });
      return;
    case GgmlType::Q5_K:
      for_blocks<BlockQ5_K>(src, nb, [&](int64_t i, const BlockQ5_K& b) { dequant_q5_k(b, dst + i * QK_K); });
      return;
    case GgmlType::Q6_K:
      for_blocks<BlockQ6_K>(src, nb, [&](int64_t i, const BlockQ6_K& b) { dequant_q6_k(b, dst + i * QK_K); });
      return;
    case GgmlType::Q8_K:
      for_blocks<BlockQ8_K>(src, nb, [&](int64_t i, const BlockQ8_K& b) { dequant_q8_k(b, dst + i * QK_K); });
      return;
    default:
      if (quant_impl::dequantize_q32(t, src, dst, nb) || quant_impl::dequantize_lowk(t, src, dst, nb)) return;
      throw_unsupported(t, "dequantize");
  }
}

void quantize_row(GgmlType t, const float* src, void* dst, int64_t n) {
  const int64_t nb = static_cast<int64_t>(row_bytes(t, n)) / std::max(1, type_traits(t).type_size);
  switch (t) {
    case GgmlType::F32: std::memcpy(dst, src, n * sizeof(float)); return;
    case GgmlType::F16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_fp16(src[i]);
      return;
    }
    case GgmlType::BF16: {
      uint16_t* d = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) d[i] = fp32_to_bf16(src[i]);
      return;
    }
    case GgmlType::Q8_0:
      for (int64_t i = 0; i < nb; ++i) quant_q8_0(src + i * QK8_0, static_cast<BlockQ8_0*>(dst)[i]);
      return;
    case GgmlType::Q4_K:
      for (int64_t i = 0; i < nb; ++i) quant_q4_k(src + i * QK_K, static_cast<BlockQ4_K*>(dst)[i]);
      return;
    case GgmlType::Q5_K:
      for (int64_t i = 0; i < nb; ++i) quant_q5_k(src + i * QK_K, static_cast<BlockQ5_K*>(dst)[i]);
      return;
    case GgmlType::Q6_K:
      for (int64_t i = 0; i < nb; ++i) quant_q6_k(src + i * QK_K, static_cast<BlockQ6_K*>(dst)[i]);
      return;
    case GgmlType::Q8_K:
      for (int64_t i = 0; i < nb; ++i) quant_q8_k(src + i * QK_K, static_cast<BlockQ8_K*>(dst)[i]);
      return;
    default:
      if (quant_impl::quantize_q32(t, src, dst, nb) || quant_impl::quantize_lowk(t, src, dst, nb)) return;
      throw_unsupported(t, "quantize");
  }
}

float dot_row_f32(GgmlType t, const void* row, const float* x, int64_t n) {
  const TypeTraits& tr = type_traits(t);
  row_bytes(t, n);  // validates n
  if (!tr.supported) throw_unsupported(t, "dot");
  // Dequantize in chunks of whole blocks (256 elements for the 1-element types).
  const int64_t chunk = tr.block_size == 1 ? 256 : tr.block_size;
  const size_t chunk_bytes = static_cast<size_t>(chunk / tr.block_size) * tr.type_size;
  std::vector<float> tmp(chunk);
  const uint8_t* p = static_cast<const uint8_t*>(row);
  double acc = 0;
  for (int64_t i0 = 0; i0 < n; i0 += chunk, p += chunk_bytes) {
    const int64_t len = std::min(chunk, n - i0);
    dequantize_row(t, p, tmp.data(), len);
    for (int64_t i = 0; i < len; ++i) acc += double(tmp[i]) * x[i0 + i];
  }
  return static_cast<float>(acc);
}

}  // namespace vkmoe
