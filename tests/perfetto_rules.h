// The rules Perfetto's JSON importer needs of a Chrome trace, checked on the
// parsed file: used by the merged-trace test and its fuzz target.
//   - every event is an object with a string "ph"; complete slices ("X") have
//     numeric, non-negative ts and dur and integer pid/tid;
//   - slices nest on their track (same pid and tid): none overlaps another partially;
//   - flow ends ("s"/"f") have an integer id, each id one "s" and one "f" with the
//     same cat and name, in one process; the "f" says "bp":"e"; each end lies in a
//     slice of its own track;
//   - every pid used has process_name metadata, every pid/tid thread_name, and a
//     tid belongs to one pid only (Perfetto keys threads by tid).
#pragma once

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace attnprof::testing {

struct PerfettoSlice {
  int64_t ts_ns = 0, end_ns = 0;
  const nlohmann::json* event = nullptr;
  int64_t parent = -1;  // the enclosing slice's position on the track
};

using PerfettoTrack = std::pair<int64_t, int64_t>;  // (pid, tid)

// Slices of each track, by (start, longer first), with their parents.
inline std::map<PerfettoTrack, std::vector<PerfettoSlice>> perfetto_tracks(const nlohmann::json& trace) {
  std::map<PerfettoTrack, std::vector<PerfettoSlice>> tracks;
  for (const auto& e : trace.at("traceEvents")) {
    if (!e.is_object() || e.value("ph", "") != "X") continue;
    if (!e.contains("pid") || !e["pid"].is_number_integer() || !e.contains("tid") || !e["tid"].is_number_integer()) continue;
    if (!e.contains("ts") || !e["ts"].is_number() || !e.contains("dur") || !e["dur"].is_number()) continue;
    const int64_t ts = std::llround(e["ts"].get<double>() * 1000.0);
    tracks[{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()}].push_back(
        {ts, ts + std::llround(e["dur"].get<double>() * 1000.0), &e});
  }
  for (auto& [key, slices] : tracks) {
    std::stable_sort(slices.begin(), slices.end(), [](const PerfettoSlice& a, const PerfettoSlice& b) {
      return a.ts_ns != b.ts_ns ? a.ts_ns < b.ts_ns : a.end_ns > b.end_ns;
    });
    std::vector<int64_t> open;
    for (size_t i = 0; i < slices.size(); ++i) {
      while (!open.empty() && slices[static_cast<size_t>(open.back())].end_ns <= slices[i].ts_ns) open.pop_back();
      slices[i].parent = open.empty() ? -1 : open.back();
      open.push_back(static_cast<int64_t>(i));
    }
  }
  return tracks;
}

// The innermost slice of `slices` holding `ts_ns` (nullptr if none).
// Holders of ts nest around the last slice starting at or before it: walk up.
inline const PerfettoSlice* innermost_slice(const std::vector<PerfettoSlice>& slices, int64_t ts_ns) {
  const auto it = std::upper_bound(slices.begin(), slices.end(), ts_ns,
                                   [](int64_t v, const PerfettoSlice& s) { return v < s.ts_ns; });
  for (int64_t i = (it - slices.begin()) - 1; i >= 0; i = slices[static_cast<size_t>(i)].parent) {
    const PerfettoSlice& s = slices[static_cast<size_t>(i)];
    if (ts_ns < s.end_ns || ts_ns == s.ts_ns) return &s;
  }
  return nullptr;
}

inline std::vector<std::string> perfetto_rule_violations(const nlohmann::json& trace) {
  std::vector<std::string> bad;
  if (!trace.is_object() || !trace.contains("traceEvents") || !trace["traceEvents"].is_array())
    return {"no traceEvents array"};
  std::set<int64_t> named_pids;
  std::set<PerfettoTrack> named_threads;
  std::set<PerfettoTrack> used;
  std::map<int64_t, int64_t> pid_of_tid;
  struct FlowEnds {
    std::vector<const nlohmann::json*> starts, finishes;
  };
  std::map<std::string, FlowEnds> flows;
  const auto is_int = [](const nlohmann::json& e, const char* k) { return e.contains(k) && e[k].is_number_integer(); };
  size_t index = 0;
  for (const auto& e : trace["traceEvents"]) {
    const std::string where = "event " + std::to_string(index++);
    if (!e.is_object() || !e.contains("ph") || !e["ph"].is_string()) {
      bad.push_back(where + ": not an object with a string ph");
      continue;
    }
    const std::string ph = e["ph"];
    if (ph == "M") {
      if (!is_int(e, "pid")) {
        bad.push_back(where + ": metadata without an integer pid");
        continue;
      }
      const std::string name = e.value("name", "");
      const bool has_name = e.contains("args") && e["args"].is_object() && e["args"].contains("name") &&
                            e["args"]["name"].is_string() && !e["args"]["name"].get<std::string>().empty();
      if (name == "process_name" && has_name) named_pids.insert(e["pid"].get<int64_t>());
      if (name == "thread_name" && has_name && is_int(e, "tid"))
        named_threads.insert({e["pid"].get<int64_t>(), e["tid"].get<int64_t>()});
      continue;
    }
    if (ph != "X" && ph != "s" && ph != "f") continue;
    if (!is_int(e, "pid") || !is_int(e, "tid")) {
      bad.push_back(where + ": pid/tid not integers");
      continue;
    }
    if (!e.contains("ts") || !e["ts"].is_number() || e["ts"].get<double>() < 0)
      bad.push_back(where + ": ts missing, not a number, or negative");
    const PerfettoTrack track{e["pid"].get<int64_t>(), e["tid"].get<int64_t>()};
    used.insert(track);
    const auto [it, added] = pid_of_tid.emplace(track.second, track.first);
    if (!added && it->second != track.first)
      bad.push_back(where + ": tid " + std::to_string(track.second) + " used under two pids");
    if (ph == "X") {
      if (!e.contains("dur") || !e["dur"].is_number() || e["dur"].get<double>() < 0)
        bad.push_back(where + ": dur missing, not a number, or negative");
      continue;
    }
    if (!is_int(e, "id")) {
      bad.push_back(where + ": flow id not an integer");
      continue;
    }
    auto& ends = flows[e["id"].dump()];
    (ph == "s" ? ends.starts : ends.finishes).push_back(&e);
    if (ph == "f" && e.value("bp", "") != "e") bad.push_back(where + ": flow finish without \"bp\":\"e\"");
  }
  for (const PerfettoTrack& t : used) {
    if (!named_pids.count(t.first)) bad.push_back("pid " + std::to_string(t.first) + " has no process_name");
    if (!named_threads.count(t))
      bad.push_back("pid " + std::to_string(t.first) + " tid " + std::to_string(t.second) + " has no thread_name");
  }
  const auto tracks = perfetto_tracks(trace);
  for (const auto& [key, slices] : tracks) {
    for (const PerfettoSlice& s : slices)
      if (s.parent >= 0 && s.end_ns > slices[static_cast<size_t>(s.parent)].end_ns)
        bad.push_back("pid " + std::to_string(key.first) + " tid " + std::to_string(key.second) + ": slice '" +
                      s.event->value("name", "") + "' overlaps its parent partially");
  }
  for (const auto& [id, ends] : flows) {
    if (ends.starts.size() != 1 || ends.finishes.size() != 1) {
      bad.push_back("flow " + id + ": " + std::to_string(ends.starts.size()) + " starts and " +
                    std::to_string(ends.finishes.size()) + " finishes");
      continue;
    }
    const nlohmann::json& s = *ends.starts[0];
    const nlohmann::json& f = *ends.finishes[0];
    if (s["pid"] != f["pid"]) bad.push_back("flow " + id + " crosses processes");
    if (s.value("cat", "") != f.value("cat", "") || s.value("name", "") != f.value("name", ""))
      bad.push_back("flow " + id + ": start and finish differ in cat or name");
    for (const nlohmann::json* end : {&s, &f}) {
      if (!(*end)["ts"].is_number()) continue;
      const auto t = tracks.find({(*end)["pid"].get<int64_t>(), (*end)["tid"].get<int64_t>()});
      const int64_t ts = std::llround((*end)["ts"].get<double>() * 1000.0);
      if (t == tracks.end() || !innermost_slice(t->second, ts))
        bad.push_back("flow " + id + ": an end lies in no slice of its track");
    }
  }
  return bad;
}

}  // namespace attnprof::testing
