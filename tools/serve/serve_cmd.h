#pragma once
// `vkmoe serve`: the command (options, model and engine setup).
#include <vector>

#include "tools/cli_args.h"

namespace vkmoe {

extern const std::vector<OptionSpec> kServeOptions;  // --host, --port, --max-body, --max-queue
int cmd_serve(const Args& a);

}  // namespace vkmoe
