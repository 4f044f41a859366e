// Highway kernels for matmul_rows_f32, compiled once per target by
// foreach_target.h and selected at run time with HWY_DYNAMIC_DISPATCH.
#include "cpu/simd_batch.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"

#undef HWY_TARGET_INCLUDE
#define HWY_TARGET_INCLUDE "cpu/simd_batch.cpp"
#include <hwy/foreach_target.h>  // IWYU pragma: keep
#include <hwy/highway.h>

#ifndef VKMOE_SIMD_BATCH_ONCE
#define VKMOE_SIMD_BATCH_ONCE
namespace vkmoe::simd_batch_detail {

// Weight rows decoded per tile; each decoded tile is used for every vector.
constexpr int64_t kTileRows = 4;

// Q4_K/Q5_K 6-bit scales and mins of the 8 sub-blocks (ggml's get_scale_min_k4).
inline void unpack_scales_mins(const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  for (int j = 0; j < 4; ++j) {
    sc[j] = q[j] & 63;
    mn[j] = q[j + 4] & 63;
    sc[j + 4] = (q[j + 8] & 0xF) | ((q[j] >> 6) << 4);
    mn[j + 4] = (q[j + 8] >> 4) | ((q[j + 4] >> 6) << 4);
  }
}

// Weight types: every type quant.cpp dequantizes except the activation-only Q8_K.
inline bool supported(GgmlType t) { return type_traits(t).supported && t != GgmlType::Q8_K; }

}  // namespace vkmoe::simd_batch_detail
#endif  // VKMOE_SIMD_BATCH_ONCE

HWY_BEFORE_NAMESPACE();
namespace vkmoe {
namespace HWY_NAMESPACE {
namespace hn = hwy::HWY_NAMESPACE;
using namespace simd_batch_detail;

// Decoding works on at most 16 floats so a vector never spans two scale groups.
using DFx = hn::CappedTag<float, 16>;
using DIx = hn::RebindToSigned<DFx>;

HWY_INLINE hn::Vec<DFx> U8ToF(const uint8_t* p) {
  return hn::ConvertTo(DFx(), hn::PromoteTo(DIx(), hn::LoadU(hn::Rebind<uint8_t, DIx>(), p)));
}
HWY_INLINE hn::Vec<DIx> U8ToI(const uint8_t* p) { return hn::PromoteTo(DIx(), hn::LoadU(hn::Rebind<uint8_t, DIx>(), p)); }

// ---- one row to f32, values as dequantize_row ----

void DecodeF16(const uint16_t* w, float* out, int64_t n) {
  const DFx df;
  const hn::Rebind<hwy::float16_t, DFx> dh;
  const auto* wh = reinterpret_cast<const hwy::float16_t*>(w);
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(dh, wh + i)), df, out + i);
  for (; i < n; ++i) out[i] = fp16_to_fp32(w[i]);
}

void DecodeBF16(const uint16_t* w, float* out, int64_t n) {
  const DFx df;
  const hn::Rebind<hwy::bfloat16_t, DFx> db;
  const auto* wb = reinterpret_cast<const hwy::bfloat16_t*>(w);
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  int64_t i = 0;
  for (; i + N <= n; i += N) hn::StoreU(hn::PromoteTo(df, hn::LoadU(db, wb + i)), df, out + i);
  for (; i < n; ++i) out[i] = bf16_to_fp32(w[i]);
}

void DecodeQ8_0(const BlockQ8_0* w, float* out, int64_t nb) {
  const DFx df;
  const size_t N = hn::Lanes(df);
  for (int64_t b = 0; b < nb; ++b, out += QK8_0) {
    const auto d = hn::Set(df, fp16_to_fp32(w[b].d));
    for (size_t i = 0; i < QK8_0; i += N) {
      const auto q = hn::PromoteTo(DIx(), hn::LoadU(hn::Rebind<int8_t, DIx>(), w[b].qs + i));
      hn::StoreU(hn::Mul(d, hn::ConvertTo(df, q)), df, out + i);
    }
  }
}

