#include "attnprof/report/trace_comparison.h"

#include <fmt/format.h>

#include <memory>

#include "attnprof/io/files.h"
#include "attnprof/report/timeline_svg.h"

namespace attnprof::report {

std::string comparison_trace_path(const std::string& out_dir, const std::string& stem) {
  return io::join_path(io::join_path(out_dir, "compare"), stem + ".trace.json.gz");
}

std::string comparison_timeline_path(const std::string& out_dir, const std::string& stem) {
  return io::join_path(io::join_path(out_dir, "compare"), stem + ".timeline.svg");
}

void remove_trace_comparison_at_publish(io::StagedFiles& staged, const std::string& out_dir, const std::string& stem) {
  staged.remove_at_publish(comparison_trace_path(out_dir, stem));
  staged.remove_at_publish(comparison_timeline_path(out_dir, stem));
}

ComparisonFiles write_trace_comparison(const std::vector<RunTraceFile>& runs, const std::string& out_dir,
                                       const std::string& stem, const std::string& title, const MergeOptions& options) {
  io::StagedFiles staged;
  ComparisonFiles out = stage_trace_comparison(staged, runs, out_dir, stem, title, options);
  staged.publish();
  return out;
}

ComparisonFiles stage_trace_comparison(io::StagedFiles& staged, const std::vector<RunTraceFile>& files,
                                       const std::string& out_dir, const std::string& stem, const std::string& title,
                                       const MergeOptions& options) {
  ComparisonFiles out;
  // unique_ptr: RunTrace points at each trace, so they must not move.
  std::vector<std::unique_ptr<KinetoTrace>> traces;
  std::vector<RunTrace> runs;
  Timeline timeline;
  timeline.title = title;
  for (const RunTraceFile& f : files) {
    const RunTrace probe{f.variant, f.run, f.headline, nullptr, f.scope, nullptr};
    try {
      auto trace = std::make_unique<KinetoTrace>(read_kineto_trace_file(f.path));
      const RunTrace run{f.variant, f.run, f.headline, trace.get(), f.scope, f.counters};
      timeline.rows.push_back(timeline_row(run));  // throws when the trace has no forward
      runs.push_back(run);
      traces.push_back(std::move(trace));
    } catch (const TraceError& e) {
      out.notes.push_back(fmt::format("{}: left out of the comparison: {}", run_title(probe), e.what()));
    }
  }
  if (runs.empty()) throw TraceError("no run's trace could be read; no comparison files written");
  const MergedTrace merged = merge_traces(runs, options);
  out.notes.insert(out.notes.end(), merged.notes.begin(), merged.notes.end());

  staged.make_dir(io::join_path(out_dir, "compare"));
  out.trace_path = comparison_trace_path(out_dir, stem);
  out.timeline_path = comparison_timeline_path(out_dir, stem);
  staged.add(out.trace_path, io::gzip_compress(merged.json));
  staged.add(out.timeline_path, render_timeline_svg(timeline));
  return out;
}

}  // namespace attnprof::report
