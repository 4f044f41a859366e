#pragma once
// What a model file goes through before any weight is used: GGUF parse,
// tokenizer construction, model validation and planning. Shared by the
// mutation test (tests/test_gguf_fuzz.cpp) and the libFuzzer target
// (fuzz/fuzz_gguf.cpp). Hostile input may be rejected with a one-line
// vkmoe::Error at any step; a broken invariant throws std::logic_error.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "engine/model/gguf.h"
#include "engine/model/model.h"
#include "engine/model/tokenizer.h"
#include "engine/offload/plan_model.h"
#include "planner/planner.h"

namespace vkmoe::test {

inline void require(bool ok, const std::string& what) {
  if (!ok) throw std::logic_error(what);
}

// A parsed file is self-consistent, and writing it back out gives a file that
// parses to the same values and bytes.
inline void check_parsed(const GgufFile& f) {
  const uint64_t a = f.alignment();
  require(a != 0 && (a & (a - 1)) == 0 && f.data_offset() % a == 0, "alignment");
  require(f.version() == 2 || f.version() == 3, "version");
  for (const auto& t : f.tensors()) {
    require(f.tensor(t.name) == &t, "tensor index of " + t.name);
    require(!t.ne.empty() && t.ne.size() <= 4 && t.offset % a == 0 && t.nbytes > 0, "tensor info of " + t.name);
    for (int64_t d : t.ne) require(d > 0, "dimension of " + t.name);
    require(t.nbytes == row_bytes(t.type, t.ne[0]) * size_t(t.nrows()), "byte size of " + t.name);
    require(t.data >= f.base() + f.data_offset() && t.nbytes <= size_t(f.base() + f.file_size() - t.data),
            "bounds of " + t.name);
  }
  if (a > 65536) return;  // rewriting would pad to a huge alignment
  GgufWriter w(a);
  w.add_all(f);
  const auto g = GgufFile::from_memory(w.to_bytes(), "rewritten");
  require(g->tensors().size() == f.tensors().size(), "tensor count after rewrite");
  for (size_t k = 0; k < f.tensors().size(); ++k) {
    const GgufTensor &x = f.tensors()[k], &y = g->tensors()[k];
    require(x.name == y.name && x.ne == y.ne && x.type == y.type && !std::memcmp(x.data, y.data, x.nbytes),
            "tensor " + x.name + " after rewrite");
  }
  auto same = [](double p, double q) { return p == q || (std::isnan(p) && std::isnan(q)); };
  for (const auto& k : f.keys()) {
    const GgufValue& x = *f.find(k);
    if (k == "general.alignment" || (x.is_array() && x.arr.type() == GgufType::ARRAY)) continue;
    const GgufValue* y = g->find(k);
    require(y && x.type == y->type && x.i == y->i && x.u == y->u && x.b == y->b && x.s == y->s && same(x.f, y->f),
            "value of " + k + " after rewrite");
    require(!x.is_array() || (x.arr.type() == y->arr.type() && x.arr.size() == y->arr.size() &&
                              x.arr.nbytes() == y->arr.nbytes() &&
                              !std::memcmp(x.arr.data(), y->arr.data(), x.arr.nbytes())),
            "array " + k + " after rewrite");
  }
}

// How far a file got.
struct Reach {
  bool tokenizer = false, model = false, planned = false;
};

// Runs fn; a vkmoe::Error (a clean rejection) must be one line.
template <class F>
bool accepted(F&& fn) {
  try {
    fn();
    return true;
  } catch (const Error& e) {
    require(!std::strchr(e.what(), '\n'), std::string("multi-line error: ") + e.what());
    return false;
  }
}

// The steps after a successful parse. Each runs even when another rejected the file.
inline Reach load_parsed(std::unique_ptr<GgufFile> f) {
  Reach r;
  r.tokenizer = accepted([&] {
    const auto tok = Tokenizer::from_gguf(*f);
    for (int32_t id : tok->encode("Hello <|im_end|> world 123\n\xC3\xA9", true))
      require(id >= 0 && id < tok->n_vocab(), "token id out of range");
    tok->decode(tok->encode(" x", false));
  });
  std::unique_ptr<Model> m;
  r.model = accepted([&] { m = Model::from_gguf(std::move(f)); });
  if (!m) return r;
  const ModelConfig& c = m->config();
  require(int(m->layers().size()) == c.n_layer && c.q_dim() > 0 && c.kv_dim() > 0 &&
              std::isfinite(c.rope_theta) && c.norm_eps > 0,
          "model config");
  r.planned = accepted([&] {
    format_plan(make_plan(plan_input_for(*m, std::min(c.n_ctx_train, 4096), 8ull << 30)));
  });
  return r;
}

}  // namespace vkmoe::test
