#include "attnprof/report/kineto_trace.h"

#include <sys/stat.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <utility>

#include "attnprof/io/files.h"

namespace attnprof::report {
namespace {

using nlohmann::json;

const char* kind_of_value(const json& v) {
  switch (v.type()) {
    case json::value_t::null: return "null";
    case json::value_t::boolean: return "a boolean";
    case json::value_t::string: return "a string";
    case json::value_t::array: return "an array";
    case json::value_t::object: return "an object";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
    case json::value_t::number_float: return "a number";
    default: return "an unknown value";
  }
}

SliceKind kind_of_category(std::string_view cat) {
  if (cat == "cpu_op") return SliceKind::cpu_op;
  if (cat == "user_annotation") return SliceKind::user_annotation;
  if (cat == "cuda_runtime" || cat == "cuda_driver") return SliceKind::runtime;
  if (cat == "kernel") return SliceKind::kernel;
  if (cat == "gpu_memcpy") return SliceKind::memcpy;
  if (cat == "gpu_memset") return SliceKind::memset;
  if (cat == "gpu_user_annotation") return SliceKind::gpu_annotation;
  return SliceKind::other;
}

// A non-negative integer arg (correlation, External id), or -1. Args are
// Kineto's free-form annotations: a wrong type there is "absent", not an error.
int64_t id_arg(const json& args, const char* key) {
  const auto it = args.find(key);
  if (it == args.end()) return -1;
  if (it->is_number_unsigned())
    return it->get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()) ? int64_t(it->get<uint64_t>()) : -1;
  if (it->is_number_integer()) return std::max<int64_t>(it->get<int64_t>(), -1);
  return -1;
}

// Converts one event object into records; every field it needs is checked and
// a defect names the event ("traceEvents[12].ts").
class EventReader {
 public:
  EventReader(KinetoTrace& trace) : trace_(trace) {}

  [[noreturn]] void fail(const std::string& field, const std::string& what) const {
    throw TraceError(fmt::format("{}: {}: {}", trace_.source, field, what));
  }

  void add(const json& e, size_t index) {
    index_ = index;
    const json& ph = required(e, "ph");
    if (!ph.is_string()) fail(field("ph"), fmt::format("expected a string, got {}", kind_of_value(ph)));
    const std::string& phase = ph.get_ref<const std::string&>();
    if (phase == "X") add_slice(e);
    else if (phase == "s" || phase == "f") add_flow(e, phase == "s");
    else ++trace_.ignored_events;  // metadata, instants, counters, flow steps
  }

  uint32_t intern(const std::string& s) {
    const auto [it, added] = ids_.emplace(s, static_cast<uint32_t>(trace_.strings.size()));
    if (added) trace_.strings.push_back(s);
    return it->second;
  }

 private:
  std::string field(const char* key) const { return fmt::format("traceEvents[{}].{}", index_, key); }

  const json& required(const json& e, const char* key) const {
    const auto it = e.find(key);
    if (it == e.end()) fail(field(key), "missing");
    return *it;
  }

  std::string string(const json& e, const char* key, bool needed) const {
    const auto it = e.find(key);
    if (it == e.end()) {
      if (needed) fail(field(key), "missing");
      return {};
    }
    if (!it->is_string()) fail(field(key), fmt::format("expected a string, got {}", kind_of_value(*it)));
    return it->get<std::string>();
  }

  // Microseconds -> integer nanoseconds, within [lo, kMaxTraceTimeUs].
  int64_t time_ns(const json& e, const char* key, double lo) const {
    const json& v = required(e, key);
    if (!v.is_number()) fail(field(key), fmt::format("expected a number, got {}", kind_of_value(v)));
    const double us = v.get<double>();
    if (!std::isfinite(us) || us < lo || us > kMaxTraceTimeUs)
      fail(field(key), fmt::format("{} is out of range [{:g}, {:g}]", v.dump(), lo, kMaxTraceTimeUs));
    return std::llround(us * 1000.0);
  }

  [[noreturn]] void fail_not_integer(const char* key, const json& v) const {
    fail(field(key), fmt::format("expected an integer or a string, got {}", v.is_number() ? v.dump() : kind_of_value(v)));
  }

  std::optional<int64_t> track_id(const json& e, const char* key) const {
    const json& v = required(e, key);
    if (v.is_string()) return std::nullopt;
    if (v.is_number_unsigned() && v.get<uint64_t>() <= uint64_t(std::numeric_limits<int64_t>::max()))
      return int64_t(v.get<uint64_t>());
    if (v.is_number_integer() && !v.is_number_unsigned()) return v.get<int64_t>();
    fail_not_integer(key, v);
  }

