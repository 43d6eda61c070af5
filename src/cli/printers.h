// What the commands print, built from records: formatting only.
#pragma once

#include <string>
#include <vector>

#include "attnprof/report/key_averages_table.h"
#include "attnprof/run_record.h"

namespace attnprof::cli {

// A finished run: its key-averages table, the headline, the launch table with
// --kernels, and the files it wrote.
std::string run_text(const RunRecord& r, const TableOptions& table, bool kernels, const std::string& out_dir);

// "[2/9] inplace (8x16x1024x64 bf16 causal on cuda:0)"
std::string progress_line(size_t index, size_t count, const std::string& variant, const Problem& p);

}  // namespace attnprof::cli
