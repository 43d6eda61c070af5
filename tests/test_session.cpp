// run_variant as the CLI uses it: every status with its reason, the scopes of
// each pass in the record, and the trace handed back for the writers.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <cmath>
#include <csignal>
#include <string>

#include <torch/cuda.h>

#include "attnprof/device_memory.h"
#include "attnprof/interrupt.h"
#include "attnprof/session.h"
#include "test_util.h"

using namespace attnprof;

namespace {

Problem tiny(Pass pass = Pass::fwd) {
  Problem p;
  p.batch = 1, p.heads_q = 4, p.heads_kv = 2, p.seq_q = 5, p.seq_kv = 33, p.head_dim = 16;
  p.pass = pass;
  p.device = "cpu";
  return p;
}

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

}  // namespace

TEST(Session, OkRunCarriesScopesFiguresAndTheTrace) {
  for (Pass pass : {Pass::fwd, Pass::bwd, Pass::fwd_bwd}) {
    SCOPED_TRACE(pass_name(pass));
    const Measurement m = run_variant("inplace", tiny(pass), quick());
    const RunRecord& r = m.record;
    ASSERT_EQ(r.status, Status::ok) << r.reason;
    ASSERT_EQ(r.scopes.size(), pass == Pass::fwd_bwd ? 2u : 1u);
    EXPECT_EQ(r.scopes.front().scope, pass == Pass::bwd ? kBackwardScope : kForwardScope);
    for (const ScopeStats& s : r.scopes) EXPECT_EQ(s.calls, 2);
    EXPECT_GT(r.cpu_time_us(), 0.0);
    ASSERT_TRUE(r.tflops);
    EXPECT_NEAR(*r.tflops, r.problem.flops() / (r.cpu_time_us() * 1e-6) / 1e12, 1e-9 * *r.tflops);
    ASSERT_TRUE(r.timing);
    EXPECT_EQ(r.timing->reps, 2);
    EXPECT_TRUE(r.output_finite);
    // bf16 against float64 on every query row: a few 1e-3, never zero.
    ASSERT_TRUE(r.accuracy);
    EXPECT_EQ(r.accuracy->rows, 5);
    EXPECT_EQ(r.accuracy->total_rows, 5);
    EXPECT_GT(r.accuracy->rel_error, 1e-4);
    EXPECT_LT(r.accuracy->rel_error, 2e-2);
    EXPECT_FALSE(r.accuracy->input_quantisation_error);
    EXPECT_FALSE(r.rows.empty());
    const auto trace = nlohmann::json::parse(m.trace_json);
    EXPECT_EQ(trace["attnprof"]["problem"]["heads_kv"], 2);
    EXPECT_TRUE(r.trace_file.empty()) << "run_variant writes no output files";
  }
}

TEST(Session, StatusesSayWhy) {
  RunRecord r = run_variant("no-such-variant", tiny(), quick()).record;
  EXPECT_EQ(r.status, Status::failed);
  EXPECT_EQ(r.reason, "unknown variant");

  r = run_variant("sdpa-cudnn", tiny(), quick()).record;
  EXPECT_EQ(r.status, Status::skipped);
  EXPECT_NE(r.reason.find("CUDA"), std::string::npos) << r.reason;

  Problem huge = tiny();
  huge.seq_q = huge.seq_kv = 1 << 21, huge.heads_q = huge.heads_kv = 64;
  r = run_variant("naive", huge, quick()).record;
  EXPECT_EQ(r.status, Status::skipped);
  EXPECT_NE(r.reason.find("(predicted)"), std::string::npos) << r.reason;

  request_interrupt(15);
  r = run_variant("naive", tiny(), quick()).record;
  request_interrupt(0);
  EXPECT_EQ(r.status, Status::interrupted);
  EXPECT_EQ(r.reason, "stopped by signal 15");
  // Nothing of Kineto's is left in the scratch directory.
  for (const std::string& p : attnprof::testing::list_tree("/tmp"))
    EXPECT_EQ(p.find("naive_1_4_5_16"), std::string::npos) << p;
}

