// Highway kernels, compiled once per target by foreach_target.h and selected
// at run time with HWY_DYNAMIC_DISPATCH.
#include "cpu/simd_kernels.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"

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
enum Kernel : int {
  kF32, kF16, kBF16, kQ8_0, kQ4_K, kQ5_K, kQ6_K,
  kQ4_0, kQ4_1, kQ5_0, kQ5_1, kIQ4_NL, kMXFP4, kQ2_K, kQ3_K, kIQ4_XS
};

inline Kernel kernel_for(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return kF32;
    case GgmlType::F16: return kF16;
    case GgmlType::BF16: return kBF16;
    case GgmlType::Q8_0: return kQ8_0;
    case GgmlType::Q4_K: return kQ4_K;
    case GgmlType::Q5_K: return kQ5_K;
    case GgmlType::Q6_K: return kQ6_K;
    case GgmlType::Q4_0: return kQ4_0;
    case GgmlType::Q4_1: return kQ4_1;
    case GgmlType::Q5_0: return kQ5_0;
    case GgmlType::Q5_1: return kQ5_1;
    case GgmlType::IQ4_NL: return kIQ4_NL;
    case GgmlType::MXFP4: return kMXFP4;
    case GgmlType::Q2_K: return kQ2_K;
    case GgmlType::Q3_K: return kQ3_K;
    case GgmlType::IQ4_XS: return kIQ4_XS;
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

// Same as unpack_scales_k4 with 32-bit word operations (little-endian):
// out[0..7] = scales, out[8..15] = mins.
inline void unpack_scales_mins_k4(const uint8_t* q, uint8_t* out) {
  static_assert(std::endian::native == std::endian::little);
  uint32_t a, b, c;
  std::memcpy(&a, q, 4);
  std::memcpy(&b, q + 4, 4);
  std::memcpy(&c, q + 8, 4);
  const uint32_t sc_lo = a & 0x3F3F3F3Fu, mn_lo = b & 0x3F3F3F3Fu;
  const uint32_t sc_hi = (c & 0x0F0F0F0Fu) | ((a >> 2) & 0x30303030u);
  const uint32_t mn_hi = ((c >> 4) & 0x0F0F0F0Fu) | ((b >> 2) & 0x30303030u);
  std::memcpy(out, &sc_lo, 4);
  std::memcpy(out + 4, &sc_hi, 4);
  std::memcpy(out + 8, &mn_lo, 4);
  std::memcpy(out + 12, &mn_hi, 4);
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
  auto acc0 = hn::Zero(df), acc1 = hn::Zero(df), acc2 = hn::Zero(df), acc3 = hn::Zero(df);
  int64_t i = 0;
  for (; i + 4 * N <= n; i += 4 * N) {
    acc0 = hn::MulAdd(load_w(df, i), hn::LoadU(df, x + i), acc0);
    acc1 = hn::MulAdd(load_w(df, i + N), hn::LoadU(df, x + i + N), acc1);
    acc2 = hn::MulAdd(load_w(df, i + 2 * N), hn::LoadU(df, x + i + 2 * N), acc2);
    acc3 = hn::MulAdd(load_w(df, i + 3 * N), hn::LoadU(df, x + i + 3 * N), acc3);
  }
  for (; i + N <= n; i += N) acc0 = hn::MulAdd(load_w(df, i), hn::LoadU(df, x + i), acc0);
  float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(acc0, acc1), hn::Add(acc2, acc3))));
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

#include "cpu/simd_lowbit.inc"

#undef VKMOE_BYTE_DOT  // defined once per target
#if HWY_TARGET == HWY_AVX2 || HWY_TARGET == HWY_AVX3
#include "cpu/simd_dot_x86.inc"
#define VKMOE_BYTE_DOT(generic, bytes) bytes
#else
#define VKMOE_BYTE_DOT(generic, bytes) generic
#endif

