// The "at a glance" table: one row per variant of one problem, with the
// figures and the facts a reader would otherwise assemble from six traces.
// Built from RunRecords only; every cell is derived from measured data.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attnprof/report/table_data.h"
#include "attnprof/run_record.h"

namespace attnprof::io {
class StagedFiles;
}

namespace attnprof::report {

// A GPU's dense peak for the problem's dtype: 16-bit tensor cores (fp32
// accumulate, no sparsity) for bf16/fp16, FP32 CUDA cores for fp32 (PyTorch
// leaves TF32 off for matmul by default).
struct DevicePeak {
  std::string gpu;    // the table entry that matched, "H100 SXM"
  double tflops = 0;
  std::string basis;  // "bf16 tensor cores, dense" / "fp32 CUDA cores" / "--peak-tflops"
};

// nullopt when the device name matches no known GPU (and always for "CPU").
std::optional<DevicePeak> lookup_peak_tflops(const std::string& device_name, DType dtype);
// The datasheet's DRAM (HBM/GDDR) bandwidth in GB/s, 4800 for an H200;
// nullopt when unknown (A100s differ by memory size and are not told apart).
std::optional<double> lookup_spec_dram_gbps(const std::string& device_name);

struct AtAGlanceOptions {
  std::optional<double> peak_tflops;  // --peak-tflops: replaces the table's peak
  std::string baseline;  // the variant the speed-up column divides by (the registry's baseline tag)
};

// Columns: variant, status, kernels/fwd (kernels/step for a backward pass),
// GPU time profiled (us), GPU time event median (us), CPU time (us), speedup
// vs the baseline, TFLOP/s, % of peak, peak memory, math path, fused kernel,
// launch API, note. When any run has a counter pass (--counters), before the
// note: DRAM %, tensor pipe %, occupancy (achieved) and the verdict of the
// run's dominant kernel (the longest in the counter pass). "% of peak"
// divides by --peak-tflops, else the run's measured GEMM ceiling, else the
// datasheet. Missing values show as "n/a" (null in JSON, empty in CSV);
// skipped/failed rows carry their reason in the note.
Table at_a_glance_table(const std::vector<RunRecord>& records, const AtAGlanceOptions& opt = {});

// The "what the trace shows" note of one run ("; "-joined facts, or "").
std::string at_a_glance_note(const RunRecord& r);

// "8x16x1024x64 bf16 causal on cuda:0 (NVIDIA H200; peak 989 TFLOP/s bf16 tensor cores, dense)"
std::string at_a_glance_header(const std::vector<RunRecord>& records, const AtAGlanceOptions& opt = {});

// Stages out_dir/compare/<stem>.{txt,json,csv,md} into `files` (the compare/
// set of a run, published together); the .txt and .md start with the header
// line. Returns the paths. Throws io::FileError, and std::invalid_argument
// when `records` is empty.
std::vector<std::string> stage_at_a_glance(io::StagedFiles& files, const std::vector<RunRecord>& records,
                                           const std::string& out_dir, const AtAGlanceOptions& opt = {});
// The same as a set of its own, published at once.
std::vector<std::string> write_at_a_glance(const std::vector<RunRecord>& records, const std::string& out_dir,
                                           const AtAGlanceOptions& opt = {});

}  // namespace attnprof::report
