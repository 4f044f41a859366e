#pragma once
// ggml/GGUF tensor element types and block layouts, bit-exact with ggml.
#include <cstddef>
#include <cstdint>

namespace vkmoe {

enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ4_NL = 20,
  IQ4_XS = 23,
  BF16 = 30,
  MXFP4 = 39,
};

constexpr int QK8_0 = 32;
constexpr int QK4_0 = 32;  // also Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4
constexpr int QK_K = 256;
constexpr int K_SCALE_SIZE = 12;

// Non-linear 4-bit codebooks: IQ4_NL/IQ4_XS values, and MXFP4's e2m1 values
// doubled (the block scale is halved to match, see e8m0_to_fp32_half).
inline constexpr int8_t kValuesIQ4NL[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
inline constexpr int8_t kValuesMXFP4[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

#pragma pack(push, 1)
// 32-element blocks: element j of the block is the low nibble of qs[j] for
// j < 16 and the high nibble of qs[j - 16] otherwise; Q5_x take bit j of the
// little-endian qh word as bit 4.
struct BlockQ4_0 {
  uint16_t d;  // fp16 scale: x = d * (q - 8)
  uint8_t qs[QK4_0 / 2];
};
struct BlockQ4_1 {
  uint16_t d, m;  // fp16: x = d * q + m
  uint8_t qs[QK4_0 / 2];
};
struct BlockQ5_0 {
  uint16_t d;  // x = d * (q - 16)
  uint8_t qh[4];
  uint8_t qs[QK4_0 / 2];
};
struct BlockQ5_1 {
  uint16_t d, m;  // x = d * q + m
  uint8_t qh[4];
  uint8_t qs[QK4_0 / 2];
};
struct BlockIQ4_NL {
  uint16_t d;  // x = d * kValuesIQ4NL[q]
  uint8_t qs[QK4_0 / 2];
};
struct BlockMXFP4 {
  uint8_t e;  // E8M0 exponent: x = 2^(e - 128) * kValuesMXFP4[q]
  uint8_t qs[QK4_0 / 2];
};
// 256-element super-blocks of 16 groups of 16 (Q2_K, Q3_K): element i has its
// 2 low bits at bits 2j..2j+1 of qs[32 * (i / 128) + i % 32], j = (i % 128) / 32.
struct BlockQ2_K {
  uint8_t scales[QK_K / 16];  // low nibble scale, high nibble min of each group
  uint8_t qs[QK_K / 4];
  uint16_t d, dmin;  // x = d * sc * q - dmin * mn
};
struct BlockQ3_K {
  uint8_t hmask[QK_K / 8];  // bit (i / 32) of hmask[i % 32] set: q - 0, clear: q - 4
  uint8_t qs[QK_K / 4];
  uint8_t scales[12];  // 16 six-bit scales, offset by 32
  uint16_t d;          // x = d * (scale - 32) * (q - 4 * !hbit)
};
struct BlockIQ4_XS {
  uint16_t d;
  uint16_t scales_h;           // high 2 bits of the 8 six-bit scales
  uint8_t scales_l[QK_K / 64];  // low 4 bits, two per byte
  uint8_t qs[QK_K / 2];        // 8 groups of 32 laid out like IQ4_NL blocks
};
struct BlockQ8_0 {
  uint16_t d;  // fp16 scale
  int8_t qs[QK8_0];
};
struct BlockQ4_K {
  uint16_t d;     // fp16 super-block scale for quantized scales
  uint16_t dmin;  // fp16 super-block scale for quantized mins
  uint8_t scales[K_SCALE_SIZE];  // 8 x (6-bit scale, 6-bit min)
  uint8_t qs[QK_K / 2];          // 4-bit quants
};
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[K_SCALE_SIZE];
  uint8_t qh[QK_K / 8];  // high bit of each quant
  uint8_t qs[QK_K / 2];  // low 4 bits
};
struct BlockQ6_K {
  uint8_t ql[QK_K / 2];      // low 4 bits
  uint8_t qh[QK_K / 4];      // high 2 bits
  int8_t scales[QK_K / 16];  // 8-bit scales per 16 values
  uint16_t d;                // fp16 super-block scale
};
struct BlockQ8_K {
  float d;
  int8_t qs[QK_K];
  int16_t bsums[QK_K / 16];  // sums of groups of 16 quants
};
#pragma pack(pop)
static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockIQ4_NL) == 18);
static_assert(sizeof(BlockMXFP4) == 17);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockIQ4_XS) == 136);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);

struct TypeTraits {
  const char* name;
  int block_size;   // elements per block
  int type_size;    // bytes per block
  bool supported;   // dequantize/quantize implemented here
};

// Traits for any ggml type id (unknown ids return {"?",0,0,false}).
const TypeTraits& type_traits(GgmlType t);
bool is_known_type(uint32_t id);
const char* type_name(GgmlType t);
// Bytes of one row of n elements; throws Error if n is not a multiple of the block size.
size_t row_bytes(GgmlType t, int64_t n);

float fp16_to_fp32(uint16_t h);
uint16_t fp32_to_fp16(float f);  // round to nearest even
float bf16_to_fp32(uint16_t h);
// ggml_e8m0_to_fp32_half: 2^(e - 128) (e < 2 gives the float subnormals).
float e8m0_to_fp32_half(uint8_t e);
// Six-bit scale j (0..15, still offset by 32) of a Q3_K block.
int q3_k_scale(const uint8_t* scales12, int j);
uint16_t fp32_to_bf16(float f);  // round to nearest even, NaN preserved

// Reference conversions of one row of n elements (n multiple of block size).
// Throw Error for unsupported types.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);

// Scalar reference dot of one quantized row with an f32 vector.
float dot_row_f32(GgmlType t, const void* row, const float* x, int64_t n);

}  // namespace vkmoe
