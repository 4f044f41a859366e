// Tests of the Highway CPU kernels, the thread pool and the CPU expert FFN.
#include <gtest/gtest.h>

#include <hwy/targets.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <cstdio>
#include <stdexcept>
#include <thread>
#include <vector>

#include "cpu/expert_ffn.h"
#include "cpu/quant.h"
#include "cpu/simd_kernels.h"
#include "cpu/thread_pool.h"
#include "base/error.h"
#include "tests/simd_test_util.h"
#include "tests/seed.h"

using namespace vkmoe;
using namespace vkmoe::test;

namespace {

const GgmlType kWeightTypes[] = {GgmlType::F32,  GgmlType::F16,    GgmlType::BF16,   GgmlType::Q8_0,
                                 GgmlType::Q4_K, GgmlType::Q5_K,   GgmlType::Q6_K,   GgmlType::Q4_0,
                                 GgmlType::Q4_1, GgmlType::Q5_0,   GgmlType::Q5_1,   GgmlType::IQ4_NL,
                                 GgmlType::MXFP4, GgmlType::Q2_K,  GgmlType::Q3_K,   GgmlType::IQ4_XS};

std::vector<uint8_t> quantized(GgmlType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, x.size()));
  quantize_row(t, x.data(), q.data(), x.size());
  return q;
}

std::vector<float> dequantized(GgmlType t, const void* q, int64_t n) {
  std::vector<float> y(n);
  dequantize_row(t, q, y.data(), n);
  return y;
}

// Worst-case |x_i - dequantized activation_i| per element: half a quant step
// (Q8_K: |d|/2; Q8_0: d/2 plus the fp16 rounding of d, <= 127 * d * 2^-11),
// zero for f32 activations.
std::vector<float> activation_error_bound(GgmlType wtype, const void* xq, int64_t n) {
  std::vector<float> bound(n, 0.f);
  const GgmlType at = activation_type(wtype);
  if (at == GgmlType::Q8_K) {
    const auto* b = static_cast<const BlockQ8_K*>(xq);
    for (int64_t i = 0; i < n; ++i) bound[i] = 0.5f * std::fabs(b[i / QK_K].d) * 1.0001f;
  } else if (at == GgmlType::Q8_0) {
    const auto* b = static_cast<const BlockQ8_0*>(xq);
    for (int64_t i = 0; i < n; ++i) bound[i] = 0.57f * fp16_to_fp32(b[i / QK8_0].d);
  }
  return bound;
}

}  // namespace

TEST(SimdKernels, ReportsTarget) {
  const char* name = simd_target_name();
  ASSERT_NE(name, nullptr);
  EXPECT_GT(std::strlen(name), 0u);
  EXPECT_STRNE(name, "?");
  std::string all;
  for (int64_t t : hwy::SupportedAndGeneratedTargets()) all += std::string(" ") + hwy::TargetName(t);
  std::printf("dispatched target: %s; testable targets:%s\n", name, all.c_str());
}

