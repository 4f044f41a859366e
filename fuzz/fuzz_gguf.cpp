// libFuzzer entry point for the GGUF reader: any input must parse or throw
// vkmoe::Error; a parsed file must be self-consistent.
#include <cstdlib>
#include <cstring>
#include <vector>

#include "engine/model/gguf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::unique_ptr<vkmoe::GgufFile> f;
  try {
    f = vkmoe::GgufFile::from_memory(std::vector<uint8_t>(data, data + size), "fuzz");
  } catch (const vkmoe::Error&) {
    return 0;
  }
  // Touch everything the reader exposes so ASan sees any bad pointer.
  for (const auto& k : f->keys()) {
    const vkmoe::GgufValue* v = f->find(k);
    if (!v) std::abort();
    if (v->is_array() && v->arr_type == vkmoe::GgufType::STRING &&
        v->array_size() != v->arr_str.size())
      std::abort();
  }
  const uint8_t* end = f->base() + f->file_size();
  volatile uint8_t sink = 0;
  for (const auto& t : f->tensors()) {
    if (f->tensor(t.name) != &t) std::abort();
    if (t.nbytes == 0) std::abort();  // every dimension is positive
    if (t.data < f->base() + f->data_offset() || t.nbytes > size_t(end - t.data)) std::abort();
    if (t.nbytes != vkmoe::row_bytes(t.type, t.ne[0]) * size_t(t.nrows())) std::abort();
    sink = sink + t.data[0] + t.data[t.nbytes - 1];
  }
  // Writing a parsed file back out must not fail (alignment capped to keep it small).
  if (f->alignment() <= 4096) {
    vkmoe::GgufWriter w(f->alignment());
    for (const auto& k : f->keys()) {
      const vkmoe::GgufValue& v = *f->find(k);
      if (k == "general.alignment" && f->alignment() != 32) continue;
      if (v.is_array() && v.arr_type == vkmoe::GgufType::ARRAY) continue;
      w.add_value(k, v);
    }
    for (const auto& t : f->tensors())
      w.add_tensor(t.name, t.ne, t.type, std::vector<uint8_t>(t.data, t.data + t.nbytes));
    auto g = vkmoe::GgufFile::from_memory(w.to_bytes(), "rewritten");
    if (g->tensors().size() != f->tensors().size()) std::abort();
  }
  return 0;
}
