// Highway kernels, compiled once per target by foreach_target.h and selected
// at run time with HWY_DYNAMIC_DISPATCH.
#include "cpu/simd_kernels.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

#include "engine/common.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/simd_kernels.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef VKMOE_SIMD_KERNELS_ONCE
#define VKMOE_SIMD_KERNELS_ONCE
namespace vkmoe::simd_detail {

// Exact fp16 -> fp32 without a call: place exponent/mantissa in a float and
// rebias by 2^112 (also exact for subnormals); inf/NaN get the max exponent.
inline float half_to_float(uint16_t h) {
  uint32_t magnitude = static_cast<uint32_t>(h & 0x7FFF) << 13;
  float f;
  if ((h & 0x7C00) == 0x7C00) {
    magnitude |= 0x7F800000u;
    std::memcpy(&f, &magnitude, 4);
  } else {
    std::memcpy(&f, &magnitude, 4);
    f *= 0x1p112f;
  }
  return (h & 0x8000) ? -f : f;
}

// Kernel ids shared by all targets (plain ints cross the dispatch boundary).
enum Kernel : int { kF32, kF16, kBF16, kQ8_0, kQ4_K, kQ5_K, kQ6_K };

inline Kernel kernel_for(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return kF32;
    case GgmlType::F16: return kF16;
    case GgmlType::BF16: return kBF16;
    case GgmlType::Q8_0: return kQ8_0;
    case GgmlType::Q4_K: return kQ4_K;
    case GgmlType::Q5_K: return kQ5_K;
    case GgmlType::Q6_K: return kQ6_K;
    default:
      throw Error(std::string("CPU kernels: weight type ") + type_name(t) + " is not supported");
  }
}

// Unpacks the 6-bit scales and mins of a Q4_K/Q5_K block.
inline void unpack_scales_k4(const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    mn[j] = q[j + 4] & 63;
    sc[j + 4] = (q[j + 8] & 0xF) | ((q[j] >> 6) << 4);
    mn[j + 4] = (q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4);
  }
}

// Sum over the 8 sub-blocks of min_j * (sum of activation quants in sub-block j).
inline int mins_dot_bsums(const uint8_t* mn, const int16_t* bsums) {
  int sum = 0;
  for (int j = 0; j < 8; ++j) sum += mn[j] * (bsums[2 * j] + bsums[2 * j + 1]);
  return sum;
}

}  // namespace vkmoe::simd_detail
#endif  // VKMOE_SIMD_KERNELS_ONCE

HWY_BEFORE_NAMESPACE();
namespace vkmoe {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace simd_detail;

// Integer lanes: at most 16 x int16 (256 bits) so one vector never spans two
// 16/32-element sub-blocks; the lane count divides 16 on every target.
using D16 = hn::CappedTag<int16_t, 16>;
using D8 = hn::Rebind<int8_t, D16>;
using DU8 = hn::Rebind<uint8_t, D16>;
using D32 = hn::Repartition<int32_t, D16>;
using DF32 = hn::Rebind<float, D32>;

// Pairwise widening multiply-add: int16 x int16 -> int32 lanes.
HWY_INLINE hn::Vec<D32> MulPairs(hn::Vec<D16> a, hn::Vec<D16> b) {
  const D32 d32;
  auto sum1 = hn::Zero(d32);
  const auto sum0 = hn::ReorderWidenMulAccumulate(d32, a, b, hn::Zero(d32), sum1);
  return hn::RearrangeToOddPlusEven(sum0, sum1);
}

HWY_INLINE hn::Vec<D16> LoadI8(const int8_t* p) { return hn::PromoteTo(D16(), hn::LoadU(D8(), p)); }
HWY_INLINE hn::Vec<D16> LoadU8(const uint8_t* p) { return hn::PromoteTo(D16(), hn::LoadU(DU8(), p)); }

// ---- float weights x f32 activations ----

template <class LoadW, class ScalarW>
HWY_INLINE float DotFloat(const float* x, int64_t n, LoadW load_w, ScalarW scalar_w) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  auto acc0 = hn::Zero(df), acc1 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 2 * N <= n; i += 2 * N) {
    acc0 = hn::MulAdd(load_w(df, i), hn::LoadU(df, x + i), acc0);
    acc1 = hn::MulAdd(load_w(df, i + N), hn::LoadU(df, x + i + N), acc1);
  }
  for (; i + N <= n; i += N) acc0 = hn::MulAdd(load_w(df, i), hn::LoadU(df, x + i), acc0);
  float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(acc0, acc1)));
  for (; i < n; ++i) sum += scalar_w(i) * x[i];
  return sum;
}