// Q4_K (kHighBits = false) and Q5_K (true): group 2c holds the low nibbles of
// qs[32c..32c+32), group 2c+1 the high nibbles; Q5_K adds bit j of qh[l] as
// bit 4 of element l of group j. Value: d * sc[j] * q - dmin * mn[j].
template <bool kHighBits, class Block>
void DecodeK4(const Block* w, float* out, int64_t nb) {
  const DFx df;
  const DIx di;
  const size_t N = hn::Lanes(df);
  const auto low4 = hn::Set(di, 0xF), one = hn::Set(di, 1);
  for (int64_t b = 0; b < nb; ++b, out += QK_K) {
    const Block& blk = w[b];
    uint8_t sc[8], mn[8];
    unpack_scales_mins(blk.scales, sc, mn);
    const float d = fp16_to_fp32(blk.d), dmin = fp16_to_fp32(blk.dmin);
    for (int c = 0; c < 4; ++c) {
      const auto d_lo = hn::Set(df, d * sc[2 * c]), d_hi = hn::Set(df, d * sc[2 * c + 1]);
      const auto m_lo = hn::Set(df, dmin * mn[2 * c]), m_hi = hn::Set(df, dmin * mn[2 * c + 1]);
      for (size_t off = 0; off < 32; off += N) {
        const auto q = U8ToI(blk.qs + 32 * c + off);
        auto lo = hn::And(q, low4), hi = hn::ShiftRight<4>(q);
        if constexpr (kHighBits) {
          const auto h = hn::ShiftRightSame(U8ToI(blk.qh + off), 2 * c);
          lo = hn::Or(lo, hn::ShiftLeft<4>(hn::And(h, one)));
          hi = hn::Or(hi, hn::ShiftLeft<4>(hn::And(hn::ShiftRight<1>(h), one)));
        }
        hn::StoreU(hn::Sub(hn::Mul(d_lo, hn::ConvertTo(df, lo)), m_lo), df, out + 64 * c + off);
        hn::StoreU(hn::Sub(hn::Mul(d_hi, hn::ConvertTo(df, hi)), m_hi), df, out + 64 * c + 32 + off);
      }
    }
  }
}

// Q6_K: per half of 128, element 32k + l (quarter k) has its low nibble in
// ql[l] (k = 0, 2) or ql[32 + l] (k = 1, 3), low for k < 2, high otherwise,
// bits 2k..2k+1 of qh[l] on top, minus 32; value d * scales[i / 16] * q.
void DecodeQ6_K(const BlockQ6_K* w, float* out, int64_t nb) {
  const DFx df;
  const DIx di;
  const size_t N = hn::Lanes(df);
  const auto low4 = hn::Set(di, 0xF), low2 = hn::Set(di, 3), bias = hn::Set(di, 32);
  for (int64_t b = 0; b < nb; ++b, out += QK_K) {
    const BlockQ6_K& blk = w[b];
    const float d = fp16_to_fp32(blk.d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = blk.ql + 64 * half;
      const uint8_t* qh = blk.qh + 32 * half;
      const int8_t* sc = blk.scales + 8 * half;
      float* o = out + 128 * half;
      for (size_t off = 0; off < 32; off += N) {
        const auto l0 = U8ToI(ql + off), l1 = U8ToI(ql + 32 + off), h = U8ToI(qh + off);
        const int is = static_cast<int>(off / 16);
        const auto q0 = hn::Sub(hn::Or(hn::And(l0, low4), hn::ShiftLeft<4>(hn::And(h, low2))), bias);
        const auto q1 = hn::Sub(hn::Or(hn::And(l1, low4), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<2>(h), low2))), bias);
        const auto q2 = hn::Sub(hn::Or(hn::ShiftRight<4>(l0), hn::ShiftLeft<4>(hn::And(hn::ShiftRight<4>(h), low2))), bias);
        const auto q3 = hn::Sub(hn::Or(hn::ShiftRight<4>(l1), hn::ShiftLeft<4>(hn::ShiftRight<6>(h))), bias);
        hn::StoreU(hn::Mul(hn::Set(df, d * sc[is + 0]), hn::ConvertTo(df, q0)), df, o + off);
        hn::StoreU(hn::Mul(hn::Set(df, d * sc[is + 2]), hn::ConvertTo(df, q1)), df, o + 32 + off);
        hn::StoreU(hn::Mul(hn::Set(df, d * sc[is + 4]), hn::ConvertTo(df, q2)), df, o + 64 + off);
        hn::StoreU(hn::Mul(hn::Set(df, d * sc[is + 6]), hn::ConvertTo(df, q3)), df, o + 96 + off);
      }
    }
  }
}

// Row in f32: F32 rows are used in place, the others decoded into buf.
const float* DecodeRow(GgmlType t, const uint8_t* row, float* buf, int64_t n) {
  switch (t) {
    case GgmlType::F32: return reinterpret_cast<const float*>(row);
    case GgmlType::F16: DecodeF16(reinterpret_cast<const uint16_t*>(row), buf, n); break;
    case GgmlType::BF16: DecodeBF16(reinterpret_cast<const uint16_t*>(row), buf, n); break;
    case GgmlType::Q8_0: DecodeQ8_0(reinterpret_cast<const BlockQ8_0*>(row), buf, n / QK8_0); break;
    case GgmlType::Q4_K: DecodeK4<false>(reinterpret_cast<const BlockQ4_K*>(row), buf, n / QK_K); break;
    case GgmlType::Q5_K: DecodeK4<true>(reinterpret_cast<const BlockQ5_K*>(row), buf, n / QK_K); break;
    case GgmlType::Q6_K: DecodeQ6_K(reinterpret_cast<const BlockQ6_K*>(row), buf, n / QK_K); break;
    // The low-bit types decode with the scalar reference: once per tile of
    // rows for all the vectors, so it is a small part of the work.
    default: dequantize_row(t, row, buf, n); break;
  }
  return buf;
}

