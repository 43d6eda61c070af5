// The measuring layer on the CPU: what one step of each pass records under
// the profiler, the progress it reports, the unprofiled timing, and that a
// stop at any point tears Kineto down so the next run works.
#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <string>
#include <vector>

#include "attnprof/interrupt.h"
#include "attnprof/variant.h"
#include "profiler/runner.h"
#include "variants/torch_problem.h"

using namespace attnprof;

namespace {

Problem tiny(Pass pass) {
  Problem p;
  p.batch = 1, p.heads_q = 2, p.heads_kv = 1, p.seq_q = 8, p.seq_kv = 24, p.head_dim = 16;
  p.dtype = DType::FP32;
  p.pass = pass;
  p.device = "cpu";
  return p;
}

std::map<std::string, int> scope_counts(const std::vector<TraceEvent>& events) {
  std::map<std::string, int> n;
  for (const TraceEvent& e : events)
    if (e.is_user_annotation) ++n[e.name.rfind(kStepScopePrefix, 0) == 0 ? "step" : e.name];
  return n;
}

// Counts the steps of a run with schedule `s` and no timing, and tells `callback`.
StepProgress progress_for(const Schedule& s, ProgressCallback callback = {}) {
  report::PlanRequest plan;
  plan.schedule = s;
  plan.timing_iters = 0;
  return StepProgress(std::move(callback), plan);
}

struct Fixture {
  Problem p;
  std::unique_ptr<Variant> v = make_variant("naive");
  Inputs in;
  explicit Fixture(Pass pass) : p(tiny(pass)) {
    at::manual_seed(std::random_device{}());
    in = random_inputs(p);
    v->prepare(p, in.q, in.k, in.v);
  }
};

}  // namespace

TEST(Runner, EachPassRecordsItsScopesOncePerActiveStep) {
  for (Pass pass : {Pass::fwd, Pass::bwd, Pass::fwd_bwd}) {
    SCOPED_TRACE(pass_name(pass));
    Fixture f(pass);
    RunnerOptions o;
    o.schedule = {1, 1, 1, 3};
    StepProgress progress = progress_for(o.schedule);
    const ProfiledRun run = profile_pass(*f.v, f.p, f.in, o, progress);
    const auto n = scope_counts(run.events);
    EXPECT_EQ(n.at("step"), 3) << "only the active steps are recorded";
    EXPECT_EQ(n.count(kForwardScope) ? n.at(kForwardScope) : 0, pass == Pass::bwd ? 0 : 3);
    EXPECT_EQ(n.count(kBackwardScope) ? n.at(kBackwardScope) : 0, pass == Pass::fwd ? 0 : 3);
    EXPECT_FALSE(run.peak_memory_bytes) << "no device memory probe on the CPU";
    EXPECT_FALSE(run.trace_saved);
  }
}

TEST(Runner, ReportsProgressForEveryUnitOfWork) {
  Fixture f(Pass::fwd);
  RunnerOptions o;
  o.schedule = {2, 1, 1, 2};
  std::vector<RunProgress> seen;
  StepProgress progress = progress_for(o.schedule, [&](const RunProgress& r) { seen.push_back(r); });
  const ProfiledRun run = profile_pass(*f.v, f.p, f.in, o, progress);
  // Each phase as it starts (done 0), then each unit as it finishes.
  ASSERT_EQ(seen.size(), 1u + 2u + 1u + 4u);
  EXPECT_EQ(seen[0].phase, RunPhase::warmup);
  EXPECT_EQ(seen[0].done, 0);
  EXPECT_EQ(seen[0].total, 2);
  EXPECT_GE(seen[1].last_unit_seconds, 0.0) << "the first step's time feeds the estimate";
  EXPECT_GT(seen[1].step_seconds, 0.0);
  EXPECT_LT(seen[2].last_unit_seconds, 0.0) << "a fixed count times only the first warm-up step";
  EXPECT_EQ(seen[2].done, 2);
  EXPECT_EQ(seen[2].total, 2);
  EXPECT_EQ(seen[3].phase, RunPhase::profiling);
  EXPECT_EQ(seen[3].done, 0);
  for (size_t i = 4; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].phase, RunPhase::profiling);
    EXPECT_EQ(seen[i].done, int(i) - 3);
    EXPECT_EQ(seen[i].total, 4);
    EXPECT_GE(seen[i].last_unit_seconds, 0.0) << "profiled steps end with a synchronise";
  }
  // 2 warm-ups + 4 profiled + the NaN check: every report adds up to 7.
  for (const RunProgress& r : seen) EXPECT_EQ(r.steps_done + r.steps_left, 7) << r.steps_done;
  EXPECT_EQ(seen.back().steps_left, 1);
  EXPECT_EQ(run.warmup_iters, 2);
  EXPECT_GT(run.min_step_seconds, 0.0);
}

