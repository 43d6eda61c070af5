// One variant, end to end, as data: support check, memory prediction, inputs,
// prepare, the profiled schedule, unprofiled timing, the NaN check, with
// --counters the counter pass, and the aggregation of the events into a RunRecord. Nothing is printed or written
// here except Kineto's own temporary trace file, which is read back and
// removed before returning: the CLI hands the Measurement to the writers
// (report/run_files.h) and the printers.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnprof/problem.h"
#include "attnprof/progress.h"
#include "attnprof/run_record.h"

namespace attnprof {

struct MeasureOptions {
  // warmup_iters may be kAutoIters: up to 3 untraced steps within a time
  // budget (report/run_plan.h); the record holds the count that ran.
  Schedule schedule;
  ProfilerOptions profiler;
  // Steps timed without the profiler; kAutoIters: as many as fit the timing
  // budget at the profiled steps' pace, 1 to 100.
  int timing_iters = kAutoIters;
  // --counters: after the timing and the NaN check, one more step of the pass
  // whose kernels are replayed for their hardware counters, and the device's
  // ceilings (calibrated once, then cached). Runs last, so no profiled or
  // timed figure sees it.
  bool counters = false;
  // Process start to main() (dynamic loading of LibTorch), recorded as the first
  // phase of the run.
  std::optional<double> startup_ms;
  // Where Kineto may write its trace before it is read back (a hidden name; the
  // output directory, which the CLI has checked is writable).
  std::string scratch_dir = ".";
  ProgressCallback progress;  // may be empty; called on the measuring thread
  // More top-level objects for the trace, (key, JSON object text): a rank of a
  // multi-GPU run adds "distributedInfo" (rank, world size) for HTA.
  std::vector<std::pair<std::string, std::string>> trace_metadata;
};

struct Measurement {
  RunRecord record;        // status ok / skipped / failed / interrupted, figures when ok
  std::string trace_json;  // Kineto's Chrome trace (its JSON text) when ok
};

// Never throws for a variant's own failure: that becomes status failed with
// the reason (skipped for out-of-memory and for what the variant or the memory
// prediction rules out; interrupted when a signal stopped it at a step boundary).
Measurement run_variant(const std::string& name, const Problem& p, const MeasureOptions& opt);

}  // namespace attnprof
