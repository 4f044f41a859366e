#include "engine/vulkan/vk_matvec.h"

#include <algorithm>
#include <array>
#include <optional>
#include <span>

#include "engine/vulkan/vk_check.h"
#include "engine/vulkan/vk_moe.h"
#include "engine/vulkan/weight_types.h"

namespace vkmoe::vk {
namespace {

// matvec.comp's bounds: MAX_WG invocations, MAX_RPT rows per lane, and its
// reduction scratch red[MAX_WG * (MAX_RPT + 1)] floats in shared memory.
constexpr uint32_t kMaxWorkgroup = 256, kMaxRowsPerThread = 8;
constexpr uint64_t kReduceScratchBytes = uint64_t(kMaxWorkgroup) * (kMaxRowsPerThread + 1) * 4;

struct TypeLayout {
  const char* suffix;      // shader name suffix
  uint32_t qk;             // elements per shader block
  uint32_t block_bytes;
  uint32_t units_per_block;
  uint32_t align;          // required byte alignment of the weights
};

// Pieces of a ggml block the matvec shader reads per unit of work: 8-element
// rows of float weights, quarters of a 32-element block (MXFP4 included),
// eighths of a K-quant (or IQ4_XS) super-block, and 16-element units
// (shaders/dequant.glsl) for the rest.
uint32_t units_per_block(GgmlType t) {
  switch (t) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16: return 1;
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_1:
    case GgmlType::Q5_0:
    case GgmlType::Q5_1:
    case GgmlType::IQ4_NL:
    case GgmlType::MXFP4: return 4;
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
    case GgmlType::IQ4_XS: return 8;
    default: return static_cast<uint32_t>(type_traits(t).block_size / 16);  // Q2_K, Q3_K
  }
}

// The GPU weight type as the matvec shaders see it (float weights in blocks
// of 8); nullopt for types without GPU kernels.
std::optional<TypeLayout> layout_of(GgmlType t) {
  const GpuWeightType* w = gpu_weight_type(t);
  if (!w) return std::nullopt;
  const uint32_t qk = w->block_elems == 1 ? 8 : w->block_elems;
  return TypeLayout{w->suffix, qk, qk / w->block_elems * w->block_bytes, units_per_block(t), w->align};
}

bool pow2(uint32_t v) { return v && !(v & (v - 1)); }

}  // namespace

bool q8x_supported_type(GgmlType t) {
  return t == GgmlType::Q8_0 || t == GgmlType::Q4_K || t == GgmlType::Q5_K || t == GgmlType::Q6_K;
}

bool matvec_supported(GgmlType t) { return gpu_weight_type(t) != nullptr; }

bool q8x_pays(GgmlType t, uint32_t nrows, uint32_t n_items, bool glu_input) {
  // H100, bench-shaders --glu (PERF.md, run 23), experts 768x2048 top-8:
  // Q4_K 13.06 -> 9.47 us (8 lanes x 2 rows, matvec_config), Q6_K 13.06 ->
  // 12.80-13.31 at best, so a Q6_K down product keeps f32 input.
  // VKMOE_Q8X_GLU=0 keeps every SwiGLU input on f32 (in-place A/B runs).
  static const bool glu_off = env_off("VKMOE_Q8X_GLU");
  if (glu_input) return !glu_off && (t == GgmlType::Q4_K || t == GgmlType::Q5_K);
  // H100, bench-shaders (docs/PERF.md run 22): Q4_K 2048x512 6.14 -> 5.89 us,
  // 2048x4096 9.22 -> 8.19, experts 2048x768 top-8 12.54 -> 9.22; Q6_K
  // 2048x4096 11.01 -> 10.24, experts 14.85 -> 12.03, but 2048x512 6.14 -> 7.42.
  // Q5_K's int8 kernel runs like Q4_K's (bench-shaders' large-matrix table).
  // Q8_0 measured 82% of read bandwidth against 73% in two runs but 70% in a
  // third, so it stays on f32.
  if (t == GgmlType::Q4_K || t == GgmlType::Q5_K) return true;
  return t == GgmlType::Q6_K && uint64_t(nrows) * n_items >= 4096;
}

bool q8x_by_default(const DeviceInfo& dev) { return dev.integer_dot_accelerated; }

int quant_x_for(bool int8_wanted, GgmlType t, uint32_t nrows, uint32_t n_items, bool glu_input) {
  return int8_wanted && q8x_pays(t, nrows, n_items, glu_input) ? 1 : 0;
}