TEST(Runner, AutoWarmupTimesEachStepAndRecordsTheCount) {
  Fixture f(Pass::fwd);
  RunnerOptions o;
  o.schedule = {kAutoIters, 0, 0, 1};
  std::vector<RunProgress> seen;
  StepProgress progress = progress_for(o.schedule, [&](const RunProgress& r) { seen.push_back(r); });
  const ProfiledRun run = profile_pass(*f.v, f.p, f.in, o, progress);
  // 1 to 3 steps, depending on how long a tiny step takes on a shared machine.
  EXPECT_GE(run.warmup_iters, 1);
  EXPECT_LE(run.warmup_iters, 3);
  EXPECT_EQ(progress.warmup_steps(), run.warmup_iters);
  int warmups = 0;
  for (const RunProgress& r : seen) {
    if (r.phase != RunPhase::warmup || r.done == 0) continue;
    ++warmups;
    EXPECT_GE(r.last_unit_seconds, 0.0) << "every auto step is timed";
    EXPECT_EQ(r.total, r.done == run.warmup_iters ? run.warmup_iters : 0) << "not counted until decided";
  }
  EXPECT_EQ(warmups, run.warmup_iters);
}

TEST(Runner, TimingSplitsIntoRepetitionsForEveryPass) {
  for (Pass pass : {Pass::fwd, Pass::bwd, Pass::fwd_bwd}) {
    SCOPED_TRACE(pass_name(pass));
    Fixture f(pass);
    StepProgress progress = progress_for({});
    const auto t = time_pass(*f.v, f.p, f.in, 25, progress);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->reps, 10);
    EXPECT_EQ(t->iters_per_rep, 2);
    EXPECT_EQ(t->clock, "steady_clock");
    EXPECT_EQ(t->input_sets, 1);
    EXPECT_GT(t->median_us, 0.0);
    EXPECT_LE(t->min_us, t->median_us);
    EXPECT_LE(t->median_us, t->max_us);
    EXPECT_FALSE(time_pass(*f.v, f.p, f.in, 0, progress));
  }
}

// A stop asked for while Kineto is prepared but not yet recording (the
// schedule's warmup steps) used to fail with "Can't disable Kineto profiler
// when it's not running" and leave the profiler in use. Now the session tears
// down and the next run profiles normally.
TEST(Runner, StopAtAnyStepLeavesKinetoReusable) {
  for (int stop_at : {1, 2, 3}) {  // wait step, warmup step (prepared), active step (recording)
    SCOPED_TRACE("stop after profiled step " + std::to_string(stop_at));
    Fixture f(Pass::fwd);
    RunnerOptions o;
    o.schedule = {0, 1, 1, 3};
    StepProgress stopping = progress_for(o.schedule, [&](const RunProgress& r) {
      if (r.phase == RunPhase::profiling && r.done == stop_at) request_interrupt(2);
    });
    EXPECT_THROW(profile_pass(*f.v, f.p, f.in, o, stopping), Interrupted);
    request_interrupt(0);
    StepProgress progress = progress_for(o.schedule);
    const ProfiledRun run = profile_pass(*f.v, f.p, f.in, o, progress);
    EXPECT_EQ(scope_counts(run.events).at(kForwardScope), 3);
  }
}
