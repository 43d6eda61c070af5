// The three files of one run, published together (io::StagedFiles: all new
// and complete, or the old set untouched):
//   <out>/<variant>/<stem>/<stem>.pt.trace.json.gz  the Chrome trace (.json with
//       --no-gzip), alone in its folder: Holistic Trace Analysis takes every
//       .json/.gz in a folder as one job's ranks, and TensorBoard's profiler
//       plugin finds *.pt.trace.json[.gz] files, one run per folder
//   <out>/<variant>/<stem>.txt                     the key-averages table
//   <out>/<variant>/<stem>.summary.json            the summary
//   <out>/<variant>/<stem>.roofline.svg            with --counters, when they were collected
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

// The trace's path relative to the output directory:
// "<variant>/<stem>/<stem><suffix>.pt.trace.json.gz" (the ranks of a multi-GPU
// run share the folder: HTA reads it as one multi-rank job).
std::string trace_file_of(const RunRecord& r, bool gzip, const std::string& stem_suffix = "");

// Kineto's trace text as attnprof writes it: "distributedInfo" as the run set
// it (a multi-GPU rank's), else rank 0 of a world of 1 (HTA and TensorBoard
// read the rank from it), written with a space after each colon, "traceName" names
// `final_path` rather than the temporary file Kineto wrote, and every other
// field is kept in Kineto's order. Throws io::FileError naming `final_path`
// when the text is not one complete JSON object (a full disk or `ulimit -f`
// cut Kineto's write short).
std::string trace_for_consumers(const std::string& kineto_json, const std::string& final_path);

// For a completed run: writes the trace (from Kineto's JSON text), the table
// and the summary as one set, and records their paths (relative to out_dir)
// in `r`. Throws io::FileError naming the path and the reason (a trace Kineto
// could not save, typically a full disk, included: `trace_json` is empty
// then); nothing new is left behind then, directories included.
void write_run_files(RunRecord& r, const std::string& trace_json, const RunFileOptions& opt);

// Whether attnprof writes a file `name` in `rel_dir` of an output directory
// ("" the directory itself, "<variant>", "<variant>/<stem>", "compare",
// "sweep", "sweep/partial"): what a dead run's temps there may be removed for
// (io::OutputDir). A user's file of any other name is never touched.
bool is_own_output(const std::string& rel_dir, const std::string& name);

// For a run a signal stopped: a summary that says so (status interrupted, no
// trace or table), unless a complete summary of the same problem is already
// there — an interrupted run never replaces a finished result. Returns the
// path written, or "" when it kept the earlier one. Throws io::FileError.
std::string write_interrupted_summary(RunRecord& r, const RunFileOptions& opt);

}  // namespace attnprof::report
