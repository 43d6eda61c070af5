// A picture of one forward per run: one row per run, the device work of its
// median forward as boxes on a shared time axis ("7 kernels and a copy"
// against "1 fused kernel" at a glance). A self-contained SVG: no script, no
// external fonts or links; it opens from disk and pastes into a report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "attnprof/report/kineto_trace.h"
#include "attnprof/report/merged_trace.h"

namespace attnprof::report {

enum class BoxKind { kernel, memcpy, memset, cpu_op };

struct TimelineBox {
  std::string name;      // full name, as the trace has it
  BoxKind kind = BoxKind::kernel;
  int64_t start_ns = 0;  // from the row's origin
  int64_t dur_ns = 0;
};

struct TimelineRow {
  std::string variant;
  std::string run;           // "" for a single run; "A" / "B" under compare
  std::string scope = std::string(kForwardScope);  // the measured scope the row shows one call of
  bool cpu_ops = false;      // no device work in the trace: the CPU ops under the scope
  size_t forwards = 0;       // forwards profiled; the row is their median
  int64_t forward_ns = 0;    // the median forward's summed device time (CPU: its attn_fwd time)
  size_t work_items = 0;     // kernels + memcpys + memsets (CPU: ops) of that forward
  std::vector<TimelineBox> boxes;  // by start; at most kMaxTimelineBoxes
};

// A forward of 100k kernels would make a picture of tens of megabytes that no
// browser draws usefully; past this the row says how many are not shown.
constexpr size_t kMaxTimelineBoxes = 2000;

// The row of one run. The median forward is the lower median of all CPU
// attn_fwd scopes by summed device time (by attn_fwd's own time on CPU-only
// traces). Its origin is its first device work's start, not attn_fwd's: the
// host's launch latency before the first kernel differs between runs and is
// not device work (it stays visible in the merged trace). CPU-only traces
// (no kernel, memcpy or memset anywhere) show the ops directly under attn_fwd,
// from its start. Throws TraceError when the trace has no attn_fwd scope.
TimelineRow timeline_row(const RunTrace& run);

struct Timeline {
  std::string title;
  std::vector<TimelineRow> rows;  // drawn in this order; consecutive rows of one variant are grouped
  int width = 960;                // px
};

std::string render_timeline_svg(const Timeline& timeline);

}  // namespace attnprof::report
