// What the commands print, built from records: formatting only.
#pragma once

#include <set>
#include <string>
#include <vector>

#include "attnprof/report/key_averages_table.h"
#include "attnprof/run_record.h"
#include "attnprof/run_units.h"

namespace attnprof::cli {

// A finished run: its key-averages table, the headline, the launch table with
// --kernels, and the files it wrote.
std::string run_text(const RunRecord& r, const TableOptions& table, bool kernels, const std::string& out_dir);

// The line to print after a run whose counter pass collected nothing: a
// note once per distinct reason (no GPU, no permission: every variant would
// say the same), and an error line naming the variant for each failed pass.
class CounterNotes {
 public:
  std::string line_for(const RunRecord& r);  // "" when nothing (new) to say
  bool failed = false;                       // a pass failed: the run exits 1

 private:
  std::set<std::string> seen_;
};

// "inplace (8x16x1024x64 bf16 causal on cuda:0)"
std::string run_label(const std::string& variant, const Problem& p);

// "96 µs/forward", "1.2 ms/backward": a run's cost per measured unit.
std::string unit_headline(const RunRecord& r);
// The scope one measured unit runs in: attn_bwd for a backward-only pass, else attn_fwd.
std::string unit_scope(const Problem& p);
// "attnprof: one forward per variant, 8x16x1024x64 bf16 causal on cuda:0 (NVIDIA H200)"
std::string comparison_title(const std::vector<RunRecord>& records);

// The one line a stop signal gets: "interrupted by SIGINT during sdpa-math
// (3/3); finished (files written): naive, inplace; <marker>" (records: the
// units run_units() reached, the interrupted one last).
std::string interrupted_line(int sig, const std::vector<std::string>& names, const std::vector<RunRecord>& records,
                             const std::string& marker);
// What the interrupted unit left, as interrupted_line's marker: "; <file> marks it interrupted".
std::string interrupted_left(const UnitOutcome& u);

}  // namespace attnprof::cli
