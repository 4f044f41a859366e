#pragma once
// Batched matrix products over ggml-layout weights (prompt processing):
//   Y[n][r] = (accumulate ? Y[n][r] : 0) + sum_i W[r][i] * X[n][i]
// for tokens n in [0, n_tokens) and weight rows r in [0, nrows). X and Y are
// f32, row-major with the given strides (in floats); W rows are
// row_bytes(type, ncols) bytes of ggml blocks.
//
// Paths: a shared-memory tiled kernel for every type (any device); an int8
// dot-product kernel for the quantized types (VK_KHR_shader_integer_dot_product);
// a cooperative-matrix kernel (VK_KHR_cooperative_matrix) where the device and
// the shader compiler have it. GemmConfig::path = Auto picks the fastest
// available; the others force one (Error when unavailable).
#include <cstdint>

#include "cpu/quant.h"
#include "engine/vulkan/moe_table.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe::vk {

enum class GemmPath { Auto, Tiled, Int8Dot, CoopMat };
const char* gemm_path_name(GemmPath p);

// F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K.
bool gemm_supported(GgmlType t);
// Whether `p` can run type t on this device (Tiled: always for supported types).
bool gemm_path_available(const Context& ctx, GemmPath p, GgmlType t);

struct GemmConfig {
  GemmPath path = GemmPath::Auto;
};

struct GemmArgs {
  GgmlType type = GgmlType::F32;
  uint32_t ncols = 0, nrows = 0, n_tokens = 0;
  BufferRange w;  // weights (alignment as for MatvecArgs)
  uint64_t w_offset = 0;
  BufferRange x;
  uint32_t x_offset = 0, x_stride = 0;  // floats
  BufferRange y;
  uint32_t y_offset = 0, y_stride = 0;  // floats
  bool accumulate = false;
  // int8 path's quantized activations, size gemm_int8_scratch_bytes(ncols, n_tokens or max slots)
  // (gemm_paths.h); written and read within the call.
  BufferRange scratch;
};

// Expert-grouped product (MUL_MAT_ID) over a MoeTable (see moe_table.h): for
// each used tile i, expert e = tile_expert[i] (an index into `w`, expert e at
// w_offset + e * expert_stride bytes; tiles with e < 0 are skipped) multiplies
// the kMoeTileRows slot rows s of the tile:
//   Y[s] (+)= W_e . X[gather_x ? slot_token[s] : s]      (slot_token[s] < 0: row skipped)
// Y rows are always slot-indexed. n_tokens is unused; max_tiles bounds the dispatch.
struct GemmIdsArgs : GemmArgs {
  BufferRange table;  // MoeTable words (uint32)
  MoeTableLayout layout;
  uint64_t expert_stride = 0;
  uint32_t n_experts = 0;  // experts (or slots) in w
  bool gather_x = true;
};

// Records one dispatch (no barrier). Throws Error for unsupported types or shapes.
void record_gemm(Recorder& rec, const GemmArgs& a, const GemmConfig& cfg = {});
void record_gemm_ids(Recorder& rec, const GemmIdsArgs& a, const GemmConfig& cfg = {});

}  // namespace vkmoe::vk
