// The int8 dot-product GEMM path (gemm_paths.h): activations are quantized to
// int8 blocks of 32 into GemmArgs::scratch (shaders/quantize_q8.comp), then a
// tiled kernel multiplies them with the int8-decoded weights through packed
// 4x8-bit dot products (shaders/gemm_int8.comp). Records quantize, barrier,
// GEMM (no trailing barrier). The scratch is rewritten by every call: two
// calls without a barrier between them need distinct scratch ranges.
//
// Numerics: x is replaced by dx * q, dx = max|x| / 127 over its 32-block, so
// |error| <= sum_i |w_i| dx(i) / 2 beyond f32 rounding (the Q8 activation
// rounding of the int8-x matvec, vk_matvec.h).
#include <algorithm>
#include <string>

#include "base/error.h"
#include "engine/vulkan/gemm_paths.h"
#include "engine/vulkan/vk_check.h"

namespace vkmoe::vk {
namespace {

constexpr uint32_t kTileRows = 64, kTileTokens = 32;  // BM, dense BN in gemm_int8.comp (expert-grouped: kMoeTileRows)
// Its shared tiles with the larger BN: weights 64 x (9 ivec4 + 5 vec2), activations BN x 4 (2 ivec4 + vec2).
constexpr uint32_t kSharedBytes = 64 * (9 * 16 + 5 * 8) + std::max(kTileTokens, kMoeTileRows) * 4 * (2 * 16 + 8);

struct Int8Type {
  const char* suffix;
  uint32_t qk, block_bytes;
  uint32_t unit;  // bytes per weight addressing unit in the shader (= required alignment)
};

const Int8Type* int8_type(GgmlType t) {
  static const Int8Type q8_0{"q8_0", 32, 34, 2}, q4_k{"q4_k", 256, 144, 4}, q5_k{"q5_k", 256, 176, 4},
      q6_k{"q6_k", 256, 210, 2};
  switch (t) {
    case GgmlType::Q8_0: return &q8_0;
    case GgmlType::Q4_K: return &q4_k;
    case GgmlType::Q5_K: return &q5_k;
    case GgmlType::Q6_K: return &q6_k;
    default: return nullptr;
  }
}

// Must match the push blocks of quantize_q8.comp and gemm_int8.comp.
struct QuantizePush {
  uint32_t ncols, n_rows, x_offset, x_stride, ds_offset;
  uint32_t count_off, slot_token_off;
};
struct GemmInt8Push {
  uint32_t ncols, nrows, n_tokens, w_offset;
  uint32_t y_offset, y_stride, accumulate, ds_offset;
  uint32_t expert_stride, n_experts, count_off, tile_expert_off;
  uint32_t slot_token_off, gather_x, y_pair_off;
};

void check_range(const char* what, const BufferRange& b, uint64_t end_bytes) {
  check_binding_32bit("int8 GEMM", what, b, end_bytes);
}

}  // namespace

bool gemm_int8_available(const Context& ctx, GgmlType t) {
  const Int8Type* T = int8_type(t);
  const DeviceInfo& d = ctx.info();
  if (!T || !d.integer_dot || d.max_workgroup_invocations < 128 || d.max_workgroup_size[0] < 128 ||
      d.max_shared_memory_bytes < kSharedBytes)
    return false;
  // Q8_0 / Q6_K blocks are only 2-byte aligned and are read as uint16.
  if (T->unit == 2 && !(d.storage_16bit && d.shader_int16)) return false;
  return true;
}

uint64_t gemm_int8_scratch_bytes(uint32_t ncols, uint32_t n_rows) {
  if (ncols % 32 != 0) throw Error("int8 GEMM: ncols " + std::to_string(ncols) + " is not a multiple of 32");
  return uint64_t(n_rows) * (ncols + ncols / 32 * 8);  // int8 values, then (d, d * sum) per block
}

void record_gemm_int8(Recorder& rec, const GemmArgs& a, const GemmIdsArgs* ids) {
  const Int8Type* T = int8_type(a.type);
  Context& ctx = rec.context();
  if (!T || !gemm_int8_available(ctx, a.type))
    throw Error(std::string("the int8 GEMM path is not available for ") + type_name(a.type) + " on this device");
  if (a.ncols == 0 || a.nrows == 0 || a.ncols % T->qk != 0)
    throw Error("int8 GEMM: ncols " + std::to_string(a.ncols) + " is not a positive multiple of " +
                std::to_string(T->qk) + " for " + type_name(a.type));
  if (a.scratch.buffer == VK_NULL_HANDLE) throw Error("int8 GEMM: no scratch buffer for the quantized activations");
  if ((a.w.offset + a.w_offset) % T->unit != 0)
    throw Error(std::string("internal error: int8 GEMM weights of type ") + type_name(a.type) + " must be " +
                std::to_string(T->unit) + "-byte aligned");

  const DeviceInfo& dev = ctx.info();
  const uint64_t matrix_bytes = uint64_t(a.ncols / T->qk) * T->block_bytes * a.nrows;
  uint64_t w_end = a.w_offset + matrix_bytes;
  // Activation rows to quantize and output columns (tokens or slots).
  uint32_t x_rows, y_cols;
  if (ids) {
    const MoeTableLayout& L = ids->layout;
    if (L.max_tiles == 0) return;
    if (ids->n_experts == 0) throw Error("internal error: int8 GEMM ids with n_experts = 0");
    if (ids->expert_stride % T->unit != 0)
      throw Error("internal error: int8 GEMM ids expert_stride breaks the weight alignment");
    w_end = a.w_offset + (ids->n_experts - 1) * ids->expert_stride + matrix_bytes;
    x_rows = ids->gather_x ? L.n_tokens : L.max_slots();
    y_cols = ids->y_rows();
    check_range("table", ids->table, L.bytes());
  } else {
    if (a.n_tokens == 0) return;
    x_rows = y_cols = a.n_tokens;
  }
  if (x_rows == 0) return;
  check_range("weights", a.w, w_end);
  check_range("x", a.x, (uint64_t(a.x_offset) + uint64_t(x_rows - 1) * a.x_stride + a.ncols) * 4);
  check_range("y", a.y, (uint64_t(a.y_offset) + uint64_t(y_cols - 1) * a.y_stride + a.nrows) * 4);
  check_range("scratch", a.scratch, gemm_int8_scratch_bytes(a.ncols, x_rows));

  const uint32_t row_groups = (a.nrows + kTileRows - 1) / kTileRows;
  const uint32_t col_groups = ids ? ids->layout.max_tiles : (a.n_tokens + kTileTokens - 1) / kTileTokens;
  const uint32_t qgroups = (a.ncols / 32 + 63) / 64;
  if (row_groups > dev.max_workgroup_count[0] || col_groups > dev.max_workgroup_count[1] ||
      x_rows > dev.max_workgroup_count[1])
    throw Error("int8 GEMM: " + std::to_string(a.nrows) + " rows x " + std::to_string(y_cols) +
                " columns exceed the device's workgroup counts");
  const uint32_t ds_offset = static_cast<uint32_t>(uint64_t(x_rows) * a.ncols / 8);  // vec2 index

  // Quantize: dense rows (tokens, or gathered tokens), or slot rows of the used tiles.
  const bool slot_rows = ids && !ids->gather_x;
  QuantizePush qp{a.ncols, x_rows, a.x_offset, a.x_stride, ds_offset, 0, 0};
  if (slot_rows) {
    qp.count_off = ids->layout.count_off;
    qp.slot_token_off = ids->layout.slot_token_off;
    const Pipeline& qpipe = ctx.pipeline("quantize_q8_ids", 3, sizeof(QuantizePush));
    rec.dispatch(qpipe, {a.x, a.scratch, ids->table}, qp, qgroups, x_rows);
  } else {
    const Pipeline& qpipe = ctx.pipeline("quantize_q8", 2, sizeof(QuantizePush));
    rec.dispatch(qpipe, {a.x, a.scratch}, qp, qgroups, x_rows);
  }
  rec.barrier();

  GemmInt8Push gp{};
  gp.ncols = a.ncols;
  gp.nrows = a.nrows;
  gp.n_tokens = a.n_tokens;
  gp.w_offset = static_cast<uint32_t>(a.w_offset / T->unit);
  gp.y_offset = a.y_offset;
  gp.y_stride = a.y_stride;
  gp.accumulate = a.accumulate ? 1 : 0;
  gp.ds_offset = ds_offset;
  if (ids) {
    gp.expert_stride = static_cast<uint32_t>(ids->expert_stride / T->unit);
    gp.n_experts = ids->n_experts;
    gp.count_off = ids->layout.count_off;
    gp.tile_expert_off = ids->layout.tile_expert_off;
    gp.slot_token_off = ids->layout.slot_token_off;
    gp.gather_x = ids->gather_x ? 1 : 0;
    gp.y_pair_off = ids->y_pair_off();
    const Pipeline& p = ctx.pipeline(std::string("gemm_int8_ids_") + T->suffix, 4, sizeof(GemmInt8Push));
    rec.dispatch(p, {a.w, a.scratch, a.y, ids->table}, gp, row_groups, col_groups);
  } else {
    const Pipeline& p = ctx.pipeline(std::string("gemm_int8_") + T->suffix, 3, sizeof(GemmInt8Push));
    rec.dispatch(p, {a.w, a.scratch, a.y}, gp, row_groups, col_groups);
  }
}

}  // namespace vkmoe::vk
