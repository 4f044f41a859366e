#pragma once
// `vkmoe chat`: interactive multi-turn chat in the terminal.
#include <vector>

#include "tools/cli_args.h"

namespace vkmoe {

extern const std::vector<OptionSpec> kChatOptions;  // besides the model, engine and sampling options
int cmd_chat(const Args& a);

}  // namespace vkmoe
