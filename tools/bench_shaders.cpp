#include "tools/bench_shaders.h"

#include <algorithm>
#include <array>
#include <chrono>
#include <climits>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "cpu/quant.h"
#include "base/error.h"
#include "tools/cli_args.h"
#include "engine/vulkan/gemm_paths.h"
#include "engine/vulkan/vk_attention.h"
#include "engine/vulkan/vk_gemm.h"
#include "engine/vulkan/vk_matvec.h"
#include "engine/vulkan/vk_runtime.h"

namespace vkmoe {
namespace {

using namespace vk;

struct Options {
  int device = -1;
  std::vector<std::string> kernels = {"q4_k",      "q5_k",      "q6_k",      "q8_0",      "f16",       "bf16",
                                      "f32",       "mxfp4",     "q4_k_ids",  "mxfp4_ids", "gemm_q4_k", "gemm_q5_k",
                                      "gemm_q6_k", "gemm_q8_0", "gemm_f16",  "gemm_bf16", "gemm_f32",  "gemm_ids"};
  std::vector<std::pair<uint32_t, uint32_t>> shapes = {{2048, 768}, {768, 2048}, {2048, 4096}, {2048, 151936}};
  // GEMM: ncols x nrows : tokens (gemm_ids: per-expert shape, tokens routed top-8).
  std::vector<std::array<uint32_t, 3>> gemm_shapes = {{2048, 4096, 512}, {4096, 2048, 512}, {2048, 768, 512}};
  std::vector<std::array<uint32_t, 3>> ids_shapes;  // ncols, nrows, experts used; empty: per kernel
  std::vector<uint32_t> attn_depths = {256, 4096, 16384};  // attn_decode: keys before the token
  GemmPath gemm_path = GemmPath::Auto;
  int iters = 50;
  uint64_t bw_mib = 1024;
  uint64_t pool_mib = 512;
  uint32_t experts = 128;
  bool sweep = false;
  bool glu = false;  // TYPE_ids: the input is SwiGLU(x, u), as in the experts' down product
  bool has_config = false;
  MatvecConfig config;
};

const char* kUsage =
    "usage: vkmoe bench-shaders [--device N] [--kernels q4_k,q5_k,q6_k,q8_0,f16,bf16,f32,q4_0,q4_1,q5_0,q5_1,\n"
    "                                      iq4_nl,mxfp4,q2_k,q3_k,iq4_xs,TYPE_ids (q4_k_ids...),\n"
    "                                      TYPE_topk (f32_topk: a router with its top-8),\n"
    "                                      gemm_q4_k,...,gemm_f32,gemm_ids,\n"
    "                                      attn_decode (one token's attention, Qwen3-30B-A3B heads)]\n"
    "                           [--attn-depths N,...]\n"
    "                           [--gemm-shapes NCOLSxNROWS:TOKENS,...] [--gemm-path auto|tiled|int8|coopmat|coopmat2]\n"
    "                           [--shapes NCOLSxNROWS,...] [--ids-shapes NCOLSxNROWS:USED,...]\n"
    "                           [--iters N] [--bw-mib N] [--pool-mib N]\n"
    "                           [--experts N] [--config WG:TPR:RPT:SG[:PF[:QX]]] [--sweep] [--glu]\n";

std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, sep))
    if (!item.empty()) out.push_back(item);
  return out;
}

Options parse(int argc, char** argv) {
  const Args a = parse_options("bench-shaders",
                               {{"device"}, {"kernels"}, {"shapes"}, {"gemm-shapes"}, {"ids-shapes"}, {"gemm-path"}, {"iters"},
                                {"bw-mib"}, {"pool-mib"}, {"experts"}, {"config"}, {"attn-depths"}, {"sweep", "", true},
                                {"glu", "", true}},
                               argc - 1, argv + 1);
  if (a.has("help")) {
    std::fputs(kUsage, stdout);
    std::exit(0);
  }
  Options o;
  auto u32 = [](const char* option, const std::string& s, long long min = 1) {
    return static_cast<uint32_t>(parse_int(option, s, min, UINT32_MAX));
  };
  o.device = static_cast<int>(a.num("device", o.device, 0, INT_MAX));
  if (a.has("kernels")) o.kernels = split(a.get("kernels"), ',');
  if (a.has("shapes")) {
    o.shapes.clear();
    for (const auto& s : split(a.get("shapes"), ',')) {
      const auto parts = split(s, 'x');
      if (parts.size() != 2) throw Error("bench-shaders: bad shape '" + s + "' (want NCOLSxNROWS)");
      o.shapes.emplace_back(u32("--shapes", parts[0]), u32("--shapes", parts[1]));
    }
  }
  // NCOLSxNROWS:N lists (N: GEMM tokens or experts used).
  auto triples = [&](const char* option, const char* want) {
    std::vector<std::array<uint32_t, 3>> v;
    for (const auto& s : split(a.get(option + 2), ',')) {
      const auto parts = split(s, ':');
      const auto dims = parts.size() == 2 ? split(parts[0], 'x') : std::vector<std::string>();
      if (dims.size() != 2) throw Error(std::string("bench-shaders: bad ") + option + " '" + s + "' (want " + want + ")");
      v.push_back({u32(option, dims[0]), u32(option, dims[1]), u32(option, parts[1])});
    }
    return v;
  };
  if (a.has("gemm-shapes")) o.gemm_shapes = triples("--gemm-shapes", "NCOLSxNROWS:TOKENS");
  if (a.has("ids-shapes")) o.ids_shapes = triples("--ids-shapes", "NCOLSxNROWS:USED");
  if (a.has("gemm-path")) {
    const std::string v = a.get("gemm-path");
    const auto p = gemm_path_by_name(v);
    if (!p) throw Error("bench-shaders: unknown GEMM path '" + v + "'\n" + kUsage);
    o.gemm_path = *p;
  }
  o.iters = static_cast<int>(a.num("iters", o.iters, 1, 1 << 20));
  o.bw_mib = a.num("bw-mib", o.bw_mib, 1, 1 << 20);
  o.pool_mib = a.num("pool-mib", o.pool_mib, 1, 1 << 20);
  o.experts = static_cast<uint32_t>(a.num("experts", o.experts, 8, 1 << 20));
  if (a.has("config")) {
    const auto parts = split(a.get("config"), ':');
    if (parts.size() < 4 || parts.size() > 6) throw Error("bench-shaders: --config wants WG:TPR:RPT:SG[:PF[:QX]]");
    auto flag = [&](size_t i) { return static_cast<int>(parse_int("--config", parts[i], -1, 1)); };
    o.config.workgroup = u32("--config", parts[0], 0);
    o.config.threads_per_row = u32("--config", parts[1], 0);
    o.config.rows_per_thread = u32("--config", parts[2], 0);
    o.config.subgroup = flag(3);
    if (parts.size() >= 5) o.config.prefetch = flag(4);
    if (parts.size() == 6) o.config.quant_x = flag(5);
    o.has_config = true;
  }
  if (a.has("attn-depths")) {
    o.attn_depths.clear();
    for (const auto& d : split(a.get("attn-depths"), ',')) o.attn_depths.push_back(u32("--attn-depths", d, 0));
  }
  o.sweep = a.has("sweep");
  o.glu = a.has("glu");
  return o;
}

