#include "attnprof/report/merged_trace.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "perfetto_rules.h"
#include "trace_test_util.h"

namespace attnprof::report {
namespace {

using nlohmann::json;
using testing::gpu_fixture;
using testing::perfetto_rule_violations;

std::vector<KinetoTrace> read_all(const std::vector<std::string>& paths) {
  std::vector<KinetoTrace> traces;
  for (const auto& p : paths) traces.push_back(read_kineto_trace_file(p));
  return traces;
}

std::vector<RunTrace> runs_of(const std::vector<KinetoTrace>& traces, const std::vector<std::string>& variants,
                              const std::string& run = "") {
  std::vector<RunTrace> runs;
  for (size_t i = 0; i < traces.size(); ++i) runs.push_back({variants[i], run, "1.5 µs/forward", &traces[i]});
  return runs;
}

json parse_back(const MergedTrace& m) { return json::parse(m.json); }

void expect_perfetto_rules(const json& merged) {
  for (const std::string& v : perfetto_rule_violations(merged)) ADD_FAILURE() << v;
}

// Events of one process by phase/cat, for counting.
std::vector<const json*> events_of(const json& merged, int64_t pid, const std::string& ph, const std::string& cat = "") {
  std::vector<const json*> out;
  for (const auto& e : merged["traceEvents"])
    if (e.value("pid", -1) == pid && e["ph"] == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(&e);
  return out;
}

std::map<int64_t, std::string> metadata_by_pid(const json& merged, const std::string& name, const std::string& key) {
  std::map<int64_t, std::string> out;
  for (const auto& e : merged["traceEvents"])
    if (e["ph"] == "M" && e["name"] == name) {
      EXPECT_FALSE(out.count(e["pid"])) << name << " twice for pid " << e["pid"];
      out[e["pid"]] = e["args"][key].dump();
    }
  return out;
}

// Four variants of a real H200 run: every Perfetto rule holds, one process per
// run in order, each run's device work and flows all there, and the first
// forwards aligned.
TEST(MergedTrace, RealRunsMergeIntoOneValidAlignedTrace) {
  const auto& variants = testing::gpu_fixture_variants();
  std::vector<std::string> paths;
  for (const auto& v : variants) paths.push_back(gpu_fixture(v));
  const auto traces = read_all(paths);
  const MergedTrace m = merge_traces(runs_of(traces, variants));
  EXPECT_TRUE(m.notes.empty());
  const json merged = parse_back(m);
  expect_perfetto_rules(merged);

  const auto names = metadata_by_pid(merged, "process_name", "name");
  const auto order = metadata_by_pid(merged, "process_sort_index", "sort_index");
  ASSERT_EQ(names.size(), variants.size()) << "one process per run";
  for (size_t i = 0; i < variants.size(); ++i) {
    SCOPED_TRACE(variants[i]);
    const int64_t pid = static_cast<int64_t>(i) + 1;
    EXPECT_EQ(names.at(pid), json(variants[i] + " \u2014 1.5 \u00b5s/forward").dump());
    EXPECT_EQ(order.at(pid), std::to_string(i));

    // The whole trace's device work and launch -> kernel flows (the fixture
    // holds exactly the three profiled steps).
    const json original = testing::load_json(paths[i]);
    size_t device_work = 0, pairs = 0;
    std::map<int64_t, int> ends;
    for (const auto& e : original["traceEvents"]) {
      const std::string cat = e.value("cat", "");
      if (e["ph"] == "X" && (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset")) ++device_work;
      if (e["ph"] == "s" || e["ph"] == "f") ends[e["id"].get<int64_t>()] += e["ph"] == "s" ? 1 : 2;
    }
    for (const auto& [id, bits] : ends) pairs += bits == 3;
    size_t merged_work = 0;
    for (const char* cat : {"kernel", "gpu_memcpy", "gpu_memset"}) merged_work += events_of(merged, pid, "X", cat).size();
    EXPECT_EQ(merged_work, device_work);
    EXPECT_EQ(events_of(merged, pid, "s").size(), pairs);
    EXPECT_EQ(events_of(merged, pid, "f").size(), pairs);
    EXPECT_EQ(events_of(merged, pid, "X", "user_annotation").size(), 6u) << "3 ProfilerStep + 3 attn_fwd";
    EXPECT_TRUE(events_of(merged, pid, "X", "Trace").empty()) << "Kineto's own span is not a run's";

    // Alignment: the first CPU attn_fwd at forward_start_us, everything shifted
    // by one offset (the kernels keep their distance to the forward).
    std::vector<const json*> scopes;
    for (const json* e : events_of(merged, pid, "X", "user_annotation"))
      if ((*e)["name"] == "attn_fwd") scopes.push_back(e);
    ASSERT_FALSE(scopes.empty());
    const json* first = *std::min_element(scopes.begin(), scopes.end(), [](const json* a, const json* b) {
      return (*a)["ts"].get<double>() < (*b)["ts"].get<double>();
    });
    EXPECT_DOUBLE_EQ((*first)["ts"].get<double>(), m.forward_start_us);
    const KinetoTrace& t = traces[i];
    const auto forwards = find_forwards(t);
    const TraceSlice& anchor = t.slices[forwards.front().annotation];
    const TraceSlice& kernel = t.slices[forwards.front().device_work.front()];
    bool found = false;
    for (const json* e : events_of(merged, pid, "X"))
      if ((*e)["name"] == t.name_of(kernel) && std::llround((*e)["ts"].get<double>() * 1000) ==
                                                   std::llround(m.forward_start_us * 1000) + kernel.ts_ns - anchor.ts_ns)
        found = true;
    EXPECT_TRUE(found) << "the first kernel at the same distance from the first forward";
  }

  // Each flow binds a runtime call to the device work with the same correlation.
  const auto tracks = testing::perfetto_tracks(merged);
  std::map<int64_t, std::vector<const json*>> flow_ends;
  for (const auto& e : merged["traceEvents"])
    if (e["ph"] == "s" || e["ph"] == "f") flow_ends[e["id"]].push_back(&e);
  for (const auto& [id, ends] : flow_ends) {
    ASSERT_EQ(ends.size(), 2u);
    int64_t correlation[2] = {-1, -2};
    for (size_t k = 0; k < 2; ++k) {
      const json& end = *ends[k];
      const auto* slice = testing::innermost_slice(tracks.at({end["pid"], end["tid"]}),
                                                   std::llround(end["ts"].get<double>() * 1000));
      ASSERT_NE(slice, nullptr);
      const std::string cat = (*slice->event)["cat"];
      if (end["ph"] == "s") EXPECT_TRUE(cat == "cuda_runtime" || cat == "cuda_driver") << cat;
      else EXPECT_TRUE(cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") << cat;
      correlation[k] = (*slice->event)["args"]["correlation"];
    }
    EXPECT_EQ(correlation[0], correlation[1]) << "flow " << id;
  }
  // What the file is, and the GPU's properties once.
  EXPECT_EQ(merged["attnprof_comparison"]["runs"].size(), variants.size());
  EXPECT_DOUBLE_EQ(merged["attnprof_comparison"]["forward_start_us"].get<double>(), m.forward_start_us);
  EXPECT_EQ(merged["deviceProperties"][0]["name"], "NVIDIA H200");
  EXPECT_EQ(m.json.find("deviceProperties"), m.json.rfind("deviceProperties"));
  EXPECT_EQ(m.json.find("e+"), std::string::npos) << "no exponent notation (Perfetto misreads it in ts)";
}

// compare on two runs of one variant: Kineto's correlation ids are the same
// numbers in both files, yet pids, tids and flow ids stay apart.
TEST(MergedTrace, TwoRunsOfOneTraceStayApart) {
  const auto traces = read_all({gpu_fixture("naive"), gpu_fixture("naive")});
  std::vector<RunTrace> runs{{"naive", "A", "", &traces[0]}, {"naive", "B", "", &traces[1]}};
  const json merged = parse_back(merge_traces(runs));
  expect_perfetto_rules(merged);
  const auto names = metadata_by_pid(merged, "process_name", "name");
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names.at(1), json("naive (A)").dump());
  EXPECT_EQ(names.at(2), json("naive (B)").dump());
  std::set<int64_t> ids[2];
  for (const auto& e : merged["traceEvents"])
    if (e["ph"] == "s") ids[e["pid"].get<int64_t>() - 1].insert(e["id"].get<int64_t>());
  ASSERT_FALSE(ids[0].empty());
  EXPECT_EQ(ids[0].size(), ids[1].size());
  for (int64_t id : ids[0]) EXPECT_FALSE(ids[1].count(id)) << "flow id " << id << " in both runs";
}

TEST(MergedTrace, CpuRunsMergeWithoutFlows) {
  const auto& variants = testing::cpu_fixture_variants();
  std::vector<std::string> paths;
  for (const auto& v : variants) paths.push_back(testing::cpu_fixture(v));
  const auto traces = read_all(paths);
  const MergedTrace m = merge_traces(runs_of(traces, variants));
  const json merged = parse_back(m);
  expect_perfetto_rules(merged);
  for (size_t i = 0; i < variants.size(); ++i) {
    const int64_t pid = static_cast<int64_t>(i) + 1;
    EXPECT_TRUE(events_of(merged, pid, "s").empty());
    EXPECT_FALSE(events_of(merged, pid, "X", "cpu_op").empty());
  }
  for (const auto& e : merged["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "thread_name") EXPECT_EQ(e["args"]["name"].get<std::string>().rfind("CPU thread ", 0), 0u);
}

TEST(MergedTrace, KeepsAtMostMaxStepsFromTheFirstForward) {
  const json j = testing::synthetic_trace({{{"a", 1.0}}, {{"b", 2.0}}, {{"c", 3.0}}, {{"d", 4.0}}});
  const KinetoTrace t = parse_kineto_trace(j.dump(), "four_steps");
  MergeOptions opt;
  opt.max_steps = 2;
  const MergedTrace m = merge_traces({{"x", "", "", &t}}, opt);
  const json merged = parse_back(m);
  expect_perfetto_rules(merged);
  std::set<std::string> kernels;
  for (const auto& e : merged["traceEvents"])
    if (e.value("cat", "") == "kernel") kernels.insert(e["name"]);
  EXPECT_EQ(kernels, (std::set<std::string>{"a", "b"}));
  ASSERT_EQ(m.notes.size(), 1u);
  EXPECT_NE(m.notes[0].find("first 2 of 4 profiled steps"), std::string::npos) << m.notes[0];
  EXPECT_EQ(merged["attnprof_comparison"]["runs"][0]["steps_kept"], 2);
}

// Kineto's microsecond rounding can make a child end 1 ns after its parent;
// a flow end can sit in no slice. The output nests anyway and drops the flow.
TEST(MergedTrace, PartialOverlapsAreCutAndStrayFlowsDropped) {
  json j = testing::synthetic_trace({{{"k", 2.0}}});
  auto& ev = j["traceEvents"];
  for (auto& e : ev)
    if (e.value("cat", "") == "gpu_user_annotation") e["ts"] = e["ts"].get<double>() - 0.001;  // ends before its kernel
  ev.push_back({{"ph", "s"}, {"id", 9999}, {"pid", 100}, {"tid", 100}, {"ts", 1.0}, {"cat", "ac2g"}, {"name", "ac2g"}});
  ev.push_back({{"ph", "f"}, {"id", 9999}, {"pid", 0}, {"tid", 7}, {"ts", 1.0}, {"cat", "ac2g"}, {"name", "ac2g"}, {"bp", "e"}});
  const KinetoTrace t = parse_kineto_trace(j.dump(), "overlap");
  const json merged = parse_back(merge_traces({{"x", "", "", &t}}));
  expect_perfetto_rules(merged);
  EXPECT_EQ(merged["attnprof_comparison"]["runs"][0]["slices_cut_to_nest"], 1);
  EXPECT_EQ(merged["attnprof_comparison"]["runs"][0]["flows"], 1) << "the launch -> kernel pair only";
}

TEST(MergedTrace, RunsWithoutForwardsAreSkippedWithANote) {
  const KinetoTrace good = parse_kineto_trace(testing::synthetic_trace({{{"k", 1.0}}}).dump(), "good.json");
  json none = testing::synthetic_trace({{{"k", 1.0}}});
  for (auto& e : none["traceEvents"])
    if (e.value("name", "") == "attn_fwd") e["name"] = "other_scope";
  const KinetoTrace empty = parse_kineto_trace(none.dump(), "empty.json");
  const MergedTrace m = merge_traces({{"a", "", "", &empty}, {"b", "", "", &good}});
  ASSERT_EQ(m.notes.size(), 1u);
  EXPECT_NE(m.notes[0].find("empty.json"), std::string::npos);
  const json merged = parse_back(m);
  expect_perfetto_rules(merged);
  const auto names = metadata_by_pid(merged, "process_name", "name");
  ASSERT_EQ(names.size(), 1u);
  EXPECT_EQ(names.begin()->first, 2) << "pid keeps the run's position";
  EXPECT_THROW(merge_traces({{"a", "", "", &empty}}), TraceError);
  EXPECT_THROW(merge_traces({}), TraceError);
}

// Names with quotes, backslashes and control characters stay valid JSON; a
// larger trace (1,600 launches, ~6.5k events) merges into a valid trace no
// larger than twice the input.
TEST(MergedTrace, HostileNamesAndLargeTraces) {
  std::vector<std::vector<testing::SynthWork>> forwards(20, std::vector<testing::SynthWork>(80, {"k\"<&>\\\n\x01", 0.5}));
  const std::string text = testing::synthetic_trace(forwards).dump();
  const KinetoTrace t = parse_kineto_trace(text, "big");
  MergeOptions opt;
  opt.max_steps = 1000;
  const MergedTrace m = merge_traces({{"\"quoted\" \\ variant", "", "headline \"x\"", &t}}, opt);
  EXPECT_LT(m.json.size(), text.size() * 2);
  const json merged = parse_back(m);
  expect_perfetto_rules(merged);
  size_t kernels = 0;
  for (const auto& e : merged["traceEvents"])
    if (e.value("cat", "") == "kernel") {
      ++kernels;
      EXPECT_EQ(e["name"], "k\"<&>\\\n\x01");
    }
  EXPECT_EQ(kernels, 20u * 80u);
}

// --counters: each kernel slice of every profiled forward carries the counted
// figures of the kernel at its place in the step; memcpys, the other runs and
// Kineto's own args stay as they were.
TEST(MergedTrace, CountedKernelsCarryTheirCountersAsArgs) {
  const std::vector<std::string> variants = {"naive", "sdpa-flash"};
  const auto traces = read_all({gpu_fixture("naive"), gpu_fixture("sdpa-flash")});
  const json summary = testing::load_json(gpu_fixture("naive", ".summary.json"));
  CounterPass pass;
  pass.state = CounterPass::State::collected;
  DeviceCeilings c;
  c.copy_gbps = 4000;  // constructed, as every figure here
  pass.ceilings = c;
  int index = 0;
  for (const json& l : summary["launches"]) {
    const std::string name = l["name"];
    if (name.rfind("Memcpy", 0) == 0) continue;
    KernelCounters k;
    k.scope = kForwardScope, k.kernel = name, k.index = index++;
    k.values.duration_ns = 2000.0;
    k.values.dram_read_bytes = 6e6, k.values.dram_write_bytes = 1e6;
    k.values.tensor_active_pct = 5, k.values.sm_throughput_pct = 10;
    pass.kernels.push_back(k);
  }
  ASSERT_EQ(pass.kernels.size(), 5u);
  std::vector<RunTrace> runs = runs_of(traces, variants);
  runs[0].counters = &pass;
  const json merged = parse_back(merge_traces(runs));
  expect_perfetto_rules(merged);
  size_t counted = 0;
  for (const json* e : events_of(merged, 1, "X", "kernel")) {
    ASSERT_TRUE((*e)["args"].contains("attnprof_counters")) << (*e)["name"];
    const json& a = (*e)["args"]["attnprof_counters"];
    EXPECT_EQ(a["dram_read_bytes"], 6e6);
    EXPECT_DOUBLE_EQ(a["dram_gbps"].get<double>(), 3500.0);
    EXPECT_EQ(a["verdict"], "memory-bound: 88% of DRAM peak");
    EXPECT_TRUE((*e)["args"].contains("correlation")) << "Kineto's args kept";
    ++counted;
  }
  EXPECT_EQ(counted, 15u) << "5 kernels in each of 3 profiled forwards";
  for (const json* e : events_of(merged, 1, "X", "gpu_memcpy")) EXPECT_FALSE((*e)["args"].contains("attnprof_counters"));
  for (const json* e : events_of(merged, 2, "X", "kernel")) EXPECT_FALSE((*e)["args"].contains("attnprof_counters"));
  // A pass that collected nothing adds nothing.
  pass.state = CounterPass::State::unavailable;
  const json plain = parse_back(merge_traces(runs));
  for (const json* e : events_of(plain, 1, "X", "kernel")) EXPECT_FALSE((*e)["args"].contains("attnprof_counters"));
}

}  // namespace
}  // namespace attnprof::report
