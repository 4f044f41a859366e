// The NVIDIA cooperative-matrix-2 GEMM path (gemm_paths.h, shaders/gemm_cm2.comp):
// the activations are first converted to f16 rows in the scratch buffer
// (shaders/to_f16.comp; gathered into slot order for expert-grouped
// products), then workgroup-scope f16 fragments are loaded through tensor
// layouts whose decode callbacks dequantize the weight blocks, with f32
// accumulation. The implementation stages the tiles in shared memory and
// schedules the tensor cores itself.
// Built only when CMake found glslang 15 (VKMOE_HAVE_COOPMAT_SHADERS); the
// device must have VK_NV_cooperative_matrix2 with an f16 x f16 -> f32
// workgroup-scope configuration for the tile.
//
// Numerics: as the KHR cooperative-matrix path (weights and activations
// rounded to f16, f32 sums).
// VKMOE_COOPMAT2_TILE=<name> forces a workgroup tile (benchmarks).
#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <string>

#include "base/error.h"
#include "engine/vulkan/gemm_paths.h"
#include "engine/vulkan/weight_types.h"

namespace vkmoe::vk {
namespace {

// Workgroup tile: `threads` invocations computing BM weight rows x BN tokens, BK columns per step.
struct Tile {
  const char* name;
  uint32_t threads, bm, bn, bk;
};
constexpr Tile kTiles[] = {{"L", 256, 128, 128, 32}, {"M", 256, 128, 64, 32}, {"S", 128, 64, 64, 32},
                           {"XS", 128, 64, 32, 32}, {"L64", 256, 128, 128, 64}, {"M64", 256, 128, 64, 64}};
// Expert-grouped: one MoE table tile (kMoeTileRows slots) per workgroup column.
constexpr Tile kIdsTiles[] = {{"L", 256, 128, kMoeTileRows, 32}, {"M", 128, 64, kMoeTileRows, 32},
                              {"L64", 256, 128, kMoeTileRows, 64}, {"M64", 128, 64, kMoeTileRows, 64}};

// Expert-grouped tiles also multiply BN / 2 slots (tiles with padding past the half).
bool tile_runs(const DeviceInfo& d, const Tile& t, bool indexed) {
  return t.threads <= d.max_workgroup_invocations && t.threads <= d.max_workgroup_size[0] &&
         (d.coopmat2_max_workgroup == 0 || t.threads <= d.coopmat2_max_workgroup) &&
         d.has_coopmat2(t.bm, t.bn, t.bk, t.threads) && (!indexed || d.has_coopmat2(t.bm, t.bn / 2, t.bk, t.threads));
}

// A forced tile (VKMOE_COOPMAT2_TILE), else the largest giving at least two
// workgroups per 128 SMs' worth of work (256), else the one with the most workgroups.
const Tile* pick_tile(const DeviceInfo& d, bool indexed, uint32_t nrows, uint32_t cols) {
  const Tile* list = indexed ? kIdsTiles : kTiles;
  const size_t n = indexed ? std::size(kIdsTiles) : std::size(kTiles);
  if (const char* force = std::getenv("VKMOE_COOPMAT2_TILE")) {
    for (size_t i = 0; i < n; ++i)
      if (std::string(force) == list[i].name && tile_runs(d, list[i], indexed)) return &list[i];
  }
  const Tile* best = nullptr;
  uint64_t best_wgs = 0;
  for (size_t i = 0; i < n; ++i) {
    const Tile& t = list[i];
    if (t.bk != 32 || !tile_runs(d, t, indexed)) continue;  // BK 64 only when forced
    const uint64_t wgs = uint64_t((nrows + t.bm - 1) / t.bm) * (indexed ? cols : (cols + t.bn - 1) / t.bn);
    if (wgs >= 256) return &t;
    if (!best || wgs > best_wgs) best = &t, best_wgs = wgs;
  }
  return best;
}

// Must match the push block of gemm_cm2.comp.
struct Cm2Push {
  uint32_t ncols, nrows, n_tokens, row_blocks;
  uint32_t y_offset, y_stride, accumulate;
  uint32_t expert_blocks, n_experts;
  uint32_t count_off, tile_expert_off, slot_token_off, y_pair_off;
};
// Must match the push block of to_f16.comp.
struct ToF16Push {
  uint32_t ncols, n_rows, x_offset, x_stride;
  uint32_t gather_x, count_off, slot_token_off;
};

// f16 activation rows the GEMM reads: tokens, or the table's slots.
uint32_t f16_rows(const GemmArgs& a, const GemmIdsArgs* ids) { return ids ? ids->layout.max_slots() : a.n_tokens; }

}  // namespace

bool gemm_coopmat2_available(const Context& ctx, GgmlType t) {
#ifndef VKMOE_HAVE_COOPMAT_SHADERS
  (void)ctx;
  (void)t;
  return false;
#else
  const DeviceInfo& d = ctx.info();
  if (!d.cooperative_matrix2 || !coopmat_basics(d, t)) return false;
  return pick_tile(d, false, 1, 1) != nullptr && pick_tile(d, true, 1, 1) != nullptr;
#endif
}

uint64_t gemm_coopmat2_scratch_bytes(uint32_t ncols, uint32_t n_rows) { return uint64_t(n_rows) * ncols * 2; }

bool gemm_coopmat2_applies(const Context& ctx, const GemmArgs& a, const GemmIdsArgs* ids) {
  if (!gemm_coopmat2_available(ctx, a.type)) return false;
  const GpuWeightType* T = gpu_weight_type(a.type);
  const uint64_t align = std::max<uint64_t>(ctx.info().min_storage_offset_alignment, 16);
  return (a.w.offset + a.w_offset) % align == 0 && a.ncols % std::max<uint32_t>(T->block_elems, 4) == 0 &&
         a.x.offset % 16 == 0 && a.x_offset % 4 == 0 && a.x_stride % 4 == 0 &&
         a.scratch.buffer != VK_NULL_HANDLE &&
         a.scratch.range >= gemm_coopmat2_scratch_bytes(a.ncols, f16_rows(a, ids)) &&
         (!ids || ids->expert_stride % T->block_bytes == 0);
}

void record_gemm_coopmat2(Recorder& rec, const GemmArgs& a, const GemmIdsArgs* ids) {
  Context& ctx = rec.context();
  if (!gemm_coopmat2_applies(ctx, a, ids))
    throw Error("internal error: coopmat2 GEMM does not apply to this " + std::string(type_name(a.type)) +
                " product (device, alignment or layout)");
  const GpuWeightType* T = gpu_weight_type(a.type);
  const uint32_t cols = ids ? ids->layout.max_tiles : a.n_tokens;  // tiles or tokens
  if (cols == 0) return;
  // The shapes and ranges were checked by vk_gemm.cpp's validate(); the weights binding starts at the matrix.
  const uint32_t row_blocks = a.ncols / T->block_elems;
  const uint64_t matrix_bytes = uint64_t(row_blocks) * T->block_bytes * a.nrows;
  const uint64_t w_bytes = ids ? uint64_t(ids->n_experts - 1) * ids->expert_stride + matrix_bytes : matrix_bytes;
  BufferRange w = a.w;
  w.offset += a.w_offset;
  w.range = w_bytes;

  const DeviceInfo& d = ctx.info();
  const uint32_t rows = f16_rows(a, ids);
  if (rows > d.max_workgroup_count[1]) throw Error("coopmat2 GEMM: too many activation rows");

  // The scratch may still be read by an earlier product; then the f16 rows.
  ToF16Push hp{a.ncols, rows, a.x_offset, a.x_stride, 0, 0, 0};
  const uint32_t hx = (a.ncols / 4 + 255) / 256;
  rec.barrier();
  if (ids) {
    hp.gather_x = ids->gather_x ? 1 : 0;
    hp.count_off = ids->layout.count_off;
    hp.slot_token_off = ids->layout.slot_token_off;
    rec.dispatch(ctx.pipeline("to_f16_ids", 3, sizeof(ToF16Push)), {a.x, a.scratch, ids->table}, hp, hx, rows);
  } else {
    rec.dispatch(ctx.pipeline("to_f16", 2, sizeof(ToF16Push)), {a.x, a.scratch}, hp, hx, rows);
  }
  rec.barrier();

  const Tile* t = pick_tile(d, ids != nullptr, a.nrows, cols);
  const std::vector<uint32_t> spec = {t->threads, t->bm, t->bn, t->bk};
  Cm2Push p{};
  p.ncols = a.ncols;
  p.nrows = a.nrows;
  p.n_tokens = a.n_tokens;
  p.row_blocks = row_blocks;
  p.y_offset = a.y_offset;
  p.y_stride = a.y_stride;
  p.accumulate = a.accumulate ? 1 : 0;
  const uint32_t gx = (a.nrows + t->bm - 1) / t->bm;
  if (gx > d.max_workgroup_count[0]) throw Error("coopmat2 GEMM: too many weight rows");
  if (ids) {
    const uint64_t expert_blocks = ids->expert_stride / T->block_bytes;
    if (expert_blocks * ids->n_experts > UINT32_MAX) throw Error("coopmat2 GEMM: expert pool exceeds 2^32 blocks");
    p.expert_blocks = static_cast<uint32_t>(expert_blocks);
    p.n_experts = ids->n_experts;
    p.count_off = ids->layout.count_off;
    p.tile_expert_off = ids->layout.tile_expert_off;
    p.slot_token_off = ids->layout.slot_token_off;
    p.y_pair_off = ids->y_pair_off();
    if (cols > d.max_workgroup_count[1]) throw Error("coopmat2 GEMM: too many MoE tiles");
    const Pipeline& pl = ctx.pipeline(std::string("gemm_cm2_ids_") + T->suffix, 4, sizeof(Cm2Push), spec);
    rec.dispatch(pl, {w, a.scratch, a.y, ids->table}, p, gx, cols);
  } else {
    const uint32_t gy = (cols + t->bn - 1) / t->bn;
    if (gy > d.max_workgroup_count[1]) throw Error("coopmat2 GEMM: too many tokens");
    const Pipeline& pl = ctx.pipeline(std::string("gemm_cm2_") + T->suffix, 3, sizeof(Cm2Push), spec);
    rec.dispatch(pl, {w, a.scratch, a.y}, p, gx, gy);
  }
}

}  // namespace vkmoe::vk