bool kernel_type(const std::string& name, GgmlType& t);
// "q4_k" of "q4_k_ids" (suffix "_ids"); empty for names without the suffix.
std::string suffixed_type(const std::string& k, const std::string& suffix) {
  if (k.size() <= suffix.size() || k.compare(k.size() - suffix.size(), suffix.size(), suffix) != 0) return "";
  return k.substr(0, k.size() - suffix.size());
}
std::string ids_kernel_type(const std::string& k) { return k == "gemm_ids" ? "" : suffixed_type(k, "_ids"); }
// TYPE_topk: the router product with its fused top-8 (record_matvec_topk).
std::string topk_kernel_type(const std::string& k) { return suffixed_type(k, "_topk"); }

// The weight type of kernel k (q4_k, q4_k_ids, q4_k_topk, gemm_q4_k: Q4_K);
// false for unknown names. gemm_ids (always Q4_K) has none.
bool kernel_weight_type(const std::string& k, GgmlType& t) {
  const std::string name = !ids_kernel_type(k).empty()    ? ids_kernel_type(k)
                           : !topk_kernel_type(k).empty() ? topk_kernel_type(k)
                           : k.rfind("gemm_", 0) == 0     ? k.substr(5)
                                                          : k;
  return kernel_type(name, t);
}

void validate_kernels(const Options& o) {
  GgmlType t;
  for (const auto& k : o.kernels)
    if (k != "gemm_ids" && k != "attn_decode" && !kernel_weight_type(k, t))
      throw Error("bench-shaders: unknown kernel '" + k + "'\n" + kUsage);
  if (o.kernels.empty() || o.shapes.empty()) throw Error(std::string("bench-shaders: nothing to run\n") + kUsage);
}

bool kernel_type(const std::string& name, GgmlType& t) {
  static const std::pair<const char*, GgmlType> names[] = {
      {"f32", GgmlType::F32},   {"f16", GgmlType::F16},   {"bf16", GgmlType::BF16}, {"q8_0", GgmlType::Q8_0},
      {"q4_k", GgmlType::Q4_K}, {"q5_k", GgmlType::Q5_K}, {"q6_k", GgmlType::Q6_K}, {"q4_0", GgmlType::Q4_0},
      {"q4_1", GgmlType::Q4_1}, {"q5_0", GgmlType::Q5_0}, {"q5_1", GgmlType::Q5_1}, {"iq4_nl", GgmlType::IQ4_NL},
      {"mxfp4", GgmlType::MXFP4}, {"q2_k", GgmlType::Q2_K}, {"q3_k", GgmlType::Q3_K}, {"iq4_xs", GgmlType::IQ4_XS}};
  for (const auto& [n, ty] : names)
    if (name == n) {
      t = ty;
      return true;
    }
  return false;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

uint64_t round_up(uint64_t v, uint64_t a) { return (v + a - 1) / a * a; }

// Submits the recorded runs again and again, for at least kMinLoad and until
// their time (`read`: of the last submission) is steady (the last 3 within
// 2%), or 3 s passed; returns the last time. The minimum matters: an H100's
// clock stays at 345 MHz (of 1980) through a sweep's short bursts between
// idle gaps, where each kernel measured 3-6x its time at full clock.
constexpr auto kMinLoad = std::chrono::milliseconds(300);
double submit_until_steady(Recorder& rec, const std::function<double()>& read) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<double> last;
  for (;;) {
    rec.submit().wait();
    last.push_back(read());
    const size_t n = last.size();
    const auto elapsed = std::chrono::steady_clock::now() - start;
    if (n >= 3 && elapsed >= kMinLoad) {
      const auto [lo, hi] = std::minmax({last[n - 1], last[n - 2], last[n - 3]});
      if (hi <= lo * 1.02) break;
    }
    if (elapsed > std::chrono::seconds(3)) break;
  }
  return last.back();
}

