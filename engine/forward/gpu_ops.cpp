#include "engine/forward/gpu_ops.h"

#include <algorithm>
#include <numeric>

namespace vkmoe {
namespace {

struct RmsNormPush {
  uint32_t n, x_off, w_off, y_off, row_stride, has_w;
  float eps;
  uint32_t check;
};
struct AddRowsPush {
  uint32_t n, rows, x_off, x_stride, a_off, y_off, y_stride, mode;
};
struct SwigluPush {
  uint32_t n, g_off, u_off, act, row_elems, count_off;
};
struct BiasRowsPush {
  uint32_t width, rows, y_stride, id_off, rows_per_id, use_map, n_bias, y_row_map;
};

uint32_t div_up(uint64_t a, uint64_t b) { return static_cast<uint32_t>((a + b - 1) / b); }

}  // namespace

void GpuOps::linear(vk::Recorder& r, const GpuTensor& w, Rows x, Rows y, uint32_t n, bool acc, SplitK split,
                    std::vector<vk::GemmSplitSum>* sums_later) const {
  // Matrices larger than one binding may cover (a big output head on a device
  // with a small storage-buffer range) go in row chunks whose offsets respect
  // the binding alignment.
  const uint64_t rb = row_bytes(w.type, w.ncols);
  const uint64_t align = std::max<uint64_t>(ctx_.info().min_storage_offset_alignment, 16);
  const uint64_t row_step = align / std::gcd(rb, align);
  uint64_t chunk = std::min<uint64_t>(w.nrows, ctx_.info().max_storage_buffer_range / rb);
  if (chunk < w.nrows) chunk = chunk / row_step * row_step;
  if (chunk == 0) throw Error("a row of tensor " + w.buf.name() + " exceeds the device's storage buffer range");
  for (uint64_t r0 = 0; r0 < w.nrows; r0 += chunk) {
    const uint64_t rows = std::min<uint64_t>(chunk, w.nrows - r0);
    const vk::BufferRange wr(w.buf, r0 * rb, rows * rb);
    if (n == 1) {
      if (x.f16) throw Error("internal error: a one-token product on f16 rows");
      vk::MatvecArgs a = matvec_args(w, x, y, acc);
      a.nrows = static_cast<uint32_t>(rows);
      a.w = wr;
      a.y_offset += static_cast<uint32_t>(r0);
      vk::record_matvec(r, a, matvec_config(w.type, a.nrows, 1));
    } else {
      vk::GemmArgs a;
      a.type = w.type;
      a.ncols = w.ncols;
      a.nrows = static_cast<uint32_t>(rows);
      a.n_tokens = n;
      a.w = wr;
      a.x = *x.buf;
      a.x_offset = x.offset;
      a.x_stride = x.stride;
      a.x_f16 = x.f16;
      a.y = *y.buf;
      a.y_offset = y.offset + static_cast<uint32_t>(r0);
      a.y_stride = y.stride;
      a.accumulate = acc;
      a.scratch = scratch_;
      if (split != SplitK::kNo && split_ && chunk == w.nrows) {  // chunks run without barriers between them
        const uint64_t half = split_->size() / 2;
        a.split_k = vk::BufferRange(*split_, split == SplitK::kHalfA ? 0 : half, half);
        a.sums_later = sums_later;
      }
      vk::record_gemm(r, a, gemm_for(w.type));
    }
  }
}

vk::MatvecConfig GpuOps::matvec_config(GgmlType t, uint32_t nrows, uint32_t n_items, bool glu_input) const {
  vk::MatvecConfig c;
  c.quant_x = vk::quant_x_for(int8_x_, t, nrows, n_items, glu_input);
  return c;
}

bool GpuOps::one_binding(const GpuTensor& w) const {
  return uint64_t(w.nrows) * row_bytes(w.type, w.ncols) <= ctx_.info().max_storage_buffer_range;
}

vk::MatvecArgs GpuOps::matvec_args(const GpuTensor& w, Rows x, Rows y, bool acc) const {
  vk::MatvecArgs a;
  a.type = w.type;
  a.ncols = w.ncols;
  a.nrows = w.nrows;
  a.w = w.buf;
  a.x = *x.buf;
  a.x_offset = x.offset;
  a.y = *y.buf;
  a.y_offset = y.offset;
  a.accumulate = acc;
  return a;
}

void GpuOps::linear_glu(vk::Recorder& r, const GpuTensor& w, Rows g, Rows u, FfnAct act, Rows y, uint32_t n,
                        bool acc) const {
  if (n == 1 && one_binding(w) && g.offset == u.offset) {
    vk::MatvecArgs a = matvec_args(w, g, y, acc);
    a.glu_up = *u.buf;
    a.glu_act = act == FfnAct::OaiSwiGLU ? 1u : 0u;
    vk::record_matvec(r, a);
    return;
  }
  if (g.offset != u.offset || (n > 1 && (g.stride != w.ncols || u.stride != w.ncols)))
    throw Error("internal error: linear_glu needs matching, packed g and u rows");
  swiglu(r, *g.buf, *u.buf, uint64_t(n) * w.ncols, act);
  r.barrier();
  linear(r, w, g, y, n, acc);
}

bool GpuOps::router_topk(vk::Recorder& r, const GpuTensor& w, Rows x, const vk::MoeTopkArgs& tk,
                         const GpuTensor* norm_w, float eps, uint32_t check, Rows xn) const {
  if (tk.n_tokens != 1 || tk.n_expert != w.nrows || !one_binding(w)) return false;
  vk::MatvecTopkTail t;
  t.ids = tk.ids;
  t.weights = tk.weights;
  t.bias = tk.bias;
  t.k = tk.k;
  t.router = tk.router;
  t.counter = counters_;
  if (norm_w) {
    t.norm_w = norm_w->buf;
    t.norm_flag = non_finite_;
    t.norm_out = *xn.buf;
    t.norm_out_offset = xn.offset;
    t.norm_eps = eps;
    t.norm_check = check;
  }
  vk::MatvecArgs a = matvec_args(w, x, x, false);
  a.y = tk.logits;
  a.y_offset = 0;
  return vk::record_matvec_topk(r, a, t);
}

uint32_t GpuOps::lone_row_workgroup(uint32_t width) const {
  uint32_t wg = 64;
  while (wg < 1024 && wg * 4 < width && wg * 2 <= ctx_.info().max_workgroup_invocations) wg *= 2;
  return wg;
}

vk::GemmConfig GpuOps::gemm_for(GgmlType t) const { return {vk::gemm_path_for(ctx_, gemm_.path, t)}; }

void GpuOps::rms_norm(vk::Recorder& r, Rows x, const GpuTensor* w, Rows y, uint32_t width, uint32_t n, float eps,
                      uint32_t check, const vk::Buffer* f16_copy) const {
  if (x.stride != y.stride && n > 1) throw Error("rms_norm: input and output rows differ in stride");
  const uint32_t wg = n == 1 ? lone_row_workgroup(width) : 256;
  RmsNormPush pc{width, x.offset, 0, y.offset, std::max(x.stride, width), w ? 1u : 0u, eps, check};
  const vk::BufferRange wb = w ? vk::BufferRange(w->buf) : vk::BufferRange(*x.buf);
  if (f16_copy) {
    if ((width | x.offset | y.offset | pc.row_stride) % 4 != 0)
      throw Error("internal error: rms_norm's f16 copy needs rows of 4-value words");
    const auto& p = ctx_.pipeline("rms_norm_h", 5, sizeof(RmsNormPush), {wg});
    r.dispatch(p, {*x.buf, wb, *y.buf, non_finite_, *f16_copy}, pc, n);
    return;
  }
  const auto& p = ctx_.pipeline("rms_norm", 4, sizeof(RmsNormPush), {wg});
  r.dispatch(p, {*x.buf, wb, *y.buf, non_finite_}, pc, n);
}

bool GpuOps::takes_f16_rows(GgmlType t, uint32_t n) const {
  static const bool off = vk::env_off("VKMOE_F16_ROWS");
  return n > 1 && !off && vk::gemm_takes_f16_x(ctx_, gemm_for(t), t);
}

void GpuOps::add_rows(vk::Recorder& r, Rows x, Rows y, uint32_t width, uint32_t n, Scale s, const vk::Buffer* a,
                      uint32_t a_off) const {
  const auto& p = ctx_.pipeline("add_rows", 3, sizeof(AddRowsPush));
  AddRowsPush pc{width, n, x.offset, x.stride, a_off, y.offset, y.stride, static_cast<uint32_t>(s)};
  r.dispatch(p, {*x.buf, a ? vk::BufferRange(*a) : vk::BufferRange(*x.buf), *y.buf}, pc, div_up(width, 256), n);
}

void GpuOps::swiglu(vk::Recorder& r, const vk::Buffer& g, const vk::Buffer& u, uint64_t count, FfnAct act,
                    const MoeRows* moe) const {
  const auto& p = ctx_.pipeline("swiglu", 3, sizeof(SwigluPush));
  const uint64_t per_dispatch = 65535ull * 256;
  const uint32_t a = act == FfnAct::OaiSwiGLU ? 1u : 0u;
  if (count > UINT32_MAX) throw Error("internal error: swiglu over more than 2^32 values");
  for (uint64_t off = 0; off < count; off += per_dispatch) {
    const uint64_t n = std::min(per_dispatch, count - off);
    const SwigluPush pc{uint32_t(n), uint32_t(off), uint32_t(off), a, moe ? moe->row_elems : 0u,
                        moe ? moe->layout.count_off : 0u};
    r.dispatch(p, {g, u, moe ? vk::BufferRange(*moe->table) : vk::BufferRange(g)}, pc, div_up(n, 256));
  }
}

void GpuOps::bias_rows(vk::Recorder& r, const BiasRows& a) const {
  if (a.rows == 0 || a.width == 0) return;
  if (!a.bias || !a.ids || !a.y || a.rows_per_id == 0 || a.y_stride < a.width)
    throw Error("internal error: bias_rows with missing buffers or bad strides");
  const auto& p = ctx_.pipeline("bias_rows", 4, sizeof(BiasRowsPush));
  const BiasRowsPush pc{a.width, a.rows, a.y_stride, a.id_off, a.rows_per_id, a.map ? 1u : 0u, a.n_bias,
                          a.y_row_map};
  const uint32_t groups_y = std::min<uint32_t>(a.rows, ctx_.info().max_workgroup_count[1]);
  r.dispatch(p, {*a.bias, *a.ids, a.map ? vk::BufferRange(*a.map) : vk::BufferRange(*a.ids), *a.y}, pc,
             div_up(a.width, 256), groups_y);
}

}  // namespace vkmoe
