// Vulkan runtime: device listing, buffers, recording, timeline submission,
// async uploads, descriptor fallback and timestamps (runs on lavapipe).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "cpu/quant.h"
#include "engine/vulkan/vk_matvec.h"
#include "engine/vulkan/vk_runtime.h"
#include "tests/seed.h"

using namespace vkmoe;
using namespace vkmoe::vk;

namespace {

uint32_t fresh_seed() { return uint32_t(test::test_seed()); }

std::vector<float> random_floats(std::mt19937& rng, size_t n) {
  std::normal_distribution<float> d(0.f, 1.f);
  std::vector<float> v(n);
  for (auto& f : v) f = d(rng);
  return v;
}

// CPU y = W x for row-major f32 W (nrows x ncols).
std::vector<double> cpu_matvec(const std::vector<float>& w, const std::vector<float>& x, size_t nrows) {
  const size_t ncols = x.size();
  std::vector<double> y(nrows, 0.0);
  for (size_t r = 0; r < nrows; ++r)
    for (size_t c = 0; c < ncols; ++c) y[r] += double(w[r * ncols + c]) * x[c];
  return y;
}

// Records an F32 matvec y[y_off..] (+)= W x.
void f32_matvec(Recorder& rec, const Buffer& w, const Buffer& x, const Buffer& y, uint32_t ncols,
                uint32_t nrows, uint32_t y_off, bool accumulate) {
  MatvecArgs a;
  a.type = GgmlType::F32;
  a.ncols = ncols;
  a.nrows = nrows;
  a.w = BufferRange(w);
  a.x = BufferRange(x);
  a.y = BufferRange(y);
  a.y_offset = y_off;
  a.accumulate = accumulate;
  record_matvec(rec, a);
}

}  // namespace

TEST(VkRuntime, ListDevices) {
  const auto devs = list_devices();
  ASSERT_FALSE(devs.empty());
  for (size_t i = 0; i < devs.size(); ++i) {
    const DeviceInfo& d = devs[i];
    SCOPED_TRACE(d.summary());
    EXPECT_EQ(d.index, static_cast<int>(i));
    EXPECT_FALSE(d.name.empty());
    EXPECT_GE(d.api_version, VK_API_VERSION_1_0);
    EXPECT_GT(d.compute_queue_count, 0u);
    EXPECT_GT(d.subgroup_size, 0u);
    EXPECT_GT(d.max_workgroup_invocations, 0u);
    EXPECT_GT(d.max_shared_memory_bytes, 0u);
    EXPECT_GT(d.max_storage_buffer_range, 0u);
    EXPECT_GT(d.device_local_bytes, 0u);
    EXPECT_GE(d.budget_bytes, d.has_memory_budget ? 0u : d.device_local_bytes);
    EXPECT_EQ(d.dedicated_transfer, d.transfer_family >= 0);
    EXPECT_NE(d.summary().find(d.name), std::string::npos);
  }
  auto ctx = Context::create();
  EXPECT_FALSE(ctx->info().name.empty());
  EXPECT_GT(ctx->memory_budget().budget, 0u);
  EXPECT_THROW(Context::create(static_cast<int>(devs.size())), Error);
}

// A process may list devices and create (and drop) contexts many times, each
// doing work: NVIDIA's 580 driver refused the 30th instance of a process when
// each context made its own (docs/PERF.md run 21); contexts share one now.
TEST(VkRuntime, ManyContextsInOneProcess) {
  for (int i = 0; i < 40; ++i) {
    SCOPED_TRACE("context " + std::to_string(i));
    ASSERT_FALSE(list_devices().empty());
    auto ctx = Context::create();
    Buffer b = ctx->create_buffer(4096, MemoryKind::Upload, "test");
    Recorder r(*ctx);
    r.begin();
    r.fill(b, 0, 4096, uint32_t(i));
    r.submit().wait();
    ASSERT_EQ(b.as<uint32_t>()[1023], uint32_t(i));
  }
}

