// The comparison files of a multi-variant run (`--variant a,b,...`) and of
// `compare DIR_A DIR_B`: the merged Perfetto trace and the one-forward-per-run
// picture, both made from the runs' own Kineto traces.
#pragma once

#include <string>
#include <vector>

#include "attnprof/report/merged_trace.h"

namespace attnprof::io {
class StagedFiles;
}

namespace attnprof::report {

struct RunTraceFile {
  std::string variant;   // "sdpa-flash"
  std::string run;       // "" for one run; "A" / "B" under compare
  std::string headline;  // "96 µs/forward", formatted by the caller; may be empty
  std::string path;      // DIR/<variant>/<stem>/<stem>.pt.trace.json.gz (RunRecord::trace_file)
  std::string scope = std::string(kForwardScope);  // attn_bwd for a backward-only pass
  const CounterPass* counters = nullptr;  // RunTrace::counters; outlives the call
};

struct ComparisonFiles {
  std::string trace_path;     // out_dir/compare/<stem>.trace.json.gz
  std::string timeline_path;  // out_dir/compare/<stem>.timeline.svg
  // One line each, for the CLI to print: runs left out (unreadable trace, no
  // attn_fwd scope) and runs trimmed (steps past MergeOptions::max_steps).
  std::vector<std::string> notes;
};

// Reads each run's trace once and writes both files (each atomically: complete
// or absent). A run whose trace cannot be read or has no forward is left out
// with a note. Throws TraceError when no run is left, io::FileError when a
// file cannot be written.
ComparisonFiles write_trace_comparison(const std::vector<RunTraceFile>& runs, const std::string& out_dir,
                                       const std::string& stem, const std::string& title,
                                       const MergeOptions& options = {});
// The same, staged into `files` (a run's compare/ set, published together).
ComparisonFiles stage_trace_comparison(io::StagedFiles& files, const std::vector<RunTraceFile>& runs,
                                       const std::string& out_dir, const std::string& stem, const std::string& title,
                                       const MergeOptions& options = {});

// out_dir/compare/<stem>.trace.json.gz and out_dir/compare/<stem>.timeline.svg.
std::string comparison_trace_path(const std::string& out_dir, const std::string& stem);
std::string comparison_timeline_path(const std::string& out_dir, const std::string& stem);
// For a set that has no comparison of `stem` this time (no run's trace could
// be read): an earlier run's pair goes when the set is published, so the
// folder never shows another run's picture beside this run's tables.
void remove_trace_comparison_at_publish(io::StagedFiles& staged, const std::string& out_dir, const std::string& stem);

}  // namespace attnprof::report