// ---- R decoded rows x T vectors ----
// One accumulator vector per (row, vector) pair, summed over i in order, then
// reduced across lanes and finished by a scalar fma tail: the same operations
// for a pair whatever R and T, hence bit-identical results.
template <int R, int T>
HWY_INLINE void TileDot(const float* const* wr, const float* const* xt, int64_t n, float* y, int64_t y_stride) {
  const hn::ScalableTag<float> df;
  const int64_t N = static_cast<int64_t>(hn::Lanes(df));
  hn::Vec<decltype(df)> acc[R][T];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) acc[r][t] = hn::Zero(df);
  int64_t i = 0;
  for (; i + N <= n; i += N) {
    hn::Vec<decltype(df)> wv[R];
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) wv[r] = hn::LoadU(df, wr[r] + i);
#pragma GCC unroll 16
    for (int t = 0; t < T; ++t) {
      const auto xv = hn::LoadU(df, xt[t] + i);
#pragma GCC unroll 16
      for (int r = 0; r < R; ++r) acc[r][t] = hn::MulAdd(wv[r], xv, acc[r][t]);
    }
  }
  for (int r = 0; r < R; ++r) {
    for (int t = 0; t < T; ++t) {
      float s = hn::GetLane(hn::SumOfLanes(df, acc[r][t]));
      for (int64_t j = i; j < n; ++j) s = std::fma(wr[r][j], xt[t][j], s);
      y[t * y_stride + r] = s;
    }
  }
}

// Vectors per tile: 4 x 4 accumulators fit 32 registers, 4 x 2 fit 16.
constexpr int kTileVecs = HWY_MAX_BYTES >= 64 ? 4 : 2;

template <int R>
HWY_INLINE void RowsTimesVectors(const float* const* wr, const float* const* x, int n_tok, int64_t n, float* y,
                                 int64_t y_stride) {
  int t = 0;
  for (; t + kTileVecs <= n_tok; t += kTileVecs) TileDot<R, kTileVecs>(wr, x + t, n, y + t * y_stride, y_stride);
  switch (n_tok - t) {
    case 3: return TileDot<R, 3>(wr, x + t, n, y + t * y_stride, y_stride);
    case 2: return TileDot<R, 2>(wr, x + t, n, y + t * y_stride, y_stride);
    case 1: return TileDot<R, 1>(wr, x + t, n, y + t * y_stride, y_stride);
    default: return;
  }
}

void MatmulRowsF32(GgmlType t, const uint8_t* w, size_t stride, const float* const* x, int n_tok, float* y,
                   int64_t y_stride, int64_t r0, int64_t r1, int64_t n) {
  std::vector<float> buf(t == GgmlType::F32 ? 0 : kTileRows * n);
  const float* rows[kTileRows];
  for (int64_t r = r0; r < r1; r += kTileRows) {
    const int64_t tile = std::min(kTileRows, r1 - r);
    for (int64_t k = 0; k < tile; ++k) rows[k] = DecodeRow(t, w + (r + k) * stride, buf.data() + k * n, n);
    float* yt = y + (r - r0);
    if (tile == kTileRows) {
      RowsTimesVectors<kTileRows>(rows, x, n_tok, n, yt, y_stride);
    } else {
      for (int64_t k = 0; k < tile; ++k) RowsTimesVectors<1>(rows + k, x, n_tok, n, yt + k, y_stride);
    }
  }
}

}  // namespace HWY_NAMESPACE
}  // namespace vkmoe
HWY_AFTER_NAMESPACE();

#if HWY_ONCE
namespace vkmoe {

HWY_EXPORT(MatmulRowsF32);

void matmul_rows_f32(GgmlType wtype, const uint8_t* w, const float* const* x, int n_tok, float* y, int64_t y_stride,
                     int64_t r0, int64_t r1, int64_t n) {
  if (!simd_batch_detail::supported(wtype))
    throw Error(std::string("matmul_rows_f32: weight type ") + type_name(wtype) + " is not supported");
  const size_t stride = row_bytes(wtype, n);
  if (r1 <= r0 || n_tok <= 0) return;
  HWY_DYNAMIC_DISPATCH(MatmulRowsF32)(wtype, w, stride, x, n_tok, y, y_stride, r0, r1, n);
}

}  // namespace vkmoe
#endif  // HWY_ONCE