// Median of runs [first, n) timed by timestamp pairs (2i, 2i + 1).
double median_time(TimestampPool& ts, int first, int n) {
  const auto ns = ts.read_ns(0, 2 * n);
  std::vector<double> times;
  for (int i = first; i < n; ++i) times.push_back(ns[2 * i + 1] - ns[2 * i]);
  return median(times);
}

// Fills `bytes` of dst (from offset 0) with rows of random weights of type t
// (a few distinct quantized rows, tiled), through the async uploader.
void fill_weights(Context& ctx, Uploader& upl, const Buffer& dst, uint64_t bytes, GgmlType t, uint32_t ncols,
                  std::mt19937& rng) {
  const size_t rb = row_bytes(t, ncols);
  const int distinct = 16;
  std::vector<uint8_t> rows(rb * distinct);
  std::normal_distribution<float> nd(0.f, 1.f);
  std::vector<float> f(ncols);
  for (int r = 0; r < distinct; ++r) {
    for (auto& v : f) v = nd(rng);
    quantize_row(t, f.data(), rows.data() + r * rb, ncols);
  }
  const uint64_t chunk = std::max<uint64_t>(rb, (8ull << 20) / rb * rb);
  std::vector<uint8_t> host(std::min<uint64_t>(chunk, round_up(bytes, rb)));
  for (size_t i = 0; i < host.size(); ++i) host[i] = rows[i % rows.size()];
  for (uint64_t off = 0; off < bytes; off += host.size())
    upl.enqueue(dst, off, host.data(), std::min<uint64_t>(host.size(), bytes - off));
  upl.flush().wait();
}

struct Row {
  std::string kernel, shape, config;
  double mib = 0, us = 0, gbps = 0, pct = 0;
};

