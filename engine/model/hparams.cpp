#include "engine/model/hparams.h"

#include <limits>

namespace vkmoe {
namespace {
// Every dimension and every product of dimensions the engine forms (in int
// or uint32 arithmetic) stays within this.
constexpr int64_t kMaxDim = int64_t{1} << 30;
}  // namespace

void Hparams::fail(const std::string& what) const { throw Error(f_.path() + ": " + what); }

int Hparams::req_int(const std::string& key) const {
  const std::string k = a_ + "." + key;
  if (!f_.has(k)) fail("missing hyper-parameter '" + k + "'");
  const int64_t v = f_.get_int(k);
  if (v <= 0 || v > kMaxDim) fail("hyper-parameter '" + k + "' = " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

int Hparams::opt_count(const std::string& key, int fallback) const {
  const std::string k = a_ + "." + key;
  if (!f_.has(k)) return fallback;
  const int64_t v = f_.get_int(k);
  if (v < 0 || v > kMaxDim) fail("hyper-parameter '" + k + "' = " + std::to_string(v) + " is out of range");
  return static_cast<int>(v);
}

int Hparams::product(const std::string& kx, int x, const std::string& ky, int y) const {
  const int64_t p = int64_t{x} * y;
  if (p > kMaxDim)
    fail("hyper-parameters '" + a_ + "." + kx + "' (" + std::to_string(x) + ") x '" + a_ + "." + ky + "' (" +
         std::to_string(y) + ") = " + std::to_string(p) + " is out of range");
  return static_cast<int>(p);
}

float Hparams::positive_float(const std::string& key, double fallback) const {
  const std::string k = a_ + "." + key;
  const double v = f_.get_float_or(k, fallback);
  // A positive double below float's range would round to 0.
  if (!(v >= std::numeric_limits<float>::denorm_min() && v <= std::numeric_limits<float>::max()))
    fail("hyper-parameter '" + k + "' = " + std::to_string(v) + " must be a positive finite number");
  return static_cast<float>(v);
}

}  // namespace vkmoe