HWY_INLINE float DotF32(const float* w, const float* x, int64_t n) {
  return DotFloat(
      x, n, [w](auto df, int64_t i) { return hn::LoadU(df, w + i); }, [w](int64_t i) { return w[i]; });
}

HWY_INLINE float DotF16(const uint16_t* w, const float* x, int64_t n) {
  const auto* wh = reinterpret_cast<const hwy::float16_t*>(w);
  return DotFloat(
      x, n,
      [wh](auto df, int64_t i) { return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::float16_t, decltype(df)>(), wh + i)); },
      [w](int64_t i) { return half_to_float(w[i]); });
}

HWY_INLINE float DotBF16(const uint16_t* w, const float* x, int64_t n) {
  const auto* wb = reinterpret_cast<const hwy::bfloat16_t*>(w);
  return DotFloat(
      x, n,
      [wb](auto df, int64_t i) { return hn::PromoteTo(df, hn::LoadU(hn::Rebind<hwy::bfloat16_t, decltype(df)>(), wb + i)); },
      [w](int64_t i) { return bf16_to_fp32(w[i]); });
}

// ---- quantized weights x quantized activations ----

HWY_INLINE float DotQ8_0(const BlockQ8_0* w, const BlockQ8_0* a, int64_t nb) {
  const D32 d32;
  const DF32 df;
  const size_t N = hn::Lanes(D16());
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < nb; ++b) {
    auto s = hn::Zero(d32);
    for (size_t i = 0; i < QK8_0; i += N) s = hn::Add(s, MulPairs(LoadI8(w[b].qs + i), LoadI8(a[b].qs + i)));
    acc = hn::MulAdd(hn::Set(df, half_to_float(w[b].d) * half_to_float(a[b].d)), hn::ConvertTo(df, s), acc);
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

HWY_INLINE float DotQ4_K(const BlockQ4_K* w, const BlockQ8_K* a, int64_t nb) {
  const D16 d16;
  const D32 d32;
  const DF32 df;
  const size_t N = hn::Lanes(d16);
  const auto low4 = hn::Set(d16, 0xF);
  auto acc = hn::Zero(df);
  float mins = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ4_K& x = w[b];
    const BlockQ8_K& y = a[b];
    uint8_t sc[8], mn[8];
    unpack_scales_k4(x.scales, sc, mn);
    auto s = hn::Zero(d32);
    for (int c = 0; c < 4; ++c) {
      const auto sc_lo = hn::Set(d16, sc[2 * c]), sc_hi = hn::Set(d16, sc[2 * c + 1]);
      for (size_t off = 0; off < 32; off += N) {
        const auto q = LoadU8(x.qs + 32 * c + off);
        s = hn::Add(s, MulPairs(hn::Mul(hn::And(q, low4), sc_lo), LoadI8(y.qs + 64 * c + off)));
        s = hn::Add(s, MulPairs(hn::Mul(hn::ShiftRight<4>(q), sc_hi), LoadI8(y.qs + 64 * c + 32 + off)));
      }
    }
    acc = hn::MulAdd(hn::Set(df, y.d * half_to_float(x.d)), hn::ConvertTo(df, s), acc);
    mins += y.d * half_to_float(x.dmin) * static_cast<float>(mins_dot_bsums(mn, y.bsums));
  }
  return hn::GetLane(hn::SumOfLanes(df, acc)) - mins;
}

HWY_INLINE float DotQ5_K(const BlockQ5_K* w, const BlockQ8_K* a, int64_t nb) {
  const D16 d16;
  const D32 d32;
  const DF32 df;
  const size_t N = hn::Lanes(d16);
  const auto low4 = hn::Set(d16, 0xF), one = hn::Set(d16, 1);
  auto acc = hn::Zero(df);
  float mins = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ5_K& x = w[b];
    const BlockQ8_K& y = a[b];
    uint8_t sc[8], mn[8];
    unpack_scales_k4(x.scales, sc, mn);
    auto s = hn::Zero(d32);
    for (int c = 0; c < 4; ++c) {
      const auto sc_lo = hn::Set(d16, sc[2 * c]), sc_hi = hn::Set(d16, sc[2 * c + 1]);
      for (size_t off = 0; off < 32; off += N) {
        const auto q = LoadU8(x.qs + 32 * c + off);
        const auto h = LoadU8(x.qh + off);
        const auto h_lo = hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * c), one));
        const auto h_hi = hn::ShiftLeft<4>(hn::And(hn::ShiftRightSame(h, 2 * c + 1), one));
        const auto q_lo = hn::Or(hn::And(q, low4), h_lo);
        const auto q_hi = hn::Or(hn::ShiftRight<4>(q), h_hi);
        s = hn::Add(s, MulPairs(hn::Mul(q_lo, sc_lo), LoadI8(y.qs + 64 * c + off)));
        s = hn::Add(s, MulPairs(hn::Mul(q_hi, sc_hi), LoadI8(y.qs + 64 * c + 32 + off)));
      }
    }
    acc = hn::MulAdd(hn::Set(df, y.d * half_to_float(x.d)), hn::ConvertTo(df, s), acc);
    mins += y.d * half_to_float(x.dmin) * static_cast<float>(mins_dot_bsums(mn, y.bsums));
  }
  return hn::GetLane(hn::SumOfLanes(df, acc)) - mins;
}