// Fixed notation with at least three significant digits, so that a slow
// kernel (lavapipe under a sanitizer) never prints a rate of "0.00".
std::string sig3(double v) {
  const int decimals = v > 0 && std::isfinite(v) ? std::clamp(2 - static_cast<int>(std::floor(std::log10(v))), 1, 9) : 2;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

void print_row(const Row& r) {
  std::printf("%-10s %-14s %-14s %10.4f %10.2f %10s %7s\n", r.kernel.c_str(), r.shape.c_str(), r.config.c_str(),
              r.mib, r.us, sig3(r.gbps).c_str(), sig3(r.pct).c_str());
  std::fflush(stdout);
}

std::string config_str(const MatvecConfig& c) {
  return std::to_string(c.workgroup) + "/" + std::to_string(c.threads_per_row) + "/" +
         std::to_string(c.rows_per_thread) + "/" + std::to_string(c.subgroup) + "/" + std::to_string(c.prefetch) + (c.quant_x == 1 ? "/q8x" : "");
}

// Best-of-runs read bandwidth in GB/s over a buffer of `bytes`.
double measure_bandwidth(Context& ctx, uint64_t bytes, int runs) {
  const DeviceInfo& dev = ctx.info();
  bytes = std::min<uint64_t>({bytes, dev.max_storage_buffer_range, dev.max_allocation_bytes,
                              uint64_t(UINT32_MAX) * 16});
  bytes = bytes / 16 * 16;
  Buffer src = ctx.create_buffer(bytes, MemoryKind::Device, "bandwidth probe");
  Buffer dst = ctx.create_buffer(1024 * 4, MemoryKind::Device, "bandwidth sink");
  const uint32_t wg = std::min<uint32_t>(256, dev.max_workgroup_invocations), unroll = 8;
  const Pipeline& p = ctx.pipeline("bandwidth", 2, 8, {wg, unroll});
  const uint64_t n_vec4 = bytes / 16;
  const uint64_t groups = (n_vec4 + uint64_t(wg) * unroll - 1) / (uint64_t(wg) * unroll);
  uint32_t gx = static_cast<uint32_t>(std::min<uint64_t>(groups, dev.max_workgroup_count[0]));
  const uint32_t gz = static_cast<uint32_t>((groups + gx - 1) / gx);
  struct {
    uint32_t n_vec4, sentinel;
  } push{static_cast<uint32_t>(n_vec4), 0x9E3779B9u};
  TimestampPool ts(ctx, 2 * runs);
  Recorder rec(ctx);
  rec.begin();
  rec.fill(src, 0, bytes, 0x01234567u);
  rec.reset_timestamps(ts, 0, 2 * runs);
  for (int i = 0; i < runs; ++i) {
    rec.barrier();
    rec.timestamp(ts, 2 * i);
    rec.dispatch(p, {BufferRange(src), BufferRange(dst)}, push, gx, 1, gz);
    rec.timestamp(ts, 2 * i + 1);
  }
  const double best = submit_until_steady(rec, [&] {
    const auto ns = ts.read_ns(0, 2 * runs);
    double b = 1e300;
    for (int i = 0; i < runs; ++i) b = std::min(b, ns[2 * i + 1] - ns[2 * i]);
    return b;
  });
  return bytes / std::max(best, 1e-3);  // bytes per ns = GB/s
}

// cfg with the engine's default choice of activations (vk::quant_x_for) when it leaves them open.
MatvecConfig engine_activations(const DeviceInfo& dev, MatvecConfig cfg, GgmlType t, uint32_t nrows, uint32_t items,
                                bool glu) {
  if (cfg.quant_x < 0) cfg.quant_x = quant_x_for(q8x_by_default(dev), t, nrows, items, glu);
  return cfg;
}

// Times `iters` matvecs, rotating through slots of a weight pool.
Row bench_matvec(Context& ctx, Uploader& upl, const std::string& kernel, GgmlType t, uint32_t ncols, uint32_t nrows, const Options& o,
                 MatvecConfig cfg, double bw, std::mt19937& rng, bool print = true) {
  const DeviceInfo& dev = ctx.info();
  cfg = engine_activations(dev, cfg, t, nrows, 1, false);
  Row row;
  row.kernel = kernel;
  row.shape = std::to_string(ncols) + "x" + std::to_string(nrows);
  const uint64_t bytes = row_bytes(t, ncols) * nrows;
  if (bytes > dev.max_storage_buffer_range) {
    std::printf("%-10s %-14s skipped: %.0f MiB exceeds the device's storage range\n", row.kernel.c_str(),
                row.shape.c_str(), bytes / 1048576.0);
    return row;
  }
  const uint64_t align = std::max<uint64_t>(256, dev.min_storage_offset_alignment);
  const uint64_t stride = round_up(bytes, align);
  const uint64_t free_bytes = ctx.memory_budget().free();
  uint64_t slots = std::max<uint64_t>(2, (o.pool_mib << 20) / stride);
  slots = std::min<uint64_t>(slots, std::max<uint64_t>(1, dev.max_allocation_bytes / stride));
  if (free_bytes) slots = std::min<uint64_t>(slots, std::max<uint64_t>(1, free_bytes / 2 / stride));
  slots = std::min<uint64_t>(slots, static_cast<uint64_t>(o.iters));
  slots = std::max<uint64_t>(slots, 1);
  Buffer pool = ctx.create_buffer(stride * slots, MemoryKind::Device, "bench weights");
  fill_weights(ctx, upl, pool, stride * slots, t, ncols, rng);
  std::vector<float> x(ncols);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& v : x) v = nd(rng);
  Buffer xb = ctx.create_buffer(x.size() * 4, MemoryKind::Device, "bench x");
  Buffer yb = ctx.create_buffer(uint64_t(nrows) * 4, MemoryKind::Device, "bench y");
  upl.upload(xb, 0, x.data(), x.size() * 4).wait();
  // TYPE_topk: softmax top-8 (renormalized) of the nrows logits in the same dispatch.
  const bool topk = !topk_kernel_type(kernel).empty();
  Buffer ids, wts, counter;
  MatvecTopkTail tail;
  if (topk) {
    ids = ctx.create_buffer(8 * 4, MemoryKind::Device, "bench top-k ids");
    wts = ctx.create_buffer(8 * 4, MemoryKind::Device, "bench top-k weights");
    counter = ctx.create_buffer(4, MemoryKind::Device, "bench top-k counter");
    const uint32_t zero = 0;
    upl.upload(counter, 0, &zero, 4).wait();
    tail.ids = BufferRange(ids);
    tail.weights = BufferRange(wts);
    tail.counter = BufferRange(counter);
    tail.k = std::min<uint32_t>(8, nrows);
    tail.router.normalize = true;
  }

  const int warm = 2, n = o.iters + warm;
  TimestampPool ts(ctx, 2 * n);
  Recorder rec(ctx);
  rec.begin();
  rec.reset_timestamps(ts, 0, 2 * n);
  MatvecArgs a;
  a.type = t;
  a.ncols = ncols;
  a.nrows = nrows;
  a.x = BufferRange(xb);
  a.y = BufferRange(yb);
  for (int i = 0; i < n; ++i) {
    a.w = BufferRange(pool, (i % slots) * stride, stride);
    rec.barrier();
    rec.timestamp(ts, 2 * i);
    if (!topk)
      record_matvec(rec, a, cfg);
    else if (!record_matvec_topk(rec, a, tail, cfg))
      throw Error("bench-shaders: no fused top-k for " + kernel + " " + row.shape + " in this configuration");
    rec.timestamp(ts, 2 * i + 1);
  }
  const double t_ns = std::max(submit_until_steady(rec, [&] { return median_time(ts, warm, n); }), 1e-3);
  row.config = config_str(matvec_config(dev, t, ncols, nrows, 1, cfg));
  row.mib = bytes / 1048576.0;
  row.us = t_ns / 1000.0;
  row.gbps = bytes / t_ns;
  row.pct = 100.0 * row.gbps / bw;
  if (print) print_row(row);
  return row;
}