  // Integer pid and tid; false (and the event counted as ignored) when either
  // is a string: Kineto names its own "Spans" and "Traces" tracks that way,
  // and they are not part of a run.
  bool numeric_track(const json& e, int64_t& pid, int64_t& tid) {
    const auto p = track_id(e, "pid");
    const auto t = track_id(e, "tid");
    if (!p || !t) {
      ++trace_.ignored_events;
      return false;
    }
    pid = *p;
    tid = *t;
    return true;
  }

  void add_slice(const json& e) {
    TraceSlice s;
    const std::string name = string(e, "name", true);
    const std::string cat = string(e, "cat", false);
    s.ts_ns = time_ns(e, "ts", -kMaxTraceTimeUs);
    s.dur_ns = time_ns(e, "dur", 0.0);
    if (!numeric_track(e, s.pid, s.tid)) return;
    s.name = intern(name);
    s.cat = intern(cat);
    s.kind = kind_of_category(cat);
    if (const auto a = e.find("args"); a != e.end() && a->is_object() && !a->empty()) {
      s.correlation = id_arg(*a, "correlation");
      s.external_id = id_arg(*a, "External id");
      s.args = static_cast<uint32_t>(trace_.args.size());
      trace_.args.push_back(a->dump(-1, ' ', false, json::error_handler_t::replace));
    }
    trace_.slices.push_back(s);
  }

  void add_flow(const json& e, bool start) {
    TraceFlow f;
    f.start = start;
    f.ts_ns = time_ns(e, "ts", -kMaxTraceTimeUs);
    if (!numeric_track(e, f.pid, f.tid)) return;
    const json& id = required(e, "id");
    constexpr uint64_t kInterned = uint64_t(1) << 63;
    if (id.is_number_unsigned() && id.get<uint64_t>() < kInterned) f.id = id.get<uint64_t>();
    else if (id.is_number_integer() || id.is_string()) f.id = kInterned | intern(id.dump());
    else fail_not_integer("id", id);
    f.name = intern(string(e, "name", false));
    f.cat = intern(string(e, "cat", false));
    f.bind_enclosing = string(e, "bp", false) == "e";
    trace_.flows.push_back(f);
  }

  KinetoTrace& trace_;
  std::unordered_map<std::string, uint32_t> ids_;
  size_t index_ = 0;
};

// nlohmann's messages start with "[json.exception.parse_error.101] ", and their
// "last read" token can be as long as the input: one short line is kept.
std::string json_error_line(const json::exception& e) {
  std::string what = e.what();
  if (const size_t close = what.find("] "); what.rfind("[json.exception", 0) == 0 && close != std::string::npos)
    what.erase(0, close + 2);
  std::replace(what.begin(), what.end(), '\n', ' ');
  if (what.size() > 200) what = what.substr(0, 197) + "...";
  return what;
}

// Runtime calls of one thread that fall inside a forward: binary search over
// the forwards of that thread, by start time.
struct ThreadForwards {
  std::vector<int64_t> starts;
  std::vector<int64_t> ends;
  std::vector<size_t> forward;  // index into the result

  std::optional<size_t> holding(int64_t ts) const {
    const auto it = std::upper_bound(starts.begin(), starts.end(), ts);
    if (it == starts.begin()) return std::nullopt;
    const size_t i = static_cast<size_t>(it - starts.begin()) - 1;
    if (ts > ends[i]) return std::nullopt;
    return forward[i];
  }
};

using TrackKey = std::pair<int64_t, int64_t>;  // (pid, tid)

TrackKey track_of(const TraceSlice& s) { return {s.pid, s.tid}; }

int64_t saturating_add(int64_t a, int64_t b) {
  int64_t sum = 0;
  return __builtin_add_overflow(a, b, &sum) ? std::numeric_limits<int64_t>::max() : sum;
}

bool by_start(const KinetoTrace& t, size_t a, size_t b) {
  const TraceSlice& x = t.slices[a];
  const TraceSlice& y = t.slices[b];
  return x.ts_ns != y.ts_ns ? x.ts_ns < y.ts_ns : a < b;
}

// Fallback when no runtime call links to device work: each forward takes the
// device work that starts inside its gpu_user_annotation span, on that span's
// stream. Spans are matched to forwards by External id (Kineto gives the GPU
// span the CPU scope's id), else one to one in time order.
void assign_by_gpu_annotation(const KinetoTrace& t, std::string_view scope, std::vector<Forward>& forwards) {
  std::vector<size_t> spans;
  for (size_t i = 0; i < t.slices.size(); ++i)
    if (t.slices[i].kind == SliceKind::gpu_annotation && t.name_of(t.slices[i]) == scope) spans.push_back(i);
  std::sort(spans.begin(), spans.end(), [&](size_t a, size_t b) { return by_start(t, a, b); });
  std::unordered_map<int64_t, size_t> forward_of_id;
  for (size_t f = 0; f < forwards.size(); ++f)
    if (const int64_t id = t.slices[forwards[f].annotation].external_id; id >= 0) forward_of_id.emplace(id, f);
  std::vector<std::pair<size_t, size_t>> matched;  // (span, forward)
  for (size_t s : spans)
    if (const auto it = forward_of_id.find(t.slices[s].external_id); it != forward_of_id.end())
      matched.emplace_back(s, it->second);
  if (matched.empty() && spans.size() == forwards.size())
    for (size_t k = 0; k < spans.size(); ++k) matched.emplace_back(spans[k], k);
  if (matched.empty()) return;

  std::map<TrackKey, std::vector<size_t>> work_by_track;  // by start time
  for (size_t i = 0; i < t.slices.size(); ++i)
    if (is_device_work(t.slices[i].kind)) work_by_track[track_of(t.slices[i])].push_back(i);
  for (auto& [key, work] : work_by_track)
    std::sort(work.begin(), work.end(), [&](size_t a, size_t b) { return by_start(t, a, b); });
  std::vector<bool> taken(t.slices.size(), false);
  for (const auto& [span_index, f] : matched) {
    const TraceSlice& span = t.slices[span_index];
    const auto it = work_by_track.find(track_of(span));
    if (it == work_by_track.end()) continue;
    const auto& work = it->second;
    auto w = std::lower_bound(work.begin(), work.end(), span.ts_ns,
                              [&](size_t i, int64_t ts) { return t.slices[i].ts_ns < ts; });
    for (; w != work.end() && t.slices[*w].ts_ns <= span.end_ns(); ++w)
      if (!taken[*w]) {
        taken[*w] = true;
        forwards[f].device_work.push_back(*w);
      }
  }
}

}  // namespace

