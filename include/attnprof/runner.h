// The measuring half: warm-up, the profiler schedule, and the events that come
// out. No printing and no file formats here; the caller turns a ProfiledRun
// into a RunRecord and hands it to the writers.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>
#include <vector>

#include "attnprof/events.h"
#include "attnprof/run_record.h"
#include "attnprof/variant.h"

namespace attnprof {

struct ProfiledRun {
  std::vector<TraceEvent> events;
  std::optional<double> peak_memory_bytes;
  bool trace_saved = false;
  // What Kineto wrote to stderr while saving the trace (it reports a failed
  // write only there), held back so the caller decides what the user sees.
  std::string trace_save_messages;
  std::vector<std::pair<std::string, double>> phases_ms;  // wall time of each stage
};

// Wall-clock stopwatch for phase breakdowns.
class PhaseClock {
 public:
  PhaseClock();
  // Milliseconds since the previous lap (or construction), appended as `name`.
  void lap(const std::string& name, std::vector<std::pair<std::string, double>>& phases);

 private:
  int64_t last_ns_;
};

struct RunnerOptions {
  Schedule schedule;
  // Where Kineto writes its Chrome trace (plain JSON); empty = no trace.
  std::string trace_path;
  // Added to the trace's top level as "attnprof" (a JSON object as text).
  std::string trace_metadata_json;
};

// The names the trace and the NVTX ranges use.
inline constexpr const char* kForwardScope = "attn_fwd";
inline constexpr const char* kStepScopePrefix = "ProfilerStep#";

// Runs `variant` (already prepared) on q, k, v: untraced warm-up, a peak-memory
// probe on CUDA, then wait/warmup/active steps under the Kineto profiler.
ProfiledRun profile_forward(Variant& variant, const Problem& p, const at::Tensor& q,
                            const at::Tensor& k, const at::Tensor& v, const RunnerOptions& opt);

// Forward time without the profiler: `total_iters` forwards after the warm-up,
// split into up to 10 repetitions timed with CUDA events (steady clock on CPU).
// When q, k, v fit in the L2 cache, several input sets are rotated so the cache
// is not what gets measured. nullopt when total_iters <= 0.
std::optional<EventTiming> time_forward(Variant& variant, const Problem& p, const at::Tensor& q,
                                        const at::Tensor& k, const at::Tensor& v, int total_iters);

// Environment facts for the summary and the trace metadata.
Environment describe_environment(const Problem& p);

// "auto" → "cuda:0" when a GPU is present, else "cpu"; validates cuda:N.
// Throws std::invalid_argument with a one-line reason.
std::string resolve_device(const std::string& requested);
bool cuda_available();
int cuda_device_count();

}  // namespace attnprof