TEST(SimdKernels, ActivationTypes) {
  EXPECT_EQ(activation_type(GgmlType::Q4_K), GgmlType::Q8_K);
  EXPECT_EQ(activation_type(GgmlType::Q5_K), GgmlType::Q8_K);
  EXPECT_EQ(activation_type(GgmlType::Q6_K), GgmlType::Q8_K);
  EXPECT_EQ(activation_type(GgmlType::Q8_0), GgmlType::Q8_0);
  EXPECT_EQ(activation_type(GgmlType::F16), GgmlType::F32);
  EXPECT_EQ(activation_type(GgmlType::BF16), GgmlType::F32);
  EXPECT_EQ(activation_bytes(GgmlType::Q4_K, 2048), 8u * sizeof(BlockQ8_K));
  EXPECT_EQ(activation_bytes(GgmlType::Q8_0, 64), 2u * sizeof(BlockQ8_0));
  EXPECT_EQ(activation_bytes(GgmlType::BF16, 10), 40u);
  EXPECT_EQ(activation_type(GgmlType::Q4_1), GgmlType::Q8_0);
  EXPECT_EQ(activation_type(GgmlType::MXFP4), GgmlType::Q8_0);
  EXPECT_EQ(activation_type(GgmlType::IQ4_XS), GgmlType::Q8_K);
  EXPECT_EQ(activation_type(GgmlType::Q2_K), GgmlType::Q8_K);
  EXPECT_THROW(activation_type(GgmlType::Q8_1), Error);
  std::vector<uint8_t> buf(4096);
  std::vector<float> y(4);
  EXPECT_THROW(vec_dot(GgmlType::Q8_K, buf.data(), buf.data(), 256), Error);
  EXPECT_THROW(matvec_rows(static_cast<GgmlType>(16), buf.data(), buf.data(), y.data(), 0, 1, 256), Error);  // IQ2_XXS
  EXPECT_THROW(matvec_rows(GgmlType::Q3_K, buf.data(), buf.data(), y.data(), 0, 1, 96), Error);
  EXPECT_THROW(matvec_rows(GgmlType::Q4_K, buf.data(), buf.data(), y.data(), 0, 1, 100), Error);
  EXPECT_THROW(quantize_activation(GgmlType::Q8_0, reinterpret_cast<float*>(buf.data()), y.data(), 33), Error);
}

// quantize_activation equals quantize_row of the activation type bit for bit.
TEST(SimdQuantizeActivation, EqualsReferenceOnAllTargets) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const int64_t n = 256 * 6;
  auto x = gaussian(rng, n);
  std::fill(x.begin() + 256, x.begin() + 512, 0.f);  // an all-zero block
  for (int i = 512; i < 768; ++i) x[i] = 0.01f * (i - 600);  // ramp, negative-free max at the end
  x[800] = -9.f;                                             // negative max
  x[1100] = 7.f;                                             // tie in magnitude: the first one wins
  x[1200] = -7.f;
  for_each_target([&] {
    for (GgmlType wt : kWeightTypes) {
      const GgmlType at = activation_type(wt);
      std::vector<uint8_t> simd(activation_bytes(wt, n), 0xAB), ref(row_bytes(at, n), 0xCD);
      quantize_activation(wt, x.data(), simd.data(), n);
      quantize_row(at, x.data(), ref.data(), n);
      ASSERT_EQ(simd, ref) << type_name(wt) << " seed " << seed;
    }
  });
}

// vec_dot vs. the float reference on the quantized weights and float x: the
// only difference allowed is the activation quantization, bounded per element
// by activation_error_bound, plus float summation error.
TEST(SimdDot, MatchesFloatReferenceOnAllTargets) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  for_each_target([&] {
    for (GgmlType wt : kWeightTypes) {
      const bool float_weights = activation_type(wt) == GgmlType::F32;
      for (int64_t n : {int64_t{256}, int64_t{2048}, int64_t{float_weights ? 269 : 768}}) {
        const auto w = gaussian(rng, n, 0.05f);
        auto x = gaussian(rng, n);
        x[rng() % n] *= 6.f;  // an outlier widens one block's quant step
        const auto wq = quantized(wt, w);
        std::vector<uint8_t> xq(activation_bytes(wt, n));
        quantize_activation(wt, x.data(), xq.data(), n);
        const auto wd = dequantized(wt, wq.data(), n);
        const auto act_err = activation_error_bound(wt, xq.data(), n);
        double bound = 1e-6, mag = 0;
        for (int64_t i = 0; i < n; ++i) {
          bound += std::fabs(wd[i]) * act_err[i];
          mag += std::fabs(double(wd[i]) * x[i]);
        }
        bound += 1e-5 * mag;
        const float ref = dot_row_f32(wt, wq.data(), x.data(), n);
        const float got = vec_dot(wt, wq.data(), xq.data(), n);
        ASSERT_NEAR(got, ref, bound) << type_name(wt) << " n=" << n << " seed " << seed;
      }
    }
  });
}

