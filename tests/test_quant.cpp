// Tests of the reference ggml block formats in cpu/quant.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "cpu/quant.h"
#include "base/error.h"
#include "tests/seed.h"

using namespace vkmoe;

namespace {

uint32_t fresh_seed() { return uint32_t(test::test_seed()); }

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::vector<float> dequant(GgmlType t, const void* data, int64_t n) {
  std::vector<float> out(n);
  dequantize_row(t, data, out.data(), n);
  return out;
}

}  // namespace

TEST(QuantTraits, SizesMatchGgml) {
  struct Expect {
    GgmlType t;
    int block, size;
    bool supported;
  };
  const Expect all[] = {
      {GgmlType::F32, 1, 4, true},       {GgmlType::F16, 1, 2, true},     {GgmlType::BF16, 1, 2, true},
      {GgmlType::Q4_0, 32, 18, true},    {GgmlType::Q4_1, 32, 20, true},  {GgmlType::Q5_0, 32, 22, true},
      {GgmlType::Q5_1, 32, 24, true},    {GgmlType::Q8_0, 32, 34, true},  {GgmlType::Q8_1, 32, 36, false},
      {GgmlType::Q2_K, 256, 84, true},   {GgmlType::Q3_K, 256, 110, true}, {GgmlType::Q4_K, 256, 144, true},
      {GgmlType::Q5_K, 256, 176, true},  {GgmlType::Q6_K, 256, 210, true}, {GgmlType::Q8_K, 256, 292, true},
      {GgmlType::IQ4_NL, 32, 18, true},  {GgmlType::IQ4_XS, 256, 136, true}, {GgmlType::MXFP4, 32, 17, true},
  };
  for (const Expect& e : all) {
    const TypeTraits& tr = type_traits(e.t);
    SCOPED_TRACE(tr.name);
    EXPECT_EQ(tr.block_size, e.block);
    EXPECT_EQ(tr.type_size, e.size);
    EXPECT_EQ(tr.supported, e.supported);
    EXPECT_TRUE(is_known_type(static_cast<uint32_t>(e.t)));
  }
  EXPECT_STREQ(type_name(GgmlType::Q4_K), "Q4_K");
  EXPECT_STREQ(type_name(GgmlType::BF16), "BF16");
  EXPECT_FALSE(is_known_type(4));
  EXPECT_FALSE(is_known_type(29));
  EXPECT_FALSE(is_known_type(1000));
  EXPECT_STREQ(type_traits(static_cast<GgmlType>(4)).name, "?");
  EXPECT_EQ(type_traits(static_cast<GgmlType>(4)).block_size, 0);
}

TEST(QuantTraits, RowBytes) {
  EXPECT_EQ(row_bytes(GgmlType::F32, 7), 28u);
  EXPECT_EQ(row_bytes(GgmlType::F16, 7), 14u);
  EXPECT_EQ(row_bytes(GgmlType::Q8_0, 2048), 64u * 34u);
  EXPECT_EQ(row_bytes(GgmlType::Q4_K, 2048), 8u * 144u);
  EXPECT_EQ(row_bytes(GgmlType::Q6_K, 768), 3u * 210u);
  EXPECT_EQ(row_bytes(GgmlType::Q4_K, 0), 0u);
  EXPECT_THROW(row_bytes(GgmlType::Q4_K, 100), Error);
  EXPECT_THROW(row_bytes(GgmlType::Q8_0, 33), Error);
  EXPECT_THROW(row_bytes(GgmlType::Q6_K, -256), Error);
  EXPECT_THROW(row_bytes(static_cast<GgmlType>(77), 256), Error);
  try {
    row_bytes(GgmlType::Q5_K, 300);
    FAIL() << "expected Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("Q5_K"), std::string::npos) << e.what();
  }
}

TEST(QuantTraits, UnsupportedTypesThrow) {
  std::vector<float> x(256, 1.f);
  std::vector<uint8_t> buf(1024);
  EXPECT_THROW(dequantize_row(GgmlType::Q8_1, buf.data(), x.data(), 32), Error);
  EXPECT_THROW(quantize_row(GgmlType::Q8_1, x.data(), buf.data(), 256), Error);
  EXPECT_THROW(dot_row_f32(GgmlType::Q8_1, buf.data(), x.data(), 256), Error);
  EXPECT_THROW(dequantize_row(static_cast<GgmlType>(21), buf.data(), x.data(), 256), Error);  // IQ3_S
  EXPECT_THROW(dequantize_row(GgmlType::Q3_K, buf.data(), x.data(), 32), Error);
  EXPECT_THROW(dequantize_row(GgmlType::Q4_K, buf.data(), x.data(), 100), Error);
}

