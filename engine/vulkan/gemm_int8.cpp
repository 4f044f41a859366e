// Placeholder until the int8 GEMM path lands (replaced by its implementation).
#include "base/error.h"
#include "engine/vulkan/gemm_paths.h"

namespace vkmoe::vk {

bool gemm_int8_available(const Context&, GgmlType) { return false; }
void record_gemm_int8(Recorder&, const GemmArgs&, const GemmIdsArgs*) {
  throw Error("the int8 GEMM path is not built");
}

}  // namespace vkmoe::vk