bool is_device_work(SliceKind k) {
  return k == SliceKind::kernel || k == SliceKind::memcpy || k == SliceKind::memset;
}

KinetoTrace parse_kineto_trace(std::string_view text, const std::string& source) {
  KinetoTrace trace;
  trace.source = source;
  if (text.size() > kMaxTraceBytes)
    throw TraceError(fmt::format("{}: {} MiB of JSON; a trace may have at most {} MiB", source, text.size() >> 20,
                                 kMaxTraceBytes >> 20));
  EventReader reader(trace);
  std::string top_key;  // the root object's key being parsed
  bool saw_events = false;
  size_t index = 0;     // of the next traceEvents element
  const auto fail = [&](const std::string& field, const std::string& what) -> bool {
    throw TraceError(fmt::format("{}: {}: {}", source, field, what));
  };
  // Events are converted as each one closes and then dropped from the DOM, so
  // memory holds the records, not a parsed copy of the whole file.
  const json::parser_callback_t on_event = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    using E = json::parse_event_t;
    if ((event == E::object_start || event == E::array_start) && depth >= kMaxTraceDepth)
      throw TraceError(fmt::format("{}: nested deeper than {} levels; not a Chrome trace", source, kMaxTraceDepth));
    if (depth == 1 && event == E::key) {
      top_key = parsed.get<std::string>();
      return true;
    }
    const bool in_events = top_key == "traceEvents";
    if (depth == 1 && in_events) {
      if (event == E::array_start) saw_events = true;
      else if (event == E::object_start || event == E::value)
        return fail("traceEvents", fmt::format("expected an array, got {}",
                                               event == E::object_start ? "an object" : kind_of_value(parsed)));
      return event != E::array_end;  // the emptied array is not kept
    }
    if (depth == 2 && in_events) {
      if (event == E::object_end) {
        reader.add(parsed, index++);
        return false;
      }
      if (event == E::value || event == E::array_start)
        return fail(fmt::format("traceEvents[{}]", index),
                    fmt::format("expected an object, got {}", event == E::array_start ? "an array" : kind_of_value(parsed)));
    }
    // Other top-level values are kept only if they are needed.
    if (depth == 1 && (event == E::value || event == E::object_end || event == E::array_end))
      return top_key == "attnprof" || top_key == "deviceProperties";
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), on_event);
  } catch (const json::exception& e) {
    throw TraceError(fmt::format("{}: not valid JSON ({})", source, json_error_line(e)));
  }
  if (!root.is_object())
    throw TraceError(fmt::format("{}: expected a JSON object with a 'traceEvents' array, got {}", source,
                                 kind_of_value(root)));
  if (!saw_events) throw TraceError(fmt::format("{}: traceEvents: missing; not a Chrome trace", source));
  const auto dump = [](const json& v) { return v.dump(-1, ' ', false, json::error_handler_t::replace); };
  if (const auto a = root.find("attnprof"); a != root.end() && a->is_object()) trace.attnprof_json = dump(*a);
  if (const auto d = root.find("deviceProperties"); d != root.end() && d->is_array())
    trace.device_properties_json = dump(*d);
  return trace;
}

