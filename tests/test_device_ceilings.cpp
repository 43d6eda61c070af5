// The measured ceilings on the GPU machine (skipped without a GPU): plausible
// against the datasheet, cached, and asked for once per device and process.
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cstdlib>

#include "attnprof/report/ceilings_cache.h"
#include "profiler/calibration.h"
#include "test_util.h"

using namespace attnprof;

TEST(DeviceCeilings, CalibrationIsPlausibleAndCached) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: the ceilings are measured on a GPU";
  const std::string d = attnprof::testing::make_temp_dir("calibration");
  ASSERT_FALSE(d.empty());
  ::setenv("XDG_CACHE_HOME", d.c_str(), 1);
  Problem p;
  p.device = "cuda:0";
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
