#include "engine/model/tensor_check.h"

#include <algorithm>
#include <optional>
#include <vector>

#include "base/error.h"
#include "base/progress.h"
#include "cpu/finite_check.h"
#include "cpu/thread_pool.h"

namespace vkmoe {
namespace {

// A run of blocks of one tensor: the unit of parallel work.
struct Span {
  size_t tensor;
  int64_t begin, end;
  uint64_t bytes;
};

std::vector<Span> split_into_spans(const GgufFile& f, uint64_t span_bytes) {
  std::vector<Span> spans;
  for (size_t i = 0; i < f.tensors().size(); ++i) {
    const GgufTensor& t = f.tensors()[i];
    const TypeTraits& tt = type_traits(t.type);
    const int64_t n_blocks = t.nelements() / tt.block_size;
    const int64_t per_span = std::max<int64_t>(1, static_cast<int64_t>(span_bytes / tt.type_size));
    for (int64_t b = 0; b < n_blocks; b += per_span) {
      const int64_t e = std::min(n_blocks, b + per_span);
      spans.push_back({i, b, e, static_cast<uint64_t>(e - b) * tt.type_size});
    }
  }
  return spans;
}

std::string describe(const GgufTensor& t, const NonFiniteBlock& bad) {
  const int block_size = type_traits(t.type).block_size;
  std::string where = block_size == 1 ? "element " + std::to_string(bad.block)
                                      : std::string(type_name(t.type)) + " block " + std::to_string(bad.block);
  const int64_t row = bad.block * block_size / std::max<int64_t>(t.ne[0], 1);
  return "tensor '" + printable(t.name) + "' holds a NaN or infinity (" + bad.field + " of " + where + ", row " +
         std::to_string(row) + ")";
}

}  // namespace

void check_tensor_data(const GgufFile& f, int threads) {
  for (const GgufTensor& t : f.tensors())
    if (!type_traits(t.type).supported)
      throw Error("tensor '" + printable(t.name) + "' has type " + type_name(t.type) + ", which --check-tensors cannot read");
  const std::vector<Span> spans = split_into_spans(f, 16ull << 20);
  uint64_t total = 0;
  for (const Span& s : spans) total += s.bytes;
  ThreadPool pool(threads);
  ProgressLine progress("checking tensors", total, 1ull << 30);
  // Waves of a few spans per thread: progress is drawn between waves, and the
  // first wave holding a bad block ends the scan with the earliest one.
  const size_t wave = static_cast<size_t>(pool.size()) * 4;
  std::vector<std::optional<NonFiniteBlock>> found(wave);
  for (size_t w0 = 0; w0 < spans.size(); w0 += wave) {
    const size_t n = std::min(wave, spans.size() - w0);
    pool.parallel_for(static_cast<int64_t>(n), [&](int64_t b, int64_t e) {
      for (int64_t k = b; k < e; ++k) {
        const Span& s = spans[w0 + k];
        const GgufTensor& t = f.tensors()[s.tensor];
        found[k] = find_non_finite_block(t.type, t.data, s.begin, s.end);
      }
    });
    for (size_t k = 0; k < n; ++k) {
      if (found[k]) throw Error(describe(f.tensors()[spans[w0 + k].tensor], *found[k]));
      progress.advance(spans[w0 + k].bytes);
    }
  }
  progress.finish();
}

}  // namespace vkmoe
