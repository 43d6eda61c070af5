// Launch facts come from the kernel events' args in a Kineto trace, joined to
// the launching runtime/driver call by correlation id.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "attnprof/report/counter_report.h"
#include "attnprof/report/launch_facts.h"

using namespace attnprof;
using nlohmann::json;

namespace {
json trace_with(const json& events) { return json{{"traceEvents", events}}; }
}  // namespace

TEST(LaunchFacts, JoinsKernelArgsAndLauncherByCorrelation) {
  const json trace = trace_with(json::array({
      {{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"args", {{"correlation", 11}}}},
      {{"ph", "X"}, {"cat", "kernel"}, {"name", "k1"},
       {"args", {{"correlation", 11}, {"grid", {64, 16, 8}}, {"block", {128, 1, 1}}, {"registers per thread", 168},
                 {"shared memory", 49152}, {"est. achieved occupancy %", 12}}}},
      {{"ph", "X"}, {"cat", "cuda_driver"}, {"name", "cuLaunchKernelEx"}, {"args", {{"correlation", 12}}}},
      {{"ph", "X"}, {"cat", "kernel"}, {"name", "cudnn_k"},
       {"args", {{"correlation", 12}, {"grid", {132, 1, 1}}, {"block", {384, 1, 1}}, {"registers per thread", 90},
                 {"shared memory", 200000}, {"est. achieved occupancy %", 0}}}},
      {{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaMemsetAsync"}, {"args", {{"correlation", 13}}}},
      {{"ph", "X"}, {"cat", "gpu_memset"}, {"name", "Memset (Device)"}, {"args", {{"correlation", 13}}}},
  }));
  const auto facts = report::launch_facts(trace, {{"k1", 11, 10.0}, {"cudnn_k", 12, 20.0}, {"Memset (Device)", 13, 1.0},
                                                  {"missing", 99, 2.0}});
  ASSERT_EQ(facts.size(), 4u);
  EXPECT_EQ(facts[0].launch_api, "cudaLaunchKernel");
  EXPECT_EQ(facts[0].grid[0], 64);
  EXPECT_EQ(facts[0].grid[2], 8);
  EXPECT_EQ(facts[0].block[0], 128);
  EXPECT_EQ(facts[0].registers_per_thread, 168);
  EXPECT_EQ(facts[0].shared_memory_bytes, 49152);
  ASSERT_TRUE(facts[0].est_occupancy_pct.has_value());
  EXPECT_DOUBLE_EQ(*facts[0].est_occupancy_pct, 12.0);
  EXPECT_EQ(facts[1].launch_api, "cuLaunchKernelEx");
  EXPECT_FALSE(facts[1].est_occupancy_pct.has_value()) << "0% from a driver-API launch is 'not measured'";
  EXPECT_EQ(facts[2].launch_api, "cudaMemsetAsync");
  EXPECT_FALSE(facts[2].est_occupancy_pct.has_value());
  EXPECT_EQ(facts[3].launch_api, "");
  EXPECT_EQ(facts[3].block[0], 0);

  const std::string table = report::format_launch_table(facts);
  EXPECT_NE(table.find("not measured"), std::string::npos) << table;
  EXPECT_NE(table.find("64x16x8"), std::string::npos) << table;
  EXPECT_NE(table.find("12%"), std::string::npos) << table;
}

TEST(LaunchFacts, ToleratesMalformedTraces) {
  for (const json& bad : {json::object(), json{{"traceEvents", 5}}, json{{"traceEvents", {1, "x", nullptr}}},
                          trace_with(json::array({{{"cat", "kernel"}, {"args", {{"correlation", "11"}}}}}))}) {
    const auto facts = report::launch_facts(bad, {{"k", 11, 1.0}});
    ASSERT_EQ(facts.size(), 1u);
    EXPECT_EQ(facts[0].registers_per_thread, 0);
  }
}

// Found by tests/fuzz/launch_facts.cpp under UBSan: numbers that do not fit the
// field (1e300 as registers, as a correlation id, 1e10 as a grid size) were
// converted anyway (undefined behaviour for floats, a wrapped value for
// integers). They now read as absent.
TEST(LaunchFacts, OutOfRangeNumbersReadAsAbsent) {
  const json trace = trace_with(json::array({
      {{"cat", "kernel"}, {"args", {{"correlation", 1e300}, {"registers per thread", 32}}}},
      {{"cat", "kernel"},
       {"args", {{"correlation", 11}, {"registers per thread", 1e300}, {"shared memory", -1e300},
                 {"grid", {int64_t(1) << 40, 2, 3}}, {"block", {1e10, 128, 18446744073709551615ull}},
                 {"est. achieved occupancy %", 1e300}}}},
      {{"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"args", {{"correlation", 18446744073709551615ull}}}},
  }));
  const auto facts = report::launch_facts(trace, {{"k", 11, 1.0}, {"huge", 18446744073709551615ull, 1.0}});
  ASSERT_EQ(facts.size(), 2u);
  EXPECT_EQ(facts[0].registers_per_thread, 0);
  EXPECT_EQ(facts[0].shared_memory_bytes, 0);
  EXPECT_EQ(facts[0].grid[0], 0);
  EXPECT_EQ(facts[0].grid[1], 2);
  EXPECT_EQ(facts[0].block[0], 0);
  EXPECT_EQ(facts[0].block[1], 128);
  EXPECT_EQ(facts[0].block[2], 0);
  EXPECT_EQ(facts[1].launch_api, "") << "a correlation id past int64 matches nothing";
  EXPECT_FALSE(report::format_launch_table(facts).empty());
}

TEST(LaunchFacts, ZeroOccupancyIsNotMeasuredForAnyLaunchApi) {
  const json trace = trace_with(json::array({
      {{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"args", {{"correlation", 5}}}},
      {{"ph", "X"}, {"cat", "kernel"}, {"name", "ours"},
       {"args", {{"correlation", 5}, {"grid", {8, 1, 1}}, {"block", {128, 1, 1}}, {"est. achieved occupancy %", 0}}}},
  }));
  const auto facts = report::launch_facts(trace, {{"ours", 5, 1.0}});
  ASSERT_EQ(facts.size(), 1u);
  EXPECT_FALSE(facts[0].est_occupancy_pct.has_value());
}

// The "Est. occupancy" column with the device's limits: the formula's figure
// and what limits it for every kernel, cuDNN's driver-API launch included;
// the grid's own figure where it cannot fill the SMs.
TEST(LaunchFacts, OccupancyColumnFromTheFormula) {
  const json trace = trace_with(json::array({
      {{"ph", "X"}, {"cat", "cuda_driver"}, {"name", "cuLaunchKernelEx"}, {"args", {{"correlation", 1}}}},
      {{"ph", "X"}, {"cat", "kernel"}, {"name", "cudnn_k"},
       {"args", {{"correlation", 1}, {"grid", {132, 1, 1}}, {"block", {384, 1, 1}}, {"registers per thread", 168},
                 {"shared memory", 134144}, {"est. achieved occupancy %", 0}}}},
      {{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"args", {{"correlation", 2}}}},
      {{"ph", "X"}, {"cat", "kernel"}, {"name", "tiny"},
       {"args", {{"correlation", 2}, {"grid", {33, 1, 1}}, {"block", {128, 1, 1}}, {"registers per thread", 32},
                 {"shared memory", 0}, {"est. achieved occupancy %", 2}}}},
      {{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaMemsetAsync"}, {"args", {{"correlation", 3}}}},
      {{"ph", "X"}, {"cat", "gpu_memset"}, {"name", "Memset (Device)"}, {"args", {{"correlation", 3}}}},
  }));
  auto facts = report::launch_facts(trace, {{"cudnn_k", 1, 50.0}, {"tiny", 2, 1.0}, {"Memset (Device)", 3, 1.0}});
  report::DeviceLimits h200;
  h200.compute_major = 9, h200.sm_count = 132, h200.max_threads_per_sm = 2048, h200.max_blocks_per_sm = 32;
  h200.regs_per_sm = h200.regs_per_block = 65536;
  h200.smem_per_sm = 233472, h200.smem_per_block_optin = 232448, h200.smem_reserved_per_block = 1024;
  report::apply_allocation_rules(h200);
  report::fill_launch_occupancy(facts, h200);
  // 384 threads x 168 registers: one block (12 of 64 warps) by registers (shared memory allows one too).
  EXPECT_DOUBLE_EQ(*facts[0].theoretical_occupancy_pct, 18.75);
  EXPECT_EQ(facts[0].occupancy_limiter, "registers");
  EXPECT_FALSE(facts[0].est_occupancy_pct) << "CUPTI's 0 stays not measured";
  // 33 blocks on 132 SMs: a quarter block per SM of the 16 that fit.
  EXPECT_DOUBLE_EQ(*facts[1].theoretical_occupancy_pct, 100.0);
  EXPECT_NEAR(*facts[1].grid_occupancy_pct, 33.0 / 132.0 * 128.0 / 2048.0 * 100.0, 1e-9);
  EXPECT_FALSE(facts[2].theoretical_occupancy_pct) << "a memset has no block";
  const std::string table = report::format_launch_table(facts);
  EXPECT_EQ(table.find("not measured"), std::string::npos) << table;
  EXPECT_NE(table.find("19% (registers)"), std::string::npos) << table;
  EXPECT_NE(table.find("100% (warps), grid 2%"), std::string::npos) << table;
}
