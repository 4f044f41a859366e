// libFuzzer entry point for chat templates (tests/template_pipeline.h): any
// input must parse and render, or be rejected with a one-line vkmoe::Error,
// within the renderer's step and size limits.
#include "tests/template_pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  vkmoe::test::run_template(std::string(reinterpret_cast<const char*>(data), size));
  return 0;
}
