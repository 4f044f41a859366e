#include "cpu/expert_ffn_exact.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/moe_route.h"
#include "cpu/thread_pool.h"
#include "engine/common.h"

// Built with -O3 -fopenmp-simd (CMakeLists.txt): the `omp simd` reductions
// below vectorize, and target_clones picks AVX-512/AVX2 at run time.
#define VKMOE_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

namespace vkmoe {
namespace {

// 6-bit scale j and min j of a Q4_K/Q5_K block (ggml's get_scale_min_k4).
inline void scale_min_k4(int j, const uint8_t* q, float& sc, float& mn) {
  if (j < 4) {
    sc = q[j] & 63;
    mn = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Sum of each run of 32 values of x: the K-quant "min" terms need only these.
std::vector<float> sums32(const float* x, int64_t n) {
  std::vector<float> s(n / 32);
  for (int64_t i = 0; i < n / 32; ++i) {
    float a = 0;
#pragma omp simd reduction(+ : a)
    for (int l = 0; l < 32; ++l) a += x[i * 32 + l];
    s[i] = a;
  }
  return s;
}

VKMOE_CLONES float dot_q4_k(const BlockQ4_K* b, const float* x, const float* sx, int64_t nb) {
  float acc = 0;
  for (int64_t i = 0; i < nb; ++i, x += QK_K, sx += 8) {
    const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int j = 0; j < 8; j += 2, q += 32) {
      float s1, m1, s2, m2, a1 = 0, a2 = 0;
      scale_min_k4(j, b[i].scales, s1, m1);
      scale_min_k4(j + 1, b[i].scales, s2, m2);
      const float* x1 = x + 32 * j;
#pragma omp simd reduction(+ : a1, a2)
      for (int l = 0; l < 32; ++l) {
        a1 += float(q[l] & 0xF) * x1[l];
        a2 += float(q[l] >> 4) * x1[l + 32];
      }
      acc += d * (s1 * a1 + s2 * a2) - dmin * (m1 * sx[j] + m2 * sx[j + 1]);
    }
  }
  return acc;
}

VKMOE_CLONES float dot_q5_k(const BlockQ5_K* b, const float* x, const float* sx, int64_t nb) {
  float acc = 0;
  for (int64_t i = 0; i < nb; ++i, x += QK_K, sx += 8) {
    const float d = fp16_to_fp32(b[i].d), dmin = fp16_to_fp32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    const uint8_t* qh = b[i].qh;
    for (int j = 0; j < 8; j += 2, q += 32) {
      float s1, m1, s2, m2, a1 = 0, a2 = 0;
      scale_min_k4(j, b[i].scales, s1, m1);
      scale_min_k4(j + 1, b[i].scales, s2, m2);
      const float* x1 = x + 32 * j;
      const int lo = j, hi = j + 1;
#pragma omp simd reduction(+ : a1, a2)
      for (int l = 0; l < 32; ++l) {
        a1 += float((q[l] & 0xF) | (((qh[l] >> lo) & 1) << 4)) * x1[l];
        a2 += float((q[l] >> 4) | (((qh[l] >> hi) & 1) << 4)) * x1[l + 32];
      }
      acc += d * (s1 * a1 + s2 * a2) - dmin * (m1 * sx[j] + m2 * sx[j + 1]);
    }
  }
  return acc;
}

VKMOE_CLONES float dot_q6_k(const BlockQ6_K* b, const float* x, int64_t nb) {
  float acc = 0;
  for (int64_t i = 0; i < nb; ++i, x += QK_K) {
    const float d = fp16_to_fp32(b[i].d);
    for (int half = 0; half < 2; ++half) {
      const uint8_t* ql = b[i].ql + 64 * half;
      const uint8_t* qh = b[i].qh + 32 * half;
      const int8_t* sc = b[i].scales + 8 * half;
      const float* xh = x + 128 * half;
      // Quarter k holds values 32k..32k+31 of the half; scales change every 16.
      float a[8] = {0, 0, 0, 0, 0, 0, 0, 0};
      for (int part = 0; part < 2; ++part) {
        float b0 = 0, b1 = 0, b2 = 0, b3 = 0;
        const int o = 16 * part;
#pragma omp simd reduction(+ : b0, b1, b2, b3)
        for (int l = o; l < o + 16; ++l) {
          b0 += float(int((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32) * xh[l];
          b1 += float(int((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * xh[l + 32];
          b2 += float(int((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * xh[l + 64];
          b3 += float(int((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * xh[l + 96];
        }
        a[part + 0] = b0, a[part + 2] = b1, a[part + 4] = b2, a[part + 6] = b3;
      }
      float s = 0;
      for (int k = 0; k < 8; ++k) s += sc[k] * a[k];
      acc += d * s;
    }
  }
  return acc;
}

VKMOE_CLONES float dot_q8_0(const BlockQ8_0* b, const float* x, int64_t nb) {
  float acc = 0;
  for (int64_t i = 0; i < nb; ++i, x += QK8_0) {
    float a = 0;
#pragma omp simd reduction(+ : a)
    for (int l = 0; l < QK8_0; ++l) a += float(b[i].qs[l]) * x[l];
    acc += fp16_to_fp32(b[i].d) * a;
  }
  return acc;
}

VKMOE_CLONES float dot_f32(const float* w, const float* x, int64_t n) {
  float acc = 0;
#pragma omp simd reduction(+ : acc)
  for (int64_t i = 0; i < n; ++i) acc += w[i] * x[i];
  return acc;
}

// One input vector with what the row kernels share across rows.
struct Input {
  const float* x;
  int64_t n;
  std::vector<float> sx;  // sums32(x), for Q4_K/Q5_K
};

float row_dot(GgmlType t, const uint8_t* row, const Input& in, float* scratch) {
  const int64_t nb = in.n / QK_K;
  switch (t) {
    case GgmlType::Q4_K: return dot_q4_k(reinterpret_cast<const BlockQ4_K*>(row), in.x, in.sx.data(), nb);
    case GgmlType::Q5_K: return dot_q5_k(reinterpret_cast<const BlockQ5_K*>(row), in.x, in.sx.data(), nb);
    case GgmlType::Q6_K: return dot_q6_k(reinterpret_cast<const BlockQ6_K*>(row), in.x, nb);
    case GgmlType::Q8_0: return dot_q8_0(reinterpret_cast<const BlockQ8_0*>(row), in.x, in.n / QK8_0);
    default: return dot_row_dequant(t, row, in.x, in.n, scratch);
  }
}

}  // namespace

float dot_row_dequant(GgmlType t, const uint8_t* row, const float* x, int64_t n, float* scratch) {
  if (t == GgmlType::F32) return dot_f32(reinterpret_cast<const float*>(row), x, n);
  dequantize_row(t, row, scratch, n);
  return dot_f32(scratch, x, n);
}

void moe_ffn_cpu_exact(const ExpertView* experts, const float* weights, int n, const float* x, float* out,
                       ThreadPool& pool) {
  if (n <= 0) return;
  const int64_t E = experts[0].n_embd, F = experts[0].n_ff;
  for (int k = 0; k < n; ++k) {
    const ExpertView& e = experts[k];
    if (e.n_embd != E || e.n_ff != F) throw Error("moe_ffn_cpu_exact: experts differ in shape");
    row_bytes(e.gate_type, E), row_bytes(e.up_type, E), row_bytes(e.down_type, F);  // validates types
  }
  const Input xin{x, E, E % 32 == 0 ? sums32(x, E) : std::vector<float>()};
  std::vector<float> h(n * F);
  pool.parallel_for(n * F, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(E);
    for (int64_t i = begin; i < end; ++i) {
      const ExpertView& e = experts[i / F];
      const int64_t r = i % F;
      const float g = row_dot(e.gate_type, e.gate + r * row_bytes(e.gate_type, E), xin, scratch.data());
      const float u = row_dot(e.up_type, e.up + r * row_bytes(e.up_type, E), xin, scratch.data());
      h[i] = silu(g) * u;
    }
  });
  std::vector<Input> hin;
  for (int k = 0; k < n; ++k)
    hin.push_back({&h[k * F], F, F % 32 == 0 ? sums32(&h[k * F], F) : std::vector<float>()});
  pool.parallel_for(E, [&](int64_t begin, int64_t end) {
    std::vector<float> scratch(F);
    for (int64_t r = begin; r < end; ++r) {
      float acc = 0;
      for (int k = 0; k < n; ++k) {
        const ExpertView& e = experts[k];
        acc += weights[k] * row_dot(e.down_type, e.down + r * row_bytes(e.down_type, F), hin[k], scratch.data());
      }
      out[r] = acc;
    }
  });
}

}  // namespace vkmoe