HWY_INLINE float DotRowImpl(int kernel, const uint8_t* w, const void* xq, int64_t n) {
  const auto* a0 = static_cast<const BlockQ8_0*>(xq);
  const auto* ak = static_cast<const BlockQ8_K*>(xq);
  switch (kernel) {
    case kF32: return DotF32(reinterpret_cast<const float*>(w), static_cast<const float*>(xq), n);
    case kF16: return DotF16(reinterpret_cast<const uint16_t*>(w), static_cast<const float*>(xq), n);
    case kBF16: return DotBF16(reinterpret_cast<const uint16_t*>(w), static_cast<const float*>(xq), n);
    case kQ8_0:
      return VKMOE_BYTE_DOT(DotQ8_0, DotQ8_0Bytes)(reinterpret_cast<const BlockQ8_0*>(w), a0, n / QK8_0);
    case kQ4_K:
      return VKMOE_BYTE_DOT(DotQ4_K, DotK4Bytes<false>)(reinterpret_cast<const BlockQ4_K*>(w), ak, n / QK_K);
    case kQ5_K:
      return VKMOE_BYTE_DOT(DotQ5_K, DotK4Bytes<true>)(reinterpret_cast<const BlockQ5_K*>(w), ak, n / QK_K);
    case kQ6_K:
      return VKMOE_BYTE_DOT(DotQ6_K, DotQ6_KBytes)(reinterpret_cast<const BlockQ6_K*>(w), ak, n / QK_K);
    case kQ4_0: return DotQ32Q8<kQ4_0>(w, a0, n / 32);
    case kQ4_1: return DotQ32Q8<kQ4_1>(w, a0, n / 32);
    case kQ5_0: return DotQ32Q8<kQ5_0>(w, a0, n / 32);
    case kQ5_1: return DotQ32Q8<kQ5_1>(w, a0, n / 32);
    case kIQ4_NL: return DotQ32Q8<kIQ4_NL>(w, a0, n / 32);
    case kMXFP4: return DotQ32Q8<kMXFP4>(w, a0, n / 32);
    case kQ2_K: return DotLowKQ8<kQ2_K>(w, ak, n / QK_K);
    case kQ3_K: return DotLowKQ8<kQ3_K>(w, ak, n / QK_K);
    case kIQ4_XS: return DotLowKQ8<kIQ4_XS>(w, ak, n / QK_K);
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
    case kQ4_0: return RowsFor<kQ4_0>(w, stride, xq, y, r0, r1, n);
    case kQ4_1: return RowsFor<kQ4_1>(w, stride, xq, y, r0, r1, n);
    case kQ5_0: return RowsFor<kQ5_0>(w, stride, xq, y, r0, r1, n);
    case kQ5_1: return RowsFor<kQ5_1>(w, stride, xq, y, r0, r1, n);
    case kIQ4_NL: return RowsFor<kIQ4_NL>(w, stride, xq, y, r0, r1, n);
    case kMXFP4: return RowsFor<kMXFP4>(w, stride, xq, y, r0, r1, n);
    case kQ2_K: return RowsFor<kQ2_K>(w, stride, xq, y, r0, r1, n);
    case kQ3_K: return RowsFor<kQ3_K>(w, stride, xq, y, r0, r1, n);
    case kIQ4_XS: return RowsFor<kIQ4_XS>(w, stride, xq, y, r0, r1, n);
  }
}

// ---- quantized weights x f32 activations ----
// Blocks are dequantized in registers. Within a scale group the weights are
// w = scale * q - min, so sum(w * x) = scale * sum(q * x) - min * sum(x): the
// integer quants are converted to float and multiplied by x lane-wise, and the
// group's lane sums are scaled once per group (f32 throughout, no activation
// quantization). Vectors hold at most 16 floats so one never spans two groups.
using DFx = hn::CappedTag<float, 16>;
using DIx = hn::RebindToSigned<DFx>;

HWY_INLINE hn::Vec<DIx> LoadU8AsI32(const uint8_t* p) { return hn::PromoteTo(DIx(), hn::LoadU(hn::Rebind<uint8_t, DIx>(), p)); }
HWY_INLINE hn::Vec<DIx> LoadI8AsI32(const int8_t* p) { return hn::PromoteTo(DIx(), hn::LoadU(hn::Rebind<int8_t, DIx>(), p)); }
HWY_INLINE hn::Vec<DFx> ToFloat(hn::Vec<DIx> v) { return hn::ConvertTo(DFx(), v); }

// xs[g]: sum of x over the `group`-element group g (16 or 32), for the min
// terms of Q4_K/Q5_K/Q4_1/Q5_1 (32) and Q2_K (16).
void GroupSums(const float* x, int64_t n, int group, float* xs) {
  const DFx df;
  const size_t N = hn::Lanes(df);
  for (int64_t g = 0; g < n / group; ++g, x += group) {
    auto s = hn::LoadU(df, x);
    for (size_t off = N; off < size_t(group); off += N) s = hn::Add(s, hn::LoadU(df, x + off));
    xs[g] = hn::GetLane(hn::SumOfLanes(df, s));
  }
}

