// Everything one variant's run produced, as data. Measuring code fills it;
// writers (table, headline, summary JSON, at-a-glance, sweep, compare) only
// format it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnprof/report/counters.h"
#include "attnprof/report/key_averages.h"
#include "attnprof/problem.h"

namespace attnprof {

enum class Status { ok, skipped, failed, interrupted };
const char* status_name(Status s);  // "ok", "skipped", "failed", "interrupted"
std::optional<Status> parse_status(const std::string& s);

struct Environment {
  std::string torch_version;
  std::string device_name;  // GPU name, or the CPU model
  std::string attnprof_version;
  std::string cuda_runtime;  // empty on CPU-only runs
};

// --warmup-iters auto, --timing-iters auto: in a request, the runner decides
// (report/run_plan.h); a record holds the count it used.
inline constexpr int kAutoIters = -1;

struct Schedule {
  int warmup_iters = 3;  // untraced, before the profiler exists; kAutoIters in a request
  int wait = 1;
  int warmup = 1;
  int active = 3;
};

// What the profiler records besides the events, as torch.profiler's flags:
// input shapes (TensorBoard's "group by input shape"), allocations (its
// memory view) and call stacks. Each adds overhead to the recorded steps.
struct ProfilerOptions {
  bool record_shapes = false;
  bool profile_memory = false;
  bool with_stack = false;
};

// The device work of one kernel name inside a scope, per call of the scope,
// over all profiled calls: how many launches and how long they took together.
struct KernelStats {
  std::string name;
  double count_per_call = 0.0;
  double time_avg_us = 0.0;  // mean over calls of the summed time in one call
  double time_min_us = 0.0;
  double time_max_us = 0.0;
};

// What the profiler says about the user scopes named `scope` (attn_fwd,
// attn_bwd): their CPU and device time averages, and the device work launched
// by any op inside them.
struct ScopeStats {
  std::string scope;
  int64_t calls = 0;
  double cpu_time_avg_us = 0.0;
  double device_time_avg_us = 0.0;  // sum of the call's device work, each piece once
  double device_time_min_us = 0.0;
  double device_time_max_us = 0.0;
  double kernels_per_call = 0.0;  // kernels + memcpy + memset
  std::vector<KernelStats> kernels;  // in order of first launch
  // The first call's device work one by one, in execution order; the
  // correlation id finds each launch's details in the trace.
  struct Launch {
    std::string name;
    uint64_t correlation_id = 0;
    double time_us = 0.0;
  };
  std::vector<Launch> first_call;
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
  double time_us = 0.0;  // duration of this launch in the first profiled step
  // The occupancy formula's figures for this launch on the run's device
  // (report::occupancy): resident warps / max warps, what limits them, and
  // the same no higher than the grid fills the SMs (CUPTI's estimate's model).
  std::optional<double> theoretical_occupancy_pct;
  std::string occupancy_limiter;
  std::optional<double> grid_occupancy_pct;
};

// Time of one step of the pass without the profiler: back-to-back steps
// between two CUDA events (steady clock on CPU), repeated; the spread is over
// the repetitions.
struct EventTiming {
  int iters_per_rep = 0;
  int reps = 0;
  int input_sets = 1;  // >1 when inputs were rotated to keep them out of L2
  double median_us = 0.0, min_us = 0.0, max_us = 0.0;
  std::string clock;  // "cuda_event" or "steady_clock"
};

// The forward's output against a float64 reference on the run's inputs,
// computed once after the timing, outside every measured scope, on a sample
// of query rows when the reference of every row would be large.
struct Accuracy {
  double rel_error = 0.0;  // relative Frobenius error over the compared rows, every head
  int64_t rows = 0;        // query rows compared (summed over the batch)
  int64_t total_rows = 0;  // the problem's query rows
  // fp8: what quantising the inputs alone moves the float64 output by (the
  // reference of the dequantised inputs, which rel_error is against, versus
  // that of the bf16 draws).
  std::optional<double> input_quantisation_error;
};

struct RunRecord {
  std::string variant;
  std::string description;
  Problem problem;
  Environment env;
  Schedule schedule;
  ProfilerOptions profiler;
  std::vector<std::pair<std::string, std::string>> facts;
  Status status = Status::ok;
  std::string reason;  // why skipped, failed or interrupted
  std::vector<std::string> warnings;
  std::vector<OpStats> rows;       // key_averages, in first-seen order
  std::vector<ScopeStats> scopes;  // one per scope of the pass, in step order
  std::optional<double> peak_memory_bytes;  // device memory of one step
  std::optional<double> tflops;
  std::vector<KernelLaunch> launches;  // first profiled step, in launch order
  std::optional<EventTiming> timing;
  // profiled step device time / unprofiled median (CPU runs: CPU times).
  std::optional<double> profiler_overhead;
  bool output_finite = true;  // NaN/Inf check on the output (and gradients)
  std::optional<Accuracy> accuracy;  // absent where not measured (a NaN output, an older summary)
  // Where this run's wall time went, in order (ms): set-up, warm-up, profiling, ...
  std::vector<std::pair<std::string, double>> phases_ms;
  // The GPU's limits behind the occupancy figures (CUDA runs).
  std::optional<report::DeviceLimits> device_limits;
  // The hardware-counter pass (--counters): absent when not asked for.
  std::optional<report::CounterPass> counters;
  // Files written for this run, relative to the output directory.
  std::string trace_file, table_file, summary_file;
  std::string roofline_file;  // <variant>/<stem>.roofline.svg when counters were collected

  bool ok() const { return status == Status::ok; }
  const ScopeStats* scope(const std::string& name) const;
  // Per step of the pass: the scopes' figures added up.
  double device_time_us() const;
  double cpu_time_us() const;
  double kernels_per_step() const;
  // What the run costs: device time on CUDA, CPU time on CPU.
  double cost_us() const { return problem.on_cuda() ? device_time_us() : cpu_time_us(); }
  // Every scope's kernels, in scope order.
  std::vector<KernelStats> kernels() const;
};

}  // namespace attnprof