MatvecConfig matvec_config(const DeviceInfo& dev, GgmlType t, uint32_t ncols, uint32_t nrows, uint32_t n_items,
                           const MatvecConfig& want) {
  const auto L = layout_of(t);
  if (!L) throw Error(std::string("no GPU matvec for weight type ") + type_name(t));
  MatvecConfig c = want;
  const uint32_t sg = std::max<uint32_t>(dev.subgroup_size, 1);
  if (c.subgroup < 0) c.subgroup = (dev.subgroup_arithmetic && dev.subgroup_shuffle) ? 1 : 0;
  // Defaults from bench-shaders sweeps on an H100. Large quantized matrices
  // (>= 16384 rows in total) reuse each x slice over 8 rows per lane (6 for
  // Q6_K); otherwise 32 lanes per row with up to 4 rows per lane, fewer while
  // the dispatch would have too few workgroups, and software-pipelined loads.
  const bool quant = L->qk > 8;
  const bool large = quant && uint64_t(nrows) * n_items >= 16384;
  // int8-x path (matvec_q8x.comp), only where asked for (the engine's rule is
  // q8x_pays): on an H100 it is faster than the f32-x path for Q4_K/Q5_K
  // (large: ~86% of read bandwidth vs ~65%; small shapes up to ~15%), best at
  // 128 threads, 32 lanes per row, 4 rows per lane.
  const bool q8x_type = q8x_supported_type(t);
  if (c.quant_x < 0) c.quant_x = 0;
  // Rows of fewer than 32 int8 units (64-element groups of the K-quants, Q8_0
  // blocks), e.g. the experts' down product of 768 columns (12 units): 8 lanes
  // x 2 rows, 9.47 us for Q4_K experts 768x2048 top-8 against 11.52 on 32 x 4
  // (bench-shaders --glu, PERF.md run 23).
  if (c.quant_x != 0 && q8x_type && dev.integer_dot && dev.subgroup_shuffle && c.subgroup == 1 && pow2(sg)) {
    const bool short_rows = ncols / (t == GgmlType::Q8_0 ? 32 : 64) < 32;
    if (c.threads_per_row == 0) c.threads_per_row = std::min<uint32_t>(short_rows ? 8 : 32, sg);
    if (c.workgroup == 0) c.workgroup = std::max<uint32_t>(128, sg);
    if (c.rows_per_thread == 0) c.rows_per_thread = short_rows ? 2 : 4;
    if (c.prefetch < 0) c.prefetch = 0;
  }
  const uint32_t units = std::max<uint32_t>(ncols / L->qk * L->units_per_block, 1);
  // Measured on an H100 with the clock held up (bench-shaders --sweep, docs/PERF.md
  // run 14): a router (f32 2048x128) on 128 lanes per row, one row per
  // workgroup, took 5.4 us against 8.2 on 32 lanes x 2 rows (a lane's 8
  // dependent loads were the latency); Q6_K expert down products (768x2048,
  // top-8) 11.8 us on 8 lanes x 2 rows in 128 threads against 14.1 as 6 rows in 64.
  const bool long_float_rows = !quant && units >= 128 && uint64_t(nrows) * n_items <= 2048;
  const bool q6k_experts = large && t == GgmlType::Q6_K && n_items > 1;
  if (c.workgroup == 0 && c.threads_per_row == 0 && c.rows_per_thread == 0 && (long_float_rows || q6k_experts)) {
    c.workgroup = std::max<uint32_t>(128, sg);
    c.threads_per_row = long_float_rows ? 128 : 8;
    c.rows_per_thread = long_float_rows ? 1 : 2;
    if (c.prefetch < 0) c.prefetch = 0;
  }
  if (c.threads_per_row == 0) {
    if (large) {
      c.threads_per_row = t == GgmlType::Q6_K ? 8 : 16;
    } else {
      // Fewest idle lanes over the row's units, preferring 32 lanes (quantized
      // rows of >= 16 units run best on 32 lanes even with a few idle).
      c.threads_per_row = 32;
      if (!quant || units < 16) {
        double best = -1;
        for (uint32_t tpr : {4u, 8u, 16u, 32u}) {
          const double eff = double(units) / (tpr * ((units + tpr - 1) / tpr));
          if (eff >= best - 1e-9) {
            best = std::max(best, eff);
            c.threads_per_row = tpr;
          }
        }
      }
    }
  }
  if (c.workgroup == 0) {
    c.workgroup = large && t != GgmlType::Q6_K ? 128u : 64u;
    c.workgroup = std::max<uint32_t>({c.workgroup, sg, c.threads_per_row});
  }
  if (c.rows_per_thread == 0) {
    if (large) {
      c.rows_per_thread = t == GgmlType::Q6_K ? 6 : 8;
    } else {
      const uint64_t groups = c.workgroup / c.threads_per_row, min_wgs = quant ? 192 : 512;
      c.rows_per_thread = 4;
      while (c.rows_per_thread > 1 &&
             uint64_t(n_items) * ((nrows + groups * c.rows_per_thread - 1) / (groups * c.rows_per_thread)) < min_wgs)
        c.rows_per_thread /= 2;
    }
  }
  if (c.prefetch < 0) c.prefetch = c.rows_per_thread <= 4 ? 1 : 0;
  {
    const bool q8x_ok = q8x_type && dev.integer_dot && dev.subgroup_shuffle && c.subgroup == 1 &&
                        c.threads_per_row <= sg && c.workgroup % sg == 0 && pow2(sg) &&
                        uint64_t(ncols) * 5 / 4 <= dev.max_shared_memory_bytes;
    if (!q8x_ok) c.quant_x = 0;
    if (c.quant_x < 0) c.quant_x = 1;
  }
  if (!pow2(c.threads_per_row) || !pow2(c.workgroup) || c.threads_per_row > c.workgroup || c.workgroup > kMaxWorkgroup ||
      c.rows_per_thread < 1 || c.rows_per_thread > kMaxRowsPerThread || c.workgroup > dev.max_workgroup_invocations)
    throw Error("invalid matvec configuration: workgroup " + std::to_string(c.workgroup) + ", threads/row " +
                std::to_string(c.threads_per_row) + ", rows/thread " + std::to_string(c.rows_per_thread));
  // Subgroup reductions assume full subgroups that tile the workgroup.
  if (c.subgroup && (c.workgroup % sg != 0 || !pow2(sg))) c.subgroup = 0;
  if (!c.subgroup) c.quant_x = 0;
  return c;
}

