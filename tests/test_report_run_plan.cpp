// The arithmetic behind --warmup-iters auto, --timing-iters auto, the steps a
// run has left and the smaller problem the early estimate suggests; and the
// words progress displays print. Pure: no LibTorch, no clock.
#include "attnprof/report/run_plan.h"

#include <gtest/gtest.h>

#include "attnprof/report/progress_text.h"

namespace attnprof::report {
namespace {

Problem shape(int64_t b, int64_t h, int64_t s, int64_t d) {
  Problem p;
  p.batch = b, p.heads_q = p.heads_kv = h, p.seq_q = p.seq_kv = s, p.head_dim = d;
  return p;
}

// What the auto warm-up does when every step takes `first_s`, then `step_s`.
int run_auto_warmup(double first_s, double step_s) {
  int done = 0;
  double elapsed = 0.0, last = -1.0;
  while (warmup_wants_another(done, elapsed, last)) {
    last = done == 0 ? first_s : step_s;
    elapsed += last;
    ++done;
  }
  return done;
}

PlanRequest auto_request(bool cuda) {
  PlanRequest r;
  r.schedule = {kAutoIters, 1, 1, 3};
  r.timing_iters = kAutoIters;
  r.cuda = cuda;
  return r;
}

TEST(RunPlan, AutoWarmupKeepsThreeForShortStepsAndOneForSlowOnes) {
  // GPU forwards of micro- to milliseconds, even after a slow first call: 3, as before auto.
  EXPECT_EQ(run_auto_warmup(57e-6, 57e-6), 3);
  EXPECT_EQ(run_auto_warmup(0.8, 1e-3), 3);
  // A CPU forward of a second whose first call takes 2.3 s (8x16x1024x64 bf16 naive, 2 cores): 1.
  EXPECT_EQ(run_auto_warmup(2.3, 1.0), 1);
  // In between: as many as end within the 2 s budget.
  EXPECT_EQ(run_auto_warmup(0.9, 0.9), 2);
  EXPECT_EQ(run_auto_warmup(0.6, 0.6), 3);
  EXPECT_EQ(run_auto_warmup(13.0, 13.0), 1) << "at least one, however slow";
  // The prediction agrees with the rule at every point of a warm-up under way.
  EXPECT_EQ(auto_warmup_total(0, 0.0, -1.0, 0.9), 2);
  EXPECT_EQ(auto_warmup_total(1, 0.3, 0.3, 1.5), 2) << "the next step is judged by the last one";
  EXPECT_EQ(auto_warmup_total(2, 1.8, 1.5, 1.5), 2);
  EXPECT_EQ(auto_warmup_total(3, 0.1, 0.05, 0.05), 3) << "never more than 3";
}

TEST(RunPlan, AutoTimingFitsTheBudgetBetweenOneAndAHundred) {
  EXPECT_EQ(auto_timing_iters(57e-6), 100) << "short GPU forwards keep the former CUDA count";
  EXPECT_EQ(auto_timing_iters(0.005), 100) << "up to 5 ms a step";
  EXPECT_EQ(auto_timing_iters(0.00525), 95);
  EXPECT_EQ(auto_timing_iters(0.092), 5) << "sdpa-cudnn on the varlen-prefill batch: half a second of timing";
  EXPECT_EQ(auto_timing_iters(0.125), 4);
  EXPECT_EQ(auto_timing_iters(0.25), 2);
  EXPECT_EQ(auto_timing_iters(0.3), 1);
  EXPECT_EQ(auto_timing_iters(13.0), 1) << "at least one";
  EXPECT_EQ(auto_timing_iters(-1.0), 100) << "unknown: the maximum";
  EXPECT_EQ(auto_timing_iters(0.0), 100);
  EXPECT_EQ(auto_timing_iters(1e-300), 100) << "no overflow";
}

TEST(RunPlan, TimingSplitsIntoAtMostTenRepetitions) {
  EXPECT_EQ(split_timing(0).steps(), 0);
  EXPECT_EQ(split_timing(-1).reps, 0);
  const TimingSplit hundred = split_timing(100);
  EXPECT_EQ(hundred.reps, 10);
  EXPECT_EQ(hundred.iters_per_rep, 10);
  const TimingSplit three = split_timing(3);
  EXPECT_EQ(three.reps, 3);
  EXPECT_EQ(three.iters_per_rep, 1);
  EXPECT_EQ(split_timing(15).steps(), 10) << "15 are 10 reps of 1; the remainder is dropped";
  EXPECT_EQ(split_timing(95).steps(), 90);
}

TEST(RunPlan, PlanCountsEveryStepOfTheRun) {
  // Explicit counts: 3 warm-ups, probe, 1+1+3 profiled, 4 first touches, 100 timed, check.
  PlanRequest gpu;
  gpu.schedule = {3, 1, 1, 3};
  gpu.timing_iters = 100;
  gpu.cuda = true;
  gpu.first_touch_steps = 4;
  StepPlan plan = plan_steps(gpu, 1e-3);
  EXPECT_EQ(plan.warmup, 3);
  EXPECT_EQ(plan.peak_memory, 1);
  EXPECT_EQ(plan.profiled, 5);
  EXPECT_EQ(plan.first_touch, 4);
  EXPECT_EQ(plan.timed, 100);
  EXPECT_EQ(plan.check, 1);
  EXPECT_EQ(plan.total(), 114);
  gpu.timing_iters = 0;
  EXPECT_EQ(plan_steps(gpu, 1e-3).first_touch, 0) << "no timing, no first touch";

  // Auto on the CPU, 1 s a step: the auto counts follow the step time.
  plan = plan_steps(auto_request(false), 1.0);
  EXPECT_EQ(plan.warmup, 2);
  EXPECT_EQ(plan.peak_memory, 0);
  EXPECT_EQ(plan.timed, 1);
  EXPECT_EQ(plan.total(), 2 + 5 + 1 + 1);
  // Step time not known yet: the auto counts at their maximum.
  plan = plan_steps(auto_request(false), -1.0);
  EXPECT_EQ(plan.warmup, 3);
  EXPECT_EQ(plan.timed, 100);
}

TEST(RunPlan, SuggestsTheLargestHalvingThatFitsTheQuickLook) {
  const Problem p = shape(8, 16, 1024, 64);
  const PlanRequest r = auto_request(false);
  // 1.3 s a forward: --seq 512 has a quarter of the FLOPs, 0.325 s a step,
  // 3 warm-ups + 5 profiled + 1 timed + check = 10 steps, 3.25 s.
  auto s = suggest_smaller(p, r, 1.3);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->flags, "--seq 512");
  EXPECT_EQ(s->problem.seq_q, 512);
  EXPECT_EQ(s->problem.seq_kv, 512);
  EXPECT_NEAR(s->predicted_seconds, 10 * 1.3 / 4, 1e-9);
  EXPECT_LE(s->predicted_seconds, kQuickLookSeconds);
  // 13 s a forward (the report): --seq 256 (0.81 s a step, 9 steps)
  // is still over; --seq 128 is 11 steps of 0.2 s.
  s = suggest_smaller(p, r, 13.0);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->flags, "--seq 128");
  EXPECT_NEAR(s->predicted_seconds, 11 * 13.0 / 64, 1e-9);
  EXPECT_LE(s->predicted_seconds, kQuickLookSeconds);
  // Slower still: seq stops at 64, then the batch halves.
  s = suggest_smaller(p, r, 2000.0);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->flags.rfind("--seq 64 --batch ", 0), 0u) << s->flags;
  // A decode shape (seq_q != seq_kv) keeps its sequences: the batch halves.
  Problem decode = shape(8, 32, 1, 128);
  decode.seq_kv = 8192;
  s = suggest_smaller(decode, r, 2.0);
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->flags.find("--seq"), std::string::npos) << s->flags;
  EXPECT_EQ(s->problem.seq_kv, 8192);
  // Nothing to shrink, or no step time: no suggestion.
  EXPECT_FALSE(suggest_smaller(shape(1, 1, 64, 64), r, 100.0).has_value());
  EXPECT_FALSE(suggest_smaller(p, r, -1.0).has_value());
}

