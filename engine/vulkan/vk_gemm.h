#pragma once
// Batched matrix products over ggml-layout weights (prompt processing):
//   Y[n][r] = (accumulate ? Y[n][r] : 0) + sum_i W[r][i] * X[n][i]
// for tokens n in [0, n_tokens) and weight rows r in [0, nrows). X and Y are
// f32, row-major with the given strides (in floats); W rows are
// row_bytes(type, ncols) bytes of ggml blocks.
//
// Paths: a shared-memory tiled kernel for every type (any device); an int8
// dot-product kernel for the quantized types (VK_KHR_shader_integer_dot_product);
// a cooperative-matrix kernel (VK_KHR_cooperative_matrix) and an NVIDIA
// cooperative-matrix-2 kernel (VK_NV_cooperative_matrix2) where the device and
// the shader compiler have them. GemmConfig::path = Auto picks the fastest
// available of coopmat, int8 and tiled (coopmat2 is slower than coopmat on an
// H100 so far: docs/PERF.md); the others force one (Error when unavailable; a
// coopmat2 product whose layout that kernel cannot take runs on coopmat).
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "cpu/quant.h"
#include "engine/vulkan/moe_table.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe::vk {

enum class GemmPath { Auto, Tiled, Int8Dot, CoopMat, CoopMat2 };
const char* gemm_path_name(GemmPath p);
// The path named `name` (as gemm_path_name writes it); nullopt when none is.
std::optional<GemmPath> gemm_path_by_name(std::string_view name);
constexpr const char* kGemmPathNames = "auto, tiled, int8, coopmat, coopmat2";

// F32, F16, BF16, Q8_0, Q4_K, Q5_K, Q6_K, Q4_0, Q4_1, Q5_0, Q5_1, IQ4_NL, MXFP4, Q2_K,
// Q3_K, IQ4_XS (tiled path; int8 and coopmat cover the first seven at most).
bool gemm_supported(GgmlType t);
// Whether `p` can run type t on this device (Tiled: always for supported types).
bool gemm_path_available(const Context& ctx, GemmPath p, GgmlType t);
// The path `p` stands for with type t here: Auto becomes the fastest available.
// Throws Error when a forced path is unavailable.
GemmPath resolve_gemm_path(const Context& ctx, GemmPath p, GgmlType t);

struct GemmConfig {
  GemmPath path = GemmPath::Auto;
};

// The sum of a split product's partial planes into its y.
struct GemmSplitSum {
  BufferRange partials, y;
  uint32_t nrows = 0, n_tokens = 0, splits = 0, plane = 0, y_offset = 0, y_stride = 0;
  bool accumulate = false;
  // With norm_w: also xn = rmsnorm(y row) * norm_w at y's offset and stride
  // (one workgroup per token); a non-finite row lowers flags[0] to check.
  // nrows, plane, y_offset and y_stride multiples of 4 (norm_foldable).
  BufferRange norm_w, xn, flags;
  float eps = 0.f;
  uint32_t check = 0;
  bool norm_foldable() const { return (nrows | plane | y_offset | y_stride) % 4 == 0; }
  // Whether a reader may take the partial planes for y itself (split_planes.glsl):
  // y is whole rows from offset 0, not accumulated into.
  bool planes_are_rows() const { return y_offset == 0 && y_stride == nrows && !accumulate; }
};
// Records the sums (their partials written before a barrier the caller recorded).
void record_gemm_split_sums(Recorder& rec, const std::vector<GemmSplitSum>& sums);

struct GemmArgs {
  GgmlType type = GgmlType::F32;
  uint32_t ncols = 0, nrows = 0, n_tokens = 0;
  BufferRange w;  // weights (alignment as for MatvecArgs)
  uint64_t w_offset = 0;
  BufferRange x;
  uint32_t x_offset = 0, x_stride = 0;  // floats (halfs with x_f16)
  // X rows are f16, offset and stride multiples of 4: the coopmat path only
  // (gemm_takes_f16_x), which rounds f32 rows to f16 anyway.
  bool x_f16 = false;
  BufferRange y;
  uint32_t y_offset = 0, y_stride = 0;  // floats
  bool accumulate = false;
  // The int8 and coopmat2 paths' converted activations, gemm_scratch_bytes(ncols, n_tokens or max slots)
  // (gemm_paths.h); written and read within the call.
  BufferRange scratch;
  // Optional room for the partial sums of a split-K product (the coopmat path
  // splits long rows over few workgroups, see gemm_split_k_bytes); must not be
  // in use by a product recorded without a barrier in between. Empty: no split.
  BufferRange split_k;
  // Where a split product leaves its sum of the partials for the caller to
  // record after a barrier of its own (record_gemm_split_sums), so that
  // several products' partials run together; null: the call records barrier
  // and sum itself.
  std::vector<GemmSplitSum>* sums_later = nullptr;
};

