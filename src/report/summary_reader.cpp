#include "attnprof/report/summary_reader.h"

#include "attnprof/io/files.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <zlib.h>

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "attnprof/report/summary.h"

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

// Reads fields under a dotted path ("headline.kernels[2].count") so every
// error names the exact field.
class Reader {
 public:
  explicit Reader(std::string source) : source_(std::move(source)) {}

  [[noreturn]] void fail(const std::string& path, const std::string& what) const {
    throw SummaryError(fmt::format("{}: field '{}': {}", source_, path, what));
  }

  const json& field(const json& obj, const std::string& path, const char* key) const {
    const std::string p = join(path, key);
    if (!obj.is_object()) fail(path, fmt::format("expected an object, got {}", type_name(obj)));
    const auto it = obj.find(key);
    if (it == obj.end()) fail(p, "missing");
    return *it;
  }
  const json* optional_field(const json& obj, const char* key) const {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }

  const json& object(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_object()) fail(join(path, key), fmt::format("expected an object, got {}", type_name(v)));
    return v;
  }
  const json& array(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_array()) fail(join(path, key), fmt::format("expected an array, got {}", type_name(v)));
    return v;
  }
  std::string string(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_string()) fail(join(path, key), fmt::format("expected a string, got {}", type_name(v)));
    return v.get<std::string>();
  }
  bool boolean(const json& obj, const std::string& path, const char* key) const {
    const json& v = field(obj, path, key);
    if (!v.is_boolean()) fail(join(path, key), fmt::format("expected true or false, got {}", type_name(v)));
    return v.get<bool>();
  }
  // Finite and within [lo, hi].
  double number_value(const json& v, const std::string& p, double lo, double hi) const {
    if (!v.is_number()) fail(p, fmt::format("expected a number, got {}", type_name(v)));
    const double d = v.get<double>();
    if (!std::isfinite(d) || d < lo || d > hi) fail(p, fmt::format("{} is out of range [{:g}, {:g}]", v.dump(), lo, hi));
    return d;
  }
  double number(const json& obj, const std::string& path, const char* key, double lo = 0.0,
                double hi = 1e18) const {
    return number_value(field(obj, path, key), join(path, key), lo, hi);
  }
  std::optional<double> optional_number(const json& obj, const std::string& path, const char* key,
                                        double lo = 0.0, double hi = 1e18) const {
    const json& v = field(obj, path, key);
    if (v.is_null()) return std::nullopt;
    if (!v.is_number()) fail(join(path, key), fmt::format("expected a number or null, got {}", type_name(v)));
    return number_value(v, join(path, key), lo, hi);
  }
  int64_t integer_value(const json& v, const std::string& p, int64_t lo, int64_t hi) const {
    if (!v.is_number_integer()) fail(p, fmt::format("expected an integer, got {}", v.is_number() ? v.dump() : type_name(v)));
    // Unsigned values above int64's range read as negative through get<int64_t>.
    if (v.is_number_unsigned() && v.get<uint64_t>() > uint64_t(std::numeric_limits<int64_t>::max()))
      fail(p, fmt::format("{} is out of range [{}, {}]", v.dump(), lo, hi));
    const int64_t i = v.get<int64_t>();
    if (i < lo || i > hi) fail(p, fmt::format("{} is out of range [{}, {}]", i, lo, hi));
    return i;
  }
  int64_t integer(const json& obj, const std::string& path, const char* key, int64_t lo, int64_t hi) const {
    return integer_value(field(obj, path, key), join(path, key), lo, hi);
  }
  // Microseconds shown in the summary back to the nanoseconds OpStats holds.
  int64_t us_to_ns(const json& obj, const std::string& path, const char* key) const {
    return std::llround(number(obj, path, key, 0.0, 1e15) * 1000.0);
  }

  static std::string join(const std::string& path, const char* key) {
    return path.empty() ? std::string(key) : path + "." + key;
  }
  static std::string index(const std::string& path, size_t i) { return fmt::format("{}[{}]", path, i); }

 private:
  std::string source_;
};

constexpr int64_t kMaxDim = int64_t(1) << 40;
constexpr size_t kMaxArray = 1'000'000;

