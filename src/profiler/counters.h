// The counter pass (--counters): more steps of the problem's pass, run after
// the profiled steps and the timing, on their own, in which the CUPTI Range
// Profiler reads each kernel's hardware counters (one auto range per launch;
// the step repeated once per hardware pass). Nothing here prints; the record
// carries the results (report/counters.h).
#pragma once

#include "attnprof/problem.h"
#include "attnprof/report/counters.h"
#include "attnprof/run_record.h"
#include "attnprof/variant.h"
#include "variants/torch_problem.h"

namespace attnprof {

// Kernels of one step of p's pass, per scope in launch order. Never throws for
// the counters' own trouble: no GPU, no CUPTI, no permission
// (ERR_NVGPUCTRPERM) or a profiler error give state unavailable / failed and a
// one-line reason. A stop signal during the pass throws Interrupted.
// Ceilings are not filled here (report::DeviceCeilings come from the calibration).
report::CounterPass collect_counters(Variant& variant, const Problem& p, const Inputs& in);

// Names the counted kernels after the profiled step's launches of the same
// scope (Memcpy/Memset are not kernels and have no range), in execution
// order: auto ranges are numbered, not named. A count that differs from the
// profiled step's makes the pass failed, with the reason.
void name_counted_kernels(report::CounterPass& pass, const std::vector<ScopeStats>& scopes);

}  // namespace attnprof