// Indexed-expert matvec of kernel TYPE_ids: random distinct experts of a
// stack of o.experts (x shared), fresh ids for every iteration; ncols x nrows
// experts, `used` per token (by default Qwen3-30B-A3B's gate 2048x768 top-8,
// or gpt-oss's 2880x2880 top-4 for mxfp4_ids).
Row bench_ids(Context& ctx, Uploader& upl, const std::string& kernel, GgmlType t, uint32_t ncols, uint32_t nrows,
              uint32_t used, const Options& o, MatvecConfig cfg, double bw, std::mt19937& rng) {
  const DeviceInfo& dev = ctx.info();
  cfg = engine_activations(dev, cfg, t, nrows, used, o.glu);
  const uint64_t ebytes = row_bytes(t, ncols) * nrows, stack = ebytes * o.experts;
  Row row;
  row.kernel = kernel;
  row.shape = std::to_string(ncols) + "x" + std::to_string(nrows) + ":" + std::to_string(used) + "/" +
              std::to_string(o.experts) + (o.glu ? "+glu" : "");
  if (stack > dev.max_storage_buffer_range) {
    std::printf("%-10s %-14s skipped: stack exceeds the device's storage range\n", row.kernel.c_str(),
                row.shape.c_str());
    return row;
  }
  Buffer w = ctx.create_buffer(stack, MemoryKind::Device, "bench expert stack");
  fill_weights(ctx, upl, w, stack, t, ncols, rng);
  const int warm = 2, n = o.iters + warm;
  std::vector<int32_t> ids;
  std::vector<int32_t> perm(o.experts);
  for (uint32_t i = 0; i < o.experts; ++i) perm[i] = static_cast<int32_t>(i);
  for (int i = 0; i < n; ++i) {
    std::shuffle(perm.begin(), perm.end(), rng);
    ids.insert(ids.end(), perm.begin(), perm.begin() + used);
  }
  std::vector<float> x(ncols);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& v : x) v = nd(rng);
  Buffer ib = ctx.create_buffer(ids.size() * 4, MemoryKind::Device, "bench ids");
  Buffer xb = ctx.create_buffer(x.size() * 4, MemoryKind::Device, "bench x");
  Buffer ub;  // --glu: the up vector (x again)
  if (o.glu) ub = ctx.create_buffer(x.size() * 4, MemoryKind::Device, "bench u");
  Buffer yb = ctx.create_buffer(uint64_t(nrows) * used * 4, MemoryKind::Device, "bench y");
  upl.enqueue(ib, 0, ids.data(), ids.size() * 4);
  upl.enqueue(xb, 0, x.data(), x.size() * 4);
  if (o.glu) upl.enqueue(ub, 0, x.data(), x.size() * 4);
  upl.flush().wait();

  TimestampPool ts(ctx, 2 * n);
  Recorder rec(ctx);
  rec.begin();
  rec.reset_timestamps(ts, 0, 2 * n);
  MatvecIdsArgs a;
  a.type = t;
  a.ncols = ncols;
  a.nrows = nrows;
  a.w = BufferRange(w);
  a.x = BufferRange(xb);
  a.y = BufferRange(yb);
  a.ids = BufferRange(ib);
  a.n_ids = used;
  a.n_experts = o.experts;
  a.expert_stride = ebytes;
  a.x_stride = 0;
  a.y_stride = nrows;
  if (o.glu) a.glu_up = BufferRange(ub);
  for (int i = 0; i < n; ++i) {
    a.ids_offset = static_cast<uint32_t>(i * used);
    rec.barrier();
    rec.timestamp(ts, 2 * i);
    record_matvec_ids(rec, a, cfg);
    rec.timestamp(ts, 2 * i + 1);
  }
  const double t_ns = std::max(submit_until_steady(rec, [&] { return median_time(ts, warm, n); }), 1e-3);
  const uint64_t bytes = ebytes * used;
  row.config = config_str(matvec_config(dev, t, ncols, nrows, used, cfg));
  row.mib = bytes / 1048576.0;
  row.us = t_ns / 1000.0;
  row.gbps = bytes / t_ns;
  row.pct = 100.0 * row.gbps / bw;
  print_row(row);
  return row;
}

// --- GEMM (prompt processing): rows are kernel, shape (ncols x nrows : tokens),
// path, median time, TFLOP/s (2 * tokens * nrows * ncols / time) and weight GB/s.

void print_gemm_row(const std::string& kernel, const std::string& shape, GemmPath path, double t_ns, double flops,
                    uint64_t weight_bytes) {
  std::printf("%-10s %-22s %-8s %10.2f %10.4g %10.4g\n", kernel.c_str(), shape.c_str(), gemm_path_name(path),
              t_ns / 1000.0, flops / t_ns / 1000.0, weight_bytes / t_ns);
  std::fflush(stdout);
}

// Median GPU time in ns of o.iters calls of `record`, each between barriers.
double time_dispatches(Context& ctx, const Options& o, const std::function<void(Recorder&)>& record) {
  const int warm = 2, n = o.iters + warm;
  TimestampPool ts(ctx, 2 * n);
  Recorder rec(ctx);
  rec.begin();
  rec.reset_timestamps(ts, 0, 2 * n);
  for (int i = 0; i < n; ++i) {
    rec.barrier();
    rec.timestamp(ts, 2 * i);
    record(rec);
    rec.timestamp(ts, 2 * i + 1);
  }
  return std::max(submit_until_steady(rec, [&] { return median_time(ts, warm, n); }), 1e-3);
}