void check_size(const Reader& rd, const json& arr, const std::string& path) {
  if (arr.size() > kMaxArray) rd.fail(path, fmt::format("{} entries is more than a summary holds", arr.size()));
}

Problem read_problem(const Reader& rd, const json& j) {
  const std::string P = "problem";
  Problem p;
  p.batch = rd.integer(j, P, "batch", 1, kMaxDim);
  p.heads = rd.integer(j, P, "heads", 1, kMaxDim);
  p.seq = rd.integer(j, P, "seq", 1, kMaxDim);
  p.head_dim = rd.integer(j, P, "head_dim", 1, kMaxDim);
  const std::string dt = rd.string(j, P, "dtype");
  const auto dtype = parse_dtype(dt);
  if (!dtype) rd.fail("problem.dtype", fmt::format("unknown dtype '{}'", dt.substr(0, 40)));
  p.dtype = *dtype;
  p.causal = rd.boolean(j, P, "causal");
  p.device = rd.string(j, P, "device");
  if (p.device != "cpu" && !p.on_cuda()) rd.fail("problem.device", fmt::format("unknown device '{}'", p.device.substr(0, 40)));
  if (const json* seed = rd.optional_field(j, "seed"))
    p.seed = uint64_t(rd.integer_value(*seed, "problem.seed", 0, std::numeric_limits<int64_t>::max()));
  return p;
}

OpStats read_op(const Reader& rd, const json& j, const std::string& P) {
  OpStats s;
  s.name = rd.string(j, P, "name");
  const std::string dev = rd.string(j, P, "device");
  if (dev != "cpu" && dev != "cuda") rd.fail(Reader::join(P, "device"), fmt::format("expected \"cpu\" or \"cuda\", got \"{}\"", dev.substr(0, 40)));
  s.device = dev == "cuda" ? EventDevice::Cuda : EventDevice::Cpu;
  s.is_user_annotation = rd.boolean(j, P, "is_user_annotation");
  s.count = rd.integer(j, P, "count", 0, int64_t(1) << 50);
  s.cpu_time_total_ns = rd.us_to_ns(j, P, "cpu_time_total_us");
  s.self_cpu_time_total_ns = rd.us_to_ns(j, P, "self_cpu_time_total_us");
  s.device_time_total_ns = rd.us_to_ns(j, P, "cuda_time_total_us");
  s.self_device_time_total_ns = rd.us_to_ns(j, P, "self_cuda_time_total_us");
  return s;
}

// Optional blocks that summary schema 1 may carry (launches, event timing).
void read_optional_blocks(const Reader& rd, const json& j, RunRecord& r) {
  if (const json* t = rd.optional_field(j, "timing")) {
    const std::string P = "timing";
    EventTiming e;
    e.iters_per_rep = int(rd.integer(*t, P, "iters_per_rep", 0, 1 << 30));
    e.reps = int(rd.integer(*t, P, "reps", 0, 1 << 30));
    if (rd.optional_field(*t, "input_sets")) e.input_sets = int(rd.integer(*t, P, "input_sets", 1, 1 << 20));
    e.median_us = rd.number(*t, P, "median_us");
    e.min_us = rd.number(*t, P, "min_us");
    e.max_us = rd.number(*t, P, "max_us");
    e.clock = rd.string(*t, P, "clock");
    r.timing = e;
  }
  if (const json* l = rd.optional_field(j, "launches")) {
    if (!l->is_array()) rd.fail("launches", fmt::format("expected an array, got {}", type_name(*l)));
    check_size(rd, *l, "launches");
    for (size_t i = 0; i < l->size(); ++i) {
      const std::string P = Reader::index("launches", i);
      const json& x = (*l)[i];
      KernelLaunch k;
      k.name = rd.string(x, P, "name");
      k.launch_api = rd.string(x, P, "launch_api");
      k.time_us = rd.number(x, P, "time_us");
      if (rd.optional_field(x, "registers_per_thread"))
        k.registers_per_thread = int(rd.integer(x, P, "registers_per_thread", 0, 1 << 20));
      if (rd.optional_field(x, "shared_memory_bytes"))
        k.shared_memory_bytes = rd.integer(x, P, "shared_memory_bytes", 0, int64_t(1) << 40);
      if (rd.optional_field(x, "est_occupancy_pct"))
        k.est_occupancy_pct = rd.optional_number(x, P, "est_occupancy_pct", 0.0, 100.0);
      for (const char* key : {"grid", "block"}) {
        if (!rd.optional_field(x, key)) continue;
        const json& a = rd.array(x, P, key);
        if (a.size() != 3) rd.fail(Reader::join(P, key), fmt::format("expected 3 integers, got {}", a.size()));
        int* dst = key[0] == 'g' ? k.grid : k.block;
        for (size_t d = 0; d < 3; ++d)
          dst[d] = int(rd.integer_value(a[d], Reader::index(Reader::join(P, key), d), 0, std::numeric_limits<int>::max()));
      }
      r.launches.push_back(std::move(k));
    }
  }
  if (const json* ph = rd.optional_field(j, "phases_ms")) {
    if (!ph->is_array()) rd.fail("phases_ms", fmt::format("expected an array, got {}", type_name(*ph)));
    check_size(rd, *ph, "phases_ms");
    for (size_t i = 0; i < ph->size(); ++i) {
      const std::string P = Reader::index("phases_ms", i);
      r.phases_ms.emplace_back(rd.string((*ph)[i], P, "phase"), rd.number((*ph)[i], P, "ms"));
    }
  }
}