TEST(ProgressText, DurationsPhasesAndLines) {
  EXPECT_EQ(format_duration(0.00031), "0.3 ms");
  EXPECT_EQ(format_duration(0.048), "48 ms");
  EXPECT_EQ(format_duration(0.0996), "0.1 s");
  EXPECT_EQ(format_duration(0.42), "0.4 s");
  EXPECT_EQ(format_duration(9.94), "9.9 s");
  EXPECT_EQ(format_duration(9.96), "10 s");
  EXPECT_EQ(format_duration(59.4), "59 s");
  EXPECT_EQ(format_duration(59.6), "1 min 00 s");
  EXPECT_EQ(format_duration(108), "1 min 48 s");
  EXPECT_EQ(format_duration(7500), "2 h 05 min");
  EXPECT_EQ(format_duration(-1), "?");

  EXPECT_EQ(phase_text(RunPhase::profiling, 3, 5), "profiled step 4 of 5");
  EXPECT_EQ(phase_text(RunPhase::profiling, 5, 5), "profiled step 5 of 5") << "the last, while events are collected";
  EXPECT_EQ(phase_text(RunPhase::warmup, 1, 0), "warm-up 2") << "an auto count not decided yet";
  EXPECT_EQ(phase_text(RunPhase::timing, 0, 10), "timing 1 of 10");
  EXPECT_EQ(phase_text(RunPhase::checking, 0, 1), "NaN and error check");
  EXPECT_EQ(phase_text(RunPhase::writing, 0, 0), "writing files");
  EXPECT_EQ(phase_text(RunPhase::counters, 0, 0), "hardware counters");
  EXPECT_EQ(phase_text(RunPhase::calibrating, 0, 0), "calibrating ceilings");

  ProgressView v;
  v.label = "naive";
  v.phase = RunPhase::profiling;
  v.done = 2, v.total = 5;
  v.elapsed_s = 12.3;
  EXPECT_EQ(progress_text(v), "naive: profiled step 3 of 5 | elapsed 12 s");
  v.left_s = 6.0;
  EXPECT_EQ(progress_text(v), "naive: profiled step 3 of 5 | elapsed 12 s, ~6.0 s left");
  v.label = "[2/5] naive";
  v.run_left_s = 200;
  EXPECT_EQ(progress_text(v),
            "[2/5] naive: profiled step 3 of 5 | elapsed 12 s, ~6.0 s left (run ~3 min 20 s)");
  EXPECT_EQ(header_text(2, 24, "naive 8x16x1024x64 bf16", 62, 180),
            "[3/24] naive 8x16x1024x64 bf16 | elapsed 1 min 02 s, about 3 min 00 s left");
  EXPECT_EQ(header_text(0, 24, "naive", 0.4, -1), "[1/24] naive | elapsed 0.4 s");
}

TEST(ProgressText, EstimateSaysPerStepStepsLeftTotalAndTheSmallerProblem) {
  EstimateView e;
  e.name = "naive";
  e.device = "cpu";
  e.step_s = 1.3;
  e.steps_left = 9;
  e.total_s = 14.2;
  EXPECT_EQ(estimate_text(e), "naive on cpu: 1.3 s per forward, 9 more forwards, about 14 s in all "
                              "(estimate from the first forward)");
  SmallerProblem s;
  s.flags = "--seq 256";
  s.predicted_seconds = 2.14;
  e.smaller = s;
  e.steps_left = 1;
  e.span = "for this variant";
  e.pass = Pass::fwd_bwd;
  EXPECT_EQ(estimate_text(e), "naive on cpu: 1.3 s per step, 1 more step, about 14 s for this variant; "
                              "--seq 256 would take about 2.1 s (estimates from the first step, scaled by FLOPs)");
}

}  // namespace
}  // namespace attnprof::report