TEST(Session, AutoCountsAreDecidedMeasuredAndRecorded) {
  MeasureOptions o = quick();
  o.schedule.warmup_iters = kAutoIters;
  o.timing_iters = kAutoIters;
  std::vector<RunProgress> seen;
  o.progress = [&](const RunProgress& r) { seen.push_back(r); };
  const RunRecord r = run_variant("naive", tiny(), o).record;
  ASSERT_EQ(r.status, Status::ok) << r.reason;
  // The counts depend on the step time (a tiny CPU step takes 0.1 to 60 ms
  // here, with other processes on the cores), so they are checked against
  // their bounds and against the steps the progress reports counted.
  const int warmups = r.schedule.warmup_iters;
  EXPECT_GE(warmups, 1);
  EXPECT_LE(warmups, 3);
  ASSERT_TRUE(r.timing);
  const int timed = r.timing->reps * r.timing->iters_per_rep;
  EXPECT_GE(timed, 1);
  EXPECT_LE(timed, 100);
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.back().phase, RunPhase::checking);
  EXPECT_EQ(seen.back().steps_done, warmups + (0 + 1 + 2) + timed + 1);
  EXPECT_EQ(seen.back().steps_left, 0);
  for (const RunProgress& p : seen)
    if (p.phase == RunPhase::timing) EXPECT_EQ(p.steps_done + p.steps_left, seen.back().steps_done) << "exact once decided";
}

// --counters on the CPU: the run is the same, the record says why there are no
// counters, and nothing of the hardware view (limits, occupancy) is made up.
TEST(Session, CountersOnTheCpuAreUnavailableWithTheReason) {
  MeasureOptions o = quick();
  o.counters = true;
  const RunRecord r = run_variant("naive", tiny(), o).record;
  ASSERT_EQ(r.status, Status::ok) << r.reason;
  ASSERT_TRUE(r.counters);
  EXPECT_EQ(r.counters->state, report::CounterPass::State::unavailable);
  EXPECT_EQ(r.counters->reason, "the problem runs on the CPU; hardware counters need a CUDA device");
  EXPECT_FALSE(r.counters->ceilings);
  EXPECT_FALSE(r.device_limits);
  EXPECT_TRUE(r.timing) << "the timed figures as without --counters";
  EXPECT_FALSE(run_variant("naive", tiny(), quick()).record.counters) << "no pass unless asked for";
}

// The occupancy formula on the GPU machine: CUPTI's own estimate wherever
// CUPTI gives one, and a figure for every kernel.
TEST(Session, OccupancyFormulaAgreesWithCuptiOnTheGpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: CUPTI and the counter pass need one";
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

TEST(Session, StopDuringTheCounterPassKeepsTheMeasuredRun) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: CUPTI and the counter pass need one";
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

// The allocators' refusals read as out of memory (a skip, not a failure), in
// their own words without c10's source-line prefix.
TEST(Session, AllocatorRefusalsAreOutOfMemoryInPlainWords) {
  const std::string cpu_past_system =
      "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
      "allocate 17592186044416 bytes. Error code 12 (Cannot allocate memory)";
  EXPECT_TRUE(is_out_of_memory_reason(cpu_past_system));
  EXPECT_EQ(out_of_memory_words(cpu_past_system),
            "DefaultCPUAllocator: can't allocate memory: you tried to allocate 17592186044416 bytes. Error code 12 "
            "(Cannot allocate memory)");
  EXPECT_TRUE(is_out_of_memory_reason("DefaultCPUAllocator: not enough memory: you tried to allocate 8 GB"));
  EXPECT_TRUE(is_out_of_memory_reason("CUDA out of memory. Tried to allocate 2.00 GiB"));
  EXPECT_EQ(out_of_memory_words("CUDA out of memory. Tried to allocate 2.00 GiB"),
            "CUDA out of memory. Tried to allocate 2.00 GiB");
  EXPECT_FALSE(is_out_of_memory_reason("\"bmm\" not implemented for 'Float8_e4m3fn'"));
}
