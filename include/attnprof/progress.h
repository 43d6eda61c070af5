// What a run is doing while it runs, for progress displays: the measuring
// code reports each unit of work before it starts it; a display decides what
// to show and how often. No printing happens in measuring code.
#pragma once

#include <functional>

namespace attnprof {

enum class RunPhase {
  setup,      // device, inputs, prepare
  warmup,     // untraced steps before the profiler exists
  profiling,  // the profiler schedule: wait, warmup and active steps
  timing,     // unprofiled steps between CUDA events
  checking,   // the NaN/Inf check
  writing,    // trace, table and summary files
};
const char* run_phase_name(RunPhase p);  // "warm-up", "profiled step", ...

struct RunProgress {
  RunPhase phase = RunPhase::setup;
  int done = 0;   // units of this phase finished
  int total = 0;  // units in this phase (0: not counted)
  // Wall time of the last unit, when one just finished (seconds; < 0 unknown):
  // the first step's time is what an estimate of the whole run is made from.
  double last_unit_seconds = -1.0;
};

// Called on the measuring thread between units of work; must be cheap.
using ProgressCallback = std::function<void(const RunProgress&)>;

}  // namespace attnprof
