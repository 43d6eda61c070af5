// The measuring half of a run: warm-up, the profiler schedule, unprofiled
// timing. No printing and no file formats here; run_variant (session.cpp)
// turns what comes out into a RunRecord for the writers.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnprof/events.h"
#include "attnprof/problem.h"
#include "attnprof/progress.h"
#include "attnprof/run_record.h"
#include "attnprof/variant.h"
#include "profiler/step_progress.h"
#include "variants/torch_problem.h"

namespace attnprof {

// Wall-clock stopwatch for phase breakdowns.
class PhaseClock {
 public:
  PhaseClock();
  // Milliseconds since the previous lap (or construction), appended as `name`.
  void lap(const std::string& name, std::vector<std::pair<std::string, double>>& phases);

 private:
  int64_t last_ns_;
};

struct RunnerOptions {
  Schedule schedule;
  // Where Kineto writes its Chrome trace (plain JSON); empty = no trace.
  std::string trace_path;
  // Added to the trace's top level as "attnprof" (a JSON object as text).
  std::string trace_metadata_json;
  // More top-level objects, (key, JSON object text).
  std::vector<std::pair<std::string, std::string>> extra_trace_metadata;
  ProfilerOptions profiler;  // --record-shapes, --profile-memory, --with-stack
  std::string trace_id;      // the trace's "trace_id"
};

struct ProfiledRun {
  std::vector<TraceEvent> events;
  std::optional<double> peak_memory_bytes;
  bool trace_saved = false;
  // What Kineto wrote to stderr while saving the trace (it reports a failed
  // write only there), held back so the caller decides what the user sees.
  std::string trace_save_messages;
  // What LibTorch wrote to stderr while the profiler was on (the CPU
  // allocator's "Memory block of unknown size" under --profile-memory): the
  // run's warnings, not raw lines on the user's terminal.
  std::string profiling_messages;
  std::vector<std::pair<std::string, double>> phases_ms;  // wall time of each stage
  int warmup_iters = 0;           // untraced steps run (the auto count once decided)
  // The fastest step timed without the profiler (a timed warm-up or a wait
  // step), else the fastest profiled one; wall to wall, seconds.
  double min_step_seconds = 0.0;
};

// The name of profiled step n: "ProfilerStep#n", folded to "ProfilerStep*" in tables.
inline constexpr const char* kStepScopePrefix = "ProfilerStep#";

// Runs `variant` (already prepared) on `in`: untraced warm-up steps (a fixed
// count, or kAutoIters: report/run_plan.h decides after each), a peak-memory
// probe on CUDA, then wait/warmup/active steps under the Kineto profiler, each
// a ProfilerStep#N scope ending with a device synchronise. Every phase and step is
// reported to `progress`.
ProfiledRun profile_pass(Variant& variant, const Problem& p, const Inputs& in, const RunnerOptions& opt,
                         StepProgress& progress);

// How many input sets time_pass rotates through (1 on the CPU), and how many
// steps it spends touching them before it times (0 on the CPU).
int timing_input_set_count(const Problem& p, const Inputs& in);
int first_touch_steps(const Problem& p, int input_sets);

// Step time without the profiler: `total_iters` back-to-back steps after the
// warm-up, in up to 10 repetitions timed with CUDA events (steady clock on
// CPU). A backward pass times the backward alone, through a kept forward
// graph. When q, k, v fit in the L2 cache, several input sets are rotated so
// the cache is not what gets measured. nullopt when total_iters <= 0.
std::optional<EventTiming> time_pass(Variant& variant, const Problem& p, const Inputs& in, int total_iters,
                                     StepProgress& progress);

}  // namespace attnprof
