#include "attnprof/report/run_files.h"

#include "attnprof/io/files.h"
#include "attnprof/report/summary.h"
#include "attnprof/report/table_data.h"

namespace attnprof::report {

std::string run_table_text(const RunRecord& r, const TableOptions& table) {
  return format_key_averages_table(r.rows, table);
}

void write_run_files(RunRecord& r, const std::string& trace_json, const RunFileOptions& opt) {
  const std::string dir = io::join_path(opt.out_dir, r.variant);
  const std::string stem = r.problem.file_stem() + opt.stem_suffix;
  r.trace_file = io::join_path(r.variant, stem + (opt.gzip ? ".json.gz" : ".json"));
  r.table_file = io::join_path(r.variant, stem + ".txt");
  r.summary_file = io::join_path(r.variant, stem + ".summary.json");
  const std::string trace_path = io::join_path(opt.out_dir, r.trace_file);
  if (trace_json.empty()) {
    const auto left = io::free_bytes(opt.out_dir);
    throw io::FileError("cannot write '" + trace_path + "': the profiler could not save its trace (" +
                        (left ? format_bytes(double(*left)) + " free there" : std::string("free space unknown")) +
                        (left && *left < (1u << 20) ? ": No space left on device)" : ")"));
  }
  io::ensure_writable_dir(dir);
  io::write_file_atomic(trace_path, opt.gzip ? io::gzip_compress(trace_json) : trace_json);
  io::write_file_atomic(io::join_path(opt.out_dir, r.table_file), run_table_text(r, opt.table));
  io::write_file_atomic(io::join_path(opt.out_dir, r.summary_file), summary_json(r).dump(2) + "\n");
}

std::string write_interrupted_summary(RunRecord& r, const RunFileOptions& opt) {
  r.trace_file.clear(), r.table_file.clear();
  r.summary_file = io::join_path(r.variant, r.problem.file_stem() + opt.stem_suffix + ".summary.json");
  const std::string path = io::join_path(opt.out_dir, r.summary_file);
  if (io::path_exists(path)) {
    try {
      if (read_summary_file(path).ok()) return "";
    } catch (const SummaryError&) {
      // Not a readable summary: nothing worth keeping.
    }
  }
  io::ensure_writable_dir(io::join_path(opt.out_dir, r.variant));
  io::write_file_atomic(path, summary_json(r).dump(2) + "\n");
  return path;
}

}  // namespace attnprof::report