TEST(QuantFp16, KnownValues) {
  EXPECT_EQ(fp32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(fp32_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(fp32_to_fp16(0.5f), 0x3800);
  EXPECT_EQ(fp32_to_fp16(65504.f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(0.0f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-0.0f), 0x8000);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.f, -14)), 0x0400);  // smallest normal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1023.f, -24)), 0x03FF);  // largest subnormal
  EXPECT_EQ(fp16_to_fp32(0x3C00), 1.0f);
  EXPECT_EQ(fp16_to_fp32(0xC500), -5.0f);
  EXPECT_EQ(fp16_to_fp32(0x7BFF), 65504.f);
  EXPECT_EQ(fp16_to_fp32(0x0001), std::ldexp(1.f, -24));
  EXPECT_EQ(fp16_to_fp32(0x83FF), -std::ldexp(1023.f, -24));
  EXPECT_EQ(fp16_to_fp32(0x3555), 0.333251953125f);
  EXPECT_EQ(bits_of(fp16_to_fp32(0x8000)), 0x80000000u);
}

TEST(QuantFp16, RoundingTiesOverflowAndSpecials) {
  // 1 + 2^-11 lies halfway between 1 and 1 + 2^-10: ties to even (1.0).
  EXPECT_EQ(fp32_to_fp16(1.f + std::ldexp(1.f, -11)), 0x3C00);
  // 1 + 3*2^-11 is halfway between 0x3C01 and 0x3C02: ties to even (0x3C02).
  EXPECT_EQ(fp32_to_fp16(1.f + 3 * std::ldexp(1.f, -11)), 0x3C02);
  // Just above the tie rounds up.
  EXPECT_EQ(fp32_to_fp16(std::nextafter(1.f + std::ldexp(1.f, -11), 2.f)), 0x3C01);
  // Subnormal ties: 2^-25 -> 0 (even), 3*2^-25 -> 2*2^-24 (even).
  EXPECT_EQ(fp32_to_fp16(std::ldexp(1.f, -25)), 0x0000);
  EXPECT_EQ(fp32_to_fp16(std::ldexp(3.f, -25)), 0x0002);
  EXPECT_EQ(fp32_to_fp16(std::nextafter(std::ldexp(1.f, -25), 1.f)), 0x0001);
  // Largest subnormal + half ulp rounds up into the smallest normal.
  EXPECT_EQ(fp32_to_fp16(std::ldexp(2047.f, -25)), 0x0400);
  // Overflow: 65519 -> max finite, 65520 (tie, odd max) -> inf.
  EXPECT_EQ(fp32_to_fp16(65519.f), 0x7BFF);
  EXPECT_EQ(fp32_to_fp16(65520.f), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-1e10f), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(std::numeric_limits<float>::infinity()), 0x7C00);
  EXPECT_EQ(fp32_to_fp16(-std::numeric_limits<float>::infinity()), 0xFC00);
  EXPECT_EQ(fp32_to_fp16(1e-30f), 0x0000);
  EXPECT_EQ(fp32_to_fp16(-1e-30f), 0x8000);
  const uint16_t nan16 = fp32_to_fp16(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(nan16 & 0x7C00, 0x7C00);
  EXPECT_NE(nan16 & 0x03FF, 0);
  EXPECT_TRUE(std::isnan(fp16_to_fp32(nan16)));
  EXPECT_TRUE(std::isnan(fp16_to_fp32(0x7C01)));  // signalling NaN stays NaN
  EXPECT_TRUE(std::isnan(fp16_to_fp32(fp32_to_fp16(float_of(0x7F800001u)))));
  EXPECT_EQ(fp16_to_fp32(0x7C00), std::numeric_limits<float>::infinity());
  EXPECT_EQ(fp16_to_fp32(0xFC00), -std::numeric_limits<float>::infinity());
}

TEST(QuantFp16, AllHalfValuesRoundTripAndRoundToNearest) {
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = fp16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_EQ(h & 0x7C00, 0x7C00u);
      continue;
    }
    ASSERT_EQ(fp32_to_fp16(f), h) << std::hex << h;
  }
  // Random floats: the result is the nearest half (no other half is closer).
  const uint32_t seed = fresh_seed();
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> mag(-26.f, 17.f);
  for (int i = 0; i < 20000; ++i) {
    const float f = std::exp2(mag(rng)) * (rng() & 1 ? 1.f : -1.f);
    const uint16_t h = fp32_to_fp16(f);
    const double got = fp16_to_fp32(h);
    if (std::isinf(got)) {
      ASSERT_GE(std::fabs(f), 65520.f) << "seed " << seed;
      continue;
    }
    const double err = std::fabs(got - f);
    for (int step : {-1, 1}) {
      const uint16_t nb = static_cast<uint16_t>(h + step);
      if ((nb & 0x7FFF) >= 0x7C00 || ((h & 0x7FFF) == 0 && step < 0)) continue;
      ASSERT_LE(err, std::fabs(double(fp16_to_fp32(nb)) - f)) << "seed " << seed << " f=" << f;
    }
  }
}

