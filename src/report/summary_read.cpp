#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "attnprof/io/files.h"
#include "attnprof/io/text.h"
#include "attnprof/report/summary.h"
#include "report/summary_schema.h"

namespace attnprof::report {
namespace {

using nlohmann::json;

const char* type_name(const json& v) {
  if (v.is_null()) return "null";
  if (v.is_boolean()) return "a boolean";
  if (v.is_number()) return "a number";
  if (v.is_string()) return "a string";
  if (v.is_array()) return "an array";
  if (v.is_object()) return "an object";
  return "an unknown value";
}

// Text from a file a user may have edited: control characters (ANSI escapes,
// line breaks) would reach the terminal raw and break one-line messages.
std::string printable(const std::string& s) { return io::visible(s); }

std::string clip(const std::string& s) { return printable(s.size() > 40 ? s.substr(0, 40) + "..." : s); }

constexpr size_t kMaxArray = 1'000'000;

// The reading visitor of summary_schema.h: every field is looked up under a
// dotted path ("headline.scopes[0].kernels[2].count_per_call") so an error
// names the exact field.
class Reader {
 public:
  Reader(const json& root, std::string source) : cur_(&root), source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw SummaryError(fmt::format("{}: field '{}': {}", source_, path, what));
  }
  [[noreturn]] void fail_at(const char* key, const std::string& what) const { fail(join(key), what); }