Buffer random_f32_buffer(Context& ctx, Uploader& upl, uint64_t n, const char* what, std::mt19937& rng) {
  std::vector<float> v(n);
  std::normal_distribution<float> nd(0.f, 1.f);
  for (auto& f : v) f = nd(rng);
  Buffer b = ctx.create_buffer(std::max<uint64_t>(n, 1) * 4, MemoryKind::Device, what);
  upl.upload(b, 0, v.data(), n * 4).wait();
  return b;
}

// Dense GEMM of one weight type: Y (tokens x nrows) = X (tokens x ncols) . W^T.
void bench_gemm(Context& ctx, Uploader& upl, const std::string& kernel, GgmlType t, uint32_t ncols, uint32_t nrows,
                uint32_t tokens, const Options& o, std::mt19937& rng) {
  const std::string shape = std::to_string(ncols) + "x" + std::to_string(nrows) + ":" + std::to_string(tokens);
  const GemmPath path = resolve_gemm_path(ctx, o.gemm_path, t);
  const uint64_t bytes = row_bytes(t, ncols) * nrows;
  if (!gemm_path_available(ctx, path, t) || bytes > ctx.info().max_storage_buffer_range) {
    std::printf("%-10s %-22s skipped: %s\n", kernel.c_str(), shape.c_str(),
                bytes > ctx.info().max_storage_buffer_range ? "weights exceed the device's storage range"
                                                            : "path not available");
    return;
  }
  Buffer w = ctx.create_buffer(bytes, MemoryKind::Device, "bench gemm weights");
  fill_weights(ctx, upl, w, bytes, t, ncols, rng);
  Buffer xb = random_f32_buffer(ctx, upl, uint64_t(tokens) * ncols, "bench gemm x", rng);
  Buffer yb = ctx.create_buffer(uint64_t(tokens) * nrows * 4, MemoryKind::Device, "bench gemm y");
  // Every product gets the activation scratch, as in the engine (the int8 and coopmat2 paths need it).
  Buffer scratch = ctx.create_buffer(gemm_scratch_bytes(ncols, tokens), MemoryKind::Device, "bench gemm scratch");
  Buffer split = ctx.create_buffer(gemm_split_k_bytes(nrows, tokens), MemoryKind::Device, "bench gemm split-K");
  GemmArgs a;
  a.type = t;
  a.ncols = ncols;
  a.nrows = nrows;
  a.n_tokens = tokens;
  a.w = BufferRange(w);
  a.x = BufferRange(xb);
  a.x_stride = ncols;
  a.y = BufferRange(yb);
  a.y_stride = nrows;
  a.scratch = BufferRange(scratch);
  a.split_k = BufferRange(split);
  const double t_ns = time_dispatches(ctx, o, [&](Recorder& rec) { record_gemm(rec, a, GemmConfig{path}); });
  print_gemm_row(kernel, shape, path, t_ns, 2.0 * tokens * nrows * ncols, bytes);
}

// Expert-grouped Q4_K GEMM: `tokens` tokens routed to 8 random distinct
// experts each among o.experts experts of ncols x nrows, grouped into a MoeTable
// on the host (as the GPU grouping would), x gathered by token.
void bench_gemm_ids(Context& ctx, Uploader& upl, uint32_t ncols, uint32_t nrows, uint32_t tokens, const Options& o,
                    std::mt19937& rng) {
  const GgmlType t = GgmlType::Q4_K;
  const uint32_t k = 8;
  const std::string shape = std::to_string(ncols) + "x" + std::to_string(nrows) + ":" + std::to_string(tokens) +
                            "k8/" + std::to_string(o.experts);
  const GemmPath path = resolve_gemm_path(ctx, o.gemm_path, t);
  const uint64_t ebytes = row_bytes(t, ncols) * nrows, stack = ebytes * o.experts;
  if (ncols % 256 != 0 || !gemm_path_available(ctx, path, t) || stack > ctx.info().max_storage_buffer_range) {
    std::printf("%-10s %-22s skipped: %s\n", "gemm_ids", shape.c_str(),
                ncols % 256 != 0 ? "ncols is not a multiple of 256" : "path not available or stack too large");
    return;
  }
  // Routing and grouping: each expert's pairs in tiles of kMoeTileRows slots.
  const MoeTableLayout l = MoeTableLayout::make(tokens, k, o.experts);
  std::vector<uint32_t> words(l.words, kMoeNoSlot);
  std::vector<std::vector<uint32_t>> by_expert(o.experts);
  std::vector<uint32_t> perm(o.experts);
  for (uint32_t e = 0; e < o.experts; ++e) perm[e] = e;
  for (uint32_t tok = 0; tok < tokens; ++tok) {
    std::shuffle(perm.begin(), perm.end(), rng);
    for (uint32_t j = 0; j < k; ++j) by_expert[perm[j]].push_back(tok * k + j);
  }
  uint32_t tiles = 0, used = 0;
  for (uint32_t e = 0; e < o.experts; ++e) {
    used += by_expert[e].empty() ? 0 : 1;
    for (size_t b = 0; b < by_expert[e].size(); b += kMoeTileRows, ++tiles) {
      words[l.tile_expert_off + tiles] = e;
      for (uint32_t s = 0; s < kMoeTileRows; ++s) {
        const size_t i = b + s;
        const uint32_t slot = tiles * kMoeTileRows + s;
        words[l.slot_token_off + slot] = i < by_expert[e].size() ? by_expert[e][i] / k : kMoeNoSlot;
        if (i < by_expert[e].size()) words[l.pair_slot_off + by_expert[e][i]] = slot;
      }
    }
  }
  words[l.count_off] = tiles;
  Buffer w = ctx.create_buffer(stack, MemoryKind::Device, "bench gemm expert stack");
  fill_weights(ctx, upl, w, stack, t, ncols, rng);
  Buffer tb = ctx.create_buffer(l.bytes(), MemoryKind::Device, "bench gemm table");
  upl.upload(tb, 0, words.data(), l.bytes()).wait();
  Buffer xb = random_f32_buffer(ctx, upl, uint64_t(tokens) * ncols, "bench gemm x", rng);
  Buffer yb = ctx.create_buffer(uint64_t(l.max_slots()) * nrows * 4, MemoryKind::Device, "bench gemm y");
  Buffer scratch = ctx.create_buffer(gemm_scratch_bytes(ncols, l.max_slots()), MemoryKind::Device, "bench gemm scratch");
  GemmIdsArgs a;
  a.type = t;
  a.ncols = ncols;
  a.nrows = nrows;
  a.w = BufferRange(w);
  a.x = BufferRange(xb);
  a.x_stride = ncols;
  a.y = BufferRange(yb);
  a.y_stride = nrows;
  a.table = BufferRange(tb);
  a.layout = l;
  a.expert_stride = ebytes;
  a.n_experts = o.experts;
  a.gather_x = true;
  a.scratch = BufferRange(scratch);
  const double t_ns = time_dispatches(ctx, o, [&](Recorder& rec) { record_gemm_ids(rec, a, GemmConfig{path}); });
  print_gemm_row("gemm_ids", shape, path, t_ns, 2.0 * tokens * k * nrows * ncols, ebytes * used);
}