TEST(QuantBf16, KnownValuesAndRounding) {
  EXPECT_EQ(fp32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(-2.0f), 0xC000);
  EXPECT_EQ(bf16_to_fp32(0x3F80), 1.0f);
  EXPECT_EQ(bf16_to_fp32(0x4049), 3.140625f);
  // Ties: 1 + 2^-8 is halfway between 1 and 1 + 2^-7 -> even (1.0).
  EXPECT_EQ(fp32_to_bf16(1.f + std::ldexp(1.f, -8)), 0x3F80);
  EXPECT_EQ(fp32_to_bf16(1.f + 3 * std::ldexp(1.f, -8)), 0x3F82);
  EXPECT_EQ(fp32_to_bf16(std::nextafter(1.f + std::ldexp(1.f, -8), 2.f)), 0x3F81);
  // Max float rounds to inf; inf stays inf; subnormals are kept.
  EXPECT_EQ(fp32_to_bf16(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(fp32_to_bf16(-std::numeric_limits<float>::infinity()), 0xFF80);
  EXPECT_EQ(fp32_to_bf16(float_of(0x00010000u)), 0x0001);
  EXPECT_EQ(bf16_to_fp32(0x0001), float_of(0x00010000u));
  EXPECT_EQ(fp32_to_bf16(-0.0f), 0x8000);
  // NaN stays NaN (even a payload that would round to inf).
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(float_of(0x7F800001u)))));
  EXPECT_TRUE(std::isnan(bf16_to_fp32(fp32_to_bf16(float_of(0xFFFFFFFFu)))));
  EXPECT_EQ(fp32_to_bf16(float_of(0xFFC00000u)), 0xFFC0);
  for (uint32_t h = 0; h < 0x10000; ++h) {
    const float f = bf16_to_fp32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(fp32_to_bf16(f), h) << std::hex << h;
  }
}

TEST(QuantKnown, Q8_0Block) {
  BlockQ8_0 b;
  b.d = 0x3800;  // 0.5
  for (int i = 0; i < 32; ++i) b.qs[i] = static_cast<int8_t>(i - 16);
  b.qs[31] = -128;
  const auto y = dequant(GgmlType::Q8_0, &b, 32);
  EXPECT_EQ(y[0], -8.f);
  EXPECT_EQ(y[16], 0.f);
  EXPECT_EQ(y[17], 0.5f);
  EXPECT_EQ(y[30], 7.f);
  EXPECT_EQ(y[31], -64.f);
}

// Shared 12-byte scale table for the Q4_K / Q5_K known-value tests. By the
// 6-bit packing (j<4: low 6 bits of bytes j / j+4; j>=4: nibbles of byte j+4
// plus the top 2 bits of bytes j-4 / j) it decodes to these scales and mins.
const uint8_t kScales12[12] = {0x01, 0x02, 0x43, 0x84, 0x05, 0xC6, 0x07, 0x08, 0x21, 0x43, 0x65, 0x87};
const int kSc[8] = {1, 2, 3, 4, 1, 3, 21, 39};
const int kMin[8] = {5, 6, 7, 8, 2, 52, 6, 8};

TEST(QuantKnown, Q4_KBlock) {
  BlockQ4_K b;
  b.d = 0x3C00;     // 1.0
  b.dmin = 0x3800;  // 0.5
  std::memcpy(b.scales, kScales12, 12);
  for (int k = 0; k < 128; ++k) b.qs[k] = static_cast<uint8_t>(k);
  const auto y = dequant(GgmlType::Q4_K, &b, 256);
  // Byte 32c+l holds sub-block 2c (low nibble = l%16) and 2c+1 (high nibble = 2c + l/16).
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      EXPECT_EQ(y[64 * c + l], kSc[2 * c] * (l % 16) - 0.5f * kMin[2 * c]) << c << " " << l;
      EXPECT_EQ(y[64 * c + 32 + l], kSc[2 * c + 1] * (2 * c + l / 16) - 0.5f * kMin[2 * c + 1]) << c << " " << l;
    }
  EXPECT_EQ(y[0], -2.5f);
  EXPECT_EQ(y[160], -14.f);   // 3*4 - 0.5*52
  EXPECT_EQ(y[255], 269.f);   // 39*7 - 0.5*8
  EXPECT_EQ(y[200], 21.f * 8 - 3.f);  // sub-block 6, l=8: nibble 8
}

