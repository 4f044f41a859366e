// The cooperative-matrix GEMM path (gemm_paths.h, shaders/gemm_coopmat.comp):
// weights dequantized and activations converted to f16 in shared memory,
// multiplied with VK_KHR_cooperative_matrix fragments into f32 accumulators.
// Built only when CMake found glslang 15 (VKMOE_HAVE_COOPMAT_SHADERS; see
// scripts/build_glslang.sh); the device must list an f16 x f16 -> f32
// subgroup-scope configuration whose sizes divide the warp tiles.
//
// Numerics: each weight and activation is rounded to f16 (relative 2^-11;
// values beyond +-65504 overflow), products are summed in f32.
// Expert-grouped products may carry the up weights of a gated FFN
// (GemmIdsArgs::glu_up): gate and up in one product, its activation applied to
// the accumulators (gemm_coopmat_glu_<type>; the expert tiles all fit it).
// VKMOE_COOPMAT_TILE=L1|L|M|XS32 (expert-grouped: L|M|S) forces a workgroup tile; VKMOE_COOPMAT_SHAPE and
// VKMOE_COOPMAT_IDS_SHAPE=BM,BN,WM,WN,BK any fitting one for the dense and the
// expert-grouped kernel (benchmarks; expert-grouped needs BN = kMoeTileRows), with
// an optional sixth field NBUF (1 or 2).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <string>

#include "base/error.h"
#include "engine/vulkan/gemm_paths.h"
#include "engine/vulkan/vk_check.h"
#include "engine/vulkan/weight_types.h"