// vec_dot vs. the scalar integer reference and vs. the float dot of the two
// dequantized vectors: same math, only float summation order differs.
TEST(SimdDot, MatchesIntegerReferenceOnAllTargets) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const int64_t n = 1024;
  for_each_target([&] {
    for (GgmlType wt : kWeightTypes) {
      const auto w = gaussian(rng, n, 0.05f);
      const auto x = gaussian(rng, n);
      const auto wq = quantized(wt, w);
      std::vector<uint8_t> xq(activation_bytes(wt, n));
      quantize_activation(wt, x.data(), xq.data(), n);
      const auto wd = dequantized(wt, wq.data(), n);
      const auto xd = dequantized(activation_type(wt), xq.data(), n);
      double exact = 0, mag = 0;
      for (int64_t i = 0; i < n; ++i) {
        exact += double(wd[i]) * xd[i];
        mag += std::fabs(double(wd[i]) * xd[i]);
      }
      const double tol = 1e-5 * mag + 1e-7;  // ~100 float roundings of the magnitude
      const float got = vec_dot(wt, wq.data(), xq.data(), n);
      const float ref = vec_dot_ref(wt, wq.data(), xq.data(), n);
      EXPECT_NEAR(got, ref, tol) << type_name(wt) << " seed " << seed;
      EXPECT_NEAR(got, exact, tol) << type_name(wt) << " seed " << seed;
      EXPECT_NEAR(ref, exact, tol) << type_name(wt) << " seed " << seed;
    }
  });
}

// Extreme quants: every weight and activation quant at its range limit, so
// that int16/int32 intermediate overflow would show.
TEST(SimdDot, ExtremeQuantsDoNotOverflow) {
  const int64_t n = 2048;
  for_each_target([&] {
    for (GgmlType wt : {GgmlType::Q4_K, GgmlType::Q5_K, GgmlType::Q6_K, GgmlType::Q8_0}) {
      std::vector<uint8_t> wq(row_bytes(wt, n), 0xFF);
      std::vector<uint8_t> xq(activation_bytes(wt, n));
      const int bs = type_traits(wt).type_size;
      for (size_t b = 0; b < wq.size() / bs; ++b) {  // sane fp16 scales, max everything else
        uint8_t* blk = wq.data() + b * bs;
        const uint16_t one = 0x3C00;
        if (wt == GgmlType::Q6_K) {
          std::memcpy(blk + 208, &one, 2);
          std::memset(blk + 192, 0x80, 16);  // scales -128
        } else {
          std::memcpy(blk, &one, 2);
          if (wt != GgmlType::Q8_0) std::memcpy(blk + 2, &one, 2);
          else std::memset(blk + 2, 0x81, 32);  // quants -127
        }
      }
      std::vector<float> x(n, -1.f);
      quantize_activation(wt, x.data(), xq.data(), n);
      const float got = vec_dot(wt, wq.data(), xq.data(), n);
      const float ref = dot_row_f32(wt, wq.data(), dequantized(activation_type(wt), xq.data(), n).data(), n);
      EXPECT_NEAR(got, ref, 1e-5 * std::fabs(ref)) << type_name(wt);
      EXPECT_NEAR(vec_dot_ref(wt, wq.data(), xq.data(), n), ref, 1e-5 * std::fabs(ref)) << type_name(wt);
    }
  });
}