  template <class T>
  void integer(const char* key, T& out, int64_t lo, int64_t hi) {
    const json& v = field(key);
    if (!v.is_number_integer())
      fail_at(key, fmt::format("expected an integer, got {}", v.is_number() ? v.dump() : type_name(v)));
    // Unsigned values above int64's range read as negative through get<int64_t>.
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      fail_at(key, fmt::format("{} is out of range [{}, {}]", v.dump(), lo, hi));
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) fail_at(key, fmt::format("{} is out of range [{}, {}]", i, lo, hi));
    out = static_cast<T>(i);
  }
  void number(const char* key, double& out, double lo, double hi) { out = number_value(field(key), key, lo, hi); }
  void optional_number(const char* key, std::optional<double>& out, double lo, double hi) {
    const json& v = field(key);
    if (v.is_null()) {
      out.reset();
      return;
    }
    if (!v.is_number()) fail_at(key, fmt::format("expected a number or null, got {}", type_name(v)));
    out = number_value(v, key, lo, hi);
  }
  // A number added within a schema version: absent (an older file) is null.
  void later_optional_number(const char* key, std::optional<double>& out, double lo, double hi) {
    if (!cur_->contains(key)) {
      out.reset();
      return;
    }
    optional_number(key, out, lo, hi);
  }
  // Microseconds shown in the summary back to the nanoseconds OpStats holds.
  void ns_as_us(const char* key, int64_t& out) { out = std::llround(number_value(field(key), key, 0.0, 1e15) * 1000.0); }
  void string(const char* key, std::string& out) { out = printable(string_value(field(key), join(key))); }
  void boolean(const char* key, bool& out) {
    const json& v = field(key);
    if (!v.is_boolean()) fail_at(key, fmt::format("expected true or false, got {}", type_name(v)));
    out = v.get<bool>();
  }
  // A boolean added within a schema version: absent (an older file) is false.
  template <class T>
  void integer_or_zero(const char* key, T& out, int64_t lo, int64_t hi) {
    if (!cur_->contains(key)) {
      out = 0;
      return;
    }
    integer(key, out, lo, hi);
  }
  void flag(const char* key, bool& out) {
    if (!cur_->contains(key)) {
      out = false;
      return;
    }
    boolean(key, out);
  }
  template <class E, class Name, class Parse>
  void enumeration(const char* key, E& out, Name, Parse parse, const char* valid) {
    const std::string s = string_value(field(key), join(key));
    const auto e = parse(s);
    if (!e) fail_at(key, fmt::format("expected {}, got \"{}\"", valid, clip(s)));
    out = *e;
  }
  template <class F>
  void object(const char* key, F&& fn) {
    const json& v = field(key);
    if (!v.is_object()) fail_at(key, fmt::format("expected an object, got {}", type_name(v)));
    descend(v, join(key), fn);
  }
  template <class T, class F>
  void optional_object(const char* key, std::optional<T>& out, F&& fn) {
    const json& v = field(key);
    if (v.is_null()) {
      out.reset();
      return;
    }
    if (!v.is_object()) fail_at(key, fmt::format("expected an object or null, got {}", type_name(v)));
    out.emplace();
    descend(v, join(key), [&] { fn(*out); });
  }
  // An object added within a schema version: absent (an older file) is null.
  template <class T, class F>
  void later_optional_object(const char* key, std::optional<T>& out, F&& fn) {
    if (!cur_->contains(key)) {
      out.reset();
      return;
    }
    optional_object(key, out, fn);
  }
  template <class T, class F>
  void array(const char* key, std::vector<T>& out, F&& fn) {
    const json& a = array_field(key);
    out.clear();
    out.resize(a.size());
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string p = fmt::format("{}[{}]", join(key), i);
      if (!a[i].is_object()) fail(p, fmt::format("expected an object, got {}", type_name(a[i])));
      descend(a[i], p, [&] { fn(out[i]); });
    }
  }
  void string_list(const char* key, std::vector<std::string>& out) {
    const json& a = array_field(key);
    out.clear();
    for (size_t i = 0; i < a.size(); ++i) out.push_back(printable(string_value(a[i], fmt::format("{}[{}]", join(key), i))));
  }
  // Empty when absent (files from before the field).
  void int_list(const char* key, std::vector<int64_t>& out, int64_t lo, int64_t hi, size_t max_size) {
    out.clear();
    if (!cur_->contains(key)) return;
    const json& a = array_field(key);
    if (a.size() > max_size) fail_at(key, fmt::format("{} entries, more than {}", a.size(), max_size));
    for (size_t i = 0; i < a.size(); ++i) {
      const std::string p = fmt::format("{}[{}]", join(key), i);
      if (!a[i].is_number_integer()) fail(p, fmt::format("expected an integer, got {}", type_name(a[i])));
      if (a[i].is_number_unsigned() && a[i].get<uint64_t>() > uint64_t(hi)) fail(p, fmt::format("{} is out of range [{}, {}]", a[i].dump(), lo, hi));
      const int64_t x = a[i].get<int64_t>();
      if (x < lo || x > hi) fail(p, fmt::format("{} is out of range [{}, {}]", x, lo, hi));
      out.push_back(x);
    }
  }
  void string_map(const char* key, std::vector<std::pair<std::string, std::string>>& out) {
    const json& v = field(key);
    if (!v.is_object()) fail_at(key, fmt::format("expected an object, got {}", type_name(v)));
    out.clear();
    for (const auto& [k, x] : v.items()) out.emplace_back(printable(k), printable(string_value(x, join(key) + "." + clip(k))));
  }
  void int_triple(const char* key, int (&out)[3], int lo, int hi) {
    const json& a = array_field(key);
    if (a.size() != 3) fail_at(key, fmt::format("expected 3 integers, got {}", a.size()));
    for (size_t d = 0; d < 3; ++d) {
      const std::string p = fmt::format("{}[{}]", join(key), d);
      if (!a[d].is_number_integer()) fail(p, fmt::format("expected an integer, got {}", type_name(a[d])));
      if (a[d].is_number_unsigned() && a[d].get<uint64_t>() > uint64_t(hi)) fail(p, fmt::format("{} is out of range [{}, {}]", a[d].dump(), lo, hi));
      const int64_t x = a[d].get<int64_t>();
      if (x < lo || x > hi) fail(p, fmt::format("{} is out of range [{}, {}]", x, lo, hi));
      out[d] = static_cast<int>(x);
    }
  }
  template <class F>
  void derived(const char*, F&&) {}  // written for people and scripts; recomputed, not read

 private:
  std::string join(const char* key) const { return path_.empty() ? std::string(key) : path_ + "." + key; }
  const json& field(const char* key) const {
    if (!cur_->is_object()) fail(path_.empty() ? "(top level)" : path_, fmt::format("expected an object, got {}", type_name(*cur_)));
    const auto it = cur_->find(key);
    if (it == cur_->end()) fail_at(key, "missing");
    return *it;
  }
  const json& array_field(const char* key) const {
    const json& a = field(key);
    if (!a.is_array()) fail_at(key, fmt::format("expected an array, got {}", type_name(a)));
    if (a.size() > kMaxArray) fail_at(key, fmt::format("{} entries is more than a summary holds", a.size()));
    return a;
  }
  std::string string_value(const json& v, const std::string& p) const {
    if (!v.is_string()) fail(p, fmt::format("expected a string, got {}", type_name(v)));
    return v.get<std::string>();
  }
  double number_value(const json& v, const char* key, double lo, double hi) const {
    if (!v.is_number()) fail_at(key, fmt::format("expected a number, got {}", type_name(v)));
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) fail_at(key, fmt::format("{} is out of range [{:g}, {:g}]", v.dump(), lo, hi));
    return d;
  }
  template <class F>
  void descend(const json& v, std::string path, F&& fn) {
    const json* saved_cur = cur_;
    std::string saved_path = std::move(path_);
    cur_ = &v;
    path_ = std::move(path);
    fn();
    cur_ = saved_cur;
    path_ = std::move(saved_path);
  }

  const json* cur_;
  std::string path_;
  std::string source_;
};

