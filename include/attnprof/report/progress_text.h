// The words of progress displays: durations, phases, the per-unit and header
// lines, and the early estimate. Formatting only; when and where they are
// shown is the CLI's progress display (src/cli/progress_display.h).
#pragma once

#include <optional>
#include <string>

#include "attnprof/progress.h"
#include "attnprof/report/run_plan.h"

namespace attnprof::report {

// "0.4 s", "13 s", "1 min 48 s", "2 h 05 min"; "?" when negative (not known).
std::string format_duration(double seconds);

// "warm-up 2 of 3", "profiled step 4 of 5": the unit running now, after
// `done` of `total` finished (total 0: not counted).
std::string phase_text(RunPhase phase, int done, int total);

// One look at a running unit (a variant, or a sweep point).
struct ProgressView {
  std::string label;  // "naive", "[2/5] inplace"
  RunPhase phase = RunPhase::setup;
  int done = 0, total = 0;
  double elapsed_s = 0.0;  // in this unit
  double left_s = -1.0;    // in this unit; < 0: not known yet
  double run_left_s = -1.0;  // the whole run, when it has several units; < 0: none
};
// "[2/5] inplace: profiled step 4 of 5 | elapsed 12 s, ~6.0 s left (run ~3 min 20 s)"
std::string progress_text(const ProgressView& v);

// "[3/24] naive (8x16x1024x64 bf16 causal on cpu) | elapsed 1 min 02 s, about 3 min left":
// a unit of several starts; run_left_s < 0 leaves the estimate out.
std::string header_text(size_t index, size_t count, const std::string& label, double run_elapsed_s,
                        double run_left_s);

// The early estimate, made after a unit's first step.
struct EstimateView {
  std::string name, device;  // "naive", "cpu"
  Pass pass = Pass::fwd;
  double step_s = 0.0;
  int steps_left = 0;
  double total_s = 0.0;          // predicted wall time of what `span` names
  std::string span = "in all";   // or "for this variant", "for this point"
  std::optional<SmallerProblem> smaller;
  std::string basis = "first";  // which step's pace: "first", "second"
};
// "naive on cpu: 1.3 s per forward, 9 more forwards, about 14 s in all; --seq 256 would take
// about 2.1 s (estimates from the second forward, scaled by FLOPs)"
std::string estimate_text(const EstimateView& e);

}  // namespace attnprof::report
