#include "profiler/step_progress.h"

#include <algorithm>
#include <utility>

namespace attnprof {

StepProgress::StepProgress(ProgressCallback callback, report::PlanRequest plan)
    : callback_(std::move(callback)), plan_(std::move(plan)) {}

void StepProgress::begin(RunPhase phase, int total) { send(phase, 0, total, -1.0); }

void StepProgress::unit_done(RunPhase phase, int done, int total, int steps, double seconds) {
  steps_done_ += steps;
  if (seconds >= 0.0 && steps > 0) step_s_ = seconds / steps;
  if (phase == RunPhase::warmup) {
    warmup_steps_ += steps;
    warmup_elapsed_s_ += std::max(0.0, seconds);
    warmup_last_s_ = seconds;
  }
  send(phase, done, total, seconds);
}

void StepProgress::warmup_decided(int steps) { plan_.schedule.warmup_iters = steps; }

void StepProgress::plan_timing(int iters, int first_touch_steps) {
  plan_.timing_iters = iters;
  plan_.first_touch_steps = first_touch_steps;
}

void StepProgress::send(RunPhase phase, int done, int total, double last_seconds) const {
  if (!callback_) return;
  RunProgress p{phase, done, total, last_seconds};
  p.steps_done = steps_done_;
  report::PlanRequest plan = plan_;
  if (plan.schedule.warmup_iters == kAutoIters && warmup_steps_ > 0 && step_s_ > 0.0)
    plan.schedule.warmup_iters = report::auto_warmup_total(warmup_steps_, warmup_elapsed_s_, warmup_last_s_, step_s_);
  p.steps_left = std::max(0, report::plan_steps(plan, step_s_).total() - steps_done_);
  p.step_seconds = step_s_;
  callback_(p);
}

}  // namespace attnprof
