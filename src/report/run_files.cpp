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
  TableOptions t = table;
  t.profile_memory = r.profiler.profile_memory;  // the memory columns, as Python's table has them then
  return format_key_averages_table(r.rows, t);
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
  // The trace of the other compression is an earlier run's: beside this one,
  // HTA would read the folder as two ranks.
  files.remove_at_publish(io::join_path(opt.out_dir, trace_file_of(r, !opt.gzip, opt.stem_suffix)));
  files.add(io::join_path(opt.out_dir, r.table_file), run_table_text(r, opt.table));
  files.add(io::join_path(opt.out_dir, r.summary_file), json_text(summary_json(r)));
  stage_roofline(files, {r}, io::join_path(opt.out_dir, io::join_path(r.variant, stem + ".roofline.svg")));
  files.publish();
}

namespace {
bool digits_at(const std::string& s, size_t& i) {
  const size_t start = i;
  while (i < s.size() && s[i] >= '0' && s[i] <= '9') ++i;
  return i > start;
}
bool word_at(const std::string& s, size_t& i, const char* w) {
  const size_t n = std::char_traits<char>::length(w);
  if (s.compare(i, n, w) != 0) return false;
  i += n;
  return true;
}
// The length of a file stem at the start of `s` (Problem::file_stem:
// B_H_S_D_dtype_mask, then _hkvN, _kvN, _wN, _pN, _vlN-<hex>[-padded], _bwd or
// _fwdbwd), 0 when none.
size_t stem_length(const std::string& s) {
  size_t i = 0;
  for (int k = 0; k < 4; ++k)
    if (!digits_at(s, i) || !word_at(s, i, "_")) return 0;
  if (!(word_at(s, i, "bf16_") || word_at(s, i, "fp16_") || word_at(s, i, "fp32_"))) return 0;
  if (!(word_at(s, i, "causal-top-left") || word_at(s, i, "causal") || word_at(s, i, "full"))) return 0;
  size_t j = i;
  if (word_at(s, j, "_hkv") && digits_at(s, j)) i = j;
  for (const char* tag : {"_kv", "_w", "_p"}) {
    j = i;
    if (word_at(s, j, tag) && digits_at(s, j)) i = j;
  }
  j = i;
  if (word_at(s, j, "_vl") && digits_at(s, j) && word_at(s, j, "-")) {
    const size_t hex = j;
    while (j < s.size() && ((s[j] >= '0' && s[j] <= '9') || (s[j] >= 'a' && s[j] <= 'f'))) ++j;
    if (j > hex) {
      i = j;
      if (word_at(s, j, "-padded")) i = j;
    }
  }
  j = i;
  if (word_at(s, j, "_bwd") || word_at(s, j, "_fwdbwd")) i = j;
  return i;
}
bool one_of(const std::string& rest, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (rest == n) return true;
  return false;
}
// "<stem>[.rank<k>]<rest>" with `rest` among `exts`.
bool stem_file(const std::string& name, std::initializer_list<const char*> exts, const std::string& stem = "") {
  const size_t n = stem_length(name);
  if (n == 0 || (!stem.empty() && name.compare(0, n, stem) != 0) || (!stem.empty() && n != stem.size())) return false;
  size_t i = n, j = n;
  if (word_at(name, j, ".rank") && digits_at(name, j)) i = j;
  return one_of(name.substr(i), exts);
}
bool sweep_file(const std::string& name) {
  if (name.find('/') != std::string::npos) return false;
  return one_of(name, {"sweep.txt", "sweep.csv", "sweep.md", "sweep.json"}) ||
         (name.size() > 4 && name.compare(name.size() - 4, 4, ".svg") == 0);
}
}  // namespace

bool is_own_output(const std::string& rel_dir, const std::string& name) {
  const size_t slash = rel_dir.find('/');
  if (rel_dir.empty()) {  // the profiler's scratch trace: <variant>_<stem>.json
    if (name.size() < 6 || name.compare(name.size() - 5, 5, ".json") != 0) return false;
    for (size_t p = name.find('_'); p != std::string::npos; p = name.find('_', p + 1))
      if (stem_length(name.substr(p + 1)) == name.size() - p - 6) return true;
    return false;
  }
  if (slash == std::string::npos) {
    if (rel_dir == "compare")
      return stem_file(name, {".txt", ".csv", ".md", ".json", ".trace.json.gz", ".timeline.svg",
                              ".context_parallel.txt", ".context_parallel.csv", ".context_parallel.md",
                              ".context_parallel.json"});
    if (rel_dir == "sweep") return sweep_file(name);
    return stem_file(name, {".txt", ".summary.json", ".ring.txt", ".ring.csv", ".ring.md", ".ring.json",
                            ".ring.summary.json"});
  }
  if (rel_dir == "sweep/partial") return sweep_file(name);
  const std::string folder = rel_dir.substr(slash + 1);
  if (folder.find('/') != std::string::npos || stem_length(folder) != folder.size()) return false;
  return stem_file(name, {".pt.trace.json", ".pt.trace.json.gz"}, folder);
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
  files.add(path, json_text(summary_json(r)));
  files.publish();
  return path;
}

}  // namespace attnprof::report
