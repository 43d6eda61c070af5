// The headline lines printed under a run's key-averages table: per scope of
// the pass its GPU/CPU time and kernels, then timing, TFLOP/s, memory, facts.
#pragma once

#include <string>

#include "attnprof/run_record.h"

namespace attnprof::report {

std::string headline_text(const RunRecord& r);

}  // namespace attnprof::report