// Q4_K/Q5_K scaled group factors of one block: scale[j] = d * sc[j] and
// mins += sum_j dmin * mn[j] * xs[j] (mins has at most 8 lanes).
template <class DM, class VM>
HWY_INLINE void K4Scales(DM dm, const uint8_t* packed, float d, float dmin, const float* xs, float* scale, VM& mins) {
  uint8_t sc_mn[16];
  unpack_scales_mins_k4(packed, sc_mn);
  const hn::RebindToSigned<DM> di;
  const hn::Rebind<uint8_t, DM> du8;
  for (size_t j = 0; j < 8; j += hn::Lanes(dm)) {
    const auto sc = hn::ConvertTo(dm, hn::PromoteTo(di, hn::LoadU(du8, sc_mn + j)));
    const auto mn = hn::ConvertTo(dm, hn::PromoteTo(di, hn::LoadU(du8, sc_mn + 8 + j)));
    hn::StoreU(hn::Mul(hn::Set(dm, d), sc), dm, scale + j);
    mins = hn::MulAdd(hn::Mul(hn::Set(dm, dmin), mn), hn::LoadU(dm, xs + j), mins);
  }
}

// Q4_K (kHighBits = false) and Q5_K (true): 8 groups of 32 per block; group
// 2c holds the low nibbles of qs[32c..32c+32), group 2c+1 the high nibbles; Q5_K
// adds bit j of qh[l] as bit 4 of element l of group j.
template <bool kHighBits, class Block>
HWY_INLINE float DotK4F32(const Block* w, const float* x, const float* xs, int64_t nb) {
  const DFx df;
  const DIx di;
  const hn::CappedTag<float, 8> dm;
  const size_t N = hn::Lanes(df);
  const auto low4 = hn::Set(di, 0xF), one = hn::Set(di, 1);
  auto acc0 = hn::Zero(df), acc1 = hn::Zero(df), acc2 = hn::Zero(df), acc3 = hn::Zero(df);
  auto mins = hn::Zero(dm);
  HWY_ALIGN float scale[8];
  for (int64_t b = 0; b < nb; ++b, x += QK_K, xs += 8) {
    const Block& blk = w[b];
    K4Scales(dm, blk.scales, half_to_float(blk.d), half_to_float(blk.dmin), xs, scale, mins);
    for (int c = 0; c < 4; c += 2) {  // groups 2c .. 2c+3
      const uint8_t* qs = blk.qs + 32 * c;
      const float* xc = x + 64 * c;
      auto s0 = hn::Zero(df), s1 = hn::Zero(df), s2 = hn::Zero(df), s3 = hn::Zero(df);
      for (size_t off = 0; off < 32; off += N) {
        const auto qa = LoadU8AsI32(qs + off), qb = LoadU8AsI32(qs + 32 + off);
        auto q0 = hn::And(qa, low4), q1 = hn::ShiftRight<4>(qa);
        auto q2 = hn::And(qb, low4), q3 = hn::ShiftRight<4>(qb);
        if constexpr (kHighBits) {
          const auto h = hn::ShiftRightSame(LoadU8AsI32(blk.qh + off), 2 * c);
          q0 = hn::Or(q0, hn::ShiftLeft<4>(hn::And(h, one)));
          q1 = hn::Or(q1, hn::ShiftLeft<4>(hn::And(hn::ShiftRight<1>(h), one)));
          q2 = hn::Or(q2, hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), one)));
          q3 = hn::Or(q3, hn::ShiftLeft<4>(hn::And(hn::ShiftRight<3>(h), one)));
        }
        s0 = hn::MulAdd(ToFloat(q0), hn::LoadU(df, xc + off), s0);
        s1 = hn::MulAdd(ToFloat(q1), hn::LoadU(df, xc + 32 + off), s1);
        s2 = hn::MulAdd(ToFloat(q2), hn::LoadU(df, xc + 64 + off), s2);
        s3 = hn::MulAdd(ToFloat(q3), hn::LoadU(df, xc + 96 + off), s3);
      }
      acc0 = hn::MulAdd(hn::Set(df, scale[2 * c + 0]), s0, acc0);
      acc1 = hn::MulAdd(hn::Set(df, scale[2 * c + 1]), s1, acc1);
      acc2 = hn::MulAdd(hn::Set(df, scale[2 * c + 2]), s2, acc2);
      acc3 = hn::MulAdd(hn::Set(df, scale[2 * c + 3]), s3, acc3);
    }
  }
  const float sum = hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(acc0, acc1), hn::Add(acc2, acc3))));
  return sum - hn::GetLane(hn::SumOfLanes(dm, mins));
}