std::vector<MatvecConfig> configs_for(const Options& o) {
  if (o.sweep) {
    // Lanes per row past the subgroup size too (rows reduced over several
    // subgroups): fewer units per lane, so fewer dependent loads.
    std::vector<MatvecConfig> v;
    for (uint32_t wg : {64u, 128u, 256u})
      for (uint32_t tpr : {8u, 16u, 32u, 64u, 128u, 256u})
        for (uint32_t rpt : {1u, 2u, 4u, 8u})
          for (int pf : {0, 1})
            if (tpr <= wg && (tpr > 32 || wg < 256 || rpt == 1)) v.push_back({wg, tpr, rpt, 1, pf});
    return v;
  }
  return {o.has_config ? o.config : MatvecConfig{}};
}

// --- One token's attention over an F16 cache of Qwen3-30B-A3B's heads (32
// query / 4 kv heads of 128) at `depth` keys before it, split and combined as
// the engine records it (scratch and tail counters). Caches rotate over copies
// (--pool-mib of them, larger than the L2 cache); GB/s = K and V bytes read / time.
void bench_attention(Context& ctx, Uploader& upl, const std::string& kernel, uint32_t depth, const Options& o,
                     std::mt19937& rng) {
  const uint32_t D = 128, n_head = 32, n_head_kv = 4, n_kv = depth + 1;
  const uint64_t cache_bytes = kv_cache_bytes(KvType::F16, n_kv, D, n_head_kv);
  const uint32_t copies = uint32_t(std::clamp<uint64_t>((o.pool_mib << 20) / (2 * cache_bytes), 1, 64));
  std::vector<uint16_t> halves(cache_bytes / 2 * copies);
  std::uniform_real_distribution<float> ud(-1.f, 1.f);
  for (auto& h : halves) h = fp32_to_fp16(ud(rng));
  Buffer k = ctx.create_buffer(cache_bytes * copies, MemoryKind::Device, "bench attention k");
  Buffer v = ctx.create_buffer(cache_bytes * copies, MemoryKind::Device, "bench attention v");
  upl.upload(k, 0, halves.data(), cache_bytes * copies).wait();
  upl.upload(v, 0, halves.data(), cache_bytes * copies).wait();
  Buffer q = random_f32_buffer(ctx, upl, uint64_t(n_head) * D, "bench attention q", rng);
  Buffer out = ctx.create_buffer(uint64_t(n_head) * D * 4, MemoryKind::Device, "bench attention o");
  Buffer scratch = ctx.create_buffer(attention_scratch_bytes(n_head, D, n_kv), MemoryKind::Device, "bench attention scratch");
  Buffer counters = ctx.create_buffer(4096, MemoryKind::Device, "bench attention counters");
  {
    Recorder r(ctx);
    r.begin();
    r.fill(counters, 0, counters.size(), 0);
    r.submit().wait();
  }
  AttentionArgs a;
  a.q = BufferRange(q);
  a.o = BufferRange(out);
  a.q_stride = a.o_stride = n_head * D;
  a.n_tokens = 1;
  a.pos0 = depth;
  a.head_dim = D;
  a.n_head = n_head;
  a.n_head_kv = n_head_kv;
  a.scale = 1.f / std::sqrt(float(D));
  a.scratch = BufferRange(scratch);
  a.counters = BufferRange(counters);
  uint32_t call = 0;
  const double t_ns = time_dispatches(ctx, o, [&](Recorder& rec) {
    const uint64_t off = cache_bytes * (call++ % copies);
    a.k_cache = BufferRange(k, off, cache_bytes);
    a.v_cache = BufferRange(v, off, cache_bytes);
    record_attention(rec, a);
  });
  std::printf("%-12s depth %-8u %10.2f us %10.4g GB/s (K+V %.2f MiB, %u cache copies)\n", kernel.c_str(), depth,
              t_ns / 1000.0, 2.0 * cache_bytes / t_ns, 2.0 * cache_bytes / 1048576.0, copies);
  std::fflush(stdout);
}

