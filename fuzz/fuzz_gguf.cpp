// libFuzzer entry point: any input must either load (tests/gguf_pipeline.h:
// parse, tokenizer, model checks, plan) or be rejected with a one-line
// vkmoe::Error. A std::logic_error (broken invariant) escapes and is reported.
#include "tests/gguf_pipeline.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<vkmoe::GgufFile> f;
  try {
    f = vkmoe::GgufFile::from_memory(std::vector<uint8_t>(data, data + size), "fuzz");
  } catch (const vkmoe::Error&) {
    return 0;
  }
  vkmoe::test::check_parsed(*f);
  vkmoe::test::load_parsed(std::move(f));
  return 0;
}
