#include "planner/planner.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>

namespace vkmoe {

namespace {

std::string percent(uint64_t part, uint64_t whole) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f%%", whole ? 100.0 * double(part) / double(whole) : 0.0);
  return buf;
}

uint64_t kv_row_bytes(GgmlType t, int kv_dim) {
  switch (t) {
    case GgmlType::F32: return 4ull * uint64_t(kv_dim);
    case GgmlType::F16: return 2ull * uint64_t(kv_dim);
    case GgmlType::Q8_0:
      if (kv_dim % QK8_0 != 0)
        throw Error("a Q8_0 KV cache needs n_head_kv * head_dim to be a multiple of 32, got " +
                    std::to_string(kv_dim));
      return uint64_t(kv_dim / QK8_0) * sizeof(BlockQ8_0);
    default:
      throw Error(std::string("unsupported KV cache type ") + type_name(t) +
                  " (use f32, f16 or q8_0)");
  }
}

const char* kv_type_label(GgmlType t) {
  switch (t) {
    case GgmlType::F32: return "f32";
    case GgmlType::F16: return "f16";
    case GgmlType::Q8_0: return "q8_0";
    default: return "?";
  }
}

// "blk.12.attn_q.weight" -> "blk.*.attn_q.weight"
std::string fold_layer_index(const std::string& name) {
  if (name.rfind("blk.", 0) != 0) return name;
  size_t i = 4;
  while (i < name.size() && std::isdigit(static_cast<unsigned char>(name[i]))) ++i;
  if (i == 4 || i >= name.size() || name[i] != '.') return name;
  return "blk.*" + name.substr(i);
}

}  // namespace

const char* plan_mode_name(PlanMode m) {
  switch (m) {
    case PlanMode::Auto: return "auto";
    case PlanMode::Resident: return "resident";
    case PlanMode::ExpertCache: return "expert-cache";
    case PlanMode::CpuMoe: return "cpu-moe";
  }
  return "?";
}

PlanMode parse_plan_mode(std::string_view s) {
  if (s == "auto") return PlanMode::Auto;
  if (s == "resident") return PlanMode::Resident;
  if (s == "expert-cache" || s == "cache") return PlanMode::ExpertCache;
  if (s == "cpu-moe" || s == "cpu") return PlanMode::CpuMoe;
  throw Error("unknown mode '" + std::string(s) +
              "' (expected auto, resident, expert-cache or cpu-moe)");
}

const char* where_name(Placement::Where w) {
  switch (w) {
    case Placement::Where::Gpu: return "gpu";
    case Placement::Where::Cpu: return "cpu";
    case Placement::Where::GpuCache: return "gpu-cache";
  }
  return "?";
}

uint64_t ExpertSpec::expert_bytes(int layer) const {
  if (n_expert <= 0) return 0;
  uint64_t sum = 0;
  for (const auto& t : tensors)
    if (t.layer == layer) sum += t.bytes;
  return sum / uint64_t(n_expert);
}

uint64_t KvSpec::bytes_per_token() const {
  if (n_layer < 0 || kv_dim < 0) throw Error("invalid KV cache shape");
  const int vd = v_dim < 0 ? kv_dim : v_dim;
  return uint64_t(n_layer) * (kv_row_bytes(type_k, kv_dim) + (vd ? kv_row_bytes(type_v, vd) : 0));
}

uint64_t default_scratch_bytes(const ScratchSpec& s) {
  // Per token: residual, normed input, attention output, Q/K/V and two
  // spares (8 x n_embd), three FFN intermediates, attention scores of every
  // head over the context, and logits; all f32.
  const uint64_t floats_per_token = 8ull * uint64_t(s.n_embd) + 3ull * uint64_t(s.n_ff) +
                                    uint64_t(s.n_head) * uint64_t(s.n_ctx) + uint64_t(s.n_vocab);
  return uint64_t(std::max(s.n_batch, 1)) * floats_per_token * 4ull + kScratchSafetyMargin;
}

