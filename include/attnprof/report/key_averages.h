// Re-implementation of Python's `prof.key_averages()` (torch/autograd/
// profiler.py, profiler_util.py, torch 2.11) as pure functions over
// TraceEvent: events in, aggregates out. Printing them as Python's `.table()`
// does is report/key_averages_table.h. Times are nanoseconds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "attnprof/events.h"

namespace attnprof {

// One row of key_averages: all events with the same (name, device, user
// annotation) key, summed.
struct OpStats {
  std::string name;
  EventDevice device = EventDevice::Cpu;
  bool is_user_annotation = false;
  int64_t count = 0;
  int64_t cpu_time_total_ns = 0;
  int64_t self_cpu_time_total_ns = 0;
  int64_t device_time_total_ns = 0;
  int64_t self_device_time_total_ns = 0;
  // --profile-memory: bytes allocated (less those freed) inside the op, and
  // outside its child ops; CPU and device memory apart, as Python's columns.
  int64_t cpu_memory_usage = 0, self_cpu_memory_usage = 0;
  int64_t device_memory_usage = 0, self_device_memory_usage = 0;
  bool is_async = false;

  double cpu_time_avg_ns() const { return count ? double(cpu_time_total_ns) / count : 0.0; }
  double device_time_avg_ns() const { return count ? double(device_time_total_ns) / count : 0.0; }
};

// One event after tree building: the source event plus derived totals.
struct FunctionEvent {
  TraceEvent event;
  std::string key;  // name with ProfilerStep#N folded to ProfilerStep*
  int parent = -1;
  std::vector<int> children;
  // Device work (indices into the same vector) attributed directly to this CPU op.
  std::vector<int> kernels;
  int64_t kernel_time_ns = 0;
  int64_t cpu_time_total_ns = 0;
  int64_t self_cpu_time_total_ns = 0;
  int64_t device_time_total_ns = 0;
  int64_t self_device_time_total_ns = 0;
  // Python's _parse_kineto_results: every "[memory]" record whose time lies in
  // a CPU event's [start, end] counts towards it (nested ones too); records
  // inside no event become "[memory]" events of their own.
  int64_t cpu_memory_usage = 0, device_memory_usage = 0;
  int64_t self_cpu_memory_usage = 0, self_device_memory_usage = 0;
};

// Builds the CPU op tree (per thread, by time containment), attributes each
// device activity to the CPU op whose id is its linked correlation id, and
// folds a child into its parent when both have the same name and it is the only
// child (Python's _remove_dup_nodes: mul.Scalar calling mul.Tensor is one row).
// The result is sorted by (start, -end), as Python sorts function events.
// `use_device` is false for CPU-only profiles, where device times are all zero.
// `profile_memory`: "[memory]" records are counted towards the CPU events
// around them, and those around none become "[memory]" events (Python has
// such records only then); without it they are dropped as utility events.
std::vector<FunctionEvent> build_function_events(const std::vector<TraceEvent>& events,
                                                 bool use_device, bool profile_memory = false);

// Rows in order of the first appearance of their key.
std::vector<OpStats> key_averages(const std::vector<FunctionEvent>& events);

enum class SortKey {
  CpuTime,            // cpu_time (avg)
  CudaTime,           // cuda_time (avg)
  CpuTimeTotal,
  CudaTimeTotal,
  SelfCpuTimeTotal,
  SelfCudaTimeTotal,
  Count,
  CpuMemoryUsage,  // --profile-memory's columns, as Python sorts them
  SelfCpuMemoryUsage,
  CudaMemoryUsage,
  SelfCudaMemoryUsage,
};
std::optional<SortKey> parse_sort_key(const std::string& s);
const std::vector<std::string>& sort_key_names();
const char* sort_key_name(SortKey k);

// Stable, descending, like Python's sorted(..., reverse=True).
std::vector<OpStats> sort_rows(std::vector<OpStats> rows, SortKey key);

}  // namespace attnprof
