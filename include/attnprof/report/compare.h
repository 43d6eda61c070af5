// Before/after diffs of runs: headline figures with ratios (B/A) and per-op
// rows matched by (name, device). Pure functions over RunRecords; the CLI reads
// the summaries (summary.h) and prints or writes what comes back.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attnprof/report/table_data.h"
#include "attnprof/run_record.h"

namespace attnprof::report {

// One headline figure of A and B; nullopt where a side has no value (a CPU
// run's GPU time, a run without event timing).
struct MetricDiff {
  std::string metric;  // "forward GPU time (profiled)"
  std::string unit;    // "us", "bytes", "TFLOP/s", "" (count)
  std::optional<double> a, b;
  std::optional<double> ratio() const;  // b / a; nullopt if either is missing or a == 0
};

// One key-averages row on both sides, per profiled forward (totals divided by
// each side's forwards_profiled, so runs with different --active compare).
struct OpDiff {
  std::string name;
  std::string device;  // "cpu" or "cuda"
  std::optional<double> calls_a, calls_b;
  std::optional<double> self_cpu_us_a, self_cpu_us_b;
  std::optional<double> device_us_a, device_us_b;  // self device time
  std::string note;  // "only in A", "only in B" or empty
};

struct Comparison {
  std::string label_a, label_b;
  std::vector<std::string> notes;  // e.g. "A and B measure different problems: ..."
  std::vector<MetricDiff> headline;
  std::vector<OpDiff> ops;  // by the larger side's time, descending
  std::string per = "fwd";  // what the per-op figures are per: "fwd" or "step" (A's pass)
};

Comparison compare_runs(const RunRecord& a, const RunRecord& b, const std::string& label_a = "A",
                        const std::string& label_b = "B");

// metric | A | B | B/A, formatted for people (times as 1.234ms, bytes as GiB).
Table headline_table(const Comparison& c);
// op | device | calls/fwd A | B | self CPU/fwd A | B | B/A | device/fwd A | B | B/A | note
Table ops_table(const Comparison& c);
// "0.52x"; "n/a" when there is no ratio.
std::string format_ratio(const std::optional<double>& r);

// A pair of summaries found under two directories, by relative path
// ("naive/8_16_1024_64_bf16.summary.json").
struct PairedComparison {
  std::string relative_path;
  Comparison comparison;
};
struct DirectoryComparison {
  std::vector<PairedComparison> pairs;
  std::vector<std::string> only_in_a, only_in_b;  // relative paths
};

// The relative paths of every *.summary.json under `dir` (at most 5 levels
// deep; regular files, and links to files inside `dir`; never a FIFO or
// device, never through a link to a directory or into another filesystem),
// sorted. Throws SummaryError when `dir` cannot be read.
std::vector<std::string> find_summaries(const std::string& dir);

// Reads every summary under both directories (summary.h) and diffs the
// pairs. Throws SummaryError naming the first unreadable or malformed file.
DirectoryComparison compare_directories(const std::string& dir_a, const std::string& dir_b);

// One long table for CSV/JSON: summary | section | name | device | metric | unit | A | B | B/A | note.
// Values are plain numbers in the row's unit (us, bytes, TFLOP/s) so spreadsheets can use them.
Table comparison_long_table(const std::vector<PairedComparison>& pairs);

// What `attnprof compare` prints: per pair, the notes, headline and op tables;
// for directories, the unpaired files too.
std::string comparison_text(const std::vector<PairedComparison>& pairs, const std::vector<std::string>& only_in_a = {},
                            const std::vector<std::string>& only_in_b = {});
// The same as Markdown with a heading per pair, ready to paste.
std::string comparison_markdown(const std::vector<PairedComparison>& pairs,
                                const std::vector<std::string>& only_in_a = {},
                                const std::vector<std::string>& only_in_b = {});

}  // namespace attnprof::report