TEST(VkRuntime, BufferRoundTripCopyFill) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  auto ctx = Context::create();
  const uint64_t before = ctx->allocated_bytes();
  const size_t n = 100003;  // odd size: not a multiple of 16
  std::vector<uint8_t> src(n);
  for (auto& b : src) b = static_cast<uint8_t>(rng());
  {
    Buffer dev = ctx->create_buffer(n, MemoryKind::Device, "test device");
    Buffer dev2 = ctx->create_buffer(n, MemoryKind::Device, "test device 2");
    Buffer up = ctx->create_buffer(n, MemoryKind::Upload, "test upload");
    Buffer rb = ctx->create_buffer(n, MemoryKind::Readback, "test readback");
    EXPECT_EQ(ctx->allocated_bytes(), before + 4 * n);
    EXPECT_EQ(ctx->allocated_bytes(MemoryKind::Upload), n);
    ASSERT_EQ(dev.data(), nullptr);
    ASSERT_NE(up.data(), nullptr);
    ASSERT_NE(rb.data(), nullptr);

    // Synchronous helpers.
    ctx->write_buffer(dev, 0, src.data(), n);
    std::vector<uint8_t> back(n, 0);
    ctx->read_buffer(dev, 0, back.data(), n);
    EXPECT_EQ(back, src);

    // Staging -> device -> device (at an offset) -> readback, plus a fill.
    std::memcpy(up.data(), src.data(), n);
    Recorder rec(*ctx);
    rec.begin();
    rec.copy(up, 0, dev, 0, n);
    rec.barrier();
    rec.copy(dev, 16, dev2, 0, n - 16);
    const size_t fill_at = (n - 48) & ~size_t(3);
    rec.fill(dev2, fill_at, 16, 0xA5A5A5A5u);
    rec.barrier();
    rec.copy(dev2, 0, rb, 0, n - 16);
    SyncPoint done = rec.submit();
    done.wait();
    EXPECT_TRUE(done.reached());
    for (size_t i = 0; i < n - 16; ++i) {
      const bool filled = i >= fill_at && i < fill_at + 16;
      ASSERT_EQ(rb.data()[i], filled ? 0xA5 : src[i + 16]) << "byte " << i;
    }

    // Ranged read of the middle.
    std::vector<uint8_t> mid(1000);
    ctx->read_buffer(dev, 5000, mid.data(), mid.size());
    EXPECT_EQ(0, std::memcmp(mid.data(), src.data() + 5000, mid.size()));
  }
  EXPECT_EQ(ctx->allocated_bytes(), before);
}

TEST(VkRuntime, AllocationErrorsAreClear) {
  auto ctx = Context::create();
  try {
    ctx->create_buffer(uint64_t(1) << 50, MemoryKind::Device, "huge test tensor");
    FAIL() << "expected an Error";
  } catch (const Error& e) {
    const std::string msg = e.what();
    EXPECT_NE(msg.find("huge test tensor"), std::string::npos) << msg;
    EXPECT_NE(msg.find("MiB"), std::string::npos) << msg;
  }
}

// Uploads through the transfer path (split over several small staging slots),
// then a compute submission waits on the upload's timeline value on the GPU.
static void upload_then_compute(const ContextOptions& opts) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  auto ctx = Context::create(-1, opts);
  if (!opts.allow_transfer_queue) {
    EXPECT_FALSE(ctx->has_separate_transfer_queue());
  }
  EXPECT_EQ(&ctx->transfer_queue() == &ctx->compute_queue(), !ctx->has_separate_transfer_queue());

  const uint32_t ncols = 512, nrows = 300;
  const auto w = random_floats(rng, size_t(ncols) * nrows);
  const auto x = random_floats(rng, ncols);
  Buffer wb = ctx->create_buffer(w.size() * 4, MemoryKind::Device, "w");
  Buffer xb = ctx->create_buffer(x.size() * 4, MemoryKind::Device, "x");
  Buffer yb = ctx->create_buffer(nrows * 4, MemoryKind::Device, "y");

  Uploader upl(*ctx, 64 << 10, 3);  // 600 KiB of weights through 3 x ~21 KiB slots
  upl.enqueue(wb, 0, w.data(), w.size() * 4 / 2);
  upl.enqueue(wb, w.size() * 4 / 2, w.data() + w.size() / 2, w.size() * 4 - w.size() * 4 / 2);
  upl.enqueue(xb, 0, x.data(), x.size() * 4);
  SyncPoint ready = upl.flush();
  EXPECT_EQ(ready.queue, &ctx->transfer_queue());
  EXPECT_EQ(upl.bytes_uploaded(), (w.size() + x.size()) * 4);

  Recorder rec(*ctx);
  rec.begin();
  f32_matvec(rec, wb, xb, yb, ncols, nrows, 0, false);
  SyncPoint done = rec.submit({ready});
  done.wait();
  EXPECT_TRUE(ready.reached());
  std::vector<float> y(nrows);
  ctx->read_buffer(yb, 0, y.data(), nrows * 4);
  const auto ref = cpu_matvec(w, x, nrows);
  for (uint32_t r = 0; r < nrows; ++r) {
    double mag = 0;
    for (uint32_t c = 0; c < ncols; ++c) mag += std::fabs(double(w[size_t(r) * ncols + c]) * x[c]);
    ASSERT_NEAR(y[r], ref[r], 1e-5 * mag + 1e-5) << "row " << r;
  }
  // A second upload overwriting part of w becomes visible to the next compute pass.
  std::vector<float> zeros(ncols * 10, 0.f);
  ready = upl.upload(wb, 0, zeros.data(), zeros.size() * 4);
  rec.begin();
  f32_matvec(rec, wb, xb, yb, ncols, nrows, 0, false);
  rec.submit({ready}).wait();
  ctx->read_buffer(yb, 0, y.data(), nrows * 4);
  for (uint32_t r = 0; r < 10; ++r) EXPECT_EQ(y[r], 0.f) << "row " << r;
  EXPECT_NEAR(y[10], ref[10], 1e-3 * (1 + std::fabs(ref[10])));
}