// Schema 1 (attnprof 0.1): square problems (heads, seq, causal), forward only,
// the headline as forward_* figures of the first forward's kernels. Rewritten
// into schema 2's shape so one reader validates both; fields schema 1 made
// optional get the values 0.1 meant by leaving them out.
json upgrade_from_schema_1(json j) {
  if (j.contains("problem") && j["problem"].is_object()) {
    json& p = j["problem"];
    if (p.contains("heads")) p["heads_q"] = p["heads"], p["heads_kv"] = p["heads"];
    if (p.contains("seq")) p["seq_q"] = p["seq"], p["seq_kv"] = p["seq"];
    if (p.contains("causal") && p["causal"].is_boolean()) p["mask"] = p["causal"].get<bool>() ? "causal" : "full";
    else if (p.contains("causal")) p["mask"] = p["causal"];  // the reader names the bad type
    p["pass"] = "fwd";
    if (!p.contains("seed")) p["seed"] = 0;
  }
  if (j.contains("headline") && j["headline"].is_object()) {
    json& h = j["headline"];
    json scope = {{"scope", kForwardScope}};
    auto copy = [&](const char* from, const char* to, json fallback) {
      scope[to] = h.contains(from) && !h[from].is_null() ? h[from] : fallback;
    };
    copy("forwards_profiled", "calls", json());
    copy("forward_cpu_time_avg_us", "cpu_time_avg_us", json());
    copy("forward_cuda_time_avg_us", "cuda_time_avg_us", 0.0);
    scope["cuda_time_min_us"] = scope["cuda_time_avg_us"];
    scope["cuda_time_max_us"] = scope["cuda_time_avg_us"];
    copy("kernels_per_forward", "kernels_per_call", 0.0);
    json kernels = json::array();
    if (h.contains("kernels") && h["kernels"].is_array()) {
      for (const json& k : h["kernels"]) {
        if (!k.is_object()) {
          kernels.push_back(k);
          continue;
        }
        json nk = {{"name", k.contains("name") ? k["name"] : json()}};
        nk["count_per_call"] = k.contains("count") ? k["count"] : json();
        const json t = k.contains("time_us") ? k["time_us"] : json();
        nk["time_avg_us"] = t, nk["time_min_us"] = t, nk["time_max_us"] = t;
        kernels.push_back(std::move(nk));
      }
    } else if (h.contains("kernels")) {
      kernels = h["kernels"];
    }
    scope["kernels"] = std::move(kernels);
    h["scopes"] = json::array({std::move(scope)});
    for (const char* k : {"profiler_overhead", "tflops", "peak_memory_bytes"})
      if (!h.contains(k)) h[k] = nullptr;
    if (!h.contains("output_finite")) h["output_finite"] = true;
  }
  if (!j.contains("timing")) j["timing"] = nullptr;
  if (j.contains("timing") && j["timing"].is_object() && !j["timing"].contains("input_sets")) j["timing"]["input_sets"] = 1;
  if (!j.contains("launches")) j["launches"] = json::array();
  if (j.contains("launches") && j["launches"].is_array()) {
    for (json& l : j["launches"]) {
      if (!l.is_object()) continue;
      for (const char* key : {"grid", "block"})
        if (!l.contains(key)) l[key] = json::array({0, 0, 0});
      if (!l.contains("registers_per_thread")) l["registers_per_thread"] = 0;
      if (!l.contains("shared_memory_bytes")) l["shared_memory_bytes"] = 0;
      if (!l.contains("est_occupancy_pct")) l["est_occupancy_pct"] = nullptr;
    }
  }
  if (!j.contains("phases_ms")) j["phases_ms"] = json::array();
  return j;
}