namespace {

void check_range(const char* what, const BufferRange& b, uint64_t end_bytes) {
  check_binding_32bit("matvec", what, b, end_bytes);
}

// The fused top-k tail (shaders/matvec_tail.glsl): bindings 3..6 (5: the
// counter), with a folded norm also 7..9 (matvec.comp), and the push block
// with its tail_* / topk_* / norm_* fields set.
struct Tail {
  std::array<BufferRange, 7> bindings;
  uint32_t n_bindings = 4;  // 7 with a folded norm
  MatvecPush push;
  bool norm() const { return n_bindings == 7; }
};

// A GLU input staged in shared memory (matvec.comp's GLU_SH): the row's ncols / 4
// vec4s (ncols is a positive multiple of 8) where they fit beside the reduction
// scratch, else 1 (each row group forms act(x, u) as it reads it).
uint32_t glu_staged_vec4s(const DeviceInfo& dev, uint32_t ncols) {
  return uint64_t(ncols) * 4 + kReduceScratchBytes <= dev.max_shared_memory_bytes ? ncols / 4 : 1;
}

// Returns false (recording nothing) where a top-k tail does not fit the configuration.
bool record(Recorder& rec, const MatvecArgs& a, const MatvecIdsArgs* ids, const Tail* tail, MatvecConfig want) {
  const auto L = layout_of(a.type);
  if (!L) throw Error(std::string("no GPU matvec for weight type ") + type_name(a.type));
  if (const char* f = gpu_weight_type_missing_feature(rec.context().info(), a.type))
    throw Error(std::string("the ") + type_name(a.type) + " matvec needs " + f + " on " + rec.context().info().name);
  if (a.ncols == 0 || a.nrows == 0 || a.ncols % L->qk != 0 || a.ncols % 8 != 0)
    throw Error("matvec: ncols " + std::to_string(a.ncols) + " is not a positive multiple of " +
                std::to_string(std::max<uint32_t>(L->qk, 8)) + " for " + type_name(a.type));
  if ((a.w.offset + a.w_offset) % L->align != 0)
    throw Error(std::string("internal error: matvec weights of type ") + type_name(a.type) + " must be " +
                std::to_string(L->align) + "-byte aligned");
  const uint32_t n_items = ids ? ids->n_ids : 1;
  if (n_items == 0) return true;
  const uint64_t row_bytes = uint64_t(a.ncols / L->qk) * L->block_bytes;
  const uint64_t matrix_bytes = row_bytes * a.nrows;
  uint64_t w_end = a.w_offset + matrix_bytes;
  uint64_t x_end = uint64_t(a.x_offset) + a.ncols, y_end = uint64_t(a.y_offset) + a.nrows;
  if (a.x_offset % 4 != 0) throw Error("internal error: matvec x_offset must be a multiple of 4");
  if (ids) {
    if (ids->n_experts == 0) throw Error("internal error: matvec_ids with n_experts = 0");
    if (ids->x_stride % 4 != 0) throw Error("internal error: matvec_ids x_stride must be a multiple of 4");
    if (ids->expert_stride % L->align != 0)
      throw Error("internal error: matvec_ids expert_stride breaks the weight alignment");
    w_end = a.w_offset + (ids->n_experts - 1) * ids->expert_stride + matrix_bytes;
    x_end += uint64_t(ids->x_stride) * (n_items - 1);
    y_end += uint64_t(ids->y_stride) * (n_items - 1);
    check_range("ids", ids->ids, (uint64_t(ids->ids_offset) + n_items) * 4);
  }
  check_range("weights", a.w, w_end);
  check_range("x", a.x, x_end * 4);
  check_range("y", a.y, y_end * 4);
  const bool glu = a.glu_up.buffer != VK_NULL_HANDLE;
  if (glu) {
    check_range("glu_up", a.glu_up, x_end * 4);
    if (a.glu_act > 1) throw Error("internal error: matvec glu_act " + std::to_string(a.glu_act));
  }
  if (tail) check_range("counter", tail->bindings[2], (uint64_t(tail->push.tail_counter) + 1) * 4);
  // The top-k tail exists on the f32-x path only.
  if (tail) want.quant_x = 0;

  Context& ctx = rec.context();
  const DeviceInfo& dev = ctx.info();
  // The MXFP4 matvec reads its 1-byte-aligned weights as aligned 32-bit
  // words, the int8-x one its 2-byte-aligned Q8_0 and Q6_K blocks.
  const bool words = a.type == GgmlType::MXFP4 || a.type == GgmlType::Q8_0 || a.type == GgmlType::Q6_K;
  const BufferRange w_binding = words ? whole_words(a.w, dev.max_storage_buffer_range) : a.w;
  const MatvecConfig c = matvec_config(dev, a.type, a.ncols, a.nrows, n_items, want);
  // The top-k tail reduces with subgroup operations; each invocation owns at most 32 experts.
  if (tail && (c.subgroup != 1 || a.nrows > 32 * c.workgroup)) return false;
  const uint32_t rows_per_wg = c.workgroup / c.threads_per_row * c.rows_per_thread;
  const uint32_t row_blocks = (a.nrows + rows_per_wg - 1) / rows_per_wg;
  uint32_t gx = row_blocks, gz = 1;
  const uint32_t max_x = dev.max_workgroup_count[0];
  if (gx > max_x) {
    gz = (row_blocks + max_x - 1) / max_x;
    gx = (row_blocks + gz - 1) / gz;
  }
  if (n_items > dev.max_workgroup_count[1]) throw Error("internal error: matvec_ids with too many items");

  MatvecPush push = tail ? tail->push : MatvecPush{};  // a tail's fields set, the rest below
  push.ncols = a.ncols;
  push.nrows = a.nrows;
  push.w_offset = static_cast<uint32_t>(a.w_offset);
  push.x_offset = a.x_offset;
  push.y_offset = a.y_offset;
  push.accumulate = a.accumulate ? 1 : 0;
  push.row_blocks = row_blocks;
  // The int8-x shader takes the shared x size (int32 words, multiple of 8) in place of SG/PF.
  const std::vector<uint32_t> spec =
      c.quant_x == 1 ? std::vector<uint32_t>{c.workgroup, c.threads_per_row, c.rows_per_thread, (a.ncols / 4 + 7) / 8 * 8,
                                             a.glu_act}
                     : std::vector<uint32_t>{c.workgroup, c.threads_per_row, c.rows_per_thread,
                                             static_cast<uint32_t>(c.subgroup), static_cast<uint32_t>(c.prefetch != 0),
                                             a.glu_act, glu ? glu_staged_vec4s(dev, a.ncols) : 1};
  const std::string variant =
      std::string(c.quant_x == 1 ? "q8x_" : "") + (glu ? "glu_" : tail ? (tail->norm() ? "topk_norm_" : "topk_") : "") +
      L->suffix;
  if (ids) {
    push.expert_stride = static_cast<uint32_t>(ids->expert_stride);
    push.n_experts = ids->n_experts;
    push.ids_offset = ids->ids_offset;
    push.x_stride = ids->x_stride;
    push.y_stride = ids->y_stride;
    const std::string name = "matvec_ids_" + variant;
    if (glu)
      rec.dispatch(ctx.pipeline(name, 5, sizeof(MatvecPush), spec), {w_binding, a.x, a.y, ids->ids, a.glu_up}, push,
                   gx, n_items, gz);
    else
      rec.dispatch(ctx.pipeline(name, 4, sizeof(MatvecPush), spec), {w_binding, a.x, a.y, ids->ids}, push, gx,
                   n_items, gz);
  } else if (glu) {
    rec.dispatch(ctx.pipeline("matvec_" + variant, 4, sizeof(MatvecPush), spec), {w_binding, a.x, a.y, a.glu_up}, push,
                 gx, 1, gz);
  } else if (tail) {
    std::array<BufferRange, 3 + std::tuple_size_v<decltype(tail->bindings)>> b = {w_binding, a.x, a.y};
    std::copy_n(tail->bindings.begin(), tail->n_bindings, b.begin() + 3);
    const uint32_t n = 3 + tail->n_bindings;
    rec.dispatch(ctx.pipeline("matvec_" + variant, n, sizeof(MatvecPush), spec), std::span(b.data(), n), &push,
                 sizeof push, gx, 1, gz);
  } else {
    const Pipeline& p = ctx.pipeline("matvec_" + variant, 3, sizeof(MatvecPush), spec);
    rec.dispatch(p, {w_binding, a.x, a.y}, push, gx, 1, gz);
  }
  return true;
}

}  // namespace

