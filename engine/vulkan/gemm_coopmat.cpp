// Placeholder until the coopmat GEMM path lands (replaced by its implementation).
#include "base/error.h"
#include "engine/vulkan/gemm_paths.h"

namespace vkmoe::vk {

bool gemm_coopmat_available(const Context&, GgmlType) { return false; }
void record_gemm_coopmat(Recorder&, const GemmArgs&, const GemmIdsArgs*) {
  throw Error("the coopmat GEMM path is not built");
}

}  // namespace vkmoe::vk