// matvec_rows on sub-ranges equals vec_dot of each row and writes exactly r1 - r0 outputs.
TEST(SimdMatvec, OddRowRanges) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const int64_t rows = 37, n = 512;
  for (GgmlType wt : kWeightTypes) {
    const size_t rb = row_bytes(wt, n);
    std::vector<uint8_t> w(rows * rb);
    for (int64_t r = 0; r < rows; ++r) {
      const auto q = quantized(wt, gaussian(rng, n, 0.1f));
      std::memcpy(w.data() + r * rb, q.data(), rb);
    }
    const auto x = gaussian(rng, n);
    std::vector<uint8_t> xq(activation_bytes(wt, n));
    quantize_activation(wt, x.data(), xq.data(), n);
    for (auto [r0, r1] : {std::pair<int64_t, int64_t>{0, rows}, {5, 6}, {13, 29}, {36, 37}, {7, 7}, {1, 36}}) {
      std::vector<float> y(rows + 2, -12345.f);
      matvec_rows(wt, w.data(), xq.data(), y.data(), r0, r1, n);
      for (int64_t r = r0; r < r1; ++r)
        ASSERT_EQ(y[r - r0], vec_dot(wt, w.data() + r * rb, xq.data(), n)) << type_name(wt) << " row " << r;
      for (size_t i = r1 - r0; i < y.size(); ++i) ASSERT_EQ(y[i], -12345.f) << type_name(wt) << " wrote past end";
    }
  }
}

TEST(ThreadPool, CoversEachIndexOnce) {
  for (int threads : {1, 2, 3, 8}) {
    ThreadPool pool(threads);
    EXPECT_EQ(pool.size(), threads);
    for (int64_t n : {0, 1, 2, 7, 64, 1001}) {
      std::vector<std::atomic<int>> hits(n);
      std::atomic<int64_t> calls{0};
      pool.parallel_for(n, [&](int64_t b, int64_t e) {
        ASSERT_LE(0, b);
        ASSERT_LT(b, e);
        ASSERT_LE(e, n);
        ++calls;
        for (int64_t i = b; i < e; ++i) hits[i]++;
      });
      for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[i].load(), 1) << "threads " << threads << " n " << n;
      if (n == 0) {
        EXPECT_EQ(calls.load(), 0);
      }
    }
  }
  EXPECT_GE(ThreadPool().size(), 1);
}

TEST(ThreadPool, UsesWorkersAndCaller) {
  ThreadPool pool(3);
  std::mutex mu;
  std::set<std::thread::id> ids;
  // Chunks that sleep a little so every participant gets some.
  pool.parallel_for(64, [&](int64_t, int64_t) {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    std::lock_guard<std::mutex> lock(mu);
    ids.insert(std::this_thread::get_id());
  });
  EXPECT_GE(ids.size(), 2u);
  EXPECT_LE(ids.size(), 3u);
  ThreadPool serial(1);
  std::thread::id seen;
  serial.parallel_for(5, [&](int64_t b, int64_t e) {
    EXPECT_EQ(b, 0);
    EXPECT_EQ(e, 5);
    seen = std::this_thread::get_id();
  });
  EXPECT_EQ(seen, std::this_thread::get_id());
}

TEST(ThreadPool, ManyShortJobsSumCorrectly) {
  ThreadPool pool(4);
  for (int iter = 0; iter < 2000; ++iter) {
    const int64_t n = 1 + iter % 97;
    std::atomic<int64_t> sum{0};
    pool.parallel_for(n, [&](int64_t b, int64_t e) {
      int64_t s = 0;
      for (int64_t i = b; i < e; ++i) s += i;
      sum += s;
    });
    ASSERT_EQ(sum.load(), n * (n - 1) / 2) << "iteration " << iter;
  }
}

TEST(ThreadPool, PropagatesExceptionAndStaysUsable) {
  ThreadPool pool(3);
  EXPECT_THROW(pool.parallel_for(100,
                                 [](int64_t b, int64_t e) {
                                   if (b <= 50 && 50 < e) throw std::runtime_error("boom");
                                 }),
               std::runtime_error);
  std::atomic<int64_t> count{0};
  pool.parallel_for(100, [&](int64_t b, int64_t e) { count += e - b; });
  EXPECT_EQ(count.load(), 100);
}

