// Writers for one run: the machine-readable summary and the headline lines
// printed under the key-averages table. Formatting only; no measuring.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "attnprof/run_record.h"

namespace attnprof::report {

constexpr int kSummarySchemaVersion = 1;

nlohmann::json problem_json(const Problem& p);
nlohmann::json op_row_json(const OpStats& s);
nlohmann::json summary_json(const RunRecord& r);

// A few lines: forward GPU/CPU time, kernels per forward (named), TFLOP/s, memory.
std::string headline_text(const RunRecord& r);

std::string format_bytes(double bytes);  // "4.40 GiB", "512.00 MiB"

}  // namespace attnprof::report