HWY_INLINE float DotQ6_K(const BlockQ6_K* w, const BlockQ8_K* a, int64_t nb) {
  const D16 d16;
  const D32 d32;
  const DF32 df;
  const size_t N = hn::Lanes(d16);
  const auto low4 = hn::Set(d16, 0xF), low2 = hn::Set(d16, 3), bias = hn::Set(d16, 32);
  auto acc = hn::Zero(df);
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K& x = w[b];
    const BlockQ8_K& y = a[b];
    auto s = hn::Zero(d32);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = x.ql + 64 * half;
      const uint8_t* qh = x.qh + 32 * half;
      const int8_t* sc = x.scales + 8 * half;
      const int8_t* yq = y.qs + 128 * half;
      for (size_t off = 0; off < 32; off += N) {
        const auto l0 = LoadU8(ql + off), l1 = LoadU8(ql + 32 + off), h = LoadU8(qh + off);
        const int is = static_cast<int>(off / 16);
        const auto q0 = hn::Sub(hn::Or(hn::And(l0, low4), hn::ShiftLeft<4>(hn::And(h, low2))), bias);
        const auto q1 = hn::Sub(hn::Or(hn::And(l1, low4), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), low2))), bias);
        const auto q2 = hn::Sub(hn::Or(hn::ShiftRight<4>(l0), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(h), low2))), bias);
        const auto q3 = hn::Sub(hn::Or(hn::ShiftRight<4>(l1), hn::ShiftLeft<4>(hn::ShiftRight<6>(h))), bias);
        s = hn::Add(s, MulPairs(hn::Mul(q0, hn::Set(d16, sc[is + 0])), LoadI8(yq + off)));
        s = hn::Add(s, MulPairs(hn::Mul(q1, hn::Set(d16, sc[is + 2])), LoadI8(yq + 32 + off)));
        s = hn::Add(s, MulPairs(hn::Mul(q2, hn::Set(d16, sc[is + 4])), LoadI8(yq + 64 + off)));
        s = hn::Add(s, MulPairs(hn::Mul(q3, hn::Set(d16, sc[is + 6])), LoadI8(yq + 96 + off)));
      }
    }
    acc = hn::MulAdd(hn::Set(df, y.d * half_to_float(x.d)), hn::ConvertTo(df, s), acc);
  }
  return hn::GetLane(hn::SumOfLanes(df, acc));
}

HWY_INLINE float DotRowImpl(int kernel, const uint8_t* w, const void* xq, int64_t n) {
  switch (kernel) {
    case kF32: return DotF32(reinterpret_cast<const float*>(w), static_cast<const float*>(xq), n);
    case kF16: return DotF16(reinterpret_cast<const uint16_t*>(w), static_cast<const float*>(xq), n);
    case kBF16: return DotBF16(reinterpret_cast<const uint16_t*>(w), static_cast<const float*>(xq), n);
    case kQ8_0:
      return DotQ8_0(reinterpret_cast<const BlockQ8_0*>(w), static_cast<const BlockQ8_0*>(xq), n / QK8_0);
    case kQ4_K:
      return DotQ4_K(reinterpret_cast<const BlockQ4_K*>(w), static_cast<const BlockQ8_K*>(xq), n / QK_K);
    case kQ5_K:
      return DotQ5_K(reinterpret_cast<const BlockQ5_K*>(w), static_cast<const BlockQ8_K*>(xq), n / QK_K);
    case kQ6_K:
      return DotQ6_K(reinterpret_cast<const BlockQ6_K*>(w), static_cast<const BlockQ8_K*>(xq), n / QK_K);
  }
  return 0.f;
}

