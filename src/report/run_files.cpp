#include "attnprof/report/run_files.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <sys/resource.h>

#include "attnprof/io/files.h"
#include "attnprof/report/roofline_svg.h"
#include "attnprof/report/summary.h"
#include "attnprof/report/table_data.h"

namespace attnprof::report {

std::string run_table_text(const RunRecord& r, const TableOptions& table) {
  return format_key_averages_table(r.rows, table);
}

std::string trace_file_of(const RunRecord& r, bool gzip, const std::string& stem_suffix) {
  const std::string stem = r.problem.file_stem();
  return io::join_path(io::join_path(r.variant, stem),
                       stem + stem_suffix + (gzip ? ".pt.trace.json.gz" : ".pt.trace.json"));
}

namespace {
// Kineto writes strings as they are, so a control character in a path (its
// "traceName" is the file it wrote, under --out) makes the file invalid JSON.
// Inside strings every byte below 0x20 becomes \u00XX; outside them only
// whitespace may appear, which stays.
std::string escape_controls_in_strings(const std::string& text) {
  std::string out;
  out.reserve(text.size());
  bool in_string = false, escaped = false;
  for (char ch : text) {
    const unsigned char c = static_cast<unsigned char>(ch);
    if (in_string && c < 0x20) {
      out += fmt::format("\\u{:04x}", c);
      escaped = false;
      continue;
    }
    out += ch;
    if (!in_string) in_string = c == '"';
    else if (escaped) escaped = false;
    else if (c == '\\') escaped = true;
    else if (c == '"') in_string = false;
  }
  return out;
}

// Why Kineto left no trace file: it says so only in its log, so the likely
// causes are named from what can be seen.
std::string why_no_trace(const RunRecord& r, const std::string& out_dir) {
  std::string why;
  struct rlimit limit {};
  if (::getrlimit(RLIMIT_FSIZE, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY)
    why = "File too large: the file size limit (ulimit -f) is " + format_bytes(double(limit.rlim_cur));
  const auto left = io::free_bytes(out_dir);
  if (why.empty() && left && *left < (1u << 20)) why = "No space left on device";
  const std::string space = left ? format_bytes(double(*left)) + " free there" : std::string("free space unknown");
  why = why.empty() ? space : why + "; " + space;
  for (const std::string& w : r.warnings)
    if (w.rfind("Kineto, while saving the trace: ", 0) == 0) return why + "; " + w;
  return why;
}
}  // namespace

std::string trace_for_consumers(const std::string& kineto_json, const std::string& final_path) {
  using ordered = nlohmann::ordered_json;
  const ordered in = ordered::parse(escape_controls_in_strings(kineto_json), nullptr, /*allow_exceptions=*/false);
  if (in.is_discarded() || !in.is_object() || !in.contains("traceEvents"))
    throw io::FileError("cannot write '" + final_path +
                        "': the profiler's trace is not complete JSON (a full disk or a file size limit, "
                        "`ulimit -f`, cuts it short)");
  auto dump = [](const ordered& v) { return v.dump(-1, ' ', false, ordered::error_handler_t::replace); };
  // Written by hand at the top level: "rank": 0 keeps the space after the
  // colon that HTA's rank pattern ("rank":\s+(\d+)) needs, and each event gets
  // its own line, as in Kineto's file.
  // A multi-GPU run's own distributedInfo (rank, world size, process groups)
  // is kept; a single-process run is rank 0 of 1.
  ordered info = in.contains("distributedInfo") && in["distributedInfo"].is_object()
                     ? in["distributedInfo"]
                     : ordered{{"backend", "none"}, {"rank", 0}, {"world_size", 1}};
  std::string info_text;
  for (const auto& [key, value] : info.items()) info_text += (info_text.empty() ? "" : ", ") + dump(ordered(key)) + ": " + dump(value);
  std::string out = "{\n  \"schemaVersion\": " + dump(in.value("schemaVersion", ordered(1))) +
                    ",\n  \"distributedInfo\": {" + info_text + "}";
  for (const auto& [key, value] : in.items()) {
    if (key == "schemaVersion" || key == "distributedInfo" || key == "traceName") continue;
    out += ",\n  " + dump(ordered(key)) + ": ";
    if (key != "traceEvents" || !value.is_array()) {
      out += dump(value);
      continue;
    }
    out += "[";
    for (size_t i = 0; i < value.size(); ++i) out += (i ? ",\n  " : "\n  ") + dump(value[i]);
    out += "\n  ]";
  }
  return out + ",\n  \"traceName\": " + dump(ordered(final_path)) + "\n}\n";
}

void write_run_files(RunRecord& r, const std::string& trace_json, const RunFileOptions& opt) {
  const std::string dir = io::join_path(opt.out_dir, r.variant);
  const std::string stem = r.problem.file_stem() + opt.stem_suffix;
  r.trace_file = trace_file_of(r, opt.gzip, opt.stem_suffix);
  r.table_file = io::join_path(r.variant, stem + ".txt");
  r.summary_file = io::join_path(r.variant, stem + ".summary.json");
  r.roofline_file = has_counted_kernels(r) ? io::join_path(r.variant, stem + ".roofline.svg") : "";
  const std::string trace_path = io::join_path(opt.out_dir, r.trace_file);
  if (trace_json.empty())
    throw io::FileError("cannot write '" + trace_path + "': the profiler could not save its trace (" +
                        why_no_trace(r, opt.out_dir) + ")");
  const std::string trace = trace_for_consumers(trace_json, trace_path);
  io::StagedFiles files;
  files.make_dir(io::join_path(dir, r.problem.file_stem()));
  files.add(trace_path, opt.gzip ? io::gzip_compress(trace) : trace);
  files.add(io::join_path(opt.out_dir, r.table_file), run_table_text(r, opt.table));
  files.add(io::join_path(opt.out_dir, r.summary_file), summary_json(r).dump(2) + "\n");
  if (!r.roofline_file.empty()) stage_roofline(files, {r}, io::join_path(opt.out_dir, r.roofline_file));
  files.publish();
}

std::string write_interrupted_summary(RunRecord& r, const RunFileOptions& opt) {
  r.trace_file.clear(), r.table_file.clear(), r.roofline_file.clear();
  r.summary_file = io::join_path(r.variant, r.problem.file_stem() + opt.stem_suffix + ".summary.json");
  const std::string path = io::join_path(opt.out_dir, r.summary_file);
  if (io::path_exists(path)) {
    try {
      if (read_summary_file(path).ok()) return "";
    } catch (const SummaryError&) {
      // Not a readable summary: nothing worth keeping.
    }
  }
  io::StagedFiles files;
  files.make_dir(io::join_path(opt.out_dir, r.variant));
  files.add(path, summary_json(r).dump(2) + "\n");
  files.publish();
  return path;
}

}  // namespace attnprof::report
