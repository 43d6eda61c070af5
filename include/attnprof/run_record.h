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
  // The first forward's device work one by one, in execution order; the
  // correlation id finds each launch's details in the trace.
  struct Launch {
    std::string name;
    uint64_t correlation_id = 0;
    double time_us = 0.0;
  };
  std::vector<Launch> first_forward;
};

// One device kernel as Kineto describes it (the trace's kernel args), and the
// runtime/driver call that launched it.
struct KernelLaunch {
  std::string name;
  std::string launch_api;  // e.g. cudaLaunchKernel, cuLaunchKernelEx; empty if unknown
  int grid[3] = {0, 0, 0};
  int block[3] = {0, 0, 0};
  int registers_per_thread = 0;
  int64_t shared_memory_bytes = 0;  // static + dynamic, per block
  // CUPTI's estimate; nullopt where it reports 0 for a driver-API launch (not measured).
  std::optional<double> est_occupancy_pct;
  double time_us = 0.0;  // duration of this launch in the first profiled forward
};

// Forward time without the profiler: back-to-back forwards between two CUDA
// events (steady clock on CPU), repeated; the spread is over the repetitions.
struct EventTiming {
  int iters_per_rep = 0;
  int reps = 0;
  int input_sets = 1;  // >1 when inputs were rotated to keep them out of L2
  double median_us = 0.0, min_us = 0.0, max_us = 0.0;
  std::string clock;  // "cuda_event" or "steady_clock"
};

struct RunRecord {
  std::string variant;
  std::string description;
  Problem problem;
  Environment env;
  Schedule schedule;
  std::vector<std::pair<std::string, std::string>> facts;
  std::string status = "ok";  // ok | skipped | failed | interrupted
  std::string reason;         // why skipped or failed
  std::vector<std::string> warnings;
  std::vector<OpStats> rows;  // key_averages, in first-seen order
  ForwardStats forward;
  std::optional<double> peak_memory_bytes;  // device memory of one forward
  std::optional<double> tflops;
  std::vector<KernelLaunch> launches;  // first profiled forward, in launch order
  std::optional<EventTiming> timing;
  // profiled forward device time / unprofiled median (CPU runs: CPU times).
  std::optional<double> profiler_overhead;
  bool output_finite = true;  // NaN/Inf check on the forward's output
  // Where this run's wall time went, in order (ms): set-up, warm-up, profiling, ...
  std::vector<std::pair<std::string, double>> phases_ms;
  // Files written for this run, relative to the output directory.
  std::string trace_file, table_file, summary_file;
};

}  // namespace attnprof