// Row loop per kernel so the switch is hoisted out of the loop.
template <int K>
HWY_INLINE void RowsFor(const uint8_t* w, size_t stride, const void* xq, float* y, int64_t r0, int64_t r1, int64_t n) {
  for (int64_t r = r0; r < r1; ++r) y[r - r0] = DotRowImpl(K, w + static_cast<size_t>(r) * stride, xq, n);
}

void MatvecRows(int kernel, const uint8_t* w, size_t stride, const void* xq, float* y, int64_t r0, int64_t r1,
                int64_t n) {
  switch (kernel) {
    case kF32: return RowsFor<kF32>(w, stride, xq, y, r0, r1, n);
    case kF16: return RowsFor<kF16>(w, stride, xq, y, r0, r1, n);
    case kBF16: return RowsFor<kBF16>(w, stride, xq, y, r0, r1, n);
    case kQ8_0: return RowsFor<kQ8_0>(w, stride, xq, y, r0, r1, n);
    case kQ4_K: return RowsFor<kQ4_K>(w, stride, xq, y, r0, r1, n);
    case kQ5_K: return RowsFor<kQ5_K>(w, stride, xq, y, r0, r1, n);
    case kQ6_K: return RowsFor<kQ6_K>(w, stride, xq, y, r0, r1, n);
  }
}

// Q8_K activation quantization, identical to quantize_row's: the value of
// largest magnitude (first one on ties) v gives iscale = -127/v, quants are
// min(127, round_half_even(iscale * x)) and d = 1/iscale.
void QuantizeQ8K(const float* x, BlockQ8_K* out, int64_t nb) {
  const hn::ScalableTag<float> df;
  const hn::RebindToSigned<decltype(df)> di;
  const hn::Rebind<int8_t, decltype(df)> d8;
  const size_t N = hn::Lanes(df);
  for (int64_t b = 0; b < nb; ++b, x += QK_K) {
    BlockQ8_K& y = out[b];
    auto vmax = hn::Zero(df);
    for (size_t i = 0; i < QK_K; i += N) vmax = hn::Max(vmax, hn::Abs(hn::LoadU(df, x + i)));
    const float amax = hn::GetLane(hn::MaxOfLanes(df, vmax));
    if (amax == 0.f) {
      std::memset(&y, 0, sizeof(y));
      continue;
    }
    int first = 0;
    while (std::fabs(x[first]) != amax) ++first;
    const float iscale = -127.f / x[first];
    const auto vscale = hn::Set(df, iscale);
    const auto cap = hn::Set(di, 127);
    for (size_t i = 0; i < QK_K; i += N) {
      const auto q = hn::Min(hn::NearestInt(hn::Mul(vscale, hn::LoadU(df, x + i))), cap);
      hn::StoreU(hn::DemoteTo(d8, q), d8, y.qs + i);
    }
    for (int g = 0; g < QK_K / 16; ++g) {
      int sum = 0;
      for (int i = 0; i < 16; ++i) sum += y.qs[16 * g + i];
      y.bsums[g] = static_cast<int16_t>(sum);
    }
    y.d = 1.f / iscale;
  }
}

float DotRow(int kernel, const uint8_t* w, const void* xq, int64_t n) { return DotRowImpl(kernel, w, xq, n); }

const char* TargetName() { return hwy::TargetName(HWY_TARGET); }

}  // namespace HWY_NAMESPACE
}  // namespace vkmoe
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace vkmoe {

HWY_EXPORT(MatvecRows);
HWY_EXPORT(DotRow);
HWY_EXPORT(QuantizeQ8K);
HWY_EXPORT(TargetName);

GgmlType activation_type(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: return GgmlType::F32;
    case GgmlType::Q8_0: return GgmlType::Q8_0;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return GgmlType::Q8_K;
    default:
      throw Error(std::string("CPU kernels: weight type ") + type_name(weight_type) + " is not supported");
  }
}

size_t activation_bytes(GgmlType weight_type, int64_t n) { return row_bytes(activation_type(weight_type), n); }

void quantize_activation(GgmlType weight_type, const float* x, void* xq, int64_t n) {
  const GgmlType at = activation_type(weight_type);
  const size_t bytes = row_bytes(at, n);
  if (at == GgmlType::Q8_K)
    HWY_DYNAMIC_DISPATCH(QuantizeQ8K)(x, static_cast<BlockQ8_K*>(xq), static_cast<int64_t>(bytes / sizeof(BlockQ8_K)));
  else
    quantize_row(at, x, xq, n);
}

void matvec_rows(GgmlType wtype, const uint8_t* w, const void* xq, float* y, int64_t r0, int64_t r1, int64_t n) {
  const int kernel = simd_detail::kernel_for(wtype);
  const size_t stride = row_bytes(wtype, n);
  if (r1 <= r0) return;
  HWY_DYNAMIC_DISPATCH(MatvecRows)(kernel, w, stride, xq, y, r0, r1, n);
}

