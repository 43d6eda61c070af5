// Where a run happens: resolving --device, asking what is there, and waiting
// for it. Kept apart from the measuring code so the CLI can validate a device
// before anything runs.
#pragma once

#include <optional>
#include <string>

#include "attnprof/problem.h"
#include "attnprof/report/counters.h"
#include "attnprof/run_record.h"

namespace attnprof {

// "auto" -> "cuda:0" when a GPU is present, else "cpu"; validates cuda:N.
// Throws std::invalid_argument with a one-line reason.
std::string resolve_device(const std::string& requested);
bool cuda_available();
int cuda_device_count();

// Environment facts for the summary and the trace metadata.
Environment describe_environment(const Problem& p);

// Waits until the problem's device has finished all queued work (no-op on CPU).
void synchronize(const Problem& p);

// The problem's GPU's limits for the occupancy formula (cudaDeviceProp and
// the occupancy calculator's allocation rules); nullopt on CPU.
std::optional<report::DeviceLimits> device_limits(const Problem& p);

}  // namespace attnprof
