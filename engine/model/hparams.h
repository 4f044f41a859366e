#pragma once
// Reads an architecture's hyper-parameters ("<arch>.<key>") from a GGUF file
// with range checks; every failure is a one-line Error naming the file and key.
#include <string>

#include "engine/model/gguf.h"

namespace vkmoe {

class Hparams {
 public:
  Hparams(const GgufFile& f, std::string arch) : f_(f), a_(std::move(arch)) {}
  [[noreturn]] void fail(const std::string& what) const;
  bool has(const std::string& key) const { return f_.has(a_ + "." + key); }
  bool has_tensor(const std::string& name) const { return f_.tensor(name) != nullptr; }
  // A positive integer within the engine's dimension limit.
  int req_int(const std::string& key) const;
  int opt_int(const std::string& key, int fallback) const { return has(key) ? req_int(key) : fallback; }
  // A non-negative integer (0 allowed), e.g. a count of leading dense layers.
  int opt_count(const std::string& key, int fallback) const;
  // x * y of hyper-parameters x and y (named by their keys), checked in 64 bits.
  int product(const std::string& kx, int x, const std::string& ky, int y) const;
  float positive_float(const std::string& key, double fallback) const;  // positive and finite as a float
  bool opt_bool(const std::string& key, bool fallback) const { return f_.get_bool_or(a_ + "." + key, fallback); }
  std::string opt_str(const std::string& key, const std::string& fallback) const {
    return f_.get_str_or(a_ + "." + key, fallback);
  }
  const std::string& arch() const { return a_; }
  const GgufFile& file() const { return f_; }

 private:
  const GgufFile& f_;
  std::string a_;
};

}  // namespace vkmoe
