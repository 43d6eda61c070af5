// PLACEHOLDER, replaced by the CUPTI Range Profiler collector before this
// branch lands: lets the report layer and the CLI be wired against the interface.
#include "profiler/counters.h"

namespace attnprof {

report::CounterPass collect_counters(Variant&, const Problem&, const Inputs&) {
  report::CounterPass pass;
  pass.state = report::CounterPass::State::unavailable;
  pass.route = "cupti-range-profiler";
  pass.reason = "the counter pass is not built yet";
  return pass;
}

}  // namespace attnprof