TEST(QuantKnown, Q5_KBlock) {
  BlockQ5_K b;
  b.d = 0x3C00;
  b.dmin = 0x3800;
  std::memcpy(b.scales, kScales12, 12);
  for (int k = 0; k < 128; ++k) b.qs[k] = static_cast<uint8_t>(k);
  for (int l = 0; l < 32; ++l) b.qh[l] = static_cast<uint8_t>(0xA5 ^ l);
  const auto y = dequant(GgmlType::Q5_K, &b, 256);
  // Sub-block j takes its 5th bit from bit j of qh[l].
  for (int c = 0; c < 4; ++c)
    for (int l = 0; l < 32; ++l) {
      const int j0 = 2 * c, j1 = 2 * c + 1;
      const int q0 = (l % 16) + 16 * ((b.qh[l] >> j0) & 1);
      const int q1 = (2 * c + l / 16) + 16 * ((b.qh[l] >> j1) & 1);
      EXPECT_EQ(y[64 * c + l], kSc[j0] * q0 - 0.5f * kMin[j0]);
      EXPECT_EQ(y[64 * c + 32 + l], kSc[j1] * q1 - 0.5f * kMin[j1]);
    }
  EXPECT_EQ(y[0], 13.5f);   // q = 0 + 16 (qh[0]=0xA5 bit 0), 1*16 - 2.5
  EXPECT_EQ(y[32], -3.f);   // sub-block 1, q = 0 (bit 1 of 0xA5 is 0), -0.5*6
  EXPECT_EQ(y[255], 893.f); // q = 7 + 16 (qh[31]=0xBA bit 7), 39*23 - 4
}

TEST(QuantKnown, Q6_KBlock) {
  BlockQ6_K b;
  b.d = 0x3400;  // 0.25
  for (int k = 0; k < 128; ++k) b.ql[k] = static_cast<uint8_t>(k);
  for (int k = 0; k < 64; ++k) b.qh[k] = static_cast<uint8_t>(k * 37);
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(j - 8);
  const auto y = dequant(GgmlType::Q6_K, &b, 256);
  // Element i: half h=i/128, quarter q=(i%128)/32, lane l=i%32.
  // Low 4 bits: ql[64h + l + 32*(q&1)], low nibble for q<2 else high nibble;
  // high 2 bits: qh[32h + l] >> 2q; value d * scales[i/16] * (q6 - 32).
  for (int i = 0; i < 256; ++i) {
    const int h = i / 128, q = (i % 128) / 32, l = i % 32;
    const int lowbyte = b.ql[64 * h + l + 32 * (q & 1)];
    const int q6 = (q < 2 ? lowbyte & 0xF : lowbyte >> 4) | (((b.qh[32 * h + l] >> (2 * q)) & 3) << 4);
    EXPECT_EQ(y[i], 0.25f * b.scales[i / 16] * (q6 - 32)) << i;
  }
  EXPECT_EQ(y[0], 64.f);       // q6 0 -> -32 * -8 * 0.25
  EXPECT_EQ(y[40], -12.f);     // ql[40]=0x28 -> 8, qh[8]=40 -> bits 2..3 = 2 -> q6 40 -> 8 * -6 * 0.25
  EXPECT_EQ(y[100], -1.f);     // ql[36]=0x24 -> 2, qh[4]=148 -> bits 6..7 = 2 -> q6 34 -> 2 * -2 * 0.25
  EXPECT_EQ(y[255], -43.75f);  // ql[127] -> 7, qh[63]=27 -> bits 6..7 = 0 -> q6 7 -> -25 * 7 * 0.25
}

TEST(QuantKnown, Q8_KQuantize) {
  std::vector<float> x(256, 0.f);
  x[0] = -2.54f;  // largest magnitude, negative: d = -max/127 = 0.02
  x[1] = 1.0f;
  x[17] = 0.3f;
  x[255] = 2.54f;  // +max maps to +127
  BlockQ8_K b;
  quantize_row(GgmlType::Q8_K, x.data(), &b, 256);
  EXPECT_FLOAT_EQ(b.d, 0.02f);
  EXPECT_EQ(b.qs[0], -127);
  EXPECT_EQ(b.qs[1], 50);
  EXPECT_EQ(b.qs[17], 15);
  EXPECT_EQ(b.qs[255], 127);
  EXPECT_EQ(b.bsums[0], -77);
  EXPECT_EQ(b.bsums[1], 15);
  EXPECT_EQ(b.bsums[15], 127);
  // Positive max: iscale = -127/max < 0, the max maps to -127 and d < 0.
  x.assign(256, 0.f);
  x[3] = 1.27f;
  x[4] = -1.0f;
  quantize_row(GgmlType::Q8_K, x.data(), &b, 256);
  EXPECT_FLOAT_EQ(b.d, -0.01f);
  EXPECT_EQ(b.qs[3], -127);
  EXPECT_EQ(b.qs[4], 100);
  EXPECT_EQ(b.bsums[0], -27);
  // All zeros: d = 0 and all quants 0.
  x.assign(256, 0.f);
  quantize_row(GgmlType::Q8_K, x.data(), &b, 256);
  EXPECT_EQ(b.d, 0.f);
  for (int i = 0; i < 256; ++i) ASSERT_EQ(b.qs[i], 0);
}