// Schema 2 (before the counter pass): no counters, device limits or
// theoretical occupancy. Filled with what a run without --counters writes.
json upgrade_from_schema_2(json j) {
  for (const char* key : {"device_limits", "counters"})
    if (!j.contains(key)) j[key] = nullptr;
  if (j.contains("launches") && j["launches"].is_array()) {
    for (json& l : j["launches"]) {
      if (!l.is_object()) continue;
      for (const char* key : {"theoretical_occupancy_pct", "grid_occupancy_pct"})
        if (!l.contains(key)) l[key] = nullptr;
      if (!l.contains("occupancy_limiter")) l["occupancy_limiter"] = "";
    }
  }
  if (j.contains("files") && j["files"].is_object() && !j["files"].contains("roofline")) j["files"]["roofline"] = "";
  return j;
}

// Bounded inflate: a small .gz cannot expand past kMaxSummaryBytes.
std::string gunzip_bounded(const std::string& bytes, const std::string& source) {
  try {
    return io::gzip_decompress(bytes, kMaxSummaryBytes);
  } catch (const io::FileError& e) {
    throw SummaryError(source + ": " + e.what());
  }
}


}  // namespace

// Nesting depth outside strings, so absurdly deep input is refused before the
// parser (and the recursive destructor of nested values) ever sees it.
int json_nesting_depth(std::string_view text) {
  int depth = 0, max = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '[' || c == '{') max = std::max(max, ++depth);
    else if (c == ']' || c == '}') --depth;
  }
  return max;
}