TEST(ThreadPool, NestedAndConcurrentCalls) {
  ThreadPool pool(3);
  std::atomic<int64_t> count{0};
  pool.parallel_for(8, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) pool.parallel_for(10, [&](int64_t b2, int64_t e2) { count += e2 - b2; });
  });
  EXPECT_EQ(count.load(), 80);
  count = 0;
  auto hammer = [&] {
    for (int i = 0; i < 200; ++i) pool.parallel_for(13, [&](int64_t b, int64_t e) { count += e - b; });
  };
  std::thread other(hammer);
  hammer();
  other.join();
  EXPECT_EQ(count.load(), 2 * 200 * 13);
}

TEST(ThreadPool, DestroyIdleAndAfterUse) {
  for (int i = 0; i < 20; ++i) {
    ThreadPool idle(4);
    ThreadPool used(4);
    std::atomic<int> c{0};
    used.parallel_for(10, [&](int64_t b, int64_t e) { c += static_cast<int>(e - b); });
    EXPECT_EQ(c.load(), 10);
  }
}

TEST(ThreadPool, ParallelMemcpyCopiesEveryByteOnce) {
  ThreadPool pool(3);
  const uint32_t seed = uint32_t(test::test_seed());
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937 rng(seed);
  // Sizes around the 1 MiB pieces: smaller, exact, a partial last piece; on
  // the pool and, without one, on this thread.
  for (ThreadPool* p : {&pool, static_cast<ThreadPool*>(nullptr)})
    for (uint64_t n : {uint64_t(0), uint64_t(1), uint64_t(1000), uint64_t(1) << 20, (uint64_t(5) << 20) + 123}) {
      std::vector<uint8_t> src(n), dst(n + 2, 0xA5);
      for (uint8_t& b : src) b = uint8_t(rng());
      parallel_memcpy(p, dst.data() + 1, src.data(), n);
      EXPECT_EQ(dst.front(), 0xA5) << n;
      EXPECT_EQ(dst.back(), 0xA5) << n;
      EXPECT_TRUE(std::equal(src.begin(), src.end(), dst.begin() + 1)) << n;
    }
}

