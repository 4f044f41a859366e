#pragma once
#include <stdexcept>
#include <string>

namespace vkmoe {

// Every user-facing failure (bad file, unsupported model, no driver, OOM) is
// reported as an Error with a one-line message; the CLI prints it and exits 1.
struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace vkmoe
