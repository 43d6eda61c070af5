// The three files of one run, under <out>/<variant>/: the Chrome trace
// (<stem>.json.gz, or .json), the key-averages table (<stem>.txt) and the
// summary (<stem>.summary.json). Each goes to a hidden temporary name and is
// renamed into place, so a file is complete or absent.
#pragma once

#include <string>

#include "attnprof/report/key_averages_table.h"
#include "attnprof/run_record.h"

namespace attnprof::report {

struct RunFileOptions {
  std::string out_dir = "traces";
  bool gzip = true;
  TableOptions table;
  // After the problem's stem in every file name: ".rank1" keeps a rank's files apart.
  std::string stem_suffix;
};

// The key-averages table of a run as the .txt holds it (and the CLI prints).
std::string run_table_text(const RunRecord& r, const TableOptions& table);

// For a completed run: writes the trace (from Kineto's JSON text), the table
// and the summary, and records their paths (relative to out_dir) in `r`.
// Throws io::FileError naming the path and the reason (a trace Kineto could
// not save, typically a full disk, included: `trace_json` is empty then).
void write_run_files(RunRecord& r, const std::string& trace_json, const RunFileOptions& opt);

// For a run a signal stopped: a summary that says so (status interrupted, no
// trace or table), unless a complete summary of the same problem is already
// there — an interrupted run never replaces a finished result. Returns the
// path written, or "" when it kept the earlier one. Throws io::FileError.
std::string write_interrupted_summary(RunRecord& r, const RunFileOptions& opt);

}  // namespace attnprof::report