namespace vkmoe::vk {
namespace {

// Workgroup tile: BM weight rows x BN tokens, subgroups of WM x WN each, BK
// columns per step, nbuf shared buffers (2: the next step is staged while the
// current one is multiplied, one barrier a step; 1: it is staged after a second
// barrier, in half the shared memory).
struct Tile {
  const char* name;
  uint32_t bm, bn, wm, wn, bk, nbuf = 2;
};
// Largest first. Q4_K on an H100 (PERF.md run 16): per subgroup, 64 x 32 and
// 32 x 32 outputs beat 32 x 16 when there are workgroups enough for the SMs
// (dense 2048 x 4096 x 512 tokens: L 104, M 72, XS32 44 TFLOP/s).
// L1: one shared buffer; on an H200 (PERF.md run 31), alone, Q4_K 512 tokens: 2048x4096 81 us (L 82, M 116);
// split in two, 4096x2048 90 (M unsplit 113); split in eight, 2048x512 21 (XS32 unsplit 43).
constexpr Tile kTiles[] = {{"L1", 128, 64, 32, 32, 32, 1},
                           {"L", 128, 128, 64, 32, 32},
                           {"M", 64, 64, 32, 32, 32},
                           {"XS32", 64, 32, 32, 16, 32}};
// Expert-grouped: one MoE table tile (kMoeTileRows slots) per workgroup column,
// one shared buffer. Q4_K 2048 x 768 per expert, top-8 of 128, 512 tokens, on an
// H200 (PERF.md run 30): L 251 us, against 342 with two buffers (M 289, S 380);
// 768 x 2048: 266 against 375.
constexpr Tile kIdsTiles[] = {{"L", 128, kMoeTileRows, 32, 32, 32, 1},
                              {"M", 64, kMoeTileRows, 32, 32, 32, 1},
                              {"S", 64, kMoeTileRows, 32, 16, 32, 1}};
// Dense: the largest tile giving at least this many workgroups (about one per
// SM of an H100; fewer leave SMs idle, which costs more than smaller tiles).
constexpr uint64_t kMinWorkgroups = 128;

struct Frag {
  uint32_t m = 0, n = 0, k = 0;
};

// The device's f16 -> f32 subgroup fragment that fits every tile (16x16x16 preferred).
Frag pick_fragment(const DeviceInfo& d) {
  if (d.has_coopmat(16, 16, 16, kCoopMatF16, kCoopMatF32)) return {16, 16, 16};
  for (const auto& c : d.coopmat_shapes) {
    const bool types = c.a_type == kCoopMatF16 && c.b_type == kCoopMatF16 && c.c_type == kCoopMatF32 &&
                       c.result_type == kCoopMatF32 && c.scope == kCoopMatScopeSubgroup && !c.saturating;
    // Tiles' WM/WN are multiples of 16 (32 for WM), BK = 32, shared rows in groups of 4.
    if (types && (c.m == 8 || c.m == 16) && (c.n == 8 || c.n == 16) && (c.k == 8 || c.k == 16 || c.k == 32))
      return {c.m, c.n, c.k};
  }
  return {};
}

uint32_t shared_bytes(const Tile& t, const Frag& f) {
  const uint32_t warps = (t.bm / t.wm) * (t.bn / t.wn);
  return t.nbuf * (t.bm + t.bn) * (t.bk + 8) * 2 + warps * f.m * f.n * 4;
}

// Fragments per subgroup: at most 4 x 2 (the shader's separate accumulators).
bool tile_fits(const DeviceInfo& d, const Tile& t, const Frag& f) {
  if (t.wm % f.m || t.wn % f.n || t.wm / f.m > 4 || t.wn / f.n > 2) return false;
  const uint32_t threads = (t.bm / t.wm) * (t.bn / t.wn) * d.subgroup_size;
  return threads <= d.max_workgroup_invocations && threads <= d.max_workgroup_size[0] &&
         shared_bytes(t, f) <= d.max_shared_memory_bytes;
}

// Must match the push block of gemm_coopmat.comp.
struct CoopPush {
  uint32_t ncols, nrows, n_tokens, w_offset;
  uint32_t x_offset, x_stride, y_offset, y_stride;
  uint32_t accumulate, x_vec4;
  uint32_t expert_stride, n_experts, gather_x;
  uint32_t count_off, tile_expert_off, slot_token_off, y_pair_off;
  uint32_t k_split, split_stride;
  uint32_t glu_act;
  uint32_t y_vec4;  // y_offset, y_stride and split_stride are multiples of 4 (vec4 stores)
};

struct SplitSumPush {
  uint32_t nrows, n_tokens, splits, plane;
  uint32_t y_offset, y_stride, accumulate;
};
struct SplitSumNormPush {
  SplitSumPush s;
  float eps;
  uint32_t check;
};

// Split-K: a product of fewer workgroups than kSplitTargetWgs (about two per SM
// of an H100) and at least 2 * kSplitMinSteps steps runs as up to kMaxSplits
// column ranges of at least kSplitMinSteps steps each (the router, f32 2048 -> 128 at
// 512 tokens: 32 workgroups of 64 steps).
// VKMOE_GEMM_SPLIT_K=N (N >= 2) sets the target instead, 0 turns splitting off
// (benchmarks, A/B measurements).
constexpr uint32_t kSplitTargetWgs = 256, kSplitMinSteps = 8, kMaxSplits = 8;

// The split target in workgroups; 0: no splitting.
uint32_t split_target_wgs() {
  static const uint32_t target = [] {
    const char* v = std::getenv("VKMOE_GEMM_SPLIT_K");
    if (v && std::strcmp(v, "0") == 0) return 0u;
    const unsigned long n = v ? std::strtoul(v, nullptr, 10) : 0;
    return n >= 2 ? uint32_t(n) : kSplitTargetWgs;
  }();
  return target;
}

// Column ranges (a multiple of bk each) for wgs workgroups over ncols, within
// `room` bytes of partial planes; 0 when the product runs unsplit.
uint32_t split_columns(uint32_t wgs, uint32_t ncols, uint32_t bk, uint64_t plane_bytes, uint64_t room) {
  const uint32_t steps = (ncols + bk - 1) / bk;
  const uint32_t target = split_target_wgs();
  uint32_t splits = std::min({(target + wgs - 1) / wgs, steps / kSplitMinSteps, kMaxSplits,
                              uint32_t(std::min<uint64_t>(room / plane_bytes, kMaxSplits))});
  if (wgs >= target || splits < 2) return 0;
  return (steps + splits - 1) / splits * bk;
}

void check_range(const char* what, const BufferRange& b, uint64_t end_bytes) {
  check_binding_32bit("coopmat GEMM", what, b, end_bytes);
}

uint64_t workgroups(const Tile& t, uint32_t nrows, uint32_t cols) {
  return uint64_t((nrows + t.bm - 1) / t.bm) * ((cols + t.bn - 1) / t.bn);
}

// The tile a benchmark forces, if it fits: VKMOE_COOPMAT_SHAPE / _IDS_SHAPE,
// else VKMOE_COOPMAT_TILE; null when none is set.
const Tile* forced_tile(const DeviceInfo& d, const Frag& f, bool indexed) {
  const Tile* list = indexed ? kIdsTiles : kTiles;
  const size_t n = indexed ? std::size(kIdsTiles) : std::size(kTiles);
  if (const char* shape = std::getenv(indexed ? "VKMOE_COOPMAT_IDS_SHAPE" : "VKMOE_COOPMAT_SHAPE")) {
    static Tile custom_dense{"custom", 0, 0, 0, 0, 0}, custom_ids{"custom", 0, 0, 0, 0, 0};
    Tile& custom = indexed ? custom_ids : custom_dense;
    custom.nbuf = 2;
    const int fields =
        std::sscanf(shape, "%u,%u,%u,%u,%u,%u", &custom.bm, &custom.bn, &custom.wm, &custom.wn, &custom.bk, &custom.nbuf);
    if (fields >= 5 && custom.wm && custom.wn && custom.bm % custom.wm == 0 && custom.bn % custom.wn == 0 &&
        custom.bk % 32 == 0 && (custom.nbuf == 1 || custom.nbuf == 2) &&
        (!indexed || custom.bn == kMoeTileRows) && tile_fits(d, custom, f))
      return &custom;
    // Said once per value: a sweep must not mistake the default tile for the one asked for.
    static std::string warned_dense, warned_ids;
    std::string& warned = indexed ? warned_ids : warned_dense;
    if (warned != shape) {
      warned = shape;
      std::fprintf(stderr, "vkmoe: %s=%s does not fit this device or kernel; using the default tile\n",
                   indexed ? "VKMOE_COOPMAT_IDS_SHAPE" : "VKMOE_COOPMAT_SHAPE", shape);
    }
  }
  if (const char* force = std::getenv("VKMOE_COOPMAT_TILE")) {
    for (size_t i = 0; i < n; ++i)
      if (std::string(force) == list[i].name && tile_fits(d, list[i], f)) return &list[i];
  }
  return nullptr;
}

// Expert-grouped: the first tile that fits; dense: the first that fits and
// gives kMinWorkgroups, else the fitting one giving the most.
const Tile* default_tile(const DeviceInfo& d, const Frag& f, bool indexed, uint32_t nrows, uint32_t cols) {
  const Tile* list = indexed ? kIdsTiles : kTiles;
  const size_t n = indexed ? std::size(kIdsTiles) : std::size(kTiles);
  const Tile* best = nullptr;
  uint64_t best_wgs = 0;
  for (size_t i = 0; i < n; ++i) {
    const Tile& t = list[i];
    if (!tile_fits(d, t, f)) continue;
    if (indexed) return &t;
    const uint64_t wgs = workgroups(t, nrows, cols);
    if (wgs >= kMinWorkgroups) return &t;
    if (wgs > best_wgs) best = &t, best_wgs = wgs;
  }
  return best;
}

const Tile* pick_tile(const DeviceInfo& d, const Frag& f, bool indexed, uint32_t nrows, uint32_t cols) {
  const Tile* t = forced_tile(d, f, indexed);
  return t ? t : default_tile(d, f, indexed, nrows, cols);
}

struct DenseChoice {
  const Tile* tile = nullptr;
  uint32_t k_split = 0;  // columns per split, 0: unsplit
};

// A dense product's tile and split, with split_room bytes for partial sums (0:
// none): the forced tile, else with room the first tile that fits if, split, it
// reaches the split target in workgroups, else default_tile's; split where the
// room allows.
DenseChoice choose_dense(const DeviceInfo& d, const Frag& f, uint32_t nrows, uint32_t ncols, uint32_t n_tokens,
                         uint64_t split_room) {
  const uint32_t target = split_target_wgs();
  if (target == 0) split_room = 0;
  const uint64_t plane_bytes = uint64_t(n_tokens) * nrows * 4;
  auto k_split_of = [&](const Tile& t) {
    const uint64_t wgs = workgroups(t, nrows, n_tokens);
    return split_room && wgs < UINT32_MAX ? split_columns(uint32_t(wgs), ncols, t.bk, plane_bytes, split_room) : 0u;
  };
  const Tile* t = forced_tile(d, f, false);
  if (!t && split_room)
    for (const Tile& first : kTiles)
      if (tile_fits(d, first, f)) {
        const uint32_t ks = k_split_of(first);
        const uint64_t parts = ks ? (ncols + ks - 1) / ks : 1;
        if (workgroups(first, nrows, n_tokens) * parts >= target) t = &first;
        break;
      }
  if (!t) t = default_tile(d, f, false, nrows, n_tokens);
  return {t, t ? k_split_of(*t) : 0};
}

}  // namespace

CoopmatPlan gemm_coopmat_plan(const DeviceInfo& d, uint32_t nrows, uint32_t ncols, uint32_t n_tokens,
                              uint64_t split_room) {
  const Frag f = pick_fragment(d);
  if (f.m == 0) return {};
  const DenseChoice c = choose_dense(d, f, nrows, ncols, n_tokens, split_room);
  if (!c.tile) return {};
  return {c.tile->name, c.k_split ? (ncols + c.k_split - 1) / c.k_split : 0};
}

bool gemm_coopmat_available(const Context& ctx, GgmlType t) {
#ifndef VKMOE_HAVE_COOPMAT_SHADERS
  (void)ctx;
  (void)t;
  return false;
#else
  const DeviceInfo& d = ctx.info();
  if (!d.cooperative_matrix || !coopmat_basics(d, t) || d.subgroup_size == 0) return false;
  const Frag f = pick_fragment(d);
  return f.m != 0 && pick_tile(d, f, false, 1, 1) != nullptr && pick_tile(d, f, true, 1, 1) != nullptr;
#endif
}

void record_gemm_coopmat(Recorder& rec, const GemmArgs& a, const GemmIdsArgs* ids) {
  const GpuWeightType* T = gpu_weight_type(a.type);
  if (!T) throw Error(std::string("coopmat GEMM: unsupported weight type ") + type_name(a.type));
  Context& ctx = rec.context();
  if (!gemm_coopmat_available(ctx, a.type))
    throw Error("coopmat GEMM: not available on " + ctx.info().name +
                " (needs VK_KHR_cooperative_matrix f16->f32 and shaders built with glslang 15)");
  const uint32_t qk = T->block_elems == 1 ? 8 : T->block_elems;
  if (a.ncols == 0 || a.nrows == 0 || a.ncols % qk != 0)
    throw Error("coopmat GEMM: ncols " + std::to_string(a.ncols) + " is not a positive multiple of " +
                std::to_string(qk) + " for " + type_name(a.type));
  if (a.w_offset % T->align != 0 || (ids && ids->expert_stride % T->align != 0))
    throw Error(std::string("internal error: coopmat GEMM weights of type ") + type_name(a.type) + " must be " +
                std::to_string(T->align) + "-byte aligned");
  const uint32_t cols = ids ? ids->layout.max_tiles : a.n_tokens;  // tiles or tokens
  if (cols == 0) return;

  const uint64_t matrix_bytes = uint64_t(a.ncols / T->block_elems) * T->block_bytes * a.nrows;
  // Rows of x read and of y written: tokens, or slots of the MoE table.
  const uint32_t x_rows = ids ? (ids->gather_x ? ids->layout.n_tokens : ids->layout.max_slots()) : a.n_tokens;
  const uint32_t y_rows = ids ? ids->y_rows() : a.n_tokens;
  uint64_t w_end = a.w_offset + matrix_bytes;
  const bool glu = ids && ids->glu_up.buffer != VK_NULL_HANDLE;
  if (ids) {
    if (ids->n_experts == 0) throw Error("internal error: coopmat GEMM with n_experts = 0");
    w_end = a.w_offset + uint64_t(ids->n_experts - 1) * ids->expert_stride + matrix_bytes;
    check_range("table", ids->table, ids->layout.bytes());
  }
  check_range("weights", a.w, w_end);
  if (glu) {
    check_range("up weights", ids->glu_up, w_end);
    if (a.accumulate) throw Error("internal error: coopmat gate/up GEMM with accumulate");
  }
  if (a.x_f16 && (a.x_offset % 4 || a.x_stride % 4))
    throw Error("internal error: coopmat GEMM f16 activation rows must start at multiples of 4 halfs");
  if (x_rows > 0)
    check_range("x", a.x, (a.x_offset + uint64_t(x_rows - 1) * a.x_stride + a.ncols) * (a.x_f16 ? 2 : 4));
  const bool y_f16 = glu && ids->glu_y_f16;
  if ((ids && ids->glu_y_f16 && !glu) || (glu && a.x_f16))
    throw Error("internal error: coopmat GEMM f16 rows: only the gate/up form writes them and does not read them");
  if (y_f16 && (a.y_offset % 4 || a.y_stride % 4))
    throw Error("internal error: coopmat GEMM f16 output rows must start at multiples of 4 halfs");
  check_range("y", a.y, (a.y_offset + uint64_t(y_rows - 1) * a.y_stride + a.nrows) * (y_f16 ? 2 : 4));

  const DeviceInfo& d = ctx.info();
  const Frag f = pick_fragment(d);
  DenseChoice choice;
  if (ids) {
    // Gate/up: fragments in pairs, an even count per subgroup (a forced tile without them yields to the default).
    auto unpaired = [&](const Tile* t) { return glu && (t->wm / f.m) % 2 != 0; };
    choice.tile = pick_tile(d, f, true, a.nrows, cols);
    if (unpaired(choice.tile)) choice.tile = default_tile(d, f, true, a.nrows, cols);
    if (unpaired(choice.tile)) throw Error("internal error: no gate/up coopmat tile");
  } else
    choice = choose_dense(d, f, a.nrows, a.ncols, a.n_tokens,
                          a.split_k.buffer != VK_NULL_HANDLE ? a.split_k.range : 0);
  const Tile* t = choice.tile;
  const uint32_t warps = (t->bm / t->wm) * (t->bn / t->wn);
  const std::vector<uint32_t> spec = {warps * d.subgroup_size, t->bm, t->bn, t->wm, t->wn, f.m, f.n, f.k,
                                      d.subgroup_size, t->bk, t->nbuf};

  CoopPush p{};
  p.ncols = a.ncols;
  p.nrows = a.nrows;
  p.n_tokens = a.n_tokens;
  p.w_offset = static_cast<uint32_t>(a.w_offset);
  p.x_offset = a.x_offset;
  p.x_stride = a.x_stride;
  p.y_offset = a.y_offset;
  p.y_stride = a.y_stride;
  p.accumulate = a.accumulate ? 1 : 0;
  p.x_vec4 = (a.x_offset % 4 == 0 && a.x_stride % 4 == 0) ? 1 : 0;
  p.y_vec4 = (a.y_offset % 4 == 0 && a.y_stride % 4 == 0) ? 1 : 0;
  const std::string x16 = a.x_f16 ? "x16_" : "";  // the f16-row variants' infix
  const uint32_t rows_per_wg = glu ? t->bm / 2 : t->bm;  // gate/up: half the rows are up rows
  const uint32_t gx = (a.nrows + rows_per_wg - 1) / rows_per_wg;
  if (gx > d.max_workgroup_count[0]) throw Error("coopmat GEMM: too many weight rows");
  if (ids) {
    p.expert_stride = static_cast<uint32_t>(ids->expert_stride);
    p.n_experts = ids->n_experts;
    p.gather_x = ids->gather_x ? 1 : 0;
    p.count_off = ids->layout.count_off;
    p.tile_expert_off = ids->layout.tile_expert_off;
    p.slot_token_off = ids->layout.slot_token_off;
    p.y_pair_off = ids->y_pair_off();
    if (cols > d.max_workgroup_count[1]) throw Error("coopmat GEMM: too many MoE tiles");
    if (glu) {
      p.glu_act = ids->glu_act;
      const std::string name = std::string(y_f16 ? "gemm_coopmat_glu_y16_" : "gemm_coopmat_glu_") + T->suffix;
      const Pipeline& pl = ctx.pipeline(name, 5, sizeof(CoopPush), spec);
      rec.dispatch(pl, {a.w, a.x, a.y, ids->table, ids->glu_up}, p, gx, cols);
      return;
    }
    const Pipeline& pl = ctx.pipeline(std::string("gemm_coopmat_ids_") + x16 + T->suffix, 4, sizeof(CoopPush), spec);
    rec.dispatch(pl, {a.w, a.x, a.y, ids->table}, p, gx, cols);
  } else {
    const uint32_t gy = (cols + t->bn - 1) / t->bn;
    if (gy > d.max_workgroup_count[1]) throw Error("coopmat GEMM: too many tokens");
    const Pipeline& pl = ctx.pipeline(std::string("gemm_coopmat_") + x16 + T->suffix, 3, sizeof(CoopPush), spec);
    const uint32_t k_split = choice.k_split;
    const uint64_t plane = uint64_t(a.n_tokens) * a.nrows;
    if (k_split == 0) {
      rec.dispatch(pl, {a.w, a.x, a.y}, p, gx, gy);
      return;
    }
    // Partial planes, z-major, n_tokens x nrows each; then their sum into y.
    const uint32_t splits = (a.ncols + k_split - 1) / k_split;
    CoopPush ps = p;
    ps.y_offset = 0;
    ps.y_stride = a.nrows;
    ps.accumulate = 0;
    ps.k_split = k_split;
    ps.split_stride = static_cast<uint32_t>(plane);
    ps.y_vec4 = a.nrows % 4 == 0 && plane % 4 == 0 ? 1 : 0;
    rec.dispatch(pl, {a.w, a.x, a.split_k}, ps, gx, gy, splits);
    const GemmSplitSum sum{a.split_k, a.y, a.nrows, a.n_tokens, splits,
                           uint32_t(plane), a.y_offset, a.y_stride, a.accumulate};
    if (a.sums_later) {
      a.sums_later->push_back(sum);
      return;
    }
    rec.barrier();
    record_gemm_split_sums(rec, {sum});
  }
}

void record_gemm_split_sums(Recorder& rec, const std::vector<GemmSplitSum>& sums) {
  for (const GemmSplitSum& s : sums) {
    const SplitSumPush sp{s.nrows, s.n_tokens, s.splits, s.plane, s.y_offset, s.y_stride, s.accumulate ? 1u : 0u};
    if (s.norm_w.buffer != VK_NULL_HANDLE) {
      if (!s.norm_foldable()) throw Error("internal error: split-K sum with a norm needs rows of 4-value words");
      check_range("norm weights", s.norm_w, uint64_t(s.nrows) * 4);
      check_range("xn", s.xn, (uint64_t(s.y_offset) + uint64_t(s.n_tokens - 1) * s.y_stride + s.nrows) * 4);
      check_range("flags", s.flags, 4);
      const SplitSumNormPush np{sp, s.eps, s.check};
      rec.dispatch(rec.context().pipeline("gemm_split_sum_norm", 5, sizeof(SplitSumNormPush)),
                   {s.partials, s.y, s.norm_w, s.xn, s.flags}, np, s.n_tokens);
      continue;
    }
    rec.dispatch(rec.context().pipeline("gemm_split_sum", 2, sizeof(SplitSumPush)), {s.partials, s.y}, sp,
                 (s.nrows + 255) / 256, s.n_tokens);
  }
}

uint64_t gemm_split_k_bytes(uint32_t nrows, uint32_t n_tokens) { return uint64_t(kMaxSplits) * nrows * n_tokens * 4; }

}  // namespace vkmoe::vk
