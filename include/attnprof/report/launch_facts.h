// Per-kernel launch facts (grid, block, registers, shared memory, occupancy,
// launch API) read from a Kineto Chrome trace: Kineto puts them in the kernel
// events' args, and the launching runtime/driver call shares the correlation id.
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "attnprof/run_record.h"

namespace attnprof::report {

// One KernelLaunch per entry of `work`, in that order; facts the trace lacks stay 0/empty.
std::vector<KernelLaunch> launch_facts(const nlohmann::json& trace,
                                       const std::vector<ScopeStats::Launch>& work);

std::string format_launch_table(const std::vector<KernelLaunch>& launches);

}  // namespace attnprof::report