Plan make_plan(const PlanInput& in) {
  const ExpertSpec& ex = in.experts;
  if (in.vram_budget == 0) throw Error("the VRAM budget is 0 bytes");
  if (!(in.capacity_ratio > 0) || !std::isfinite(in.capacity_ratio))
    throw Error("capacity ratio must be a positive number");
  if (in.kv.n_ctx <= 0) throw Error("context length must be positive");
  if (ex.n_expert < 0 || ex.n_layer < 0) throw Error("invalid expert counts");
  if (ex.n_expert > 0) {
    if (ex.n_expert_used < 1 || ex.n_expert_used > ex.n_expert)
      throw Error("n_expert_used must be between 1 and n_expert (" + std::to_string(ex.n_expert) +
                  "), got " + std::to_string(ex.n_expert_used));
    if (in.pinned_per_layer < 0 || in.pinned_per_layer > ex.n_expert - ex.n_expert_used)
      throw Error("cannot pin " + std::to_string(in.pinned_per_layer) +
                  " experts per layer: at most n_expert - n_expert_used = " +
                  std::to_string(ex.n_expert - ex.n_expert_used));
  } else if (!ex.tensors.empty()) {
    throw Error("expert tensors given for a model without routed experts");
  }
  for (const auto& t : ex.tensors) {
    if (t.layer < 0 || t.layer >= ex.n_layer)
      throw Error("expert tensor " + t.name + " has layer " + std::to_string(t.layer) +
                  " outside 0.." + std::to_string(ex.n_layer - 1));
    if (t.bytes % uint64_t(ex.n_expert) != 0)
      throw Error("expert tensor " + t.name + " (" + std::to_string(t.bytes) +
                  " bytes) does not split into " + std::to_string(ex.n_expert) + " experts");
  }

  Plan p;
  p.budget_bytes = in.vram_budget;
  p.scratch_bytes = in.scratch_bytes;
  p.kv_bytes = in.kv.bytes();
  p.n_ctx = in.kv.n_ctx;
  p.type_k = in.kv.type_k;
  p.type_v = in.kv.type_v;
  p.v_cache = in.kv.v_dim != 0;
  p.n_expert_used = ex.n_expert_used;
  for (const auto& t : in.trunk) {
    (t.cpu_ok ? p.cpu_trunk_bytes : p.trunk_bytes) += t.bytes;
    p.tensors.push_back({t.name, t.bytes, t.cpu_ok ? Placement::Where::Cpu : Placement::Where::Gpu});
  }

  const uint64_t required = p.trunk_bytes + p.kv_bytes + p.scratch_bytes;
  if (required > in.vram_budget) {
    std::string advice = "use a smaller quant or a larger --vram-budget";
    const uint64_t fixed = p.trunk_bytes + p.scratch_bytes;
    const uint64_t per_token = in.kv.bytes_per_token();
    if (fixed < in.vram_budget && per_token > 0) {
      uint64_t max_ctx = (in.vram_budget - fixed) / per_token;
      max_ctx -= max_ctx % 256;
      if (max_ctx >= 256 && max_ctx < uint64_t(in.kv.n_ctx))
        advice = "use --ctx " + std::to_string(max_ctx) + " or a smaller quant";
    }
    throw Error("needs " + format_bytes(required) + " but the budget is " + format_bytes(in.vram_budget) +
                ": trunk " + format_bytes(p.trunk_bytes) + " + KV cache " + format_bytes(p.kv_bytes) + " (ctx " +
                std::to_string(in.kv.n_ctx) + ") + scratch " + format_bytes(p.scratch_bytes) + "; " +
                advice);
  }
  const uint64_t left = in.vram_budget - required;
  p.layer_slots.assign(size_t(std::max(ex.n_layer, 0)), 0);

  if (ex.n_expert == 0) {
    if (in.forced == PlanMode::ExpertCache || in.forced == PlanMode::CpuMoe)
      throw Error(std::string("--moe-mode ") + plan_mode_name(in.forced) +
                  " needs a MoE model; this one has no routed experts");
    p.mode = PlanMode::Resident;
    p.reason = "dense model (no routed experts): trunk, KV cache and scratch use " +
               format_bytes(required) + " of " + format_bytes(in.vram_budget);
    return p;
  }

  int n_moe_layers = 0;
  for (int l = 0; l < ex.n_layer; ++l) {
    const uint64_t eb = ex.expert_bytes(l);
    if (eb == 0) continue;
    ++n_moe_layers;
    p.slot_bytes = std::max(p.slot_bytes, eb);
  }
  if (n_moe_layers == 0) throw Error("the model has routed experts but no expert tensors");
  for (const auto& t : ex.tensors) p.all_experts_bytes += t.bytes;

  const uint64_t layer_slot_bytes = uint64_t(n_moe_layers) * p.slot_bytes;
  const bool fits_all = p.all_experts_bytes <= left;
  const int min_cache_slots = in.pinned_per_layer + ex.n_expert_used;
  // Offload modes keep 2 x staging slots for prompt processing: as many as
  // asked while the cache keeps its minimum, at least n_expert_used if any.
  uint64_t left_for_cache = left;
  if (!fits_all || in.forced == PlanMode::ExpertCache || in.forced == PlanMode::CpuMoe) {
    const uint64_t keep = in.forced == PlanMode::CpuMoe ? uint64_t(in.pinned_per_layer) * layer_slot_bytes
                                                         : uint64_t(min_cache_slots) * layer_slot_bytes;
    // A quarter of what the cache could use beyond its minimum at most.
    const uint64_t spare = left > keep ? (left - keep) / 4 : 0;
    int s = std::min<int>(in.prefill_staging_experts, int(std::min<uint64_t>(spare / (2 * p.slot_bytes), 1u << 20)));
    if (s < ex.n_expert_used) s = 0;
    if (in.forced != PlanMode::Resident && s > 0) {
      p.staging_slots = s;
      p.staging_vram_bytes = 2ull * uint64_t(s) * p.slot_bytes;
      left_for_cache = left - p.staging_vram_bytes;
    }
  }
  const int max_slots = int(std::min<uint64_t>(uint64_t(ex.n_expert), left_for_cache / layer_slot_bytes));
  const double thrash_limit = in.capacity_ratio * ex.n_expert_used;
  const std::string forced = in.forced == PlanMode::Auto ? "" : "forced by --moe-mode; ";
  const std::string need = "experts need " + format_bytes(p.all_experts_bytes) + " but " + format_bytes(left) +
                           " is left after trunk, KV cache and scratch";
  char ratio_text[64];
  std::snprintf(ratio_text, sizeof ratio_text, "%.1f x %d used experts", in.capacity_ratio,
                ex.n_expert_used);

  int slots = 0;
  switch (in.forced) {
    case PlanMode::Resident:
      if (!fits_all)
        throw Error("--moe-mode resident needs " + format_bytes(p.all_experts_bytes) +
                    " for the routed experts but only " + format_bytes(left) + " of the " +
                    format_bytes(in.vram_budget) + " budget is left after trunk, KV cache and scratch");
      p.mode = PlanMode::Resident;
      break;
    case PlanMode::ExpertCache:
      if (max_slots < min_cache_slots)
        throw Error("--moe-mode expert-cache needs at least " + std::to_string(min_cache_slots) +
                    " slots per layer (" + format_bytes(uint64_t(min_cache_slots) * layer_slot_bytes) +
                    ") but only " + format_bytes(left) + " of the " + format_bytes(in.vram_budget) +
                    " budget is left after trunk, KV cache and scratch");
      p.mode = PlanMode::ExpertCache;
      break;
    case PlanMode::CpuMoe:
      p.mode = PlanMode::CpuMoe;
      break;
    case PlanMode::Auto:
      if (fits_all)
        p.mode = PlanMode::Resident;
      else if (max_slots >= min_cache_slots && double(max_slots) >= thrash_limit)
        p.mode = PlanMode::ExpertCache;
      else
        p.mode = PlanMode::CpuMoe;
      break;
  }

  if (p.mode == PlanMode::Resident) {
    slots = ex.n_expert;
    p.expert_cache_bytes = p.all_experts_bytes;
    p.reason = forced + "all " + std::to_string(ex.n_expert * n_moe_layers) + " experts (" +
               format_bytes(p.all_experts_bytes) + ") fit in the " + format_bytes(left) +
               " left after trunk, KV cache and scratch";
  } else if (p.mode == PlanMode::ExpertCache) {
    slots = max_slots;
    p.reason = forced + need + ": " + std::to_string(slots) + " slots per layer " +
               (double(slots) >= thrash_limit ? ">= " : "< ") + ratio_text;
  } else {
    if (in.pinned_per_layer > max_slots)
      throw Error("pinning " + std::to_string(in.pinned_per_layer) + " experts per layer needs " +
                  format_bytes(uint64_t(in.pinned_per_layer) * layer_slot_bytes) + " but only " +
                  format_bytes(left) + " is left after trunk, KV cache and scratch");
    slots = in.pinned_per_layer;
    p.reason = forced + need + ": " + std::to_string(max_slots) + " slots per layer " +
               (double(max_slots) >= thrash_limit ? ">= " : "< ") + ratio_text +
               (double(max_slots) >= thrash_limit ? "" : ", a cache would thrash") +
               "; routed experts run on the CPU";
    if (slots > 0) p.reason += " except " + std::to_string(slots) + " pinned per layer";
  }
  if (p.mode != PlanMode::Resident) {
    p.pinned_per_layer = in.pinned_per_layer;
    p.expert_cache_bytes = uint64_t(slots) * layer_slot_bytes;
    if (slots > 0) p.staging_bytes = 2ull * uint64_t(ex.n_expert_used) * p.slot_bytes;
  }
  p.expert_slots_per_layer = slots;
  p.expert_slots_total = slots * n_moe_layers;
  for (int l = 0; l < ex.n_layer; ++l)
    if (ex.expert_bytes(l) > 0) p.layer_slots[size_t(l)] = slots;

  const Placement::Where expert_where = p.mode == PlanMode::Resident      ? Placement::Where::Gpu
                                        : p.mode == PlanMode::ExpertCache ? Placement::Where::GpuCache
                                                                          : Placement::Where::Cpu;
  for (const auto& t : ex.tensors) p.tensors.push_back({t.name, t.bytes, expert_where});
  return p;
}