TEST(QuantKnown, Q8_0Quantize) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = (i - 10) * 0.25f;  // max |x| = 21*0.25 = 5.25
  BlockQ8_0 b;
  quantize_row(GgmlType::Q8_0, x.data(), &b, 32);
  EXPECT_EQ(b.d, fp32_to_fp16(5.25f / 127.f));
  EXPECT_EQ(b.qs[31], 127);
  EXPECT_EQ(b.qs[10], 0);
  EXPECT_EQ(b.qs[0], -60);  // -2.5 * 127/5.25 = -60.48
  EXPECT_EQ(b.qs[1], -54);  // -2.25 * 127/5.25 = -54.43
  EXPECT_EQ(b.qs[12], 12);  // 0.5 * 127/5.25 = 12.10
}

// ---- types added for issue 10: hand-built blocks, values by ggml's formulas ----

// 4-bit quants j | (15 - j) << 4: element j < 16 has quant j, element 16 + j has 15 - j.
template <class Block>
void ramp_nibbles(Block& b) {
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
}

TEST(QuantKnown, Q4_0Block) {
  BlockQ4_0 b;
  b.d = 0x3800;  // 0.5: x = 0.5 * (q - 8)
  ramp_nibbles(b);
  const auto y = dequant(GgmlType::Q4_0, &b, 32);
  EXPECT_EQ(y[0], -4.f);
  EXPECT_EQ(y[15], 3.5f);
  EXPECT_EQ(y[16], 3.5f);
  EXPECT_EQ(y[31], -4.f);
  EXPECT_EQ(y[9], 0.5f);
}

TEST(QuantKnown, Q4_1Block) {
  BlockQ4_1 b;
  b.d = 0x3C00;  // 1
  b.m = 0xBC00;  // -1: x = q - 1
  ramp_nibbles(b);
  const auto y = dequant(GgmlType::Q4_1, &b, 32);
  EXPECT_EQ(y[0], -1.f);
  EXPECT_EQ(y[5], 4.f);
  EXPECT_EQ(y[16], 14.f);
  EXPECT_EQ(y[31], -1.f);
}

// qh word 0x00FF8001: bits 0, 15 and 16..23 set (bit 4 of those quants).
const uint8_t kQh5[4] = {0x01, 0x80, 0xFF, 0x00};

TEST(QuantKnown, Q5_0Block) {
  BlockQ5_0 b;
  b.d = 0x3800;  // 0.5: x = 0.5 * (q - 16)
  std::memcpy(b.qh, kQh5, 4);
  ramp_nibbles(b);
  const auto y = dequant(GgmlType::Q5_0, &b, 32);
  EXPECT_EQ(y[0], 0.f);     // 0 | 16
  EXPECT_EQ(y[1], -7.5f);   // 1
  EXPECT_EQ(y[15], 7.5f);   // 15 | 16
  EXPECT_EQ(y[16], 7.5f);   // 15 | 16
  EXPECT_EQ(y[20], 5.5f);   // 11 | 16
  EXPECT_EQ(y[24], -4.5f);  // 7, bit 24 clear
}

TEST(QuantKnown, Q5_1Block) {
  BlockQ5_1 b;
  b.d = 0x3C00;  // 1
  b.m = 0x4000;  // 2: x = q + 2
  std::memcpy(b.qh, kQh5, 4);
  ramp_nibbles(b);
  const auto y = dequant(GgmlType::Q5_1, &b, 32);
  EXPECT_EQ(y[0], 18.f);
  EXPECT_EQ(y[1], 3.f);
  EXPECT_EQ(y[16], 33.f);
  EXPECT_EQ(y[24], 9.f);
}

TEST(QuantKnown, IQ4_NLBlock) {
  BlockIQ4_NL b;
  b.d = 0x3800;  // 0.5 * {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}[q]
  ramp_nibbles(b);
  const auto y = dequant(GgmlType::IQ4_NL, &b, 32);
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[8], 0.5f);
  EXPECT_EQ(y[15], 56.5f);
  EXPECT_EQ(y[16], 56.5f);
  EXPECT_EQ(y[20], 19.f);  // q 11: 38
  EXPECT_EQ(y[31], -63.5f);
}