TEST(VkRuntime, AsyncUploadThenComputeWaits) { upload_then_compute(ContextOptions{}); }

TEST(VkRuntime, AsyncUploadOnComputeQueueFallback) {
  ContextOptions o;
  o.allow_transfer_queue = false;
  upload_then_compute(o);
}

// Many dispatches in one command buffer without push descriptors (forces
// several descriptor pools), re-recorded after begin(), and re-submitted.
TEST(VkRuntime, DescriptorPoolFallbackAndResubmit) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  ContextOptions o;
  o.allow_push_descriptors = false;
  auto ctx = Context::create(-1, o);
  EXPECT_FALSE(ctx->push_descriptors());
  const uint32_t ncols = 64, nrows = 4, n_disp = 600;  // > 256 sets per pool
  const auto w = random_floats(rng, ncols * nrows);
  const auto x = random_floats(rng, ncols);
  Buffer wb = ctx->create_buffer(w.size() * 4, MemoryKind::Device, "w");
  Buffer xb = ctx->create_buffer(x.size() * 4, MemoryKind::Device, "x");
  Buffer yb = ctx->create_buffer(n_disp * nrows * 4, MemoryKind::Device, "y");
  ctx->write_buffer(wb, 0, w.data(), w.size() * 4);
  ctx->write_buffer(xb, 0, x.data(), x.size() * 4);
  const auto ref = cpu_matvec(w, x, nrows);

  Recorder rec(*ctx);
  for (int round = 0; round < 2; ++round) {
    rec.begin();
    rec.fill(yb, 0, yb.size(), 0);
    rec.barrier();
    for (uint32_t i = 0; i < n_disp; ++i) f32_matvec(rec, wb, xb, yb, ncols, nrows, i * nrows, true);
    EXPECT_EQ(rec.dispatch_count(), n_disp);
    rec.submit();
    std::vector<float> y(n_disp * nrows);
    ctx->read_buffer(yb, 0, y.data(), y.size() * 4);
    for (uint32_t i = 0; i < n_disp; ++i)
      for (uint32_t r = 0; r < nrows; ++r)
        ASSERT_NEAR(y[i * nrows + r], ref[r], 1e-4 * (1 + std::fabs(ref[r]))) << "round " << round << " dispatch " << i;
  }
  // Re-submitting the same commands (without begin) repeats them: the fill
  // resets y, so the results are unchanged; then accumulate-only commands.
  rec.submit().wait();
  rec.begin();
  f32_matvec(rec, wb, xb, yb, ncols, nrows, 0, true);
  for (int k = 0; k < 3; ++k) rec.submit();
  rec.wait();
  std::vector<float> y(nrows);
  ctx->read_buffer(yb, 0, y.data(), nrows * 4);
  for (uint32_t r = 0; r < nrows; ++r) EXPECT_NEAR(y[r], 4 * ref[r], 4e-4 * (1 + std::fabs(ref[r]))) << r;
}