RunRecord read_summary(const json& j, const std::string& source) {
  Reader top(j, source);
  if (!j.is_object()) top.fail("(top level)", fmt::format("expected an object, got {}", type_name(j)));
  int64_t version = 0;
  top.integer("schema_version", version, 1, std::numeric_limits<int64_t>::max());
  if (version > kSummarySchemaVersion)
    top.fail("schema_version", fmt::format("{} is newer than this attnprof reads ({})", version, kSummarySchemaVersion));
  if (const auto tool = j.find("tool"); tool != j.end() && *tool != "attnprof")
    top.fail("tool", fmt::format("expected \"attnprof\", got {}", clip(tool->dump())));
  const json upgraded = version == 1 ? upgrade_from_schema_2(upgrade_from_schema_1(j))
                        : version == 2 ? upgrade_from_schema_2(j)
                                       : json();
  Reader rd(version < kSummarySchemaVersion ? upgraded : j, source);
  RunRecord r;
  schema::summary_fields(rd, r);
  if (r.variant.empty()) rd.fail("variant", "empty");
  if (r.problem.device != "cpu" && !r.problem.on_cuda())
    rd.fail("problem.device", fmt::format("unknown device '{}'", clip(r.problem.device)));
  if (r.problem.heads_q % r.problem.heads_kv != 0)
    rd.fail("problem.heads_kv", fmt::format("{} does not divide heads_q {}", r.problem.heads_kv, r.problem.heads_q));
  if (const Problem& p = r.problem; p.varlen()) {
    const auto [lo, hi] = std::minmax_element(p.seqlens.begin(), p.seqlens.end());
    if (int64_t(p.seqlens.size()) != p.batch)
      rd.fail("problem.seqlens", fmt::format("{} lengths for a batch of {}", p.seqlens.size(), p.batch));
    if (*hi != p.seq_kv) rd.fail("problem.seqlens", fmt::format("the longest is {}, not seq_kv {}", *hi, p.seq_kv));
    if (p.seq_q != p.seq_kv && p.seq_q > *lo)
      rd.fail("problem.seq_q", fmt::format("{} is more than the shortest sequence ({})", p.seq_q, *lo));
    // What attnprof does not run (the CLI refuses both): no such summary is genuine.
    if (p.paged()) rd.fail("problem.page_size", fmt::format("{} with seqlens: a variable-length batch is not paged", p.page_size));
    if (p.pass != Pass::fwd)
      rd.fail("problem.pass", fmt::format("{} with seqlens: a variable-length batch runs the forward only", pass_name(p.pass)));
  } else if (p.varlen_padded) {
    rd.fail("problem.varlen_padded", "true without seqlens: only a variable-length batch has a padded layout");
  }
  if (r.problem.fp8_rotated && r.problem.dtype != DType::FP8)
    rd.fail("problem.fp8_rotated", fmt::format("true for {} inputs: only fp8 inputs are rotated before their "
                                               "quantisation", dtype_name(r.problem.dtype)));
  // fp8 problems attnprof never runs (the CLI refuses them): no such summary is genuine.
  if (const Problem& p = r.problem; p.dtype == DType::FP8 && (p.pass != Pass::fwd || p.varlen() || p.paged()))
    rd.fail(p.pass != Pass::fwd ? "problem.pass" : p.varlen() ? "problem.seqlens" : "problem.page_size",
            "fp8 runs dense forward problems only");
  if (const auto& a = r.accuracy) {
    if (a->total_rows != r.problem.total_q())
      rd.fail("headline.accuracy.rows_total",
              fmt::format("{} is not the problem's {} query rows", a->total_rows, r.problem.total_q()));
    if (a->rows > a->total_rows)
      rd.fail("headline.accuracy.rows_compared", fmt::format("{} is more than rows_total {}", a->rows, a->total_rows));
    // Quantising the inputs is fp8's, and every fp8 run measures it.
    if (a->input_quantisation_error.has_value() != (r.problem.dtype == DType::FP8))
      rd.fail("headline.accuracy.input_quantisation_error",
              r.problem.dtype == DType::FP8 ? "null for fp8 inputs, which a run always measures"
                                            : fmt::format("set for {} inputs, which are not quantised",
                                                          dtype_name(r.problem.dtype)));
  }
  return r;
}

DeviceCeilings read_ceilings(const json& j, const std::string& source) {
  Reader rd(j, source);
  if (!j.is_object()) rd.fail("(top level)", fmt::format("expected an object, got {}", type_name(j)));
  DeviceCeilings c;
  schema::ceilings_fields(rd, c);
  return c;
}

RunRecord read_summary_text(const std::string& text, const std::string& source) {
  if (text.size() > kMaxSummaryBytes)
    throw SummaryError(fmt::format("{}: {} bytes is larger than a summary ({} MiB at most)", source, text.size(),
                                   kMaxSummaryBytes >> 20));
  if (json_nesting_depth(text) > kMaxSummaryDepth)
    throw SummaryError(fmt::format("{}: nested deeper than {} levels; not a summary", source, kMaxSummaryDepth));
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    // parse_error, and out_of_range for a number past double ("1e999", found by
    // tests/fuzz/summary_reader.cpp). nlohmann's message is one line:
    // "[json.exception.parse_error.101] parse error at line 3, column 1: ..."
    std::string what = e.what();
    const size_t colon = what.find("] ");
    if (colon != std::string::npos) what = what.substr(colon + 2);
    for (char& c : what)
      if (c == '\n' || c == '\r') c = ' ';
    throw SummaryError(fmt::format("{}: not valid JSON ({})", source, what));
  }
  return read_summary(j, source);
}

RunRecord read_summary_file(const std::string& path) {
  std::string bytes;
  try {
    // Bounded, and never blocking on a FIFO nobody writes to.
    bytes = io::read_file(path, kMaxSummaryBytes);
  } catch (const io::FileError& e) {
    throw SummaryError(std::string(e.what()) + (std::string(e.what()).find("larger than") != std::string::npos
                                                    ? "; not a summary"
                                                    : ""));
  }
  const bool gz = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
                  static_cast<unsigned char>(bytes[1]) == 0x8b;
  return read_summary_text(gz ? gunzip_bounded(bytes, path) : bytes, path);
}

}  // namespace attnprof::report
