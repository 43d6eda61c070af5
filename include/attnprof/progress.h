// What a run is doing while it runs, for progress displays: the measuring
// code reports each phase as it starts (done 0) and each unit of work as it
// finishes; a display decides what to show and how often. No printing
// happens in measuring code.
#pragma once

#include <functional>

namespace attnprof {

enum class RunPhase {
  setup,      // device, inputs, prepare
  warmup,     // untraced steps before the profiler exists
  profiling,  // the profiler schedule: wait, warmup and active steps
  timing,     // unprofiled steps between CUDA events
  checking,   // the NaN/Inf check
  counters,   // --counters: one more step, each kernel replayed for its hardware counters
  calibrating,  // --counters: measuring the device's ceilings (once per device, then cached)
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
  // The whole variant's run counted in steps of the pass (forwards, for a
  // forward pass), as planned now: how many have run, how many are still to
  // run (auto counts are predicted until decided), and one step's wall time
  // as best known (seconds; < 0 until a step was timed).
  int steps_done = 0;
  int steps_left = 0;
  double step_seconds = -1.0;
};

// Called on the measuring thread between units of work; must be cheap.
using ProgressCallback = std::function<void(const RunProgress&)>;

}  // namespace attnprof
