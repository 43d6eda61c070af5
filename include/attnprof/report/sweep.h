// The outputs of `attnprof sweep`: one table row per point, and line plots of
// time and TFLOP/s against the key/value sequence length, one line per
// variant, one plot per combination of the other axes. Records in, files out.
#pragma once

#include <string>
#include <vector>

#include "attnprof/report/table_data.h"
#include "attnprof/run_record.h"

namespace attnprof::io {
class StagedFiles;
}

namespace attnprof::report {

// variant | batch | heads_q | heads_kv | seq_q | seq_kv | head_dim | dtype |
// mask | window (0: none) | pass | status | reason | gpu_time_us | event_median_us | cpu_time_us |
// tflops | kernels_per_step | peak_memory_bytes. Missing values are empty.
Table sweep_table(const std::vector<RunRecord>& points);

// One SVG per metric (GPU time on CUDA, CPU time on CPU; TFLOP/s) and per
// group of points that share every axis but the sequence length; a file name
// carries a suffix for each axis that takes several values in the sweep
// ("_d128", "_b8", "_hkv8", "_bwd"). Lines follow `variant_order`. Stages them
// into `files` (published with the sweep's tables) and returns their paths.
// Throws io::FileError.
std::vector<std::string> stage_sweep_plots(io::StagedFiles& files, const std::vector<RunRecord>& points,
                                           const std::vector<std::string>& variant_order, const std::string& dir);

}  // namespace attnprof::report