float vec_dot(GgmlType wtype, const void* wrow, const void* xq, int64_t n) {
  const int kernel = simd_detail::kernel_for(wtype);
  row_bytes(wtype, n);  // validates n
  return HWY_DYNAMIC_DISPATCH(DotRow)(kernel, static_cast<const uint8_t*>(wrow), xq, n);
}

const char* simd_target_name() { return HWY_DYNAMIC_DISPATCH(TargetName)(); }

// ---- scalar integer reference ----
namespace {
using namespace simd_detail;

float ref_q8_0(const BlockQ8_0* w, const BlockQ8_0* a, int64_t nb) {
  float sum = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    int32_t s = 0;
    for (int i = 0; i < QK8_0; ++i) s += w[b].qs[i] * a[b].qs[i];
    sum += half_to_float(w[b].d) * half_to_float(a[b].d) * static_cast<float>(s);
  }
  return sum;
}

// Q4_K / Q5_K: quant(i) gives the unsigned 4/5-bit quant of element i.
template <class Block, class QuantFn>
float ref_k4(const Block* w, const BlockQ8_K* a, int64_t nb, QuantFn quant) {
  float sum = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    uint8_t sc[8], mn[8];
    unpack_scales_k4(w[b].scales, sc, mn);
    int32_t s = 0;
    for (int j = 0; j < 8; ++j) {
      int32_t sj = 0;
      for (int i = 0; i < 32; ++i) sj += quant(w[b], 32 * j + i) * a[b].qs[32 * j + i];
      s += sc[j] * sj;
    }
    sum += a[b].d * half_to_float(w[b].d) * static_cast<float>(s) -
           a[b].d * half_to_float(w[b].dmin) * static_cast<float>(mins_dot_bsums(mn, a[b].bsums));
  }
  return sum;
}

int q4_k_quant(const BlockQ4_K& x, int i) {
  const int byte = x.qs[32 * (i / 64) + i % 32];
  return (i % 64 < 32) ? (byte & 0xF) : (byte >> 4);
}
int q5_k_quant(const BlockQ5_K& x, int i) {
  const int byte = x.qs[32 * (i / 64) + i % 32];
  const int low = (i % 64 < 32) ? (byte & 0xF) : (byte >> 4);
  return low | (((x.qh[i % 32] >> (i / 32)) & 1) << 4);
}

float ref_q6_k(const BlockQ6_K* w, const BlockQ8_K* a, int64_t nb) {
  float sum = 0.f;
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K& x = w[b];
    int32_t s = 0;
    for (int j = 0; j < QK_K / 16; ++j) {
      int32_t sj = 0;
      for (int k = 16 * j; k < 16 * j + 16; ++k) {
        const int half = k / 128, quarter = (k % 128) / 32, l = k % 32;
        const int low_byte = x.ql[64 * half + 32 * (quarter & 1) + l];
        const int low = quarter < 2 ? (low_byte & 0xF) : (low_byte >> 4);
        const int high = (x.qh[32 * half + l] >> (2 * quarter)) & 3;
        sj += ((low | (high << 4)) - 32) * a[b].qs[k];
      }
      s += x.scales[j] * sj;
    }
    sum += a[b].d * half_to_float(x.d) * static_cast<float>(s);
  }
  return sum;
}

}  // namespace

float vec_dot_ref(GgmlType wtype, const void* wrow, const void* xq, int64_t n) {
  row_bytes(wtype, n);
  switch (kernel_for(wtype)) {
    case kF32:
    case kF16:
    case kBF16: return dot_row_f32(wtype, wrow, static_cast<const float*>(xq), n);
    case kQ8_0:
      return ref_q8_0(static_cast<const BlockQ8_0*>(wrow), static_cast<const BlockQ8_0*>(xq), n / QK8_0);
    case kQ4_K:
      return ref_k4(static_cast<const BlockQ4_K*>(wrow), static_cast<const BlockQ8_K*>(xq), n / QK_K, q4_k_quant);
    case kQ5_K:
      return ref_k4(static_cast<const BlockQ5_K*>(wrow), static_cast<const BlockQ8_K*>(xq), n / QK_K, q5_k_quant);
    case kQ6_K: return ref_q6_k(static_cast<const BlockQ6_K*>(wrow), static_cast<const BlockQ8_K*>(xq), n / QK_K);
  }
  return 0.f;
}

}  // namespace vkmoe
#endif  // HWY_ONCE
