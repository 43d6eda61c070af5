// How many steps a run spends and how long it will take, as arithmetic over
// measured step times: the --warmup-iters auto and --timing-iters auto rules,
// the steps one variant's run still has to go, and a smaller problem to
// suggest when a run is long. Pure: no LibTorch, no clock; callers pass the
// times in (seconds).
#pragma once

#include <optional>
#include <string>

#include "attnprof/problem.h"
#include "attnprof/run_record.h"

namespace attnprof::report {

// Auto warm-up: untraced steps until the next one would end past the budget,
// at least 1 and at most 3 (the fixed count before auto existed, which a GPU
// forward of micro- to milliseconds still gets). The profiled schedule's own
// wait and warmup steps follow, so one untraced step is enough to take the
// first-call costs (allocations, library handles) out of what is profiled.
inline constexpr int kAutoWarmupMax = 3;
inline constexpr double kWarmupBudgetSeconds = 2.0;
// Auto timing: as many steps as fit in the budget at the profiled steps' pace,
// at least 1 and at most 100 (the fixed CUDA count before auto existed, kept
// for any step up to 5 ms). 0.5 s: a 92 ms forward (sdpa-cudnn on the
// varlen-prefill batch, H200) took 4.5 s end to end at 2 s and 3.05 s at 1 s,
// past issue 31's 3 s; ten of its timed steps spread 0.06%, so five suffice.
inline constexpr int kAutoTimingMax = 100;
inline constexpr double kTimingBudgetSeconds = 0.5;
inline constexpr int kTimingRepsMax = 10;

// Auto warm-up, asked after `done` steps that took `elapsed_s` together, the
// last of them `last_s`: run another?
bool warmup_wants_another(int done, double elapsed_s, double last_s);
// Auto warm-up, predicted: how many steps it will have run in all when the
// rest take `step_s` each.
int auto_warmup_total(int done, double elapsed_s, double last_s, double step_s);
// Auto timing: the steps to time when one takes `step_s` (<= 0: unknown, the maximum).
int auto_timing_iters(double step_s);

// Timed steps as repetitions: up to 10, each of total/reps back-to-back steps
// (so 15 requested are 10 reps of 1; the remainder is dropped).
struct TimingSplit {
  int reps = 0;
  int iters_per_rep = 0;
  int steps() const { return reps * iters_per_rep; }
};
TimingSplit split_timing(int total_iters);

// What a variant's run was asked to do; schedule.warmup_iters and
// timing_iters may be kAutoIters.
struct PlanRequest {
  Schedule schedule;
  int timing_iters = kAutoIters;
  bool cuda = false;
  int first_touch_steps = 0;  // steps that touch each timing input set once before timing
};

// The steps of one variant's run, in the order they run.
struct StepPlan {
  int warmup = 0;       // untraced
  int peak_memory = 0;  // the peak-memory probe (CUDA only)
  int profiled = 0;     // wait + warmup + active
  int first_touch = 0;
  int timed = 0;
  int check = 1;  // the NaN check
  int total() const { return warmup + peak_memory + profiled + first_touch + timed + check; }
};

// The plan for steps of `step_s` each (< 0: not known yet, auto counts at
// their maximum). A warm-up under way is the caller's to fold in (auto_warmup_total).
StepPlan plan_steps(const PlanRequest& r, double step_s);

// The early estimate is shown when a run will take longer than this...
inline constexpr double kEstimateThresholdSeconds = 10.0;
// ...with a smaller problem predicted to run within this.
inline constexpr double kQuickLookSeconds = 5.0;

// A smaller problem of the same kind: the flags that make it ("--seq 256"),
// and its predicted run time (its steps at step_s scaled by the FLOP ratio).
struct SmallerProblem {
  Problem problem;
  std::string flags;
  double predicted_seconds = 0.0;
};
// Halves --seq (a square problem, down to 64), then --batch, then --heads,
// until the prediction is within target_s; nullopt when p cannot shrink or
// step_s is unknown.
std::optional<SmallerProblem> suggest_smaller(const Problem& p, const PlanRequest& r, double step_s,
                                              double target_s = kQuickLookSeconds);

}  // namespace attnprof::report
