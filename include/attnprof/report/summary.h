// The machine-readable summary of one run (<stem>.summary.json), written and
// read back from ONE field list (src/report/summary_schema.h), so the writer
// and the reader cannot drift apart. The reader is the inverse of the writer
// for everything compare and at-a-glance need, reads schema 1 (attnprof 0.1's
// square-shape, forward-only summaries) too, and turns every defect in its
// input (unreadable, truncated, malformed, wrongly typed, out of range, too
// large) into a SummaryError whose message is one line naming the file and
// the field.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "attnprof/run_record.h"

namespace attnprof::report {

// 3: the counter pass (counters: per-kernel hardware counters, the derived
//    figures and verdicts, the measured ceilings), device_limits, and each
//    launch's theoretical occupancy; files.roofline.
// 2: problem with heads_q/heads_kv/seq_q/seq_kv/mask/pass; headline per scope;
//    kernels as mean/min/max per call. 1: attnprof 0.1.
constexpr int kSummarySchemaVersion = 3;

nlohmann::json summary_json(const RunRecord& r);
// The problem as the summary and the trace metadata write it.
nlohmann::json problem_json(const Problem& p);
// Measured ceilings as the summary's counters.ceilings and the calibration
// cache write them, and read back (every field validated; SummaryError names
// `source` and the field).
nlohmann::json ceilings_json(const DeviceCeilings& c);

class SummaryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A summary of a few hundred op rows is ~100 KiB; anything past this is not one.
constexpr size_t kMaxSummaryBytes = size_t(16) << 20;
// Nesting of a summary is 5 levels; deeper input is rejected before parsing.
constexpr int kMaxSummaryDepth = 32;

// Nesting depth of JSON text outside strings: readers refuse absurdly deep
// input before the parser (and the recursive destructor of nested values) sees it.
int json_nesting_depth(std::string_view text);

// `source` names the input in error messages (a path, or "summary").
RunRecord read_summary(const nlohmann::json& j, const std::string& source = "summary");
// The JSON text of a summary (plain, not gzip).
RunRecord read_summary_text(const std::string& text, const std::string& source);
// A .summary.json file, plain or gzip (detected by its magic bytes, not its name).
RunRecord read_summary_file(const std::string& path);
DeviceCeilings read_ceilings(const nlohmann::json& j, const std::string& source);

}  // namespace attnprof::report
