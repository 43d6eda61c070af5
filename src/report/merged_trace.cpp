#include "attnprof/report/merged_trace.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <iterator>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>

#include "report/summary_schema.h"

// What a run contributes, and what it does not:
//   kept     the complete slices ("X") of the profiled steps on the host (CPU
//            ops, user scopes, runtime/driver calls), the device work and GPU
//            spans those calls and scopes launched, and the launch -> kernel
//            flow pairs, with each slice's args as Kineto wrote them;
//   dropped  steps past MergeOptions::max_steps (a comparison needs a few
//            forwards; `--active 10000` would make gigabytes); the runner's
//            calls outside the steps (its final cudaDeviceSynchronize);
//            Kineto's own "Spans"/"Traces" tracks and its instants (profiler
//            bookkeeping, one per file); unpaired flow ends (Kineto writes
//            them for calls that launch nothing, e.g. cudaDeviceSynchronize:
//            they draw nothing); each file's metadata (rebuilt per run: its
//            process/thread names would all say "attnprof"); every copy of
//            "deviceProperties" but the first (runs of one machine repeat it).
namespace attnprof::report {
namespace {

using TrackKey = std::pair<int64_t, int64_t>;  // (pid, tid) in the input trace

// tid = pid * kTidStride + track number: Perfetto identifies a thread by its tid
// alone (a tid seen under a second pid reads as a reused tid), so tids are kept
// unique across the whole file, and never equal to a pid (its main thread).
constexpr int64_t kTidStride = 1000;
constexpr size_t kMaxTracksPerRun = kTidStride - 1;
// Events further than this from a run's first forward are left out (a hostile
// or corrupt timestamp): the shifted times then fit an int64 with room to spare.
constexpr int64_t kMaxDistanceNs = int64_t(1'000'000'000) * 1'000'000;  // 1e6 s

struct Track {
  TrackKey key;
  std::string name;
  std::vector<size_t> slices;  // trace indices, by (start, longer first)
  std::vector<int64_t> dur_ns;  // per position, cut where the slice overran its parent
  std::vector<int64_t> parent;  // per position, -1 at the top level
  std::vector<std::vector<size_t>> flows_after;  // per position: kept flow ends bound to it
};

struct FlowEnd {
  const TraceFlow* flow;
  uint64_t id;  // in the merged file
  const TraceFlow* named_like;  // the start: Perfetto joins the two ends by (id, cat, name)
};

struct PreparedRun {
  const RunTrace* run = nullptr;
  std::unordered_map<size_t, std::string> counter_args;  // kernel slice -> "attnprof_counters" object text
  size_t position = 0;  // in the caller's list
  int64_t anchor_ns = 0;
  int64_t lead_ns = 0;  // first forward start - earliest kept event
  std::vector<Track> tracks;
  std::vector<FlowEnd> flow_ends;  // indexed from Track::flows_after
  size_t steps_kept = 0, steps_total = 0, slices_kept = 0, flows_kept = 0, cut = 0, tracks_dropped = 0;
};

bool starts_with(std::string_view s, std::string_view prefix) { return s.substr(0, prefix.size()) == prefix; }

bool is_unit_scope(const KinetoTrace& t, const TraceSlice& s, std::string_view scope) {
  return s.kind == SliceKind::user_annotation && t.name_of(s) == scope;
}

// The time span kept: the profiler steps from the one that holds the first
// forward on, at most `max_steps` (without ProfilerStep scopes: as many forwards).
struct Window {
  int64_t begin = 0, end = 0;
  size_t kept = 0, total = 0;
};

Window step_window(const KinetoTrace& t, const TraceSlice& anchor, std::string_view scope, int max_steps) {
  std::vector<const TraceSlice*> steps, forwards;
  for (const TraceSlice& s : t.slices) {
    if (s.pid != anchor.pid || s.tid != anchor.tid || s.kind != SliceKind::user_annotation) continue;
    if (s.end_ns() < anchor.ts_ns) continue;
    if (starts_with(t.name_of(s), kStepScopePrefix)) steps.push_back(&s);
    else if (t.name_of(s) == scope) forwards.push_back(&s);
  }
  std::vector<const TraceSlice*>& scopes = steps.empty() ? forwards : steps;
  std::sort(scopes.begin(), scopes.end(), [](const TraceSlice* a, const TraceSlice* b) { return a->ts_ns < b->ts_ns; });
  Window w{anchor.ts_ns, anchor.end_ns(), 0, scopes.size()};
  for (const TraceSlice* s : scopes) {
    if (w.kept == static_cast<size_t>(std::max(1, max_steps))) break;
    w.begin = std::min(w.begin, s->ts_ns);
    w.end = std::max(w.end, s->end_ns());
    ++w.kept;
  }
  return w;
}

// Host slices (the first forward's process) inside the window; device slices
// when the runtime call (or, for GPU spans, the CPU scope) they belong to is
// kept, by time when they link to nothing.
std::vector<bool> kept_slices(const KinetoTrace& t, const TraceSlice& anchor, const Window& w) {
  const auto in_window = [&](const TraceSlice& s) { return s.ts_ns >= w.begin && s.ts_ns <= w.end; };
  std::vector<bool> keep(t.slices.size(), false);
  std::unordered_map<int64_t, size_t> runtime_of, scope_of;  // correlation / External id -> slice
  for (size_t i = 0; i < t.slices.size(); ++i) {
    const TraceSlice& s = t.slices[i];
    if (s.pid != anchor.pid) continue;
    keep[i] = in_window(s);
    if (s.kind == SliceKind::runtime && s.correlation >= 0) runtime_of.emplace(s.correlation, i);
    if (s.kind == SliceKind::user_annotation && s.external_id >= 0) scope_of.emplace(s.external_id, i);
  }
  for (size_t i = 0; i < t.slices.size(); ++i) {
    const TraceSlice& s = t.slices[i];
    if (s.pid == anchor.pid) continue;
    if (const auto r = runtime_of.find(s.correlation); s.correlation >= 0 && r != runtime_of.end())
      keep[i] = keep[r->second];
    else if (const auto a = scope_of.find(s.external_id);
             s.kind == SliceKind::gpu_annotation && s.external_id >= 0 && a != scope_of.end())
      keep[i] = keep[a->second];
    else
      keep[i] = in_window(s);
  }
  for (size_t i = 0; i < t.slices.size(); ++i) {
    const TraceSlice& s = t.slices[i];
    if (keep[i] && (s.ts_ns < anchor.ts_ns - kMaxDistanceNs || s.ts_ns > anchor.ts_ns + kMaxDistanceNs)) keep[i] = false;
  }
  return keep;
}

std::string track_name(const KinetoTrace& t, const Track& track, bool host) {
  if (host) return fmt::format("CPU thread {}", track.key.second);
  const bool gpu = std::any_of(track.slices.begin(), track.slices.end(), [&](size_t i) {
    return is_device_work(t.slices[i].kind) || t.slices[i].kind == SliceKind::gpu_annotation;
  });
  return gpu ? fmt::format("GPU {} stream {}", track.key.first, track.key.second)
             : fmt::format("process {} thread {}", track.key.first, track.key.second);
}

// Sorts a track's slices and makes them nest: a slice that starts inside
// another and ends after it is cut at that one's end (Kineto rounds to the
// nanosecond, and a GPU span can end 1 ns before its last kernel does).
size_t nest(const KinetoTrace& t, Track& track) {
  std::sort(track.slices.begin(), track.slices.end(), [&](size_t a, size_t b) {
    const TraceSlice& x = t.slices[a];
    const TraceSlice& y = t.slices[b];
    if (x.ts_ns != y.ts_ns) return x.ts_ns < y.ts_ns;
    if (x.dur_ns != y.dur_ns) return x.dur_ns > y.dur_ns;
    return a < b;
  });
  const size_t n = track.slices.size();
  track.dur_ns.resize(n);
  track.parent.assign(n, -1);
  track.flows_after.assign(n, {});
  size_t cut = 0;
  std::vector<size_t> open;
  for (size_t p = 0; p < n; ++p) {
    const TraceSlice& s = t.slices[track.slices[p]];
    track.dur_ns[p] = s.dur_ns;
    const auto end_of = [&](size_t q) { return t.slices[track.slices[q]].ts_ns + track.dur_ns[q]; };
    while (!open.empty() && end_of(open.back()) <= s.ts_ns) open.pop_back();
    if (!open.empty()) {
      track.parent[p] = static_cast<int64_t>(open.back());
      if (s.end_ns() > end_of(open.back())) {
        track.dur_ns[p] = end_of(open.back()) - s.ts_ns;
        ++cut;
      }
    }
    open.push_back(p);
  }
  return cut;
}

// The innermost slice of `track` holding `ts` (Perfetto binds a flow end to
// the slice open at its time), as a position; nullopt when none does.
std::optional<size_t> holding_slice(const KinetoTrace& t, const Track& track, int64_t ts) {
  auto it = std::upper_bound(track.slices.begin(), track.slices.end(), ts,
                             [&](int64_t v, size_t i) { return v < t.slices[i].ts_ns; });
  if (it == track.slices.begin()) return std::nullopt;
  // Every slice holding ts starts at or before the last slice that starts at
  // or before ts, and nests around it: it is on that slice's parent chain.
  for (int64_t p = (it - track.slices.begin()) - 1; p >= 0; p = track.parent[p]) {
    const int64_t start = t.slices[track.slices[p]].ts_ns;
    const int64_t end = start + track.dur_ns[p];
    if (ts < end || ts == start) return static_cast<size_t>(p);
  }
  return std::nullopt;
}

// The counted figures of one kernel, as Perfetto shows args: raw counters,
// then what they mean against the ceilings.
std::string counter_args_text(const KernelCounters& k, const std::optional<DeviceCeilings>& ceilings) {
  using nlohmann::json;
  json a = json::object();
  auto put = [&](const char* key, const std::optional<double>& v) {
    if (v) a[key] = *v;
  };
  const CounterValues& v = k.values;
  put("duration_us (counter pass)", v.duration_ns ? std::optional<double>(*v.duration_ns / 1000.0) : std::nullopt);
  put("sm_clock_mhz", v.sm_clock_hz ? std::optional<double>(*v.sm_clock_hz / 1e6) : std::nullopt);
  put("dram_read_bytes", v.dram_read_bytes);
  put("dram_write_bytes", v.dram_write_bytes);
  put("tensor_pipe_active_pct", v.tensor_active_pct);
  put("sm_throughput_pct", v.sm_throughput_pct);
  put("achieved_occupancy_pct", v.achieved_occupancy_pct);
  put("theoretical_occupancy_pct", k.theoretical_occupancy_pct);
  put("l2_hit_rate_pct", v.l2_hit_rate_pct);
  const json figures = schema::kernel_figures_json(kernel_figures(k, ceilings));
  for (const auto& [key, value] : figures.items())
    if (!value.is_null() && !(value.is_string() && value.get<std::string>().empty())) a[key] = value;
  return a.dump(-1, ' ', false, json::error_handler_t::replace);
}

// Each kernel slice of every call of a counted scope, paired with the counted
// kernel of the same scope and name at the same place in launch order.
std::unordered_map<size_t, std::string> counter_args(const KinetoTrace& t, const CounterPass& c) {
  std::unordered_map<size_t, std::string> out;
  std::map<std::string, std::vector<const KernelCounters*>> by_scope;
  for (const KernelCounters& k : c.kernels) by_scope[k.scope].push_back(&k);
  for (auto& [scope, kernels] : by_scope) {
    std::stable_sort(kernels.begin(), kernels.end(),
                     [](const KernelCounters* a, const KernelCounters* b) { return a->index < b->index; });
    std::vector<std::string> text;
    for (const KernelCounters* k : kernels) text.push_back(counter_args_text(*k, c.ceilings));
    for (const Forward& f : find_forwards(t, scope)) {
      size_t next = 0;  // counted kernels are matched in order, each slice at most once
      for (size_t i : f.device_work) {
        if (t.slices[i].kind != SliceKind::kernel) continue;
        for (size_t j = next; j < kernels.size(); ++j)
          if (kernels[j]->kernel == t.name_of(t.slices[i])) {
            out.emplace(i, text[j]);
            next = j + 1;
            break;
          }
      }
    }
  }
  return out;
}

std::optional<PreparedRun> prepare(const RunTrace& run, size_t position, const MergeOptions& options, uint64_t& next_flow_id,
                                   std::vector<std::string>& notes) {
  const KinetoTrace& t = *run.trace;
  std::optional<size_t> anchor;
  for (size_t i = 0; i < t.slices.size(); ++i)
    if (is_unit_scope(t, t.slices[i], run.scope) && (!anchor || t.slices[i].ts_ns < t.slices[*anchor].ts_ns)) anchor = i;
  if (!anchor) {
    notes.push_back(fmt::format("{}: {} has no {} scope; left out of the merged trace", run_title(run), t.source,
                                run.scope));
    return std::nullopt;
  }
  const TraceSlice& a = t.slices[*anchor];
  const Window w = step_window(t, a, run.scope, options.max_steps);
  const std::vector<bool> keep = kept_slices(t, a, w);

  PreparedRun p;
  p.run = &run;
  if (run.counters && run.counters->state == CounterPass::State::collected) p.counter_args = counter_args(t, *run.counters);
  p.position = position;
  p.anchor_ns = a.ts_ns;
  p.steps_kept = w.kept;
  p.steps_total = w.total;
  // Tracks: the first forward's thread, the other host threads, then the device
  // streams, each group by id.
  std::map<std::tuple<int, int64_t, int64_t>, Track> by_order;
  for (size_t i = 0; i < t.slices.size(); ++i) {
    if (!keep[i]) continue;
    const TraceSlice& s = t.slices[i];
    const int group = s.pid == a.pid ? (s.tid == a.tid ? 0 : 1) : 2;
    Track& track = by_order[{group, s.pid, s.tid}];
    track.key = {s.pid, s.tid};
    track.slices.push_back(i);
  }
  int64_t earliest = a.ts_ns;
  std::map<TrackKey, size_t> track_of;
  for (auto& [order, track] : by_order) {
    if (p.tracks.size() == kMaxTracksPerRun) {
      ++p.tracks_dropped;
      continue;
    }
    track.name = track_name(t, track, std::get<0>(order) < 2);
    p.cut += nest(t, track);
    p.slices_kept += track.slices.size();
    earliest = std::min(earliest, t.slices[track.slices.front()].ts_ns);
    track_of[track.key] = p.tracks.size();
    p.tracks.push_back(std::move(track));
  }
  p.lead_ns = a.ts_ns - earliest;

  // Flow arrows: an "s" and an "f" with one id, each inside a kept slice of
  // its own track. Unpaired ends (Kineto writes some, e.g. for
  // cudaDeviceSynchronize) would draw nothing and are left out.
  std::unordered_map<uint64_t, std::pair<const TraceFlow*, const TraceFlow*>> pairs;
  std::vector<uint64_t> order;
  for (const TraceFlow& f : t.flows) {
    auto [it, added] = pairs.try_emplace(f.id, nullptr, nullptr);
    if (added) order.push_back(f.id);
    const TraceFlow*& end = f.start ? it->second.first : it->second.second;
    if (!end) end = &f;
  }
  for (uint64_t id : order) {
    const auto [s, f] = pairs[id];
    if (!s || !f) continue;
    std::optional<std::pair<size_t, size_t>> bound[2];
    const TraceFlow* ends[2] = {s, f};
    for (int k = 0; k < 2; ++k) {
      const auto tr = track_of.find({ends[k]->pid, ends[k]->tid});
      if (tr == track_of.end()) break;
      if (const auto pos = holding_slice(t, p.tracks[tr->second], ends[k]->ts_ns)) bound[k] = {{tr->second, *pos}};
    }
    if (!bound[0] || !bound[1]) continue;
    const uint64_t new_id = next_flow_id++;
    for (int k = 0; k < 2; ++k) {
      p.tracks[bound[k]->first].flows_after[bound[k]->second].push_back(p.flow_ends.size());
      p.flow_ends.push_back({ends[k], new_id, s});
    }
    ++p.flows_kept;
  }
  if (w.total > w.kept)
    notes.push_back(fmt::format("{}: the merged trace keeps the first {} of {} profiled steps", run_title(run), w.kept,
                                w.total));
  if (p.tracks_dropped)
    notes.push_back(fmt::format("{}: {} tracks past the first {} left out of the merged trace", run_title(run),
                                p.tracks_dropped, kMaxTracksPerRun));
  return p;
}

// Integer nanoseconds as microseconds with three decimals: never exponent
// notation (Perfetto misreads "1.7e+15"), never a rounding step between ts and dur.
void append_us(std::string& out, int64_t ns) {
  const uint64_t mag = ns < 0 ? uint64_t(0) - uint64_t(ns) : uint64_t(ns);
  fmt::format_to(std::back_inserter(out), "{}{}.{:03}", ns < 0 ? "-" : "", mag / 1000, mag % 1000);
}

std::string json_string(std::string_view s) {
  return nlohmann::json(s).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

class Writer {
 public:
  explicit Writer(std::string& out) : out_(out) {}

  void metadata(const char* name, int64_t pid, std::optional<int64_t> tid, const std::string& key,
                const std::string& value_json) {
    comma();
    fmt::format_to(std::back_inserter(out_), R"({{"ph":"M","name":"{}","pid":{},)", name, pid);
    if (tid) fmt::format_to(std::back_inserter(out_), R"("tid":{},)", *tid);
    fmt::format_to(std::back_inserter(out_), R"("ts":0,"args":{{"{}":{}}}}})", key, value_json);
  }

  void run(const PreparedRun& p, int64_t shift_ns) {
    const KinetoTrace& t = *p.run->trace;
    const int64_t pid = static_cast<int64_t>(p.position) + 1;
    std::string process = run_title(*p.run);
    if (!p.run->headline.empty()) process += " \u2014 " + p.run->headline;
    metadata("process_name", pid, std::nullopt, "name", json_string(process));
    metadata("process_sort_index", pid, std::nullopt, "sort_index", std::to_string(p.position));
    std::vector<std::string> escaped(t.strings.size());
    const auto str = [&](uint32_t i) -> const std::string& {
      if (escaped[i].empty()) escaped[i] = json_string(t.strings[i]);
      return escaped[i];
    };
    for (size_t k = 0; k < p.tracks.size(); ++k) {
      const Track& track = p.tracks[k];
      const int64_t tid = pid * kTidStride + static_cast<int64_t>(k) + 1;
      metadata("thread_name", pid, tid, "name", json_string(track.name));
      metadata("thread_sort_index", pid, tid, "sort_index", std::to_string(k));
      for (size_t pos = 0; pos < track.slices.size(); ++pos) {
        const TraceSlice& s = t.slices[track.slices[pos]];
        comma();
        fmt::format_to(std::back_inserter(out_), R"({{"ph":"X","cat":{},"name":{},"pid":{},"tid":{},"ts":)",
                       str(s.cat), str(s.name), pid, tid);
        append_us(out_, s.ts_ns + shift_ns);
        out_ += ",\"dur\":";
        append_us(out_, track.dur_ns[pos]);
        const auto counted = p.counter_args.find(track.slices[pos]);
        if (s.args != kNoArgs && counted != p.counter_args.end()) {
          // Kineto's args object with one more member before its closing brace.
          const std::string& a = t.args[s.args];
          const size_t close = a.rfind('}');
          const bool empty = a.find_first_not_of(" \t\r\n", a.find('{') + 1) == close;
          out_ += ",\"args\":";
          out_ += a.substr(0, close);
          out_ += empty ? "\"attnprof_counters\":" : ",\"attnprof_counters\":";
          out_ += counted->second;
          out_ += a.substr(close);
        } else if (s.args != kNoArgs) {
          out_ += ",\"args\":";
          out_ += t.args[s.args];
        } else if (counted != p.counter_args.end()) {
          out_ += ",\"args\":{\"attnprof_counters\":" + counted->second + "}";
        }
        out_ += '}';
        // Right after the slice it binds to, as Kineto writes them: at equal
        // timestamps Perfetto binds a flow to the slice read before it.
        for (size_t e : track.flows_after[pos]) flow(p.flow_ends[e], pid, tid, shift_ns, str);
      }
    }
  }

 private:
  template <typename Str>
  void flow(const FlowEnd& e, int64_t pid, int64_t tid, int64_t shift_ns, const Str& str) {
    comma();
    fmt::format_to(std::back_inserter(out_), R"({{"ph":"{}","id":{},"pid":{},"tid":{},"ts":)", e.flow->start ? 's' : 'f',
                   e.id, pid, tid);
    append_us(out_, e.flow->ts_ns + shift_ns);
    fmt::format_to(std::back_inserter(out_), R"(,"cat":{},"name":{})", str(e.named_like->cat), str(e.named_like->name));
    // "bp":"e" binds the finish to the slice enclosing it (the kernel), as the
    // start binds to its runtime call; without it Perfetto takes the next slice.
    if (!e.flow->start) out_ += R"(,"bp":"e")";
    out_ += '}';
  }

  void comma() {
    if (!first_) out_ += ",\n";
    first_ = false;
  }

  std::string& out_;
  bool first_ = true;
};

}  // namespace

std::string run_title(const RunTrace& run) { return run.run.empty() ? run.variant : run.variant + " (" + run.run + ")"; }

MergedTrace merge_traces(const std::vector<RunTrace>& runs, const MergeOptions& options) {
  MergedTrace merged;
  std::vector<PreparedRun> prepared;
  uint64_t next_flow_id = 1;
  for (size_t i = 0; i < runs.size(); ++i) {
    if (!runs[i].trace) throw std::invalid_argument("merge_traces: run without a trace");
    if (auto p = prepare(runs[i], i, options, next_flow_id, merged.notes)) prepared.push_back(std::move(*p));
  }
  if (prepared.empty())
    throw TraceError(runs.empty() ? std::string("merge_traces: no runs")
                                  : fmt::format("no run has an {} scope; no merged trace", runs.front().scope));
  int64_t lead = 0;
  for (const PreparedRun& p : prepared) lead = std::max(lead, p.lead_ns);
  const int64_t start_ns = (lead + 999) / 1000 * 1000;
  merged.forward_start_us = static_cast<double>(start_ns) / 1000.0;

  using nlohmann::json;
  json info = {
      {"description", "attnprof comparison trace: one process per run, in run order; every event of a run is shifted "
                      "so that its first profiled forward (the CPU attn_fwd scope) starts at forward_start_us"},
      {"forward_start_us", merged.forward_start_us},
      {"max_steps", options.max_steps},
      {"notes", merged.notes},
  };
  json& listed = info["runs"] = json::array();
  std::string device_properties;
  for (const PreparedRun& p : prepared) {
    const KinetoTrace& t = *p.run->trace;
    json r = {{"pid", p.position + 1},
              {"variant", p.run->variant},
              {"run", p.run->run},
              {"headline", p.run->headline},
              {"source", t.source},
              {"shift_us", static_cast<double>(start_ns - p.anchor_ns) / 1000.0},
              {"steps_kept", p.steps_kept},
              {"steps_profiled", p.steps_total},
              {"slices", p.slices_kept},
              {"flows", p.flows_kept},
              {"slices_cut_to_nest", p.cut}};
    if (!t.attnprof_json.empty()) r["attnprof"] = json::parse(t.attnprof_json, nullptr, false);
    listed.push_back(std::move(r));
    // Kineto repeats the GPU's properties in every trace; runs of one machine
    // share them, so the first is kept once.
    if (device_properties.empty()) device_properties = t.device_properties_json;
  }
  const auto dump = [](const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); };
  std::string& out = merged.json;
  // No "displayTimeUnit": Perfetto ignores it now, but some of its earlier
  // versions read "ns" as the unit of ts and dur (timestamps here are us).
  out = "{\"schemaVersion\":1,\"traceName\":\"attnprof comparison\",\n";
  out += "\"attnprof_comparison\":" + dump(info) + ",\n";
  if (!device_properties.empty()) out += "\"deviceProperties\":" + device_properties + ",\n";
  out += "\"traceEvents\":[\n";
  Writer writer(out);
  for (const PreparedRun& p : prepared) writer.run(p, start_ns - p.anchor_ns);
  out += "\n]}\n";
  return merged;
}

}  // namespace attnprof::report