std::string format_bytes(uint64_t bytes) {
  char buf[64];
  if (bytes >= (1ull << 30))
    std::snprintf(buf, sizeof buf, "%.2f GiB", double(bytes) / double(1ull << 30));
  else if (bytes >= (1ull << 20))
    std::snprintf(buf, sizeof buf, "%.1f MiB", double(bytes) / double(1ull << 20));
  else if (bytes >= (1ull << 10))
    std::snprintf(buf, sizeof buf, "%.1f KiB", double(bytes) / double(1ull << 10));
  else
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
  return buf;
}

std::string format_plan(const Plan& p) {
  struct Group {
    std::string name;
    Placement::Where where;
    int count = 0;
    uint64_t bytes = 0;
  };
  std::vector<Group> groups;
  std::map<std::pair<std::string, int>, size_t> index;
  for (const auto& t : p.tensors) {
    auto key = std::make_pair(fold_layer_index(t.name), int(t.where));
    auto it = index.find(key);
    if (it == index.end()) {
      it = index.emplace(key, groups.size()).first;
      groups.push_back({key.first, t.where});
    }
    groups[it->second].count++;
    groups[it->second].bytes += t.bytes;
  }

  std::string out;
  char line[256];
  auto row = [&](const std::string& name, const std::string& count, const char* where,
                 uint64_t bytes, bool in_vram) {
    std::snprintf(line, sizeof line, "  %-36s %6s  %-9s %12s  %7s\n", name.c_str(), count.c_str(),
                  where, format_bytes(bytes).c_str(),
                  in_vram ? percent(bytes, p.budget_bytes).c_str() : "host");
    out += line;
  };
  out += std::string("mode: ") + plan_mode_name(p.mode) + "\n";
  out += "reason: " + p.reason + "\n";
  out += "VRAM budget: " + format_bytes(p.budget_bytes) + "\n\n";
  std::snprintf(line, sizeof line, "  %-36s %6s  %-9s %12s  %7s\n", "group", "count", "where",
                "size", "budget");
  out += line;
  for (const auto& g : groups)
    row(g.name, std::to_string(g.count), where_name(g.where), g.bytes,
        g.where == Placement::Where::Gpu);
  row(std::string("KV cache (") + kv_type_label(p.type_k) +
          (p.v_cache ? std::string(" K, ") + kv_type_label(p.type_v) + " V" : std::string(" latent")) + ", ctx " +
          std::to_string(p.n_ctx) + ")",
      "", "gpu", p.kv_bytes, true);
  row("scratch (activations + margin)", "", "gpu", p.scratch_bytes, true);
  if (p.mode != PlanMode::Resident && p.expert_slots_total > 0) {
    row("expert slot cache (" + std::to_string(p.expert_slots_per_layer) + "/layer x " +
            format_bytes(p.slot_bytes) + ")",
        std::to_string(p.expert_slots_total), "gpu", p.expert_cache_bytes, true);
    row("upload staging", "", "host", p.staging_bytes, false);
  }
  if (p.staging_vram_bytes > 0) {
    row("prefill expert staging (2 x " + std::to_string(p.staging_slots) + ")", std::to_string(2 * p.staging_slots),
        "gpu", p.staging_vram_bytes, true);
  }
  out += "\n";
  row("total VRAM", "", "gpu", p.vram_bytes(), true);
  row("free", "", "gpu", p.budget_bytes - std::min(p.budget_bytes, p.vram_bytes()), true);
  if (p.cpu_trunk_bytes > 0) row("trunk kept in host memory", "", "cpu", p.cpu_trunk_bytes, false);
  if (p.mode == PlanMode::ExpertCache || p.mode == PlanMode::CpuMoe)
    row("routed experts in host memory", "", "cpu", p.all_experts_bytes, false);
  if (p.pinned_per_layer > 0)
    out += "  pinned experts per layer: " + std::to_string(p.pinned_per_layer) + "\n";
  return out;
}

