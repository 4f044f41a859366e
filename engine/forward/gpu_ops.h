#pragma once
// Typed recorders for the trunk kernels the layer programs use. Every op takes
// a token count: activations are [tokens][width] rows. Products pick the
// matrix-vector kernels for one token and the GEMM kernels for more.
#include <cstdint>
#include <vector>

#include "engine/forward/gpu_weights.h"
#include "engine/model/layer_spec.h"
#include "engine/vulkan/vk_gemm.h"
#include "engine/vulkan/vk_matvec.h"
#include "engine/vulkan/vk_moe.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe {

// A row-major activation matrix: row t starts at offset + t * stride floats
// (f16: halfs, the input of GEMMs on f16 rows, GpuOps::takes_f16_rows).
struct Rows {
  const vk::Buffer* buf = nullptr;
  uint32_t offset = 0, stride = 0;
  bool f16 = false;
  Rows() = default;
  Rows(const vk::Buffer& b, uint32_t stride_, uint32_t offset_ = 0) : buf(&b), offset(offset_), stride(stride_) {}
  Rows row(uint32_t t) const { return Rows(*buf, stride, offset + t * stride).halfs(f16); }
  Rows halfs(bool h = true) const {
    Rows r = *this;
    r.f16 = h;
    return r;
  }
};

// Which half of the split-K partial-sum buffer a product may split into; two
// products in flight together (no barrier between them) use different halves.
enum class SplitK { kNo, kHalfA, kHalfB };

class GpuOps {
 public:
  // gemm_scratch: the int8 GEMM path's activation scratch; non_finite: the
  // flag norms lower when their input is not finite; counters: zeroed uints
  // for the fused router's last-workgroup counts; gemm_split: split-K partial
  // sums in two halves, null for no splitting (all in Activations).
  // int8_x: one-token products of quantized weights on int8 activations where
  // that pays (vk::q8x_pays).
  GpuOps(vk::Context& ctx, const vk::Buffer& gemm_scratch, const vk::Buffer& non_finite, const vk::Buffer& counters,
         const vk::Buffer* gemm_split = nullptr, vk::GemmConfig gemm = {}, bool int8_x = false)
      : ctx_(ctx), scratch_(gemm_scratch), non_finite_(non_finite), counters_(counters), split_(gemm_split),
        gemm_(gemm), int8_x_(int8_x) {}
  // The matvec configuration of a one-token product (n_items experts; glu_input:
  // its input is a SwiGLU of two vectors).
  vk::MatvecConfig matvec_config(GgmlType t, uint32_t nrows, uint32_t n_items, bool glu_input = false) const;
  // The configured path for type t; a path the type lacks falls back to tiled.
  vk::GemmConfig gemm_for(GgmlType t) const;
  const vk::Buffer& gemm_scratch() const { return scratch_; }
  // Whether one-token products of quantized weights may take int8 activations.
  bool int8_x() const { return int8_x_; }
  vk::Context& ctx() const { return ctx_; }

