#include "engine/vulkan/vk_head_matmul.h"

#include <string>

#include "engine/vulkan/vk_check.h"
#include "engine/vulkan/weight_types.h"

namespace vkmoe::vk {
namespace {

struct HeadMatmulPush {
  uint32_t rows, cols, n_tokens, w_head;
  uint32_t x_off, x_tok, x_head, y_off;
  uint32_t y_tok, y_head, copy;
};
constexpr uint32_t kRowsPerWorkgroup = 8, kTokensPerWorkgroup = 4;  // head_matmul.comp's RPW, NT

void check_range(const char* what, const BufferRange& b, uint64_t end_bytes) {
  check_binding("head_matmul", what, b, end_bytes);
}

// One past the last float of [t][h][off + (0..width)] rows.
uint64_t rows_end(uint32_t n_tokens, uint32_t n_head, uint32_t tok, uint32_t head, uint32_t off, uint32_t width) {
  return (uint64_t(n_tokens - 1) * tok + uint64_t(n_head - 1) * head + off + width) * 4;
}

}  // namespace

void record_head_matmul(Recorder& rec, const HeadMatmulArgs& a) {
  if (a.rows == 0 || a.n_head == 0 || a.n_tokens == 0) return;
  const bool copy = a.w.buffer == VK_NULL_HANDLE;
  const GpuWeightType* L = gpu_weight_type(copy ? GgmlType::F32 : a.type);
  if (!L) throw Error(std::string("no GPU per-head product for weight type ") + type_name(a.type));
  uint32_t w_head = 0;
  if (!copy) {
    const uint32_t mult = std::max<uint32_t>(L->block_elems, 16);
    if (a.cols == 0 || a.cols % mult != 0)
      throw Error("head_matmul: cols " + std::to_string(a.cols) + " is not a positive multiple of " +
                  std::to_string(mult) + " for " + type_name(a.type));
    if (a.w.offset % L->align != 0) throw Error("internal error: head_matmul weights are misaligned");
    const uint64_t matrix = uint64_t(row_bytes(a.type, a.cols)) * a.rows;
    if (matrix % L->align != 0) throw Error("internal error: head_matmul matrices are misaligned");
    check_range("w", a.w, matrix * a.n_head);
    w_head = static_cast<uint32_t>(matrix / L->align);
  }
  const uint32_t in_width = copy ? a.rows : a.cols;
  check_range("x", a.x, rows_end(a.n_tokens, a.n_head, a.x_tok, a.x_head, a.x_off, in_width));
  check_range("y", a.y, rows_end(a.n_tokens, a.n_head, a.y_tok, a.y_head, a.y_off, a.rows));
  const DeviceInfo& dev = rec.context().info();
  const uint32_t gx = (a.rows + kRowsPerWorkgroup - 1) / kRowsPerWorkgroup;
  const uint32_t gz = (a.n_tokens + kTokensPerWorkgroup - 1) / kTokensPerWorkgroup;
  if (gx > dev.max_workgroup_count[0] || a.n_head > dev.max_workgroup_count[1] || gz > dev.max_workgroup_count[2])
    throw Error("internal error: head_matmul dispatch exceeds the workgroup count limits");
  const HeadMatmulPush push{a.rows,  a.cols,   a.n_tokens, w_head,   a.x_off,      a.x_tok,
                            a.x_head, a.y_off, a.y_tok,    a.y_head, copy ? 1u : 0u};
  const Pipeline& p = rec.context().pipeline(std::string("head_matmul_") + L->suffix, 3, sizeof push);
  rec.dispatch(p, {copy ? a.x : a.w, a.x, a.y}, push, gx, a.n_head, gz);
}

}  // namespace vkmoe::vk