int run(const Options& o) {
  auto ctx = Context::create(o.device);
  const DeviceInfo& dev = ctx->info();
  if (!dev.timestamps) throw Error("bench-shaders: the device has no timestamp support");
  std::printf("vkmoe bench-shaders on %s (%s %s, Vulkan %s)\n", dev.name.c_str(), dev.driver_name.c_str(),
              dev.driver_info.c_str(), dev.api_version_string().c_str());
  std::mt19937 rng(std::random_device{}());
  const uint64_t free_bytes = ctx->memory_budget().free();
  uint64_t bw_bytes = o.bw_mib << 20;
  if (free_bytes) bw_bytes = std::min<uint64_t>(bw_bytes, free_bytes / 4);
  const double bw = measure_bandwidth(*ctx, bw_bytes, std::max(3, std::min(o.iters, 20)));
  std::printf("read bandwidth: %.1f GB/s (best of runs over %.0f MiB, GPU timestamps)\n", bw,
              std::min<double>(bw_bytes, dev.max_storage_buffer_range) / 1048576.0);
  Uploader upl(*ctx);
  const Row floor = bench_matvec(*ctx, upl, "f32", GgmlType::F32, 8, 1, o, {}, bw, rng, false);
  std::printf("dispatch floor: %.2f us (an f32 8x1 matvec between barriers)\n", floor.us);
  std::printf("shape = ncols x nrows (input length x output rows); MiB = weight bytes per matvec;\n"
              "time = median of %d GPU-timestamped runs rotating over weight copies larger than cache;\n"
              "config = workgroup/threads-per-row/rows-per-thread/subgroup/prefetch[/q8x: int8 x + integer dot products]\n",
              o.iters);
  std::printf("%-10s %-14s %-14s %10s %10s %10s %7s\n", "kernel", "shape", "config", "MiB", "time_us", "GB/s",
              "%bw");
  bool gemm_header = false;
  for (const auto& k : o.kernels) {
    if (k == "attn_decode") {
      for (uint32_t d : o.attn_depths) bench_attention(*ctx, upl, k, d, o, rng);
      continue;
    }
    GgmlType t = GgmlType::F32;
    if (k != "gemm_ids" && !kernel_weight_type(k, t))
      throw Error("bench-shaders: unknown kernel '" + k + "'\n" + kUsage);
    if (k.rfind("gemm_", 0) == 0) {
      if (!gemm_header) {
        std::printf("GEMM: shape = ncols x nrows : tokens (gemm_ids: per expert, tokens routed top-8 over experts);\n"
                    "time = median of %d GPU-timestamped runs; GB/s = weight bytes (experts used) / time\n"
                    "%-10s %-22s %-8s %10s %10s %10s\n",
                    o.iters, "kernel", "shape", "path", "time_us", "TFLOP/s", "GB/s");
        gemm_header = true;
      }
      for (const auto& [ncols, nrows, tokens] : o.gemm_shapes) {
        if (k == "gemm_ids") {
          bench_gemm_ids(*ctx, upl, ncols, nrows, tokens, o, rng);
        } else if (gemm_supported(t) && ncols % std::max(32, type_traits(t).block_size) == 0) {
          bench_gemm(*ctx, upl, k, t, ncols, nrows, tokens, o, rng);
        } else {
          std::printf("%-10s %ux%u:%u skipped: unsupported type or ncols\n", k.c_str(), ncols, nrows, tokens);
        }
      }
      continue;
    }
    if (!ids_kernel_type(k).empty()) {
      auto shapes = o.ids_shapes;
      if (shapes.empty()) shapes = {t == GgmlType::MXFP4 ? std::array<uint32_t, 3>{2880, 2880, 4} : std::array<uint32_t, 3>{2048, 768, 8}};
      for (const auto& [ncols, nrows, used] : shapes) {
        if (ncols % type_traits(t).block_size != 0 || used == 0 || used > o.experts) {
          std::printf("%-10s %ux%u:%u skipped: ncols or experts used do not fit\n", k.c_str(), ncols, nrows, used);
          continue;
        }
        for (const auto& cfg : configs_for(o)) bench_ids(*ctx, upl, k, t, ncols, nrows, used, o, cfg, bw, rng);
      }
      continue;
    }
    for (const auto& [ncols, nrows] : o.shapes) {
      if (ncols % type_traits(t).block_size != 0) {
        std::printf("%-10s %ux%u skipped: ncols is not a multiple of %d\n", k.c_str(), ncols, nrows,
                    type_traits(t).block_size);
        continue;
      }
      for (const auto& cfg : configs_for(o)) bench_matvec(*ctx, upl, k, t, ncols, nrows, o, cfg, bw, rng);
    }
  }
  return 0;
}

}  // namespace

int bench_shaders_main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    validate_kernels(o);
    return run(o);
  } catch (const Error& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "vkmoe: error: %s\n", e.what());
    return 1;
  }
}

}  // namespace vkmoe