TEST(QuantKnown, MXFP4Block) {
  // E8M0 e with ggml's halved convention: d = 2^(e - 128); values doubled e2m1
  // {0, 1, 2, 3, 4, 6, 8, 12, -0, -1, -2, -3, -4, -6, -8, -12}.
  EXPECT_EQ(e8m0_to_fp32_half(128), 1.f);
  EXPECT_EQ(e8m0_to_fp32_half(127), 0.5f);
  EXPECT_EQ(e8m0_to_fp32_half(2), std::ldexp(1.f, -126));
  EXPECT_EQ(e8m0_to_fp32_half(1), std::ldexp(1.f, -127));
  EXPECT_EQ(e8m0_to_fp32_half(0), std::ldexp(1.f, -128));
  EXPECT_EQ(e8m0_to_fp32_half(254), std::ldexp(1.f, 126));
  BlockMXFP4 b;
  b.e = 128;
  ramp_nibbles(b);
  auto y = dequant(GgmlType::MXFP4, &b, 32);
  EXPECT_EQ(y[5], 6.f);
  EXPECT_EQ(y[7], 12.f);
  EXPECT_EQ(y[9], -1.f);
  EXPECT_EQ(y[16], -12.f);
  EXPECT_EQ(y[23], -0.f);  // q 8
  b.e = 126;  // d = 0.25
  y = dequant(GgmlType::MXFP4, &b, 32);
  EXPECT_EQ(y[7], 3.f);
  EXPECT_EQ(y[29], 0.5f);  // q 2
}

TEST(QuantKnown, Q2_KBlock) {
  BlockQ2_K b;
  b.d = 0x3C00;     // 1
  b.dmin = 0x3800;  // 0.5: x = (sc & 15) * q - 0.5 * (sc >> 4)
  for (int g = 0; g < 16; ++g) b.scales[g] = static_cast<uint8_t>(g | ((15 - g) << 4));
  std::memset(b.qs, 0xE4, sizeof(b.qs));  // bits 2j..2j+1 = j: q = (i % 128) / 32
  b.qs[33] = 0x1B;                         // elements 129, 161, 193, 225: q = 3, 2, 1, 0
  const auto y = dequant(GgmlType::Q2_K, &b, 256);
  EXPECT_EQ(y[0], -7.5f);    // group 0, q 0, min 15
  EXPECT_EQ(y[40], -4.5f);   // group 2 (sc 2, min 13), q 1
  EXPECT_EQ(y[130], -3.5f);  // group 8, q 0
  EXPECT_EQ(y[255], 45.f);   // group 15, q 3, min 0
  EXPECT_EQ(y[129], 20.5f);  // group 8, q 3: 24 - 3.5
  EXPECT_EQ(y[161], 17.5f);  // group 10, q 2: 20 - 2.5
  EXPECT_EQ(y[193], 10.5f);  // group 12, q 1: 12 - 1.5
  EXPECT_EQ(y[225], -0.5f);  // group 14, q 0, min 1
}

TEST(QuantKnown, Q3_KBlock) {
  BlockQ3_K b;
  b.d = 0x3800;  // 0.5: x = 0.5 * (scale - 32) * (q - (hbit ? 0 : 4))
  // Scale j: low 4 bits from nibble j / 8 of byte j % 8, high 2 bits from bits
  // 2 (j / 4) of byte 8 + j % 4. Here scales 0, 1, 3, 23, 1, 36, 56 for j = 0, 1, 3, 7, 8, 11, 15.
  const uint8_t sc[12] = {0x10, 0x21, 0x32, 0x43, 0x54, 0x65, 0x76, 0x87, 0x00, 0x00, 0x00, 0xE4};
  std::memcpy(b.scales, sc, 12);
  EXPECT_EQ(q3_k_scale(b.scales, 7), 23);
  EXPECT_EQ(q3_k_scale(b.scales, 11), 36);
  EXPECT_EQ(q3_k_scale(b.scales, 15), 56);
  std::memset(b.qs, 0xE4, sizeof(b.qs));       // q = (i % 128) / 32
  std::memset(b.hmask, 0x0F, sizeof(b.hmask));  // high bit set for i < 128
  const auto y = dequant(GgmlType::Q3_K, &b, 256);
  EXPECT_EQ(y[48], -14.5f);   // scale 3 - 32, q 1
  EXPECT_EQ(y[127], -13.5f);  // scale 23 - 32, q 3
  EXPECT_EQ(y[128], 62.f);    // scale 1 - 32, q 0 - 4
  EXPECT_EQ(y[180], -6.f);    // scale 36 - 32, q 1 - 4
  EXPECT_EQ(y[255], -12.f);   // scale 56 - 32, q 3 - 4
}