uint64_t parse_size(std::string_view text) {
  const std::string quoted = "invalid size '" + std::string(text) + "'";
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (!s.empty() && s.front() == '-') throw Error(quoted + ": sizes cannot be negative");

  size_t i = 0;
  unsigned __int128 whole = 0;
  size_t whole_digits = 0;
  for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i, ++whole_digits) {
    whole = whole * 10 + unsigned(s[i] - '0');
    if (whole > ~uint64_t(0)) throw Error(quoted + ": too large");
  }
  unsigned __int128 frac = 0, frac_scale = 1;
  size_t frac_digits = 0;
  if (i < s.size() && s[i] == '.') {
    ++i;
    for (; i < s.size() && std::isdigit(static_cast<unsigned char>(s[i])); ++i, ++frac_digits) {
      if (frac_digits < 18) {  // further digits are below any unit's resolution
        frac = frac * 10 + unsigned(s[i] - '0');
        frac_scale *= 10;
      }
    }
  }
  if (whole_digits + frac_digits == 0)
    throw Error(quoted + ": expected a number with an optional unit such as 12GiB, 512MiB or 1.5GB");
  while (i < s.size() && s[i] == ' ') ++i;
  std::string unit;
  for (; i < s.size(); ++i) unit += char(std::tolower(static_cast<unsigned char>(s[i])));

  static const std::pair<const char*, uint64_t> units[] = {
      {"", 1},          {"b", 1},
      {"k", 1ull << 10}, {"kib", 1ull << 10}, {"kb", 1000ull},
      {"m", 1ull << 20}, {"mib", 1ull << 20}, {"mb", 1000000ull},
      {"g", 1ull << 30}, {"gib", 1ull << 30}, {"gb", 1000000000ull},
      {"t", 1ull << 40}, {"tib", 1ull << 40}, {"tb", 1000000000000ull},
  };
  uint64_t mult = 0;
  for (const auto& [name, m] : units)
    if (unit == name) mult = m;
  if (mult == 0)
    throw Error(quoted + ": unknown unit '" + unit + "' (use B, KiB, MiB, GiB, TiB, K, M, G, T, KB, MB, GB or TB)");
  if (mult == 1 && frac != 0) throw Error(quoted + ": a byte count must be a whole number");

  const unsigned __int128 total = whole * mult + frac * mult / frac_scale;
  if (total > ~uint64_t(0)) throw Error(quoted + ": too large");
  return uint64_t(total);
}

}  // namespace vkmoe