// Nesting depth outside strings, so absurdly deep input is refused before the
// parser (and the recursive destructor of nested values) ever sees it.
int max_depth(const std::string& text) {
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

// Bounded inflate: a small .gz cannot expand past kMaxSummaryBytes.
std::string gunzip_bounded(const std::string& bytes, const std::string& source) {
  try {
    return io::gzip_decompress(bytes, kMaxSummaryBytes);
  } catch (const io::FileError& e) {
    throw SummaryError(source + ": " + e.what());
  }
}

}  // namespace

RunRecord read_summary(const json& j, const std::string& source) {
  const Reader rd(source);
  if (!j.is_object()) rd.fail("(top level)", fmt::format("expected an object, got {}", type_name(j)));
  const int64_t version = rd.integer(j, "", "schema_version", 1, std::numeric_limits<int64_t>::max());
  if (version > kSummarySchemaVersion)
    rd.fail("schema_version", fmt::format("{} is newer than this attnprof reads ({})", version, kSummarySchemaVersion));
  if (const json* tool = rd.optional_field(j, "tool"); tool && *tool != "attnprof")
    rd.fail("tool", fmt::format("expected \"attnprof\", got {}", tool->dump().substr(0, 40)));

  RunRecord r;
  r.variant = rd.string(j, "", "variant");
  if (r.variant.empty()) rd.fail("variant", "empty");
  r.description = rd.string(j, "", "description");
  r.status = rd.string(j, "", "status");
  if (r.status != "ok" && r.status != "skipped" && r.status != "failed" && r.status != "interrupted")
    rd.fail("status", fmt::format("expected ok, skipped, failed or interrupted, got \"{}\"", r.status.substr(0, 40)));
  r.reason = rd.string(j, "", "reason");
  r.problem = read_problem(rd, rd.object(j, "", "problem"));

  const json& env = rd.object(j, "", "environment");
  r.env.torch_version = rd.string(env, "environment", "torch_version");
  r.env.device_name = rd.string(env, "environment", "device_name");
  r.env.cuda_runtime = rd.string(env, "environment", "cuda_runtime");
  r.env.attnprof_version = rd.string(env, "environment", "attnprof_version");

  const json& sch = rd.object(j, "", "schedule");
  r.schedule.warmup_iters = int(rd.integer(sch, "schedule", "warmup_iters", 0, 1 << 30));
  r.schedule.wait = int(rd.integer(sch, "schedule", "wait", 0, 1 << 30));
  r.schedule.warmup = int(rd.integer(sch, "schedule", "warmup", 0, 1 << 30));
  r.schedule.active = int(rd.integer(sch, "schedule", "active", 0, 1 << 30));

  const json& facts = rd.object(j, "", "facts");
  for (const auto& [k, v] : facts.items()) {
    if (!v.is_string()) rd.fail("facts." + k, fmt::format("expected a string, got {}", type_name(v)));
    r.facts.emplace_back(k, v.get<std::string>());
  }
  const json& warnings = rd.array(j, "", "warnings");
  check_size(rd, warnings, "warnings");
  for (size_t i = 0; i < warnings.size(); ++i) {
    if (!warnings[i].is_string()) rd.fail(Reader::index("warnings", i), fmt::format("expected a string, got {}", type_name(warnings[i])));
    r.warnings.push_back(warnings[i].get<std::string>());
  }

  const std::string H = "headline";
  const json& h = rd.object(j, "", "headline");
  r.forward.forwards = rd.integer(h, H, "forwards_profiled", 0, int64_t(1) << 40);
  r.forward.device_time_avg_us = rd.optional_number(h, H, "forward_cuda_time_avg_us").value_or(0.0);
  r.forward.cpu_time_avg_us = rd.number(h, H, "forward_cpu_time_avg_us");
  r.forward.kernels_per_forward = rd.optional_number(h, H, "kernels_per_forward").value_or(0.0);
  const json& kernels = rd.array(h, H, "kernels");
  check_size(rd, kernels, "headline.kernels");
  for (size_t i = 0; i < kernels.size(); ++i) {
    const std::string P = Reader::index("headline.kernels", i);
    ForwardStats::Kernel k;
    k.name = rd.string(kernels[i], P, "name");
    k.count = rd.integer(kernels[i], P, "count", 0, int64_t(1) << 40);
    k.total_us = rd.number(kernels[i], P, "time_us");
    r.forward.kernels.push_back(std::move(k));
  }
  r.tflops = rd.optional_number(h, H, "tflops");
  r.peak_memory_bytes = rd.optional_number(h, H, "peak_memory_bytes");
  if (rd.optional_field(h, "profiler_overhead")) r.profiler_overhead = rd.optional_number(h, H, "profiler_overhead");
  if (rd.optional_field(h, "output_finite")) r.output_finite = rd.boolean(h, H, "output_finite");

  const json& files = rd.object(j, "", "files");
  r.trace_file = rd.string(files, "files", "trace");
  r.table_file = rd.string(files, "files", "table");
  r.summary_file = rd.string(files, "files", "summary");

  const json& ops = rd.array(j, "", "ops");
  check_size(rd, ops, "ops");
  for (size_t i = 0; i < ops.size(); ++i) r.rows.push_back(read_op(rd, ops[i], Reader::index("ops", i)));

  read_optional_blocks(rd, j, r);
  return r;
}