TEST(QuantKnown, IQ4_XSBlock) {
  BlockIQ4_XS b;
  b.d = 0x3800;  // 0.5: x = 0.5 * (ls - 32) * kValuesIQ4NL[q]
  const uint8_t lo[4] = {0x10, 0x32, 0x54, 0x76};  // low nibbles 0..7
  std::memcpy(b.scales_l, lo, 4);
  b.scales_h = 0x1BE4;  // high bits 0, 1, 2, 3, 3, 2, 1, 0: ls 0, 17, 34, 51, 52, 37, 22, 7
  for (int ib = 0; ib < 8; ++ib)
    for (int j = 0; j < 16; ++j) b.qs[16 * ib + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  const auto y = dequant(GgmlType::IQ4_XS, &b, 256);
  EXPECT_EQ(y[0], 2032.f);     // -32 * -127 / 2
  EXPECT_EQ(y[40], -7.5f);     // -15 * 1 / 2
  EXPECT_EQ(y[79], 113.f);     // 2 * 113 / 2
  EXPECT_EQ(y[112], 1073.5f);  // 19 * 113 / 2
  EXPECT_EQ(y[150], 130.f);    // group 4 (ls - 32 = 20), element 22: high nibble 9 -> 13
  EXPECT_EQ(y[255], 1587.5f);  // -25 * -127 / 2
}

TEST(QuantKnown, Q4_0AndMXFP4Quantize) {
  std::vector<float> x(32);
  for (int i = 0; i < 32; ++i) x[i] = (i - 10) * 0.25f;  // max 5.25 at i = 31
  BlockQ4_0 b;
  quantize_row(GgmlType::Q4_0, x.data(), &b, 32);
  EXPECT_EQ(b.d, fp32_to_fp16(-0.65625f));  // max / -8
  EXPECT_EQ(b.qs[15] >> 4, 0);              // x[31] * id = -8 -> 0
  EXPECT_EQ(b.qs[10] & 0xF, 8);             // 0
  EXPECT_EQ(b.qs[0] & 0xF, 12);             // -2.5 / -0.65625 = 3.81 + 8.5 -> 12
  std::vector<float> m(32, 0.f);
  m[0] = 3.f;    // amax: e = floor(log2 3) - 2 + 127 = 126, d = 0.25
  m[1] = 1.f;    // 4 -> index 4
  m[2] = -0.3f;  // -1.2 -> -1, index 9
  m[3] = 2.6f;   // 10.4 -> 12 (err 0.4 vs 0.6), index 7
  BlockMXFP4 mb;
  quantize_row(GgmlType::MXFP4, m.data(), &mb, 32);
  EXPECT_EQ(mb.e, 126);
  EXPECT_EQ(mb.qs[0] & 0xF, 7);
  EXPECT_EQ(mb.qs[1] & 0xF, 4);
  EXPECT_EQ(mb.qs[2] & 0xF, 9);
  EXPECT_EQ(mb.qs[3] & 0xF, 7);
  EXPECT_EQ(mb.qs[4] & 0xF, 0);
}

// Relative RMS error of quantize + dequantize on Gaussian data.
double roundtrip_rel_rms(GgmlType t, const std::vector<float>& x) {
  std::vector<uint8_t> q(row_bytes(t, x.size()));
  quantize_row(t, x.data(), q.data(), x.size());
  const auto y = dequant(t, q.data(), x.size());
  double num = 0, den = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    num += double(y[i] - x[i]) * (y[i] - x[i]);
    den += double(x[i]) * x[i];
  }
  return std::sqrt(num / den);
}

struct RoundTripBound {
  GgmlType t;
  double gaussian, outliers;  // max relative RMS error
};
// Measured maxima over 300 seeds (Gaussian / with 0.2% outliers x8):
// F16 2e-4/3e-4, BF16 1.7e-3/2.1e-3, Q8_0 .0057/.0089, Q8_K .0079/.023,
// Q6_K .018/.027, Q5_K .038/.045, Q4_K .074/.089, Q4_0 .091/.136, Q4_1
// .082/.098, Q5_0 .045/.068, Q5_1 .040/.046, IQ4_NL .080/.107, MXFP4
// .124/.153, Q2_K .278/.302, Q3_K .150/.184, IQ4_XS .081/.108; bounds leave
// ~10% headroom.
const RoundTripBound kRoundTripBounds[] = {
    {GgmlType::F32, 0.0, 0.0},       {GgmlType::F16, 5e-4, 5e-4},    {GgmlType::BF16, 3e-3, 3e-3},
    {GgmlType::Q8_0, 0.008, 0.012},  {GgmlType::Q8_K, 0.01, 0.03},   {GgmlType::Q6_K, 0.02, 0.032},
    {GgmlType::Q5_K, 0.042, 0.055},  {GgmlType::Q4_K, 0.082, 0.105},  {GgmlType::Q4_0, 0.1, 0.15},
    {GgmlType::Q4_1, 0.09, 0.11},    {GgmlType::Q5_0, 0.05, 0.075},   {GgmlType::Q5_1, 0.044, 0.051},
    {GgmlType::IQ4_NL, 0.088, 0.118}, {GgmlType::MXFP4, 0.137, 0.169}, {GgmlType::Q2_K, 0.31, 0.335},
    {GgmlType::Q3_K, 0.165, 0.2},    {GgmlType::IQ4_XS, 0.089, 0.119},
};