// Q6_K: two halves of 128; in each, element 32k + l (quarter k) has its low
// nibble in ql[l] (k = 0, 2) or ql[32 + l] (k = 1, 3), low nibble for k < 2 and
// high nibble otherwise, and bits 2k..2k+1 of qh[l] on top; groups of 16 share
// an int8 scale; quants are offset by 32.
HWY_INLINE float DotQ6_KF32(const BlockQ6_K* w, const float* x, int64_t nb) {
  const DFx df;
  const DIx di;
  const size_t N = hn::Lanes(df);
  const auto low4 = hn::Set(di, 0xF), low2 = hn::Set(di, 3), bias = hn::Set(di, 32);
  auto acc0 = hn::Zero(df), acc1 = hn::Zero(df), acc2 = hn::Zero(df), acc3 = hn::Zero(df);
  HWY_ALIGN float scale[QK_K / 16];
  for (int64_t b = 0; b < nb; ++b) {
    const BlockQ6_K& blk = w[b];
    const auto d = hn::Set(df, half_to_float(blk.d));
    for (size_t j = 0; j < QK_K / 16; j += N) hn::StoreU(hn::Mul(d, ToFloat(LoadI8AsI32(blk.scales + j))), df, scale + j);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = blk.ql + 64 * half;
      const uint8_t* qh = blk.qh + 32 * half;
      const float* sc = scale + 8 * half;
      const float* xh = x + QK_K * b + 128 * half;
      for (int is = 0; is < 2; ++is) {  // the 16-element group within each quarter
        auto s0 = hn::Zero(df), s1 = hn::Zero(df), s2 = hn::Zero(df), s3 = hn::Zero(df);
        for (size_t off = 16 * is; off < size_t(16 * is + 16); off += N) {
          const auto l0 = LoadU8AsI32(ql + off), l1 = LoadU8AsI32(ql + 32 + off), h = LoadU8AsI32(qh + off);
          const auto q0 = hn::Sub(hn::Or(hn::And(l0, low4), hn::ShiftLeft<4>(hn::And(h, low2))), bias);
          const auto q1 = hn::Sub(hn::Or(hn::And(l1, low4), hn::ShiftLeft<2>(hn::And(h, hn::Set(di, 0xC)))), bias);
          const auto q2 = hn::Sub(hn::Or(hn::ShiftRight<4>(l0), hn::And(h, hn::Set(di, 0x30))), bias);
          const auto q3 = hn::Sub(hn::Or(hn::ShiftRight<4>(l1), hn::ShiftRight<2>(hn::And(h, hn::Set(di, 0xC0)))), bias);
          s0 = hn::MulAdd(ToFloat(q0), hn::LoadU(df, xh + off), s0);
          s1 = hn::MulAdd(ToFloat(q1), hn::LoadU(df, xh + 32 + off), s1);
          s2 = hn::MulAdd(ToFloat(q2), hn::LoadU(df, xh + 64 + off), s2);
          s3 = hn::MulAdd(ToFloat(q3), hn::LoadU(df, xh + 96 + off), s3);
        }
        acc0 = hn::MulAdd(hn::Set(df, sc[is + 0]), s0, acc0);
        acc1 = hn::MulAdd(hn::Set(df, sc[is + 2]), s1, acc1);
        acc2 = hn::MulAdd(hn::Set(df, sc[is + 4]), s2, acc2);
        acc3 = hn::MulAdd(hn::Set(df, sc[is + 6]), s3, acc3);
      }
    }
  }
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(acc0, acc1), hn::Add(acc2, acc3))));
}

// Q8_0: one scale per 32 quants; four blocks per step into four accumulators.
HWY_INLINE hn::Vec<DFx> BlockSumQ8_0(const BlockQ8_0& blk, const float* x) {
  const DFx df;
  const size_t N = hn::Lanes(df);
  auto s = hn::Zero(df);
  for (size_t off = 0; off < QK8_0; off += N) s = hn::MulAdd(ToFloat(LoadI8AsI32(blk.qs + off)), hn::LoadU(df, x + off), s);
  return s;
}

