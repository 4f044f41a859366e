// The offload prefill's choice between uploading an expert once and running
// its tokens on the CPU (engine/offload/prefill_split.h).
#include <gtest/gtest.h>

#include <cmath>

#include "engine/offload/prefill_split.h"

using namespace vkmoe;

namespace {

ExpertDemand demand(int expert, int tokens, uint64_t bytes = 3u << 20) { return {expert, tokens, bytes}; }

}  // namespace

// With a fast transfer queue and a slow CPU, busy experts are uploaded and the
// CPU takes the few-token ones until both sides take about as long.
TEST(PrefillSplit, BusyExpertsGoToTheGpuAndTheCpuTakesTheTail) {
  SplitCosts c;
  c.upload_bytes_per_s = 25e9;
  c.cpu_s_per_token_byte = 1.0 / 40e9;  // one token over 3 MiB of weights: ~79 us
  std::vector<ExpertDemand> d;
  for (int e = 0; e < 64; ++e) d.push_back(demand(e, e < 32 ? 60 : 1));
  const auto up = split_experts(d, c, 128);
  for (int e = 0; e < 32; ++e) EXPECT_TRUE(up[e]) << "expert " << e;
  int on_cpu = 0;
  double cpu = 0, upload = 0;
  for (int e = 0; e < 64; ++e) (up[e] ? upload += c.upload_seconds(d[e]) : (cpu += c.cpu_seconds(d[e]), ++on_cpu));
  EXPECT_GT(on_cpu, 0);
  EXPECT_LT(on_cpu, 32);
  // Balanced to within one expert's cost on either side.
  const double one = c.cpu_seconds(d[63]) + c.upload_seconds(d[63]);
  EXPECT_LE(std::abs(cpu - upload), one) << "cpu " << cpu << " s, upload " << upload << " s";
}

TEST(PrefillSplit, RespectsTheStagingCapacity) {
  SplitCosts c;
  c.upload_bytes_per_s = 1e12;  // uploads look free
  std::vector<ExpertDemand> d;
  for (int e = 0; e < 20; ++e) d.push_back(demand(e, 10 + e));
  const auto up = split_experts(d, c, 5);
  int n = 0;
  for (bool u : up) n += u;
  EXPECT_EQ(n, 5);
  for (int e = 15; e < 20; ++e) EXPECT_TRUE(up[e]) << "the busiest experts get the slots";
  EXPECT_EQ(split_experts(d, c, 0), std::vector<bool>(20, false));
}

TEST(PrefillSplit, SlowUploadsKeepEverythingOnTheCpu) {
  SplitCosts c;
  c.upload_bytes_per_s = 1e6;
  c.cpu_s_per_token_byte = 1e-12;
  std::vector<ExpertDemand> d = {demand(0, 100), demand(1, 3), demand(2, 40)};
  EXPECT_EQ(split_experts(d, c, 8), std::vector<bool>(3, false));
}

TEST(PrefillSplit, ObservedCpuTimeMovesTheEstimate) {
  SplitCosts c;
  c.cpu_s_per_token_byte = 1e-10;
  const std::vector<ExpertDemand> done = {demand(0, 8, 1000), demand(1, 2, 1000)};
  // work = 1000*8 + 1000*4 (two tokens count as the 4-token floor) = 12000
  c.observe_cpu(done, 12000 * 1e-9);
  EXPECT_NEAR(c.cpu_s_per_token_byte, 0.7e-10 + 0.3e-9, 1e-15);
  c.observe_cpu(done, 0);  // a pass measured as nothing changes nothing
  EXPECT_NEAR(c.cpu_s_per_token_byte, 0.7e-10 + 0.3e-9, 1e-15);
}
