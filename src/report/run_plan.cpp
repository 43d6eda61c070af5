#include "attnprof/report/run_plan.h"

#include <algorithm>
#include <cmath>

namespace attnprof::report {

bool warmup_wants_another(int done, double elapsed_s, double last_s) {
  if (done < 1) return true;
  if (done >= kAutoWarmupMax) return false;
  return last_s < 0.0 || elapsed_s + last_s <= kWarmupBudgetSeconds;
}

int auto_timing_iters(double step_s) {
  if (!(step_s > 0.0)) return kAutoTimingMax;
  const double fit = std::floor(kTimingBudgetSeconds / step_s);
  return static_cast<int>(std::clamp(fit, 1.0, double(kAutoTimingMax)));
}

TimingSplit split_timing(int total_iters) {
  if (total_iters <= 0) return {};
  TimingSplit t;
  t.reps = std::min(total_iters, kTimingRepsMax);
  t.iters_per_rep = std::max(1, total_iters / t.reps);
  return t;
}

int auto_warmup_total(int done, double elapsed_s, double last_s, double step_s) {
  while (warmup_wants_another(done, elapsed_s, last_s)) {
    elapsed_s += step_s;
    last_s = step_s;
    ++done;
  }
  return done;
}

StepPlan plan_steps(const PlanRequest& r, double step_s) {
  const Schedule& s = r.schedule;
  StepPlan plan;
  if (s.warmup_iters >= 0) plan.warmup = s.warmup_iters;
  else if (step_s > 0.0) plan.warmup = auto_warmup_total(0, 0.0, -1.0, step_s);
  else plan.warmup = kAutoWarmupMax;
  plan.peak_memory = r.cuda ? 1 : 0;
  plan.profiled = s.wait + s.warmup + s.active;
  plan.timed = split_timing(r.timing_iters >= 0 ? r.timing_iters : auto_timing_iters(step_s)).steps();
  plan.first_touch = plan.timed > 0 ? r.first_touch_steps : 0;
  return plan;
}

namespace {
// One halving of the problem, in the order a quick look gives up detail:
// sequence length first (FLOPs fall 4x), then batch, then heads.
bool shrink(Problem& q) {
  if (q.seq_q == q.seq_kv && q.seq_q > 64) {
    q.seq_q = q.seq_kv = q.seq_q / 2;
    return true;
  }
  if (q.batch > 1) {
    q.batch /= 2;
    return true;
  }
  if (q.heads_q > 1 && q.heads_kv == q.heads_q) {
    q.heads_q = q.heads_kv = q.heads_q / 2;
    return true;
  }
  return false;
}

std::string changed_flags(const Problem& from, const Problem& to) {
  std::string flags;
  auto add = [&](const char* flag, int64_t a, int64_t b) {
    if (a != b) flags += (flags.empty() ? "" : " ") + std::string(flag) + " " + std::to_string(b);
  };
  add("--seq", from.seq_q, to.seq_q);
  add("--batch", from.batch, to.batch);
  add("--heads", from.heads_q, to.heads_q);
  return flags;
}
}  // namespace

std::optional<SmallerProblem> suggest_smaller(const Problem& p, const PlanRequest& r, double step_s, double target_s) {
  if (!(step_s > 0.0) || !(p.flops() > 0.0)) return std::nullopt;
  Problem q = p;
  while (shrink(q)) {
    const double step = step_s * q.flops() / p.flops();
    const double predicted = plan_steps(r, step).total() * step;
    if (predicted <= target_s) return SmallerProblem{q, changed_flags(p, q), predicted};
  }
  return std::nullopt;
}

}  // namespace attnprof::report