void record_matvec(Recorder& rec, const MatvecArgs& a, const MatvecConfig& cfg) {
  record(rec, a, nullptr, nullptr, cfg);
}

bool record_matvec_topk(Recorder& rec, const MatvecArgs& a, const MatvecTopkTail& tail, const MatvecConfig& cfg) {
  if (a.glu_up.buffer != VK_NULL_HANDLE) throw Error("internal error: matvec with both a GLU input and a tail");
  check_topk_params(a.nrows, tail.k, tail.router);
  check_range("ids", tail.ids, (uint64_t(tail.out_offset) + tail.k) * 4);
  check_range("weights", tail.weights, (uint64_t(tail.out_offset) + tail.k) * 4);
  const bool has_bias = tail.bias.buffer != VK_NULL_HANDLE;
  if (has_bias) check_range("bias", tail.bias, uint64_t(a.nrows) * 4);
  // Without bias its binding is unused: bind the ids in its place.
  Tail t{{tail.ids, tail.weights, tail.counter, has_bias ? tail.bias : tail.ids}, 4, {}};
  if (tail.norm_w.buffer != VK_NULL_HANDLE) {
    check_range("norm weights", tail.norm_w, uint64_t(a.ncols) * 4);
    check_range("non-finite flag", tail.norm_flag, 4);
    if (tail.norm_out_offset % 4 != 0) throw Error("internal error: matvec norm_out_offset must be a multiple of 4");
    check_range("normalized x", tail.norm_out, (uint64_t(tail.norm_out_offset) + a.ncols) * 4);
    t.bindings[4] = tail.norm_w;
    t.bindings[5] = tail.norm_flag;
    t.bindings[6] = tail.norm_out;
    t.n_bindings = 7;
    t.push.norm_eps = tail.norm_eps;
    t.push.norm_check = tail.norm_check;
    t.push.norm_out_offset = tail.norm_out_offset;
  }
  t.push.tail_out_offset = tail.out_offset;
  t.push.tail_counter = tail.counter_index;
  t.push.topk_k = tail.k;
  t.push.topk_normalize = tail.router.normalize ? 1u : 0u;
  t.push.topk_gating = static_cast<uint32_t>(tail.router.gating);
  t.push.topk_has_bias = has_bias ? 1u : 0u;
  t.push.topk_n_group = static_cast<uint32_t>(tail.router.n_group);
  t.push.topk_topk_group = static_cast<uint32_t>(tail.router.topk_group);
  t.push.topk_scale = tail.router.scale;
  return record(rec, a, nullptr, &t, cfg);
}

void record_matvec_ids(Recorder& rec, const MatvecIdsArgs& a, const MatvecConfig& cfg) {
  record(rec, a, &a, nullptr, cfg);
}

}  // namespace vkmoe::vk
