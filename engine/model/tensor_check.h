#pragma once
// --check-tensors: every tensor's data is read once and checked for NaN and
// infinity (for quantized blocks, their scales), in parallel, with a progress
// line on stderr for large files.
#include "engine/model/gguf.h"

namespace vkmoe {

// Throws Error naming the first tensor (in file order) holding a non-finite
// value, with the block and field. threads: 0 = all cores.
void check_tensor_data(const GgufFile& f, int threads);

}  // namespace vkmoe
