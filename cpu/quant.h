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
  BF16 = 30,
};

constexpr int QK8_0 = 32;
constexpr int QK_K = 256;
constexpr int K_SCALE_SIZE = 12;

#pragma pack(push, 1)
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
uint16_t fp32_to_bf16(float f);  // round to nearest even, NaN preserved

// Reference conversions of one row of n elements (n multiple of block size).
// Throw Error for unsupported types.
void dequantize_row(GgmlType t, const void* src, float* dst, int64_t n);
void quantize_row(GgmlType t, const float* src, void* dst, int64_t n);

// Scalar reference dot of one quantized row with an f32 vector.
float dot_row_f32(GgmlType t, const void* row, const float* x, int64_t n);

}  // namespace vkmoe