TEST(VkRuntime, PipelineCacheAndTimestamps) {
  auto ctx = Context::create();
  const Pipeline& a = ctx->pipeline("bandwidth", 2, 8, {64, 4});
  const Pipeline& b = ctx->pipeline("bandwidth", 2, 8, {64, 4});
  const Pipeline& c = ctx->pipeline("bandwidth", 2, 8, {32, 4});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &c);
  EXPECT_THROW(ctx->pipeline("bandwidth", 3, 8, {64, 4}), Error);
  EXPECT_THROW(ctx->pipeline("no-such-shader", 1, 0), Error);
  if (!ctx->info().timestamps) GTEST_SKIP() << "no timestamps on this device";

  const uint32_t n_vec4 = 1 << 16;
  Buffer src = ctx->create_buffer(n_vec4 * 16ull, MemoryKind::Device, "src");
  Buffer dst = ctx->create_buffer(256, MemoryKind::Device, "dst");
  TimestampPool ts(*ctx, 4);
  Recorder rec(*ctx);
  rec.begin();
  rec.fill(src, 0, src.size(), 0x01020304u);
  rec.barrier();
  rec.reset_timestamps(ts, 0, 4);
  rec.timestamp(ts, 0);
  struct {
    uint32_t n, sentinel;
  } push{n_vec4, 0};
  rec.dispatch(a, {BufferRange(src), BufferRange(dst)}, push, n_vec4 / (64 * 4));
  rec.timestamp(ts, 1);
  rec.submit().wait();
  const auto ns = ts.read_ns(0, 2);
  EXPECT_TRUE(std::isfinite(ns[1] - ns[0]));
  EXPECT_GT(ns[1] - ns[0], 0.0);
  EXPECT_LT(ns[1] - ns[0], 60e9);
}

// A dry recording names the pipelines it uses without recording commands;
// compile_collected compiles them on several threads; a real recording then
// uses the same pipelines and computes as without the dry run.
TEST(VkRuntime, DryRecordingCollectsPipelinesCompiledInParallel) {
  const uint32_t seed = fresh_seed();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  auto ctx = Context::create();
  const uint32_t ncols = 64, nrows = 4;
  const auto w = random_floats(rng, ncols * nrows), x = random_floats(rng, ncols);
  Buffer wb = ctx->create_buffer(w.size() * 4, MemoryKind::Device, "w");
  Buffer xb = ctx->create_buffer(x.size() * 4, MemoryKind::Device, "x");
  Buffer yb = ctx->create_buffer(nrows * 4, MemoryKind::Device, "y");
  ctx->write_buffer(wb, 0, w.data(), w.size() * 4);
  ctx->write_buffer(xb, 0, x.data(), x.size() * 4);
  const std::vector<float> sentinel(nrows, 42.f);
  ctx->write_buffer(yb, 0, sentinel.data(), nrows * 4);

  ctx->collect_pipelines();
  const Pipeline& a = ctx->pipeline("bandwidth", 2, 8, {64, 4});
  const Pipeline& b = ctx->pipeline("bandwidth", 2, 8, {32, 4});
  EXPECT_EQ(a.pipeline, VkPipeline(VK_NULL_HANDLE)) << "compiled while collecting";
  Recorder dry(*ctx);
  dry.begin_dry();
  dry.fill(yb, 0, yb.size(), 0);
  dry.barrier();
  f32_matvec(dry, wb, xb, yb, ncols, nrows, 0, false);
  EXPECT_EQ(dry.dispatch_count(), 1u);
  EXPECT_THROW(dry.submit(), Error);
  dry.discard();
  ctx->compile_collected(4);
  EXPECT_NE(a.pipeline, VkPipeline(VK_NULL_HANDLE));
  EXPECT_NE(b.pipeline, VkPipeline(VK_NULL_HANDLE));
  std::vector<float> y(nrows);
  ctx->read_buffer(yb, 0, y.data(), nrows * 4);
  EXPECT_EQ(y, sentinel) << "the dry recording wrote";

  // A pipeline collected but never compiled is compiled when requested next.
  ctx->collect_pipelines();
  const Pipeline& c = ctx->pipeline("bandwidth", 2, 8, {128, 4});
  ctx->compile_collected(0);  // 0 threads: the calling thread alone
  EXPECT_NE(c.pipeline, VkPipeline(VK_NULL_HANDLE));

  Recorder rec(*ctx);
  rec.begin();
  f32_matvec(rec, wb, xb, yb, ncols, nrows, 0, false);
  rec.submit().wait();
  ctx->read_buffer(yb, 0, y.data(), nrows * 4);
  const auto ref = cpu_matvec(w, x, nrows);
  for (uint32_t r = 0; r < nrows; ++r) EXPECT_NEAR(y[r], ref[r], 1e-4 * (1 + std::fabs(ref[r]))) << r;
}
