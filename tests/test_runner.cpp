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
    const ProfiledRun run = profile_pass(*f.v, f.p, f.in, o);
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
  o.progress = [&](const RunProgress& r) { seen.push_back(r); };
  profile_pass(*f.v, f.p, f.in, o);
  ASSERT_EQ(seen.size(), 2u + 4u);
  EXPECT_EQ(seen[0].phase, RunPhase::warmup);
  EXPECT_GE(seen[0].last_unit_seconds, 0.0) << "the first step's time feeds the estimate";
  EXPECT_EQ(seen[1].done, 2);
  EXPECT_EQ(seen[1].total, 2);
  for (size_t i = 2; i < seen.size(); ++i) {
    EXPECT_EQ(seen[i].phase, RunPhase::profiling);
    EXPECT_EQ(seen[i].done, int(i) - 1);
    EXPECT_EQ(seen[i].total, 4);
  }
}

TEST(Runner, TimingSplitsIntoRepetitionsForEveryPass) {
  for (Pass pass : {Pass::fwd, Pass::bwd, Pass::fwd_bwd}) {
    SCOPED_TRACE(pass_name(pass));
    Fixture f(pass);
    const auto t = time_pass(*f.v, f.p, f.in, 25);
    ASSERT_TRUE(t);
    EXPECT_EQ(t->reps, 10);
    EXPECT_EQ(t->iters_per_rep, 2);
    EXPECT_EQ(t->clock, "steady_clock");
    EXPECT_EQ(t->input_sets, 1);
    EXPECT_GT(t->median_us, 0.0);
    EXPECT_LE(t->min_us, t->median_us);
    EXPECT_LE(t->median_us, t->max_us);
    EXPECT_FALSE(time_pass(*f.v, f.p, f.in, 0));
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
    o.progress = [&](const RunProgress& r) {
      if (r.phase == RunPhase::profiling && r.done == stop_at) request_interrupt(2);
    };
    EXPECT_THROW(profile_pass(*f.v, f.p, f.in, o), Interrupted);
    request_interrupt(0);
    o.progress = {};
    const ProfiledRun run = profile_pass(*f.v, f.p, f.in, o);
    EXPECT_EQ(scope_counts(run.events).at(kForwardScope), 3);
  }
}