// Rows of 16 super-blocks with a per-block magnitude varying 1x..5x.
std::vector<float> random_row(std::mt19937& rng, float offset, bool outliers) {
  std::normal_distribution<float> g(0.f, 1.f);
  std::vector<float> x(256 * 16);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = 0.02f * (1 + (i / 256) % 5) * (g(rng) + offset);
    if (outliers && rng() % 500 == 0) x[i] *= 8.f;
  }
  return x;
}

TEST(QuantRoundTrip, GaussianErrorBounds) {
  const uint32_t seed = fresh_seed();
  std::mt19937 rng(seed);
  for (float offset : {0.f, 0.5f}) {
    const auto x = random_row(rng, offset, false);
    for (const auto& b : kRoundTripBounds)
      EXPECT_LE(roundtrip_rel_rms(b.t, x), b.gaussian) << type_name(b.t) << " offset " << offset << " seed " << seed;
  }
}

TEST(QuantRoundTrip, OutlierErrorBounds) {
  const uint32_t seed = fresh_seed();
  std::mt19937 rng(seed);
  const auto x = random_row(rng, 0.f, true);
  for (const auto& b : kRoundTripBounds)
    EXPECT_LE(roundtrip_rel_rms(b.t, x), b.outliers) << type_name(b.t) << " seed " << seed;
}

// Degenerate blocks: zeros, constants, a single spike. Every value must stay
// within 0.01 of its input, except that the IQ4 codebooks have no zero: next
// to the spike of 3 a zero becomes d * 1 with d ~ 3/127 (0.024, as in ggml).
TEST(QuantRoundTrip, DegenerateBlocks) {
  const GgmlType types[] = {GgmlType::Q8_0, GgmlType::Q8_K, GgmlType::Q6_K, GgmlType::Q5_K, GgmlType::Q4_K,
                            GgmlType::Q4_0, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::IQ4_NL,
                            GgmlType::MXFP4, GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_XS};
  std::vector<std::vector<float>> rows;
  rows.push_back(std::vector<float>(256, 0.f));
  rows.push_back(std::vector<float>(256, 0.75f));
  rows.push_back(std::vector<float>(256, -0.75f));
  std::vector<float> spike(256, 0.f);
  spike[77] = 3.f;
  rows.push_back(spike);
  for (const GgmlType t : types) {
    for (size_t r = 0; r < rows.size(); ++r) {
      const auto& x = rows[r];
      std::vector<uint8_t> q(row_bytes(t, 256));
      quantize_row(t, x.data(), q.data(), 256);
      const auto y = dequant(t, q.data(), 256);
      const bool iq4 = t == GgmlType::IQ4_NL || t == GgmlType::IQ4_XS;
      const float tol = iq4 && r == 3 ? 0.025f : 0.01f;
      for (int i = 0; i < 256; ++i) ASSERT_NEAR(y[i], x[i], tol) << type_name(t) << " row " << r << " i " << i;
    }
  }
}

// dot_row_f32 equals the double-precision dot of the dequantized row.
TEST(QuantDot, MatchesDequantizedDot) {
  const uint32_t seed = fresh_seed();
  std::mt19937 rng(seed);
  std::normal_distribution<float> g(0.f, 1.f);
  const int64_t n = 512;
  std::vector<float> w(n), x(n);
  for (auto& v : w) v = g(rng);
  for (auto& v : x) v = g(rng);
  for (const auto& b : kRoundTripBounds) {
    std::vector<uint8_t> q(row_bytes(b.t, n));
    quantize_row(b.t, w.data(), q.data(), n);
    const auto wd = dequant(b.t, q.data(), n);
    double ref = 0, mag = 0;
    for (int64_t i = 0; i < n; ++i) {
      ref += double(wd[i]) * x[i];
      mag += std::fabs(double(wd[i]) * x[i]);
    }
    EXPECT_NEAR(dot_row_f32(b.t, q.data(), x.data(), n), ref, 1e-6 * mag + 1e-6) << type_name(b.t) << " seed " << seed;
  }
}