  // y[t] (+)= W x[t] for t < n.
  // split: the product may split its rows' columns over workgroups, with its
  // partial sums in that half of the split-K buffer; sums_later: where a split
  // product leaves the sum of its partials (vk::GemmArgs::sums_later).
  void linear(vk::Recorder& r, const GpuTensor& w, Rows x, Rows y, uint32_t n, bool acc = false,
              SplitK split = SplitK::kNo, std::vector<vk::GemmSplitSum>* sums_later = nullptr) const;
  // y[t] (+)= W act(g[t], u[t]) (SwiGLU, see swiglu): one fused dispatch for
  // one token; for more, swiglu in place on g (stride = width), a barrier,
  // then the product.
  void linear_glu(vk::Recorder& r, const GpuTensor& w, Rows g, Rows u, FfnAct act, Rows y, uint32_t n,
                  bool acc = false) const;
  // tk.logits = W x and their top-k (record_moe_topk's, one token) in one
  // dispatch. Returns false, recording nothing, where the fused kernel does not
  // apply (then record the two with a barrier between). With norm_w, the
  // input is rms_norm(x) * norm_w (rms_norm's, eps and check as there), also
  // written to xn: the norm step folded into the router.
  bool router_topk(vk::Recorder& r, const GpuTensor& w, Rows x, const vk::MoeTopkArgs& tk,
                   const GpuTensor* norm_w = nullptr, float eps = 0.f, uint32_t check = 0, Rows xn = {}) const;
  // Workgroup size for a row of width values that one workgroup reduces alone
  // (a decode norm): an invocation per 4 values, 64 to 1024 within the
  // device's limit, as such a step's time is its load latency.
  uint32_t lone_row_workgroup(uint32_t width) const;
  // y[t] = x[t] / rms(x[t]) * w   (w may be null: no scale); in place allowed.
  // check != 0: a non-finite x lowers the non-finite flag to check. With
  // f16_copy, y's rows also go there as f16 (same offset and stride in halfs,
  // multiples of 4 as width).
  void rms_norm(vk::Recorder& r, Rows x, const GpuTensor* w, Rows y, uint32_t width, uint32_t n, float eps,
                uint32_t check = 0, const vk::Buffer* f16_copy = nullptr) const;
  // Whether an n-token product of weights of type t takes f16 input rows (the
  // coopmat GEMM path, n > 1; VKMOE_F16_ROWS=0: never), which its producer then
  // writes instead of (or beside) f32 rows: half the bytes the GEMM reads.
  bool takes_f16_rows(GgmlType t, uint32_t n) const;
  enum class Scale : uint32_t { One = 0, ByRow = 1, SigmoidOfRow = 2 };
  // y[t] += alpha(t) * x[t] (x.stride 0 broadcasts one row); alpha from a[t].
  void add_rows(vk::Recorder& r, Rows x, Rows y, uint32_t width, uint32_t n, Scale s = Scale::One,
                const vk::Buffer* a = nullptr, uint32_t a_off = 0) const;
  // g[i] = act(g[i], u[i]) for count contiguous values (SiLU: silu(g) * u;
  // OaiSwiGLU: gpt-oss's clamped variant, cpu/ffn_act.h). With moe, g and u
  // are the slot rows of a MoE table (row_elems values each) and the rows of
  // tiles past its used count are skipped.
  struct MoeRows {
    const vk::Buffer* table = nullptr;
    MoeTableLayout layout;
    uint32_t row_elems = 0;
  };
  void swiglu(vk::Recorder& r, const vk::Buffer& g, const vk::Buffer& u, uint64_t count,
              FfnAct act = FfnAct::SiLU, const MoeRows* moe = nullptr) const;
  // Rows of a bias table (n_bias rows of width floats) added to y, chosen by ids:
  // y[r * y_stride + i] += bias[e * width + i] with e = ids[id_off + r / rows_per_id],
  // mapped through map[e] when map is given; rows with e < 0 or >= n_bias are skipped.
  struct BiasRows {
    const vk::Buffer* bias = nullptr;
    uint32_t width = 0, n_bias = 0;
    const vk::Buffer* ids = nullptr;
    uint32_t id_off = 0, rows_per_id = 1;
    const vk::Buffer* map = nullptr;  // optional: id -> bias row
    const vk::Buffer* y = nullptr;
    uint32_t y_stride = 0, rows = 0;
    uint32_t y_row_map = 0;  // 0, or 1 + the ids word holding row 0's y row (-1: skipped)
  };
  void bias_rows(vk::Recorder& r, const BiasRows& a) const;

 private:
  // The whole matrix in one binding (else linear splits it by rows).
  bool one_binding(const GpuTensor& w) const;
  vk::MatvecArgs matvec_args(const GpuTensor& w, Rows x, Rows y, bool acc) const;

  vk::Context& ctx_;
  const vk::Buffer& scratch_;
  const vk::Buffer& non_finite_;
  const vk::Buffer& counters_;
  const vk::Buffer* split_;
  vk::GemmConfig gemm_;
  bool int8_x_;
};

}  // namespace vkmoe
