// One variant, end to end: support check, inputs, prepare, profile, aggregate,
// and the three files (trace, table, summary). Returns data; the CLI prints.
#pragma once

#include <string>

#include "attnprof/key_averages.h"
#include "attnprof/run_record.h"

namespace attnprof {

struct SessionOptions {
  std::string out_dir = "traces";
  bool gzip = true;
  Schedule schedule;
  std::optional<SortKey> sort_by;  // default: cuda_time_total on CUDA, cpu_time_total on CPU
  int row_limit = 15;
  int timing_iters = -1;  // forwards timed without the profiler; <0: default for the device
  // Process start to main() (dynamic loading of LibTorch), recorded as the first
  // phase of the first variant's run.
  std::optional<double> startup_ms;
};

// 100 on CUDA; 3 on CPU, where one default-sized forward takes about a second.
int default_timing_iters(const Problem& p);

struct VariantOutcome {
  RunRecord record;
  std::string table;  // the key-averages table text (empty unless status ok)
};

// Never throws for a variant's own failure: that becomes status "failed" with
// the reason. Throws io::FileError when outputs cannot be written.
VariantOutcome run_variant(const std::string& name, const Problem& p, const SessionOptions& opt);

SortKey default_sort_key(const Problem& p);

}  // namespace attnprof