HWY_INLINE float DotQ8_0F32(const BlockQ8_0* w, const float* x, int64_t nb) {
  const DFx df;
  auto acc0 = hn::Zero(df), acc1 = hn::Zero(df), acc2 = hn::Zero(df), acc3 = hn::Zero(df);
  int64_t b = 0;
  for (; b + 4 <= nb; b += 4, x += 4 * QK8_0) {
    acc0 = hn::MulAdd(hn::Set(df, half_to_float(w[b].d)), BlockSumQ8_0(w[b], x), acc0);
    acc1 = hn::MulAdd(hn::Set(df, half_to_float(w[b + 1].d)), BlockSumQ8_0(w[b + 1], x + QK8_0), acc1);
    acc2 = hn::MulAdd(hn::Set(df, half_to_float(w[b + 2].d)), BlockSumQ8_0(w[b + 2], x + 2 * QK8_0), acc2);
    acc3 = hn::MulAdd(hn::Set(df, half_to_float(w[b + 3].d)), BlockSumQ8_0(w[b + 3], x + 3 * QK8_0), acc3);
  }
  for (; b < nb; ++b, x += QK8_0) acc0 = hn::MulAdd(hn::Set(df, half_to_float(w[b].d)), BlockSumQ8_0(w[b], x), acc0);
  return hn::GetLane(hn::SumOfLanes(df, hn::Add(hn::Add(acc0, acc1), hn::Add(acc2, acc3))));
}

template <int K>
HWY_INLINE float DotRowF32(const uint8_t* w, const float* x, const float* xs, int64_t n) {
  if constexpr (K == kF32) return DotF32(reinterpret_cast<const float*>(w), x, n);
  if constexpr (K == kF16) return DotF16(reinterpret_cast<const uint16_t*>(w), x, n);
  if constexpr (K == kBF16) return DotBF16(reinterpret_cast<const uint16_t*>(w), x, n);
  if constexpr (K == kQ8_0) return DotQ8_0F32(reinterpret_cast<const BlockQ8_0*>(w), x, n / QK8_0);
  if constexpr (K == kQ4_K) return DotK4F32<false>(reinterpret_cast<const BlockQ4_K*>(w), x, xs, n / QK_K);
  if constexpr (K == kQ5_K) return DotK4F32<true>(reinterpret_cast<const BlockQ5_K*>(w), x, xs, n / QK_K);
  if constexpr (K == kQ6_K) return DotQ6_KF32(reinterpret_cast<const BlockQ6_K*>(w), x, n / QK_K);
  if constexpr (K == kQ4_0 || K == kQ4_1 || K == kQ5_0 || K == kQ5_1 || K == kIQ4_NL || K == kMXFP4)
    return DotQ32F32<K>(w, x, xs, n / 32);
  if constexpr (K == kQ2_K || K == kQ3_K || K == kIQ4_XS) return DotLowKF32<K>(w, x, xs, n / QK_K);
  return 0.f;
}

template <int K>
HWY_NOINLINE void RowsF32For(const uint8_t* w, size_t stride, const float* x, const float* xs, float* y, int64_t r0,
                             int64_t r1, int64_t n) {
  for (int64_t r = r0; r < r1; ++r) y[r - r0] = DotRowF32<K>(w + r * stride, x, xs, n);
}

