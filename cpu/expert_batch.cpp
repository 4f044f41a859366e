#include "cpu/expert_batch.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "base/error.h"
#include "cpu/simd_batch.h"
#include "cpu/simd_kernels.h"
#include "cpu/thread_pool.h"

namespace vkmoe {

namespace {

struct BatchShape {
  int64_t n_embd = 0, n_ff = 0;
  int64_t n_entries = 0;  // sum of the batches' n
  int64_t n_tokens = 0;   // largest token index + 1
};

BatchShape check_batches(const ExpertBatch* batches, int n_batches, int64_t x_stride, int64_t out_stride) {
  BatchShape s;
  for (int b = 0; b < n_batches; ++b) {
    const ExpertBatch& eb = batches[b];
    const std::string where = "expert_ffn_batched: batch " + std::to_string(b);
    if (eb.n < 0) throw Error(where + " has n = " + std::to_string(eb.n));
    if (eb.n == 0) continue;
    if (!eb.tokens || !eb.weights) throw Error(where + " has no tokens or weights");
    const ExpertView& e = eb.expert;
    if (s.n_entries == 0) {
      s.n_embd = e.n_embd;
      s.n_ff = e.n_ff;
      if (s.n_embd <= 0 || s.n_ff <= 0)
        throw Error(where + " has invalid shape " + std::to_string(e.n_embd) + "x" + std::to_string(e.n_ff));
    }
    if (e.n_embd != s.n_embd || e.n_ff != s.n_ff)
      throw Error(where + " has shape " + std::to_string(e.n_embd) + "x" + std::to_string(e.n_ff) + ", expected " +
                  std::to_string(s.n_embd) + "x" + std::to_string(s.n_ff));
    if (!e.gate || !e.up || !e.down) throw Error(where + " has no expert weights");
    // Validates the types (activation_bytes) and whole-block row lengths (row_bytes).
    activation_bytes(e.gate_type, s.n_embd);
    activation_bytes(e.up_type, s.n_embd);
    activation_bytes(e.down_type, s.n_ff);
    row_bytes(e.gate_type, s.n_embd);
    row_bytes(e.up_type, s.n_embd);
    row_bytes(e.down_type, s.n_ff);
    for (int i = 0; i < eb.n; ++i) {
      if (eb.tokens[i] < 0) throw Error(where + " has negative token index " + std::to_string(eb.tokens[i]));
      s.n_tokens = std::max<int64_t>(s.n_tokens, int64_t{eb.tokens[i]} + 1);
    }
    s.n_entries += eb.n;
  }
  if (s.n_entries > 0 && (x_stride < s.n_embd || out_stride < s.n_embd))
    throw Error("expert_ffn_batched: strides " + std::to_string(x_stride) + ", " + std::to_string(out_stride) +
                " are shorter than n_embd " + std::to_string(s.n_embd));
  return s;
}

// Rows per work item: 64, halved (down to one 4-row tile) until there are
// about 8 items per thread.
int64_t rows_per_item(int64_t rows, int64_t n_batches, int threads) {
  int64_t chunk = 64;
  while (chunk > 4 && n_batches * ((rows + chunk - 1) / chunk) < 8 * int64_t{threads}) chunk /= 2;
  return chunk;
}

struct RowItem {
  int batch;
  int64_t r0, r1;
};

std::vector<RowItem> row_items(const ExpertBatch* batches, int n_batches, int64_t rows, int threads) {
  int64_t non_empty = 0;
  for (int b = 0; b < n_batches; ++b) non_empty += batches[b].n > 0;
  const int64_t chunk = rows_per_item(rows, non_empty, threads);
  std::vector<RowItem> items;
  for (int b = 0; b < n_batches; ++b)
    if (batches[b].n > 0)
      for (int64_t r = 0; r < rows; r += chunk) items.push_back({b, r, std::min(rows, r + chunk)});
  return items;
}

// v -> dequantize(quantize_activation(weight_type, v)): the activation
// rounding of the Q8 path (identity for float weight types).
void round_like_activation(GgmlType weight_type, float* v, int64_t n, std::vector<uint8_t>& tmp) {
  const GgmlType at = activation_type(weight_type);
  if (at == GgmlType::F32) return;
  tmp.resize(activation_bytes(weight_type, n));
  quantize_activation(weight_type, v, tmp.data(), n);
  dequantize_row(at, tmp.data(), v, n);
}

// Scratch reused across calls from the same thread (no per-layer allocation).
struct Scratch {
  std::vector<float> h;     // entry e: act(gate x + gate_b, up x + up_b), n_ff floats
  std::vector<float> y;     // entry e: down h + down_b, n_embd floats
  std::vector<float> xact;  // Q8 mode: x rounded like each activation type, per token
};

}  // namespace

void expert_ffn_batched(const ExpertBatch* batches, int n_batches, const float* x, int64_t x_stride, float* out,
                        int64_t out_stride, ThreadPool& pool, CpuActivations act) {
  if (n_batches <= 0) return;
  const BatchShape s = check_batches(batches, n_batches, x_stride, out_stride);
  if (s.n_entries == 0) return;
  const int64_t n_embd = s.n_embd, n_ff = s.n_ff;

  // Entries (batch, i) in batch order; first[b] is batch b's first entry.
  std::vector<int64_t> first(n_batches + 1, 0);
  for (int b = 0; b < n_batches; ++b) first[b + 1] = first[b] + batches[b].n;

  // Thread-local: the lambdas below must use these pointers, not scratch
  // (which names the running thread's own instance).
  thread_local Scratch scratch;
  scratch.h.resize(s.n_entries * n_ff);
  scratch.y.resize(s.n_entries * n_embd);
  float* const h = scratch.h.data();
  float* const y = scratch.y.data();

  // Activation row of each entry for gate and up: x itself, or in Q8 mode x
  // rounded through the weight type's activation format (one copy per format).
  std::vector<const float*> gate_x(s.n_entries), up_x(s.n_entries);
  std::vector<GgmlType> formats;  // Q8 mode: activation formats of gate/up weight types
  auto format_index = [&](GgmlType wt) -> int64_t {
    if (act == CpuActivations::F32 || activation_type(wt) == GgmlType::F32) return -1;
    for (size_t f = 0; f < formats.size(); ++f)
      if (activation_type(formats[f]) == activation_type(wt)) return static_cast<int64_t>(f);
    formats.push_back(wt);
    return static_cast<int64_t>(formats.size() - 1);
  };
  std::vector<int64_t> gate_format(n_batches, -1), up_format(n_batches, -1);
  for (int b = 0; b < n_batches; ++b) {
    if (batches[b].n == 0) continue;
    gate_format[b] = format_index(batches[b].expert.gate_type);
    up_format[b] = format_index(batches[b].expert.up_type);
  }
  scratch.xact.resize(formats.size() * s.n_tokens * n_embd);
  float* const xact = scratch.xact.data();
  if (!formats.empty()) {
    std::vector<char> used(s.n_tokens, 0);
    for (int b = 0; b < n_batches; ++b)
      for (int i = 0; i < batches[b].n; ++i) used[batches[b].tokens[i]] = 1;
    pool.parallel_for(s.n_tokens, [&](int64_t begin, int64_t end) {
      std::vector<uint8_t> tmp;
      for (int64_t t = begin; t < end; ++t) {
        if (!used[t]) continue;
        for (size_t f = 0; f < formats.size(); ++f) {
          float* v = xact + (f * s.n_tokens + t) * n_embd;
          std::copy(x + t * x_stride, x + t * x_stride + n_embd, v);
          round_like_activation(formats[f], v, n_embd, tmp);
        }
      }
    });
  }
  auto x_row = [&](int64_t format, int32_t token) {
    return format < 0 ? x + token * x_stride : xact + (format * s.n_tokens + token) * n_embd;
  };
  for (int b = 0; b < n_batches; ++b) {
    for (int i = 0; i < batches[b].n; ++i) {
      gate_x[first[b] + i] = x_row(gate_format[b], batches[b].tokens[i]);
      up_x[first[b] + i] = x_row(up_format[b], batches[b].tokens[i]);
    }
  }

  // h = act(gate x + gate_b, up x + up_b) for every entry, items of (batch, gate/up rows).
  const std::vector<RowItem> ff_items = row_items(batches, n_batches, n_ff, pool.size());
  pool.parallel_for(static_cast<int64_t>(ff_items.size()), [&](int64_t begin, int64_t end) {
    std::vector<float> u;
    for (int64_t it = begin; it < end; ++it) {
      const auto [b, r0, r1] = ff_items[it];
      const ExpertView& e = batches[b].expert;
      const int n = batches[b].n;
      const int64_t e0 = first[b], rows = r1 - r0;
      u.resize(n * rows);
      float* g = h + e0 * n_ff + r0;
      matmul_rows_f32(e.gate_type, e.gate, gate_x.data() + e0, n, g, n_ff, r0, r1, n_embd);
      matmul_rows_f32(e.up_type, e.up, up_x.data() + e0, n, u.data(), rows, r0, r1, n_embd);
      for (int i = 0; i < n; ++i) {
        glu_rows(e.act, g + i * n_ff, u.data() + i * rows, rows, e.gate_b ? e.gate_b + r0 : nullptr,
                 e.up_b ? e.up_b + r0 : nullptr);
      }
    }
  });
  if (act == CpuActivations::Q8) {
    pool.parallel_for(s.n_entries, [&](int64_t begin, int64_t end) {
      std::vector<uint8_t> tmp;
      int b = static_cast<int>(std::upper_bound(first.begin(), first.end(), begin) - first.begin()) - 1;
      for (int64_t e = begin; e < end; ++e) {
        while (e >= first[b + 1]) ++b;
        round_like_activation(batches[b].expert.down_type, h + e * n_ff, n_ff, tmp);
      }
    });
  }

  // y = down h + down_b for every entry, items of (batch, down rows).
  std::vector<const float*> h_rows(s.n_entries);
  for (int64_t e = 0; e < s.n_entries; ++e) h_rows[e] = h + e * n_ff;
  const std::vector<RowItem> embd_items = row_items(batches, n_batches, n_embd, pool.size());
  pool.parallel_for(static_cast<int64_t>(embd_items.size()), [&](int64_t begin, int64_t end) {
    for (int64_t it = begin; it < end; ++it) {
      const auto [b, r0, r1] = embd_items[it];
      const ExpertView& e = batches[b].expert;
      const int64_t e0 = first[b];
      matmul_rows_f32(e.down_type, e.down, h_rows.data() + e0, batches[b].n, y + e0 * n_embd + r0, n_embd, r0, r1,
                      n_ff);
      if (e.down_b)
        for (int i = 0; i < batches[b].n; ++i) {
          float* yi = y + (e0 + i) * n_embd;
          for (int64_t r = r0; r < r1; ++r) yi[r] += e.down_b[r];
        }
    }
  });

  // out[token] += weight * y over the token's entries in batch order; each
  // token's output row is read and written once, by one thread (out may be
  // uncached, write-combined memory the GPU reads).
  std::vector<int64_t> token_start(s.n_tokens + 1, 0), token_entries(s.n_entries);
  for (int b = 0; b < n_batches; ++b)
    for (int i = 0; i < batches[b].n; ++i) ++token_start[batches[b].tokens[i] + 1];
  for (int64_t t = 0; t < s.n_tokens; ++t) token_start[t + 1] += token_start[t];
  {
    std::vector<int64_t> fill(token_start.begin(), token_start.end() - 1);
    for (int b = 0; b < n_batches; ++b)
      for (int i = 0; i < batches[b].n; ++i) token_entries[fill[batches[b].tokens[i]]++] = first[b] + i;
  }
  std::vector<float> entry_weight(s.n_entries);
  for (int b = 0; b < n_batches; ++b)
    for (int i = 0; i < batches[b].n; ++i) entry_weight[first[b] + i] = batches[b].weights[i];
  pool.parallel_for(s.n_tokens, [&](int64_t begin, int64_t end) {
    std::vector<float> acc(n_embd);
    for (int64_t t = begin; t < end; ++t) {
      if (token_start[t] == token_start[t + 1]) continue;
      float* o = out + t * out_stride;
      std::memcpy(acc.data(), o, n_embd * sizeof(float));
      for (int64_t k = token_start[t]; k < token_start[t + 1]; ++k) {
        const int64_t e = token_entries[k];
        const float w = entry_weight[e];
        const float* ye = y + e * n_embd;
        for (int64_t r = 0; r < n_embd; ++r) acc[r] += w * ye[r];
      }
      std::memcpy(o, acc.data(), n_embd * sizeof(float));
    }
  });
}

}  // namespace vkmoe
