#pragma once

#include <string>
#include <vector>

#include "attnprof/key_averages.h"
#include "attnprof/run_record.h"

namespace attnprof {

// The headline figures of the user scopes named `scope` (attnprof wraps every
// forward in "attn_fwd"): their CPU and device time averages, and the device
// work launched by any op inside them.
ForwardStats forward_stats(const std::vector<FunctionEvent>& events, const std::string& scope);

// TFLOP/s over a time in microseconds; nullopt when the time is not positive.
std::optional<double> achieved_tflops(double flops, double time_us);

}  // namespace attnprof
