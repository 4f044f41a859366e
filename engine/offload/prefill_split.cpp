#include "engine/offload/prefill_split.h"

#include <algorithm>
#include <numeric>

namespace vkmoe {

double SplitCosts::cpu_seconds(const ExpertDemand& d) const {
  return double(d.bytes) * std::max(d.tokens, kCpuMinTokens) * cpu_s_per_token_byte;
}

void SplitCosts::observe_cpu(const std::vector<ExpertDemand>& done, double seconds) {
  double work = 0;
  for (const ExpertDemand& d : done) work += double(d.bytes) * std::max(d.tokens, kCpuMinTokens);
  if (work <= 0 || seconds <= 0) return;
  cpu_s_per_token_byte = 0.7 * cpu_s_per_token_byte + 0.3 * (seconds / work);
}

std::vector<bool> split_experts(const std::vector<ExpertDemand>& demands, const SplitCosts& costs, int max_uploads) {
  std::vector<size_t> order(demands.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return demands[a].tokens > demands[b].tokens; });
  std::vector<bool> upload(demands.size(), false);
  double up_time = 0, cpu_time = 0;
  int uploads = 0;
  for (size_t i : order) {
    const double u = costs.upload_seconds(demands[i]), c = costs.cpu_seconds(demands[i]);
    const bool to_gpu = uploads < max_uploads && std::max(up_time + u, cpu_time) <= std::max(up_time, cpu_time + c);
    if (to_gpu) {
      upload[i] = true;
      up_time += u;
      ++uploads;
    } else {
      cpu_time += c;
    }
  }
  return upload;
}

}  // namespace vkmoe