KinetoTrace read_kineto_trace_file(const std::string& path) {
  std::string bytes;
  try {
    bytes = io::read_file(path, kMaxTraceBytes);
    if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f && static_cast<unsigned char>(bytes[1]) == 0x8b)
      bytes = io::gzip_decompress(bytes, kMaxTraceBytes);
  } catch (const io::FileError& e) {
    const std::string what = e.what();
    // read_file names the path itself; the gzip messages do not.
    throw TraceError(what.find(path) != std::string::npos ? what : path + ": " + what);
  }
  return parse_kineto_trace(bytes, path);
}

std::vector<Forward> find_forwards(const KinetoTrace& t, std::string_view scope) {
  std::vector<size_t> scopes;
  for (size_t i = 0; i < t.slices.size(); ++i)
    if (t.slices[i].kind == SliceKind::user_annotation && t.name_of(t.slices[i]) == scope) scopes.push_back(i);
  std::sort(scopes.begin(), scopes.end(), [&](size_t a, size_t b) { return by_start(t, a, b); });
  std::vector<Forward> forwards(scopes.size());
  std::map<TrackKey, ThreadForwards> threads;
  for (size_t f = 0; f < scopes.size(); ++f) {
    const TraceSlice& s = t.slices[scopes[f]];
    forwards[f].annotation = scopes[f];
    ThreadForwards& tf = threads[track_of(s)];
    tf.starts.push_back(s.ts_ns);
    tf.ends.push_back(s.end_ns());
    tf.forward.push_back(f);
  }
  if (forwards.empty()) return forwards;

  // A scope's calls may also launch from another thread of its process: on
  // CUDA, autograd runs a backward's nodes on its device thread while the
  // caller waits inside attn_bwd. A runtime call on a thread without scopes
  // belongs to the scope (of any thread of that process) whose span holds it.
  std::map<int64_t, std::vector<TrackKey>> scope_tracks_of_pid;
  for (const auto& [track, tf] : threads) scope_tracks_of_pid[track.first].push_back(track);
  std::unordered_map<int64_t, size_t> forward_of_correlation;
  for (const TraceSlice& s : t.slices) {
    if (s.kind != SliceKind::runtime || s.correlation < 0) continue;
    if (const auto it = threads.find(track_of(s)); it != threads.end()) {
      if (const auto f = it->second.holding(s.ts_ns)) forward_of_correlation.emplace(s.correlation, *f);
      continue;
    }
    const auto pid = scope_tracks_of_pid.find(s.pid);
    if (pid == scope_tracks_of_pid.end()) continue;
    for (const TrackKey& track : pid->second)
      if (const auto f = threads.at(track).holding(s.ts_ns)) {
        forward_of_correlation.emplace(s.correlation, *f);
        break;
      }
  }
  bool linked = false;
  for (size_t i = 0; i < t.slices.size(); ++i) {
    const TraceSlice& s = t.slices[i];
    if (!is_device_work(s.kind) || s.correlation < 0) continue;
    if (const auto it = forward_of_correlation.find(s.correlation); it != forward_of_correlation.end()) {
      forwards[it->second].device_work.push_back(i);
      linked = true;
    }
  }
  if (!linked) assign_by_gpu_annotation(t, scope, forwards);
  for (Forward& f : forwards) {
    std::sort(f.device_work.begin(), f.device_work.end(), [&](size_t a, size_t b) { return by_start(t, a, b); });
    for (size_t w : f.device_work) f.device_ns = saturating_add(f.device_ns, t.slices[w].dur_ns);
  }
  return forwards;
}

std::vector<size_t> child_slices(const KinetoTrace& t, size_t parent) {
  const TraceSlice& p = t.slices.at(parent);
  std::vector<size_t> inside;
  for (size_t i = 0; i < t.slices.size(); ++i) {
    const TraceSlice& s = t.slices[i];
    if (i != parent && s.pid == p.pid && s.tid == p.tid && s.ts_ns >= p.ts_ns && s.end_ns() <= p.end_ns())
      inside.push_back(i);
  }
  // Longer first at equal starts, so a parent precedes the children it holds.
  std::sort(inside.begin(), inside.end(), [&](size_t a, size_t b) {
    const TraceSlice& x = t.slices[a];
    const TraceSlice& y = t.slices[b];
    if (x.ts_ns != y.ts_ns) return x.ts_ns < y.ts_ns;
    if (x.dur_ns != y.dur_ns) return x.dur_ns > y.dur_ns;
    return a < b;
  });
  std::vector<size_t> children;
  int64_t covered_until = std::numeric_limits<int64_t>::min();
  for (size_t i : inside) {
    const TraceSlice& s = t.slices[i];
    if (!children.empty() && s.ts_ns < covered_until) continue;  // inside (or across) the previous child
    children.push_back(i);
    covered_until = s.end_ns();
  }
  return children;
}

}  // namespace attnprof::report