namespace {

// Float reference on the dequantized weights and unquantized activations.
std::vector<double> ffn_reference(const std::vector<RandomExpert>& experts, const std::vector<float>& weights,
                                  const std::vector<float>& x, int n_embd, int n_ff) {
  std::vector<double> out(n_embd, 0.0), h(n_ff);
  for (size_t k = 0; k < experts.size(); ++k) {
    const RandomExpert& e = experts[k];
    for (int r = 0; r < n_ff; ++r) {
      double g = 0, u = 0;
      for (int c = 0; c < n_embd; ++c) {
        g += double(e.gate_f[size_t(r) * n_embd + c]) * x[c];
        u += double(e.up_f[size_t(r) * n_embd + c]) * x[c];
      }
      h[r] = g / (1 + std::exp(-g)) * u;
    }
    for (int r = 0; r < n_embd; ++r) {
      double s = 0;
      for (int c = 0; c < n_ff; ++c) s += double(e.down_f[size_t(r) * n_ff + c]) * h[c];
      out[r] += weights[k] * s;
    }
  }
  return out;
}

// Same as ffn_reference, but x and h pass through the activation quantization
// the kernels use (quantize_row + dequantize_row of activation_type). tol[r]
// receives a bound for output r: 1e-5 of its magnitude sum for float rounding,
// plus, for each h value whose scaled value h/step lies within 2e-3 of a
// rounding midpoint (the kernels compute g, u in float, ~1e-5 relative error,
// so such a value may round the other way), one quant step times |down|.
std::vector<double> ffn_reference_quantized_acts(const std::vector<RandomExpert>& experts,
                                                 const std::vector<float>& weights, const std::vector<float>& x,
                                                 int n_embd, int n_ff, std::vector<double>& tol) {
  auto through_activation = [](GgmlType wt, const std::vector<float>& v) {
    const GgmlType at = activation_type(wt);
    std::vector<uint8_t> q(row_bytes(at, v.size()));
    quantize_row(at, v.data(), q.data(), v.size());
    return dequantized(at, q.data(), v.size());
  };
  std::vector<double> out(n_embd, 0.0);
  tol.assign(n_embd, 0.0);
  for (size_t k = 0; k < experts.size(); ++k) {
    const RandomExpert& e = experts[k];
    const auto xg = through_activation(e.gate_type, x), xu = through_activation(e.up_type, x);
    std::vector<float> h(n_ff);
    for (int r = 0; r < n_ff; ++r) {
      double g = 0, u = 0;
      for (int c = 0; c < n_embd; ++c) {
        g += double(e.gate_f[size_t(r) * n_embd + c]) * xg[c];
        u += double(e.up_f[size_t(r) * n_embd + c]) * xu[c];
      }
      h[r] = static_cast<float>(g / (1 + std::exp(-g)) * u);
    }
    const auto hq = through_activation(e.down_type, h);
    // Quant step of each ambiguous h value (0 for the others).
    std::vector<double> flip_step(n_ff, 0.0);
    const GgmlType at = activation_type(e.down_type);
    if (at != GgmlType::F32) {
      const int bs = type_traits(at).block_size;
      for (int b = 0; b < n_ff; b += bs) {
        double amax = 0;
        for (int c = b; c < b + bs; ++c) amax = std::max(amax, std::fabs(double(h[c])));
        if (amax == 0) continue;
        const double step = amax / 127;
        for (int c = b; c < b + bs; ++c) {
          const double t = std::fabs(h[c]) / step;
          if (std::fabs(t - std::floor(t) - 0.5) < 2e-3) flip_step[c] = step;
        }
      }
    }
    for (int r = 0; r < n_embd; ++r) {
      double s = 0, mag = 0, flips = 0;
      for (int c = 0; c < n_ff; ++c) {
        const double w = e.down_f[size_t(r) * n_ff + c];
        s += w * hq[c];
        mag += std::fabs(w * hq[c]);
        flips += std::fabs(w) * flip_step[c];
      }
      out[r] += weights[k] * s;
      tol[r] += std::fabs(weights[k]) * (1e-5 * mag + flips * 1.01);
    }
  }
  for (double& t : tol) t += 1e-6;
  return out;
}

}  // namespace

