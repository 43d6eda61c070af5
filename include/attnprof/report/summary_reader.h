// Reads a summary.json back into a RunRecord: the inverse of summary_json()
// for the fields compare and at-a-glance need. Every defect in the input
// (unreadable, truncated, malformed, wrongly typed, out of range, too large)
// is a SummaryError whose message is one line naming the file and the field.
#pragma once

#include <cstddef>
#include <stdexcept>
#include <string>

#include <nlohmann/json_fwd.hpp>

#include "attnprof/run_record.h"

namespace attnprof::report {

class SummaryError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A summary of a few hundred op rows is ~100 KiB; anything past this is not one.
constexpr size_t kMaxSummaryBytes = size_t(16) << 20;
// Nesting of a summary is 4 levels; deeper input is rejected before parsing.
constexpr int kMaxSummaryDepth = 32;

// `source` names the input in error messages (a path, or "summary").
RunRecord read_summary(const nlohmann::json& j, const std::string& source = "summary");
// The JSON text of a summary (plain, not gzip).
RunRecord read_summary_text(const std::string& text, const std::string& source);
// A .summary.json file, plain or gzip (detected by its magic bytes, not its name).
RunRecord read_summary_file(const std::string& path);

}  // namespace attnprof::report
