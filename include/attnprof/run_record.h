// Everything one variant's run produced, as data. Measuring code fills it;
// writers (table, headline, summary JSON) only format it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnprof/key_averages.h"
#include "attnprof/problem.h"

namespace attnprof {

struct Environment {
  std::string torch_version;
  std::string device_name;  // GPU name, or the CPU model
  std::string attnprof_version;
  std::string cuda_runtime;  // empty on CPU-only runs
};

struct Schedule {
  int warmup_iters = 3;  // untraced, before the profiler exists
  int wait = 1;
  int warmup = 1;
  int active = 3;
};

// What the profiler says about the `attn_fwd` scopes.
struct ForwardStats {
  int64_t forwards = 0;
  double cpu_time_avg_us = 0.0;
  double device_time_avg_us = 0.0;  // sum of the forward's device work, as key_averages
  double kernels_per_forward = 0.0;  // kernels + memcpy + memset
  // The first forward's device work in launch order, with counts folded.
  struct Kernel {
    std::string name;
    int64_t count = 0;
    double total_us = 0.0;
  };
  std::vector<Kernel> kernels;
};

struct RunRecord {
  std::string variant;
  std::string description;
  Problem problem;
  Environment env;
  Schedule schedule;
  std::vector<std::pair<std::string, std::string>> facts;
  std::string status = "ok";  // ok | skipped | failed
  std::string reason;         // why skipped or failed
  std::vector<std::string> warnings;
  std::vector<OpStats> rows;  // key_averages, in first-seen order
  ForwardStats forward;
  std::optional<double> peak_memory_bytes;  // device memory of one forward
  std::optional<double> tflops;
  // Files written for this run, relative to the output directory.
  std::string trace_file, table_file, summary_file;
};

}  // namespace attnprof