// moe_ffn_cpu vs. the float reference. The kernels quantize x and h to 8 bits
// per block; h = silu(g)*u is heavy-tailed (block max ~10x its RMS), so its
// quant step is ~8% of the RMS and the output error ~2% (relative L2, as in
// ggml's Q8_K path). Bounds: 4% relative L2, 15% of the output RMS per element.
TEST(ExpertFfn, MatchesFloatReference) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const int n_embd = 512, n_ff = 256;
  std::vector<RandomExpert> experts;
  experts.push_back(make_expert(rng, GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K, n_embd, n_ff));
  experts.push_back(make_expert(rng, GgmlType::Q5_K, GgmlType::Q8_0, GgmlType::Q4_K, n_embd, n_ff));
  experts.push_back(make_expert(rng, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, n_embd, n_ff));
  experts.push_back(make_expert(rng, GgmlType::Q6_K, GgmlType::F32, GgmlType::Q5_K, n_embd, n_ff));
  const std::vector<float> weights = {0.4f, 0.3f, 0.2f, 0.1f};
  const auto x = gaussian(rng, n_embd);
  std::vector<ExpertView> views;
  for (const auto& e : experts) views.push_back(e.view(n_embd, n_ff));
  const auto ref = ffn_reference(experts, weights, x, n_embd, n_ff);
  std::vector<double> tol_q;
  const auto ref_q = ffn_reference_quantized_acts(experts, weights, x, n_embd, n_ff, tol_q);
  double ref_sq = 0;
  for (double v : ref) ref_sq += v * v;
  const double ref_rms = std::sqrt(ref_sq / n_embd);
  ASSERT_GT(ref_rms, 0.0);

  std::vector<float> out_serial;
  for (int threads : {1, 3}) {
    ThreadPool pool(threads);
    std::vector<float> out(n_embd, std::nanf(""));
    moe_ffn_cpu(views.data(), weights.data(), static_cast<int>(views.size()), x.data(), out.data(), pool);
    double err_sq = 0;
    for (int i = 0; i < n_embd; ++i) {
      ASSERT_NEAR(out[i], ref[i], 0.15 * ref_rms) << "row " << i << " threads " << threads << " seed " << seed;
      err_sq += (out[i] - ref[i]) * (out[i] - ref[i]);
    }
    EXPECT_LT(std::sqrt(err_sq / ref_sq), 0.04) << "threads " << threads << " seed " << seed;
    for (int i = 0; i < n_embd; ++i)
      ASSERT_NEAR(out[i], ref_q[i], tol_q[i]) << "row " << i << " threads " << threads << " seed " << seed;
    // Each output row is computed the same way whatever the chunking.
    if (out_serial.empty()) out_serial = out;
    else EXPECT_EQ(out, out_serial);
  }
}

// A single expert with weight 0.5 is half of the same expert with weight 1,
// and zero weights give zero output (out is overwritten, not accumulated).
TEST(ExpertFfn, LinearInRoutingWeightsAndOverwrites) {
  const uint32_t seed = uint32_t(test::test_seed());
  std::mt19937 rng(seed);
  const int n_embd = 256, n_ff = 512;
  const RandomExpert e = make_expert(rng, GgmlType::Q4_K, GgmlType::Q4_K, GgmlType::Q6_K, n_embd, n_ff);
  const ExpertView v = e.view(n_embd, n_ff);
  const auto x = gaussian(rng, n_embd);
  ThreadPool pool(2);
  std::vector<float> full(n_embd, 5.f), half(n_embd, 5.f), zero(n_embd, 5.f);
  const float w1 = 1.f, w_half = 0.5f, w0 = 0.f;
  moe_ffn_cpu(&v, &w1, 1, x.data(), full.data(), pool);
  moe_ffn_cpu(&v, &w_half, 1, x.data(), half.data(), pool);
  moe_ffn_cpu(&v, &w0, 1, x.data(), zero.data(), pool);
  for (int i = 0; i < n_embd; ++i) {
    ASSERT_EQ(half[i], 0.5f * full[i]) << i;  // scaling by a power of two is exact
    ASSERT_EQ(zero[i], 0.f) << i;
  }
}

TEST(ExpertFfn, RejectsMismatchedExperts) {
  std::mt19937 rng(uint32_t(test::test_seed()));
  const RandomExpert a = make_expert(rng, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, 256, 256);
  const RandomExpert b = make_expert(rng, GgmlType::Q8_0, GgmlType::Q8_0, GgmlType::Q8_0, 256, 512);
  const ExpertView views[2] = {a.view(256, 256), b.view(256, 512)};
  const float w[2] = {0.5f, 0.5f};
  std::vector<float> x(256, 1.f), out(256);
  ThreadPool pool(2);
  EXPECT_THROW(moe_ffn_cpu(views, w, 2, x.data(), out.data(), pool), Error);
  ExpertView bad = a.view(256, 256);
  bad.gate_type = GgmlType::Q8_1;
  EXPECT_THROW(moe_ffn_cpu(&bad, w, 1, x.data(), out.data(), pool), Error);
  bad = a.view(250, 256);
  EXPECT_THROW(moe_ffn_cpu(&bad, w, 1, x.data(), out.data(), pool), Error);
}
