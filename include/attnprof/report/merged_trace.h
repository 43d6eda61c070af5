// One Chrome trace holding several runs side by side, for Perfetto: each run
// (a variant, or a variant of run A/B under `compare`) becomes its own process
// whose first profiled forward starts at the same instant, so the same moment
// of every forward lines up across processes.
#pragma once

#include <string>
#include <vector>

#include "attnprof/report/counters.h"
#include "attnprof/report/kineto_trace.h"

namespace attnprof::report {

// One run to show. The trace must outlive the call.
struct RunTrace {
  std::string variant;   // "sdpa-flash"
  std::string run;       // "" for a single run; "A" / "B" under compare
  std::string headline;  // formatted by the caller, e.g. "96 µs/forward"; may be empty
  const KinetoTrace* trace = nullptr;
  // The user scope one measured call runs in: attn_fwd, or attn_bwd for a
  // backward-only pass. Runs are aligned on the first one; the picture shows one.
  std::string scope = std::string(kForwardScope);
  // The run's counter pass (--counters), when it collected: each kernel slice
  // of every profiled step gets the counted figures of the kernel at the same
  // place in the step (same scope, same name, in launch order) as the args
  // "attnprof_counters". Must outlive the call.
  const CounterPass* counters = nullptr;
};

// "sdpa-flash", "sdpa-flash (A)": how processes and timeline rows name a run.
std::string run_title(const RunTrace& run);

struct MergeOptions {
  // Profiler steps kept per run, from the one holding the first forward:
  // `--active 10000` would otherwise make a comparison file of gigabytes.
  int max_steps = 10;
};

struct MergedTrace {
  std::string json;                 // the Chrome trace; the caller gzips and writes it
  std::vector<std::string> notes;   // one line per run skipped or trimmed
  double forward_start_us = 0.0;    // where every run's first forward starts
};

// Process per run (pid = 1 + its position, process_sort_index = its position,
// named "<run_title> — <headline>"), its CPU threads then GPU streams as named
// threads, every slice shifted so the first CPU attn_fwd starts at
// forward_start_us (the largest lead of any run before its first forward,
// rounded up to a whole microsecond: Perfetto drops negative timestamps).
// Kept: the slices of the profiled steps (see MergeOptions) with the device
// work their runtime calls launched, and the launch -> kernel flow arrows whose
// two ends both sit in a kept slice (renumbered 1, 2, ... across the file).
// Slices that overlap a slice of their track partially (rounding in Kineto's
// microsecond timestamps) are cut at the enclosing slice's end, as Perfetto
// requires strict nesting. A run without an attn_fwd scope is skipped with a
// note; TraceError when no run is left.
MergedTrace merge_traces(const std::vector<RunTrace>& runs, const MergeOptions& options = {});

}  // namespace attnprof::report