void MatvecRowsF32(int kernel, const uint8_t* w, size_t stride, const float* x, float* y, int64_t r0, int64_t r1,
                   int64_t n) {
  // Group sums of x for the types with a min term: on the stack up to 4096
  // groups (n = 131072 for 32-element groups), else on the heap.
  const int group = kernel == kQ2_K ? 16 : (kernel == kQ4_K || kernel == kQ5_K || kernel == kQ4_1 || kernel == kQ5_1) ? 32 : 0;
  HWY_ALIGN float stack_buf[4096];
  std::vector<float> heap_buf;
  float* xs = nullptr;
  if (group) {
    const size_t need = static_cast<size_t>(n / group);
    xs = stack_buf;
    if (need > 4096) {
      heap_buf.resize(need);
      xs = heap_buf.data();
    }
    GroupSums(x, n, group, xs);
  }
  switch (kernel) {
    case kF32: return RowsF32For<kF32>(w, stride, x, xs, y, r0, r1, n);
    case kF16: return RowsF32For<kF16>(w, stride, x, xs, y, r0, r1, n);
    case kBF16: return RowsF32For<kBF16>(w, stride, x, xs, y, r0, r1, n);
    case kQ8_0: return RowsF32For<kQ8_0>(w, stride, x, xs, y, r0, r1, n);
    case kQ4_K: return RowsF32For<kQ4_K>(w, stride, x, xs, y, r0, r1, n);
    case kQ5_K: return RowsF32For<kQ5_K>(w, stride, x, xs, y, r0, r1, n);
    case kQ6_K: return RowsF32For<kQ6_K>(w, stride, x, xs, y, r0, r1, n);
    case kQ4_0: return RowsF32For<kQ4_0>(w, stride, x, xs, y, r0, r1, n);
    case kQ4_1: return RowsF32For<kQ4_1>(w, stride, x, xs, y, r0, r1, n);
    case kQ5_0: return RowsF32For<kQ5_0>(w, stride, x, xs, y, r0, r1, n);
    case kQ5_1: return RowsF32For<kQ5_1>(w, stride, x, xs, y, r0, r1, n);
    case kIQ4_NL: return RowsF32For<kIQ4_NL>(w, stride, x, xs, y, r0, r1, n);
    case kMXFP4: return RowsF32For<kMXFP4>(w, stride, x, xs, y, r0, r1, n);
    case kQ2_K: return RowsF32For<kQ2_K>(w, stride, x, xs, y, r0, r1, n);
    case kQ3_K: return RowsF32For<kQ3_K>(w, stride, x, xs, y, r0, r1, n);
    case kIQ4_XS: return RowsF32For<kIQ4_XS>(w, stride, x, xs, y, r0, r1, n);
    default: return;
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
HWY_EXPORT(MatvecRowsF32);
HWY_EXPORT(DotRow);
HWY_EXPORT(QuantizeQ8K);
HWY_EXPORT(TargetName);

GgmlType activation_type(GgmlType weight_type) {
  switch (weight_type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: return GgmlType::F32;
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4: return GgmlType::Q8_0;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::Q2_K:
    case GgmlType::Q3_K:
    case GgmlType::IQ4_XS: return GgmlType::Q8_K;
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

void matvec_rows_f32(GgmlType wtype, const uint8_t* w, const float* x, float* y, int64_t r0, int64_t r1, int64_t n) {
  const int kernel = simd_detail::kernel_for(wtype);
  const size_t stride = row_bytes(wtype, n);
  if (r1 <= r0) return;
  HWY_DYNAMIC_DISPATCH(MatvecRowsF32)(kernel, w, stride, x, y, r0, r1, n);
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

// Integer quant of element j (0..31) of a 32-element block, and its block's d, m.
int q32_quant(GgmlType t, const uint8_t* blk, int j, float* d, float* m) {
  auto nib = [&](const uint8_t* qs) { return j < 16 ? (qs[j] & 0xF) : (qs[j - 16] >> 4); };
  auto hb = [&](const uint8_t* qh) { return ((qh[j / 8] >> (j % 8)) & 1) << 4; };
  *m = 0.f;
  switch (t) {
    case GgmlType::Q4_0: {
      const auto& b = *reinterpret_cast<const BlockQ4_0*>(blk);
      *d = half_to_float(b.d);
      return nib(b.qs) - 8;
    }
    case GgmlType::Q4_1: {
      const auto& b = *reinterpret_cast<const BlockQ4_1*>(blk);
      *d = half_to_float(b.d);
      *m = half_to_float(b.m);
      return nib(b.qs);
    }
    case GgmlType::Q5_0: {
      const auto& b = *reinterpret_cast<const BlockQ5_0*>(blk);
      *d = half_to_float(b.d);
      return (nib(b.qs) | hb(b.qh)) - 16;
    }
    case GgmlType::Q5_1: {
      const auto& b = *reinterpret_cast<const BlockQ5_1*>(blk);
      *d = half_to_float(b.d);
      *m = half_to_float(b.m);
      return nib(b.qs) | hb(b.qh);
    }
    case GgmlType::IQ4_NL: {
      const auto& b = *reinterpret_cast<const BlockIQ4_NL*>(blk);
      *d = half_to_float(b.d);
      return kValuesIQ4NL[nib(b.qs)];
    }
    default: {
      const auto& b = *reinterpret_cast<const BlockMXFP4*>(blk);
      *d = e8m0_to_fp32_half(b.e);
      return kValuesMXFP4[nib(b.qs)];
    }
  }
}

float ref_q32(GgmlType t, const uint8_t* w, const BlockQ8_0* a, int64_t nb) {
  const size_t bytes = static_cast<size_t>(type_traits(t).type_size);
  float sum = 0.f;
  for (int64_t b = 0; b < nb; ++b, w += bytes) {
    int32_t s = 0, sa = 0;
    float d = 0.f, m = 0.f;
    for (int j = 0; j < 32; ++j) {
      s += q32_quant(t, w, j, &d, &m) * a[b].qs[j];
      sa += a[b].qs[j];
    }
    const float da = half_to_float(a[b].d);
    sum += d * da * static_cast<float>(s) + m * da * static_cast<float>(sa);
  }
  return sum;
}

// Q2_K / Q3_K / IQ4_XS: integer quant and group scale of element i.
int lowk_quant(GgmlType t, const uint8_t* blk, int i, int* scale, int* min) {
  const int qi = 32 * (i / 128) + i % 32, shift = 2 * ((i % 128) / 32);
  *min = 0;
  if (t == GgmlType::Q2_K) {
    const auto& b = *reinterpret_cast<const BlockQ2_K*>(blk);
    *scale = b.scales[i / 16] & 0xF;
    *min = b.scales[i / 16] >> 4;
    return (b.qs[qi] >> shift) & 3;
  }
  if (t == GgmlType::Q3_K) {
    const auto& b = *reinterpret_cast<const BlockQ3_K*>(blk);
    *scale = q3_k_scale(b.scales, i / 16) - 32;
    return ((b.qs[qi] >> shift) & 3) - (((b.hmask[i % 32] >> (i / 32)) & 1) ? 0 : 4);
  }
  const auto& b = *reinterpret_cast<const BlockIQ4_XS*>(blk);
  const int ib = i / 32, j = i % 32;
  *scale = (((b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF) | (((b.scales_h >> (2 * ib)) & 3) << 4)) - 32;
  const uint8_t byte = b.qs[16 * ib + j % 16];
  return kValuesIQ4NL[j < 16 ? (byte & 0xF) : (byte >> 4)];
}

float ref_lowk(GgmlType t, const uint8_t* w, const BlockQ8_K* a, int64_t nb) {
  const size_t bytes = static_cast<size_t>(type_traits(t).type_size);
  float sum = 0.f;
  for (int64_t b = 0; b < nb; ++b, w += bytes) {
    int32_t s = 0, mins = 0;
    for (int g = 0; g < 16; ++g) {
      int32_t sg = 0;
      int scale = 0, min = 0;
      for (int i = 16 * g; i < 16 * g + 16; ++i) sg += lowk_quant(t, w, i, &scale, &min) * a[b].qs[i];
      s += scale * sg;
      mins += min * a[b].bsums[g];
    }
    // Q2_K's d/dmin sit at the end of the block, Q3_K's d too, IQ4_XS's d first.
    float d = 0.f, dmin = 0.f;
    if (t == GgmlType::Q2_K) {
      d = half_to_float(reinterpret_cast<const BlockQ2_K*>(w)->d);
      dmin = half_to_float(reinterpret_cast<const BlockQ2_K*>(w)->dmin);
    } else if (t == GgmlType::Q3_K) {
      d = half_to_float(reinterpret_cast<const BlockQ3_K*>(w)->d);
    } else {
      d = half_to_float(reinterpret_cast<const BlockIQ4_XS*>(w)->d);
    }
    sum += a[b].d * d * static_cast<float>(s) - a[b].d * dmin * static_cast<float>(mins);
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
    case kQ4_0:
    case kQ4_1:
    case kQ5_0:
    case kQ5_1:
    case kIQ4_NL:
    case kMXFP4:
      return ref_q32(wtype, static_cast<const uint8_t*>(wrow), static_cast<const BlockQ8_0*>(xq), n / 32);
    case kQ2_K:
    case kQ3_K:
    case kIQ4_XS:
      return ref_lowk(wtype, static_cast<const uint8_t*>(wrow), static_cast<const BlockQ8_K*>(xq), n / QK_K);
  }
  return 0.f;
}

}  // namespace vkmoe
#endif  // HWY_ONCE
