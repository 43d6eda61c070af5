// report::launch_facts on arbitrary JSON (a hostile or foreign Chrome trace) and
// a launch list taken from the same bytes: facts or defaults, never a crash.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "attnprof/report/launch_facts.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const nlohmann::json trace =
      nlohmann::json::parse(data, data + size, /*callback=*/nullptr, /*allow_exceptions=*/false);
  if (trace.is_discarded()) return 0;
  // Ask for the correlation ids the trace mentions (plus a few it may not).
  std::vector<attnprof::ScopeStats::Launch> work;
  for (uint64_t id : {0ull, 1ull, 7ull, 0xffffffffffffffffull}) work.push_back({"probe", id, 1.0});
  if (const auto ev = trace.find("traceEvents"); ev != trace.end() && ev->is_array())
    for (const auto& e : *ev)
      if (e.is_object())
        if (const auto a = e.find("args"); a != e.end() && a->is_object())
          if (const auto c = a->find("correlation"); c != a->end() && c->is_number_unsigned())
            work.push_back({"traced", c->get<uint64_t>(), 2.5});
  const auto launches = attnprof::report::launch_facts(trace, work);
  if (launches.size() != work.size()) __builtin_trap();
  (void)attnprof::report::format_launch_table(launches);
  return 0;
}
