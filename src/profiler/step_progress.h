// Counts one variant's steps against its plan (report/run_plan.h) and tells
// the progress callback about each phase and step, with the steps left and
// the best step time known. Counting goes on without a callback too: the
// auto warm-up's count is read back from here.
#pragma once

#include "attnprof/progress.h"
#include "attnprof/report/run_plan.h"

namespace attnprof {

class StepProgress {
 public:
  StepProgress(ProgressCallback callback, report::PlanRequest plan);

  // A phase starts with `total` units (0: not counted yet).
  void begin(RunPhase phase, int total);
  // Unit `done` of `total` finished: `steps` steps of the pass that took
  // `seconds` together (< 0: not timed, e.g. launched without a synchronise).
  void unit_done(RunPhase phase, int done, int total, int steps, double seconds);

  // The warm-up's count once run; the timing's steps (kAutoIters until
  // decided) and first-touch steps once its input sets are known.
  void warmup_decided(int steps);
  void plan_timing(int iters, int first_touch_steps);

  int warmup_steps() const { return warmup_steps_; }  // untraced warm-up steps run so far
  // The time of one step from the latest timed one (the first includes one-time costs).
  double step_seconds() const { return step_s_; }
  const report::PlanRequest& plan() const { return plan_; }

 private:
  void send(RunPhase phase, int done, int total, double last_seconds) const;

  ProgressCallback callback_;
  report::PlanRequest plan_;
  int steps_done_ = 0;
  int warmup_steps_ = 0;
  double warmup_elapsed_s_ = 0.0, warmup_last_s_ = -1.0;  // the auto warm-up so far
  double step_s_ = -1.0;
};

}  // namespace attnprof