RunRecord read_summary_text(const std::string& text, const std::string& source) {
  if (text.size() > kMaxSummaryBytes)
    throw SummaryError(fmt::format("{}: {} bytes is larger than a summary ({} MiB at most)", source, text.size(),
                                   kMaxSummaryBytes >> 20));
  if (max_depth(text) > kMaxSummaryDepth)
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
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw SummaryError(fmt::format("{}: cannot read: {}", path, std::strerror(errno)));
  std::string bytes;
  char buf[1 << 16];
  size_t n = 0;
  bool too_big = false;
  while ((n = std::fread(buf, 1, sizeof(buf), f)) > 0) {
    bytes.append(buf, n);
    if (bytes.size() > kMaxSummaryBytes) {
      too_big = true;
      break;
    }
  }
  const bool read_error = std::ferror(f) != 0;
  std::fclose(f);
  if (read_error) throw SummaryError(fmt::format("{}: cannot read (I/O error, or a directory)", path));
  if (too_big) throw SummaryError(fmt::format("{}: larger than {} MiB; not a summary", path, kMaxSummaryBytes >> 20));
  const bool gz = bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
                  static_cast<unsigned char>(bytes[1]) == 0x8b;
  return read_summary_text(gz ? gunzip_bounded(bytes, path) : bytes, path);
}

}  // namespace attnprof::report
