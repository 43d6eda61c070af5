// Every counted kernel of every run on one roofline: x is FLOP per DRAM byte
// (from the counters, log), y achieved TFLOP/s (log), the roofs are the
// device's measured ceilings (DRAM copy bandwidth as the slope, the GEMM
// ceilings as the flat roofs). A dot per kernel, its area the kernel's share
// of its run's counted time, one colour per run, labelled "run · kernel".
// A self-contained SVG, as the other pictures.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attnprof/run_record.h"

namespace attnprof::io {
class StagedFiles;
}

namespace attnprof::report {

struct RooflineDot {
  size_t run = 0;       // index into Roofline::runs (its colour)
  std::string kernel;   // full name
  std::string label;    // "naive · softmax_warp_forward"
  double flop_per_byte = 0;
  double tflops = 0;
  double share = 0;     // of the run's counted kernel time, 0..1
  bool analytic = false;  // FLOPs from the problem, not counted: drawn hollow
  std::string verdict;
};

struct RooflineRoof {
  std::string label;  // "bf16 GEMM 650 TFLOP/s"
  double tflops = 0;
};

struct Roofline {
  std::string title;
  std::string subtitle;
  std::vector<std::string> runs;     // legend, in order
  std::optional<double> dram_gbps;   // the slope (measured copy ceiling)
  std::string dram_label;            // "DRAM copy 4100 GB/s"
  std::vector<RooflineRoof> roofs;   // flat roofs, highest first
  std::vector<RooflineDot> dots;
  // Counted kernels without a place on the axes (no FLOPs, no DRAM bytes),
  // one line each: "naive · Memcpy DtoD (9% of its time): no FLOPs".
  std::vector<std::string> not_drawn;
  int width = 980;
  int height = 620;
};

// The roofline of these runs' counter passes (runs without collected
// counters are left out; ceilings from the first run that has them).
// `title` heads the picture.
Roofline roofline_of(const std::vector<RunRecord>& records, const std::string& title);

// Whether the record's counter pass collected at least one kernel.
bool has_counted_kernels(const RunRecord& r);

// One <circle class="dot"> per drawn kernel (with data-run and data-kernel),
// one <line class="roof"> per roof plus the slope, a legend, the undrawn
// kernels listed under the axes.
std::string render_roofline_svg(const Roofline& roofline);

// "attnprof roofline: 8x16x1024x64 bf16 causal on cuda:0 (NVIDIA H200)"
std::string roofline_title(const std::vector<RunRecord>& records);

// Stages `path` with the roofline of `records` into `files`; returns false
// when no record has counted kernels, and an earlier file at `path` is then
// removed when the set is published (a run without --counters after one with
// it leaves no stale picture).
bool stage_roofline(io::StagedFiles& files, const std::vector<RunRecord>& records, const std::string& path);

}  // namespace attnprof::report
