// The hardware view's GPU side (skipped without a GPU): the calibration's
// ceilings are plausible against the datasheet and cached, the occupancy
// formula gives CUPTI's own estimate wherever CUPTI gives one, and a stop
// signal during the counter pass keeps what the run measured before it.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <csignal>
#include <cstdlib>

#include "attnprof/interrupt.h"
#include "attnprof/report/ceilings_cache.h"
#include "attnprof/session.h"
#include "profiler/calibration.h"
#include "test_util.h"

using namespace attnprof;

namespace {

Problem gpu_problem(int64_t batch, int64_t heads, int64_t seq, int64_t head_dim) {
  Problem p;
  p.batch = batch, p.heads_q = p.heads_kv = heads, p.seq_q = p.seq_kv = seq, p.head_dim = head_dim;
  p.device = "cuda:0";
  return p;
}

MeasureOptions quick() {
  MeasureOptions o;
  o.schedule = {1, 0, 1, 2};
  o.timing_iters = 2;
  o.scratch_dir = "/tmp";
  return o;
}

#define SKIP_WITHOUT_GPU() \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: the hardware view's GPU side needs one"

}  // namespace

TEST(DeviceCeilings, CalibrationIsPlausibleAndCached) {
  SKIP_WITHOUT_GPU();
  const std::string d = attnprof::testing::make_temp_dir("calibration");
  ASSERT_FALSE(d.empty());
  ::setenv("XDG_CACHE_HOME", d.c_str(), 1);
  const Problem p = gpu_problem(1, 1, 64, 64);
  const Calibration cal = device_ceilings(p, /*force=*/true);
  const report::DeviceCeilings& c = cal.ceilings;
  EXPECT_TRUE(cal.notes.empty()) << cal.notes.front();
  EXPECT_EQ(c.source, "measured");
  EXPECT_EQ(c.gemm_n, 8192);
  EXPECT_GT(c.copy_bytes, 1e8);
  EXPECT_NE(c.driver, "unknown");
  // Against the datasheet: below it (no kernel passes the peak), and not absurdly far.
  EXPECT_GT(c.gemm_bf16_tflops, 2 * c.gemm_fp32_tflops) << "16-bit tensor cores far above fp32 CUDA cores";
  if (c.spec_bf16_tflops) {
    EXPECT_LT(c.gemm_bf16_tflops, 1.02 * *c.spec_bf16_tflops);
    EXPECT_GT(c.gemm_bf16_tflops, 0.3 * *c.spec_bf16_tflops);
  }
  if (c.spec_dram_gbps) {
    EXPECT_LT(c.copy_gbps, 1.02 * *c.spec_dram_gbps);
    EXPECT_GT(c.copy_gbps, 0.5 * *c.spec_dram_gbps);
  }
  EXPECT_GT(c.sm_clock_mhz, 0.0) << "NVML's SM clock during the GEMM";
  // Cached: the file reads back as these ceilings; the process asks once per device.
  ASSERT_FALSE(c.cache_file.empty());
  std::string why;
  const auto back = report::read_ceilings_cache(c.cache_file, c.device, c.driver, &why);
  ASSERT_TRUE(back) << why;
  EXPECT_DOUBLE_EQ(back->gemm_bf16_tflops, c.gemm_bf16_tflops);
  EXPECT_DOUBLE_EQ(back->copy_gbps, c.copy_gbps);
  EXPECT_EQ(device_ceilings(p).ceilings.measured_at, c.measured_at);
  ::unsetenv("XDG_CACHE_HOME");
  attnprof::testing::remove_tree(d);
}

TEST(DeviceCeilings, OccupancyFormulaAgreesWithCupti) {
  SKIP_WITHOUT_GPU();
  const Measurement m = run_variant("sdpa-math", gpu_problem(8, 16, 1024, 64), quick());
  const RunRecord& r = m.record;
  ASSERT_EQ(r.status, Status::ok) << r.reason;
  ASSERT_TRUE(r.device_limits);
  EXPECT_GT(r.device_limits->sm_count, 0);
  if (r.device_limits->compute_major >= 8) EXPECT_EQ(r.device_limits->smem_reserved_per_block, 1024);
  int compared = 0;
  for (const KernelLaunch& l : r.launches) {
    if (l.block[0] <= 0) continue;
    ASSERT_TRUE(l.theoretical_occupancy_pct) << l.name;
    if (!l.est_occupancy_pct) continue;
    EXPECT_EQ(std::lround(*l.grid_occupancy_pct), std::lround(*l.est_occupancy_pct)) << l.name;
    ++compared;
  }
  EXPECT_GE(compared, 5);
}

TEST(DeviceCeilings, StopDuringTheCounterPassKeepsTheMeasuredRun) {
  SKIP_WITHOUT_GPU();
  MeasureOptions o = quick();
  o.counters = true;
  o.progress = [](const RunProgress& p) {
    if (p.phase == RunPhase::counters) request_interrupt(SIGINT);
  };
  const Measurement m = run_variant("sdpa-flash", gpu_problem(1, 2, 128, 64), o);
  request_interrupt(0);
  const RunRecord& r = m.record;
  EXPECT_EQ(r.status, Status::interrupted);
  EXPECT_NE(r.reason.find("during the counter pass"), std::string::npos) << r.reason;
  ASSERT_TRUE(r.counters);
  EXPECT_EQ(r.counters->state, report::CounterPass::State::interrupted);
  EXPECT_FALSE(r.scopes.empty()) << "the profiled figures are kept";
  EXPECT_TRUE(r.timing);
}
