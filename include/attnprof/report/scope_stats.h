// The headline figures of a user scope (attn_fwd, attn_bwd) from the
// function events of report/key_averages.h: events in, ScopeStats out.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attnprof/report/key_averages.h"
#include "attnprof/run_record.h"

namespace attnprof {

// The CPU scopes named `scope` (not their GPU-side annotations): CPU and
// device time per call, and the device work launched by any op inside them,
// per kernel name over all calls (mean, min, max per call).
ScopeStats scope_stats(const std::vector<FunctionEvent>& events, const std::string& scope);

// TFLOP/s over a time in microseconds; nullopt when the time is not positive.
std::optional<double> achieved_tflops(double flops, double time_us);

}  // namespace attnprof