// Expert-grouped product (MUL_MAT_ID) over a MoeTable (see moe_table.h): for
// each used tile i, expert e = tile_expert[i] (an index into `w`, expert e at
// w_offset + e * expert_stride bytes; tiles with e < 0 are skipped) multiplies
// the kMoeTileRows slot rows s of the tile:
//   Y[row(s)] (+)= W_e . X[gather_x ? slot_token[s] : s]      (slot_token[s] < 0: row skipped)
// row(s) = s, or with y_by_pair the slot's routing pair slot_pair[s] = t*k + j
// (Y then needs n_tokens * k rows, not max_slots(): a down product's output,
// without the padding slots' rows). n_tokens is unused; max_tiles bounds the dispatch.
struct GemmIdsArgs : GemmArgs {
  BufferRange table;  // MoeTable words (uint32)
  MoeTableLayout layout;
  uint64_t expert_stride = 0;
  uint32_t n_experts = 0;  // experts (or slots) in w
  bool gather_x = true;
  bool y_by_pair = false;
  uint32_t y_rows() const { return y_by_pair ? layout.pairs() : layout.max_slots(); }
  uint32_t y_pair_off() const { return y_by_pair ? layout.slot_pair_off : 0; }  // the shaders' push field
  // Optional up weights U of a gated FFN (same type, shape, offset and expert
  // stride as w): then Y[s] = glu(W_e . x, U_e . x) with activation glu_act
  // (shaders/glu.glsl: 0 SiLU, 1 gpt-oss's clamped one), gate and up in one
  // product. Only on the coopmat path (gemm_ids_glu_available); no accumulate.
  BufferRange glu_up;
  uint32_t glu_act = 0;
  // The gate/up form writes f16 rows (y offset and stride in halfs, multiples
  // of 4): the activations of a down product on f16 rows (GemmArgs::x_f16).
  bool glu_y_f16 = false;
};

// Bytes of GemmArgs::split_k that allow the largest split of n_tokens x nrows.
uint64_t gemm_split_k_bytes(uint32_t nrows, uint32_t n_tokens);

// Bytes of GemmArgs::scratch any path needs for n_rows activation rows of ncols
// (n_rows: n_tokens, or layout.max_slots() for expert-grouped products).
uint64_t gemm_scratch_bytes(uint32_t ncols, uint32_t n_rows);
// The path products of type t take when p is configured: p itself (Auto
// included), or tiled where a forced p lacks the type.
GemmPath gemm_path_for(const Context& ctx, GemmPath p, GgmlType t);
// Whether those products convert their activations into GemmArgs::scratch:
// the int8 and coopmat2 paths.
bool gemm_converts_x(const Context& ctx, GemmPath p, GgmlType t);

// Whether products of type t under cfg take f16 activation rows (GemmArgs::x_f16).
bool gemm_takes_f16_x(const Context& ctx, const GemmConfig& cfg, GgmlType t);

// Whether record_gemm_ids takes GemmIdsArgs::glu_up for type t under cfg.
bool gemm_ids_glu_available(const Context& ctx, const GemmConfig& cfg, GgmlType t);

// Records the product: one dispatch, or for the int8 and coopmat2 paths an
// activation conversion into `scratch`, a barrier and the product. Throws
// Error for unsupported types or shapes.
void record_gemm(Recorder& rec, const GemmArgs& a, const GemmConfig& cfg = {});
void record_gemm_ids(Recorder& rec, const GemmIdsArgs& a, const GemmConfig& cfg = {});

}  // namespace vkmoe::vk
