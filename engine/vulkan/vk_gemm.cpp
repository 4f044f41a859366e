#include "engine/vulkan/vk_gemm.h"

#include <algorithm>
#include <string>
#include <vector>

#include "engine/vulkan/gemm_paths.h"
#include "engine/vulkan/vk_check.h"
#include "engine/vulkan/weight_types.h"

namespace vkmoe::vk {
namespace {

// Push constants (must match shaders/gemm.comp).
struct GemmPush {
  uint32_t ncols, nrows, n_tokens, w_offset;
  uint32_t x_offset, x_stride, y_offset, y_stride;
  uint32_t accumulate, expert_stride, n_experts, gather_x;
  uint32_t count_off, tile_expert_off, slot_token_off, y_pair_off;
};

// One tile shape of gemm.comp: workgroup size, BM x BN tile, K step, TM x TN per thread.
struct Tile {
  uint32_t wg, bm, bn, bk, tm, tn;
  std::vector<uint32_t> spec() const { return {wg, bm, bn, bk, tm, tn}; }
};

constexpr uint32_t kBK = 32;  // ncols must be a multiple of it
// Dense tiles by decreasing size; `kTiny` serves decode-sized calls (<= 8 tokens).
constexpr Tile kLarge{256, 128, 128, kBK, 8, 8}, kMedium{256, 128, 64, kBK, 8, 4}, kSmall{128, 64, 32, kBK, 4, 4},
    kTiny{32, 64, 8, kBK, 4, 4};
// Expert-grouped tile: BN is one MoeTable tile of slots. (On an H100 BM = 64
// beat BM = 128 with 8x4 per thread by ~25% at every MoE shape measured.)
constexpr Tile kIds{128, 64, kMoeTileRows, kBK, 8, 4};

// Shader constraints (see gemm.comp), checked at compile time.
constexpr bool valid_tile(const Tile& t) {
  return t.bk % 16 == 0 && t.tm % 4 == 0 && t.tn % 4 == 0 && t.tm <= 8 && t.tn <= 8 && t.bm % t.tm == 0 &&
         t.bn % t.tn == 0 && (t.bm / t.tm) * (t.bn / t.tn) == t.wg && (t.bm * t.bk / 16) % t.wg == 0 &&
         t.bm * t.bk / 16 / t.wg <= 4 && (t.bn * t.bk / 4) % t.wg == 0 && t.bn * t.bk / 4 / t.wg <= 4;
}
static_assert(valid_tile(kLarge) && valid_tile(kMedium) && valid_tile(kSmall) && valid_tile(kTiny) &&
              valid_tile(kIds));

uint64_t groups(uint64_t rows, const Tile& t, uint64_t cols) { return (rows + t.bm - 1) / t.bm * cols; }

// Prefers the largest tile (most reuse of each loaded element) whose grid
// still has >= kMinGroups workgroups and whose token tile is not mostly
// padding. On an H100 (132 SMs), bench-shaders with 512 tokens: 128x128 and
// 128x64 tiles need about one workgroup per SM to beat 64x32 (e.g. Q4_K
// 4096x2048: 10.6 / 15.4 / 12.3 TFLOP/s with 64 / 128 / 512 workgroups).
constexpr uint64_t kMinGroups = 128;
const Tile& dense_tile(uint32_t nrows, uint32_t n_tokens) {
  if (n_tokens <= kTiny.bn) return kTiny;
  for (const Tile* t : {&kLarge, &kMedium}) {
    const uint64_t token_tiles = (n_tokens + t->bn - 1) / t->bn;
    if (n_tokens >= t->bn && groups(nrows, *t, token_tiles) >= kMinGroups) return *t;
  }
  return kSmall;
}

void check_range(const char* what, const BufferRange& b, uint64_t end_bytes) {
  check_binding("gemm", what, b, end_bytes);
}

// Validates what every path relies on; returns the type's layout.
const GpuWeightType& validate(const GemmArgs& a, const GemmIdsArgs* ids) {
  const GpuWeightType* L = gpu_weight_type(a.type);
  if (!L) throw Error(std::string("no GPU GEMM for weight type ") + type_name(a.type));
  const uint32_t mult = std::max(L->block_elems, kBK);
  if (a.ncols == 0 || a.ncols % mult != 0)
    throw Error("gemm: ncols " + std::to_string(a.ncols) + " is not a positive multiple of " + std::to_string(mult) +
                " for " + type_name(a.type));
  if (a.nrows == 0) throw Error("gemm: nrows is 0");
  if (a.w.offset % L->align != 0 || a.w_offset % L->align != 0)
    throw Error(std::string("internal error: gemm weights of type ") + type_name(a.type) + " must be " +
                std::to_string(L->align) + "-byte aligned");
  if (a.x_offset % 4 != 0 || a.x_stride % 4 != 0)
    throw Error("internal error: gemm x_offset and x_stride must be multiples of 4 floats");
  // Rows of X read and of Y written.
  const uint32_t x_rows = ids ? (ids->gather_x ? ids->layout.n_tokens : ids->layout.max_slots()) : a.n_tokens;
  const uint32_t y_rows = ids ? ids->y_rows() : a.n_tokens;
  if (y_rows > 1 && a.y_stride < a.nrows)
    throw Error("internal error: gemm y_stride " + std::to_string(a.y_stride) + " is below nrows " +
                std::to_string(a.nrows) + " (outputs would overlap)");
  if (y_rows == 0) return *L;  // nothing to compute
  if (x_rows == 0) throw Error("internal error: gemm_ids gathers from 0 tokens");
  const uint64_t matrix_bytes = uint64_t(row_bytes(a.type, a.ncols)) * a.nrows;
  uint64_t w_end = a.w_offset + matrix_bytes;
  if (ids) {
    if (ids->n_experts == 0) throw Error("internal error: gemm_ids with n_experts = 0");
    if (ids->expert_stride % L->align != 0)
      throw Error("internal error: gemm_ids expert_stride breaks the weight alignment");
    if (ids->n_experts > 1 && ids->expert_stride < matrix_bytes)
      throw Error("internal error: gemm_ids expert_stride is smaller than one expert");
    w_end += (ids->n_experts - 1) * ids->expert_stride;
    check_range("table", ids->table, ids->layout.bytes());
  }
  check_range("weights", a.w, w_end);
  if (w_end / L->align > UINT32_MAX) throw Error("internal error: gemm weights exceed the shader's offset range");
  check_range("x", a.x, (uint64_t(a.x_offset) + uint64_t(x_rows - 1) * a.x_stride + a.ncols) * (a.x_f16 ? 2 : 4));
  const bool y_f16 = ids && ids->glu_y_f16;
  check_range("y", a.y, (uint64_t(a.y_offset) + uint64_t(y_rows - 1) * a.y_stride + a.nrows) * (y_f16 ? 2 : 4));
  return *L;
}

GemmPath resolve_path(const Context& ctx, GemmPath p, GgmlType t) {
  if (p == GemmPath::Auto) {
    if (gemm_coopmat_available(ctx, t)) return GemmPath::CoopMat;
    if (gemm_int8_available(ctx, t)) return GemmPath::Int8Dot;
    return GemmPath::Tiled;
  }
  if (!gemm_path_available(ctx, p, t))
    throw Error(std::string("gemm: the ") + gemm_path_name(p) + " path is not available for " + type_name(t) +
                " on this device");
  return p;
}

void record_tiled(Recorder& rec, const GemmArgs& a, const GemmIdsArgs* ids, const GpuWeightType& L) {
  const DeviceInfo& dev = rec.context().info();
  if (const char* f = gpu_weight_type_missing_feature(dev, a.type))
    throw Error(std::string("the ") + type_name(a.type) + " GEMM needs " + f + " on " + dev.name);
  const uint32_t cols = ids ? ids->layout.max_tiles : a.n_tokens;
  if (cols == 0) return;
  const Tile& t = ids ? kIds : dense_tile(a.nrows, a.n_tokens);
  const uint32_t gx = (a.nrows + t.bm - 1) / t.bm;
  const uint32_t gy = ids ? cols : (cols + t.bn - 1) / t.bn;
  if (gx > dev.max_workgroup_count[0] || gy > dev.max_workgroup_count[1])
    throw Error("internal error: gemm grid " + std::to_string(gx) + "x" + std::to_string(gy) +
                " exceeds the device's workgroup count limits");
  if (t.wg > dev.max_workgroup_invocations) throw Error("gemm: the device allows too few threads per workgroup");

  GemmPush push{};
  push.ncols = a.ncols;
  push.nrows = a.nrows;
  push.n_tokens = ids ? ids->layout.n_tokens : a.n_tokens;
  push.w_offset = static_cast<uint32_t>(a.w_offset / L.align);
  push.x_offset = a.x_offset;
  push.x_stride = a.x_stride;
  push.y_offset = a.y_offset;
  push.y_stride = a.y_stride;
  push.accumulate = a.accumulate ? 1 : 0;
  Context& ctx = rec.context();
  if (ids) {
    push.expert_stride = static_cast<uint32_t>(ids->expert_stride / L.align);
    push.n_experts = ids->n_experts;
    push.gather_x = ids->gather_x ? 1 : 0;
    push.count_off = ids->layout.count_off;
    push.tile_expert_off = ids->layout.tile_expert_off;
    push.slot_token_off = ids->layout.slot_token_off;
    push.y_pair_off = ids->y_pair_off();
    const Pipeline& p = ctx.pipeline(std::string("gemm_ids_") + L.suffix, 4, sizeof(GemmPush), t.spec());
    rec.dispatch(p, {a.w, a.x, a.y, ids->table}, push, gx, gy);
  } else {
    const Pipeline& p = ctx.pipeline(std::string("gemm_") + L.suffix, 3, sizeof(GemmPush), t.spec());
    rec.dispatch(p, {a.w, a.x, a.y}, push, gx, gy);
  }
}

void record(Recorder& rec, const GemmArgs& a, const GemmIdsArgs* ids, const GemmConfig& cfg) {
  const GpuWeightType& L = validate(a, ids);
  if (ids && ids->glu_up.buffer != VK_NULL_HANDLE) {
    if (!gemm_ids_glu_available(rec.context(), cfg, a.type))
      throw Error("internal error: a gate/up product on a GEMM path without it");
    return record_gemm_coopmat(rec, a, ids);
  }
  if (a.x_f16) {
    if (!gemm_takes_f16_x(rec.context(), cfg, a.type))
      throw Error("internal error: f16 activation rows on a GEMM path without them");
    return record_gemm_coopmat(rec, a, ids);
  }
  GemmPath path = resolve_path(rec.context(), cfg.path, a.type);
  if (path == GemmPath::CoopMat2 && !gemm_coopmat2_applies(rec.context(), a, ids))
    path = gemm_coopmat_available(rec.context(), a.type) ? GemmPath::CoopMat : GemmPath::Tiled;
  switch (path) {
    case GemmPath::CoopMat2: return record_gemm_coopmat2(rec, a, ids);
    case GemmPath::CoopMat: return record_gemm_coopmat(rec, a, ids);
    case GemmPath::Int8Dot: return record_gemm_int8(rec, a, ids);
    default: return record_tiled(rec, a, ids, L);
  }
}

}  // namespace

const char* gemm_path_name(GemmPath p) {
  switch (p) {
    case GemmPath::Auto: return "auto";
    case GemmPath::Tiled: return "tiled";
    case GemmPath::Int8Dot: return "int8";
    case GemmPath::CoopMat: return "coopmat";
    case GemmPath::CoopMat2: return "coopmat2";
  }
  return "?";
}

std::optional<GemmPath> gemm_path_by_name(std::string_view name) {
  for (GemmPath p : {GemmPath::Auto, GemmPath::Tiled, GemmPath::Int8Dot, GemmPath::CoopMat, GemmPath::CoopMat2})
    if (name == gemm_path_name(p)) return p;
  return std::nullopt;
}

GemmPath resolve_gemm_path(const Context& ctx, GemmPath p, GgmlType t) { return resolve_path(ctx, p, t); }

bool gemm_supported(GgmlType t) { return gpu_weight_type(t) != nullptr; }

GemmPath gemm_path_for(const Context& ctx, GemmPath p, GgmlType t) {
  return p == GemmPath::Auto || gemm_path_available(ctx, p, t) ? p : GemmPath::Tiled;
}

bool gemm_converts_x(const Context& ctx, GemmPath p, GgmlType t) {
  if (!gemm_supported(t)) return false;
  const GemmPath r = resolve_path(ctx, gemm_path_for(ctx, p, t), t);
  return r == GemmPath::Int8Dot || r == GemmPath::CoopMat2;
}

uint64_t gemm_scratch_bytes(uint32_t ncols, uint32_t n_rows) {
  const uint64_t f16 = gemm_coopmat2_scratch_bytes(ncols, n_rows);
  return ncols % 32 ? f16 : std::max(f16, gemm_int8_scratch_bytes(ncols, n_rows));
}

bool gemm_path_available(const Context& ctx, GemmPath p, GgmlType t) {
  if (!gemm_supported(t)) return false;
  switch (p) {
    case GemmPath::Auto:
    case GemmPath::Tiled: return true;
    case GemmPath::Int8Dot: return gemm_int8_available(ctx, t);
    case GemmPath::CoopMat: return gemm_coopmat_available(ctx, t);
    case GemmPath::CoopMat2: return gemm_coopmat2_available(ctx, t);
  }
  return false;
}

bool gemm_ids_glu_available(const Context& ctx, const GemmConfig& cfg, GgmlType t) {
  return gemm_supported(t) && resolve_path(ctx, gemm_path_for(ctx, cfg.path, t), t) == GemmPath::CoopMat;
}

bool gemm_takes_f16_x(const Context& ctx, const GemmConfig& cfg, GgmlType t) {
  return gemm_ids_glu_available(ctx, cfg, t);
}

void record_gemm(Recorder& rec, const GemmArgs& a, const GemmConfig& cfg) { record(rec, a, nullptr, cfg); }

void record_gemm_ids(Recorder& rec, const GemmIdsArgs& a, const GemmConfig& cfg) { record(rec, a, &a, cfg); }

}  // namespace vkmoe::vk
