#include "attnprof/report/kineto_trace.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "attnprof/io/files.h"
#include "test_util.h"
#include "trace_test_util.h"

namespace attnprof::report {
namespace {

using nlohmann::json;
using testing::cpu_fixture;
using testing::gpu_fixture;
using testing::load_json;

// The events of a fixture by phase and kind, counted straight from the JSON.
struct Counts {
  size_t slices = 0, flows = 0, device_work = 0, forwards = 0;
};

Counts count_events(const json& trace) {
  Counts c;
  for (const auto& e : trace["traceEvents"]) {
    const std::string ph = e.value("ph", "");
    const bool numeric = e.contains("pid") && e["pid"].is_number();
    if (ph == "X" && numeric) {
      ++c.slices;
      const std::string cat = e.value("cat", "");
      if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset") ++c.device_work;
      if (cat == "user_annotation" && e.value("name", "") == "attn_fwd") ++c.forwards;
    }
    if ((ph == "s" || ph == "f") && numeric) ++c.flows;
  }
  return c;
}

TEST(KinetoTrace, ReadsRealTracesAndFindsEveryForwardsDeviceWork) {
  for (const std::string& v : testing::gpu_fixture_variants()) {
    SCOPED_TRACE(v);
    const KinetoTrace t = read_kineto_trace_file(gpu_fixture(v));
    const Counts expected = count_events(load_json(gpu_fixture(v)));
    EXPECT_EQ(t.slices.size(), expected.slices);
    EXPECT_EQ(t.flows.size(), expected.flows);
    EXPECT_GT(t.ignored_events, 0u) << "metadata and Kineto's own Spans track are not slices";
    EXPECT_NE(t.attnprof_json.find(v), std::string::npos) << "the run parameters are kept";
    EXPECT_NE(t.device_properties_json.find("NVIDIA H200"), std::string::npos);

    const std::vector<Forward> forwards = find_forwards(t);
    ASSERT_EQ(forwards.size(), expected.forwards);
    // attnprof's own count of the first forward (its summary), and the whole
    // trace's device work shared by its identical forwards.
    const int64_t per_forward = testing::summary_kernels_per_forward(gpu_fixture(v, ".summary.json"));
    EXPECT_EQ(static_cast<int64_t>(expected.device_work), per_forward * static_cast<int64_t>(forwards.size()));
    int64_t previous_end = 0;
    for (const Forward& f : forwards) {
      const TraceSlice& scope = t.slices[f.annotation];
      EXPECT_EQ(t.name_of(scope), "attn_fwd");
      EXPECT_EQ(scope.kind, SliceKind::user_annotation);
      EXPECT_GE(scope.ts_ns, previous_end) << "forwards in time order";
      previous_end = scope.end_ns();
      EXPECT_EQ(static_cast<int64_t>(f.device_work.size()), per_forward);
      int64_t sum = 0, last_start = 0;
      for (size_t w : f.device_work) {
        const TraceSlice& d = t.slices[w];
        EXPECT_TRUE(is_device_work(d.kind)) << t.name_of(d);
        EXPECT_GE(d.ts_ns, scope.ts_ns) << "device work starts after its forward did";
        EXPECT_GE(d.ts_ns, last_start) << "by start time";
        last_start = d.ts_ns;
        sum += d.dur_ns;
      }
      EXPECT_EQ(f.device_ns, sum);
    }
  }
}

// Without runtime calls (filtered out, or a trimmed file) a forward falls back
// to the device work inside its GPU-side attn_fwd span: the same work.
TEST(KinetoTrace, GpuAnnotationFallbackFindsTheSameWorkAsCorrelation) {
  for (const std::string& v : testing::gpu_fixture_variants()) {
    SCOPED_TRACE(v);
    json j = load_json(gpu_fixture(v));
    const KinetoTrace full = parse_kineto_trace(j.dump(), v);
    json& events = j["traceEvents"];
    json kept = json::array();
    for (const auto& e : events)
      if (e.value("cat", "") != "cuda_runtime" && e.value("cat", "") != "cuda_driver") kept.push_back(e);
    events = kept;
    const KinetoTrace stripped = parse_kineto_trace(j.dump(), v);
    const auto a = find_forwards(full), b = find_forwards(stripped);
    ASSERT_EQ(a.size(), b.size());
    for (size_t f = 0; f < a.size(); ++f) {
      ASSERT_EQ(a[f].device_work.size(), b[f].device_work.size());
      EXPECT_EQ(a[f].device_ns, b[f].device_ns);
      for (size_t k = 0; k < a[f].device_work.size(); ++k)
        EXPECT_EQ(full.name_of(full.slices[a[f].device_work[k]]), stripped.name_of(stripped.slices[b[f].device_work[k]]));
    }
  }
}

TEST(KinetoTrace, CpuTraceHasForwardsWithoutDeviceWorkAndChildOps) {
  for (const std::string& v : testing::cpu_fixture_variants()) {
    SCOPED_TRACE(v);
    const KinetoTrace t = read_kineto_trace_file(cpu_fixture(v));
    const auto forwards = find_forwards(t);
    ASSERT_EQ(forwards.size(), count_events(load_json(cpu_fixture(v))).forwards);
    for (const Forward& f : forwards) {
      EXPECT_TRUE(f.device_work.empty());
      const TraceSlice& scope = t.slices[f.annotation];
      const auto children = child_slices(t, f.annotation);
      ASSERT_FALSE(children.empty());
      int64_t covered = scope.ts_ns;
      for (size_t c : children) {
        const TraceSlice& s = t.slices[c];
        EXPECT_GE(s.ts_ns, covered) << "children do not overlap each other";
        EXPECT_LE(s.end_ns(), scope.end_ns());
        covered = s.end_ns();
        // A child is under no other slice inside the scope.
        for (const TraceSlice& o : t.slices)
          if (&o != &s && &o != &scope && o.tid == s.tid && o.ts_ns >= scope.ts_ns && o.end_ns() <= scope.end_ns())
            EXPECT_FALSE(o.ts_ns <= s.ts_ns && o.end_ns() >= s.end_ns() && o.dur_ns > s.dur_ns) << t.name_of(s);
      }
    }
  }
  // sdpa-flash on CPU: attn_fwd holds exactly one op, the SDPA call.
  const KinetoTrace t = read_kineto_trace_file(cpu_fixture("sdpa-flash"));
  const auto children = child_slices(t, find_forwards(t).front().annotation);
  ASSERT_EQ(children.size(), 1u);
  EXPECT_EQ(t.name_of(t.slices[children[0]]), "aten::scaled_dot_product_attention");
}

TEST(KinetoTrace, PlainAndGzipFilesReadTheSame) {
  const std::string dir = testing::make_temp_dir("kineto_trace");
  const std::string text = load_json(gpu_fixture("sdpa-flash")).dump();
  io::write_file_atomic(dir + "/t.json", text);
  io::write_file_atomic(dir + "/t.gz", io::gzip_compress(text));
  const KinetoTrace a = read_kineto_trace_file(dir + "/t.json"), b = read_kineto_trace_file(dir + "/t.gz");
  EXPECT_EQ(a.slices.size(), b.slices.size());
  EXPECT_EQ(a.args, b.args);
  testing::remove_tree(dir);
}

TEST(KinetoTrace, TimesAreIntegerNanoseconds) {
  json j = testing::synthetic_trace({{{"k", 1.5}}});
  j["traceEvents"].push_back({{"ph", "X"}, {"cat", "cpu_op"}, {"name", "x"}, {"pid", 1}, {"tid", 1},
                              {"ts", 5210587831011.873}, {"dur", 0.001}});
  const KinetoTrace t = parse_kineto_trace(j.dump(), "t");
  const TraceSlice& s = t.slices.back();
  EXPECT_EQ(s.ts_ns, 5210587831011873);
  EXPECT_EQ(s.dur_ns, 1);
}

// Every defect is one TraceError line naming the source and the field.
TEST(KinetoTrace, MalformedTracesAreOneLineErrorsNamingTheField) {
  const auto with_event = [](const std::string& e) { return R"({"traceEvents":[{"ph":"M","name":"x"},)" + e + "]}"; };
  const std::string deep = std::string(40, '[') + std::string(40, ']');
  struct Case {
    std::string text, expect;
  };
  const std::vector<Case> cases{
      {"", "not valid JSON"},
      {"{\"traceEvents\":[", "not valid JSON"},
      {"[1,2]", "expected a JSON object"},
      {"{}", "traceEvents: missing"},
      {R"({"traceEvents":{}})", "traceEvents: expected an array, got an object"},
      {R"({"traceEvents":"x"})", "traceEvents: expected an array, got a string"},
      {R"({"traceEvents":[1]})", "traceEvents[0]: expected an object, got a number"},
      {R"({"traceEvents":[[]]})", "traceEvents[0]: expected an object, got an array"},
      {with_event(R"({"name":"a"})"), "traceEvents[1].ph: missing"},
      {with_event(R"({"ph":7})"), "traceEvents[1].ph: expected a string, got a number"},
      {with_event(R"({"ph":"X","cat":"cpu_op","pid":1,"tid":1,"ts":1,"dur":1})"), "traceEvents[1].name: missing"},
      {with_event(R"({"ph":"X","name":3,"pid":1,"tid":1,"ts":1,"dur":1})"), "traceEvents[1].name: expected a string"},
      {with_event(R"({"ph":"X","name":"a","cat":[],"pid":1,"tid":1,"ts":1,"dur":1})"), "traceEvents[1].cat: expected a string"},
      {with_event(R"({"ph":"X","name":"a","pid":1,"tid":1,"ts":"1","dur":1})"), "traceEvents[1].ts: expected a number, got a string"},
      {with_event(R"({"ph":"X","name":"a","pid":1,"tid":1,"ts":1e300,"dur":1})"), "traceEvents[1].ts: 1e+300 is out of range"},
      {with_event(R"({"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":-5})"), "traceEvents[1].dur: -5 is out of range"},
      {with_event(R"({"ph":"X","name":"a","pid":1,"tid":1,"ts":1})"), "traceEvents[1].dur: missing"},
      {with_event(R"({"ph":"X","name":"a","pid":1.5,"tid":1,"ts":1,"dur":1})"), "traceEvents[1].pid: expected an integer or a string, got 1.5"},
      {with_event(R"({"ph":"X","name":"a","pid":1,"tid":null,"ts":1,"dur":1})"), "traceEvents[1].tid: expected an integer or a string, got null"},
      {with_event(R"({"ph":"X","name":"a","pid":18446744073709551615,"tid":1,"ts":1,"dur":1})"), "traceEvents[1].pid"},
      {with_event(R"({"ph":"s","pid":1,"tid":1,"ts":1})"), "traceEvents[1].id: missing"},
      {with_event(R"({"ph":"f","id":1.5,"pid":1,"tid":1,"ts":1})"), "traceEvents[1].id: expected an integer or a string"},
      {with_event(R"({"ph":"X","name":"a","pid":1,"tid":1,"ts":1e999,"dur":1})"), "number overflow"},
      {with_event(R"({"ph":"X","name":"a","pid":1,"tid":1,"ts":1,"dur":1,"args":{"deep":)" + deep + "}}"),
       "nested deeper than 32 levels"},
      {R"({"attnprof":)" + deep + R"(,"traceEvents":[]})", "nested deeper than 32 levels"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.text.substr(0, 120));
    try {
      (void)parse_kineto_trace(c.text, "bad.json");
      ADD_FAILURE() << "no error";
    } catch (const TraceError& e) {
      const std::string what = e.what();
      EXPECT_EQ(what.rfind("bad.json: ", 0), 0u) << what;
      EXPECT_NE(what.find(c.expect), std::string::npos) << what;
      EXPECT_EQ(what.find('\n'), std::string::npos) << what;
      EXPECT_LT(what.size(), 300u) << what;
    }
  }
}

TEST(KinetoTrace, FileErrorsNameThePath) {
  const std::string dir = testing::make_temp_dir("kineto_trace_files");
  const std::string gz = io::gzip_compress(load_json(gpu_fixture("naive")).dump());
  io::write_file_atomic(dir + "/truncated.json.gz", gz.substr(0, gz.size() / 2));
  io::write_file_atomic(dir + "/not_gzip.json.gz", std::string("\x1f\x8b garbage", 10));
  io::write_file_atomic(dir + "/empty.json", "");
  for (const std::string name : {"missing.json.gz", "truncated.json.gz", "not_gzip.json.gz", "empty.json", ""}) {
    const std::string path = name.empty() ? dir : dir + "/" + name;
    SCOPED_TRACE(path);
    try {
      (void)read_kineto_trace_file(path);
      ADD_FAILURE() << "no error";
    } catch (const TraceError& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << e.what();
      EXPECT_EQ(std::string(e.what()).find('\n'), std::string::npos) << e.what();
    }
  }
  testing::remove_tree(dir);
}

// A CUDA backward: the calling thread waits inside attn_bwd while autograd's
// device thread (another tid of the process) launches the kernels.
TEST(KinetoTrace, ScopeTakesLaunchesOfAnotherThreadInsideItsSpan) {
  json j = {{"traceEvents", json::array()}};
  auto& ev = j["traceEvents"];
  auto x = [&](const char* cat, const char* name, int pid, int tid, int ts, int dur, int corr) {
    json e = {{"ph", "X"}, {"cat", cat}, {"name", name}, {"pid", pid}, {"tid", tid}, {"ts", ts}, {"dur", dur}};
    if (corr >= 0) e["args"] = {{"correlation", corr}};
    ev.push_back(e);
  };
  x("user_annotation", "attn_bwd", 5, 1, 100, 400, -1);
  x("cpu_op", "aten::mm", 5, 2, 150, 100, -1);
  x("cuda_runtime", "cudaLaunchKernel", 5, 2, 160, 10, 9);
  x("kernel", "k_grad", 0, 7, 200, 50, 9);
  x("cuda_runtime", "cudaLaunchKernel", 5, 2, 600, 10, 10);  // after the scope
  x("kernel", "k_later", 0, 7, 620, 5, 10);
  x("cuda_runtime", "cudaLaunchKernel", 6, 2, 160, 10, 11);  // another process
  x("kernel", "k_other_process", 0, 7, 300, 5, 11);
  const KinetoTrace t = parse_kineto_trace(j.dump(), "bwd");
  const auto scopes = find_forwards(t, "attn_bwd");
  ASSERT_EQ(scopes.size(), 1u);
  ASSERT_EQ(scopes[0].device_work.size(), 1u);
  EXPECT_EQ(t.name_of(t.slices[scopes[0].device_work[0]]), "k_grad");
  EXPECT_EQ(scopes[0].device_ns, 50'000);
}

// Hostile but well-formed: no attn_fwd (no forwards, no error), string pids,
// wrongly typed args (absent), 100k events (read in linear time).
TEST(KinetoTrace, OddButValidTracesRead) {
  json j = {{"traceEvents", json::array()}};
  auto& ev = j["traceEvents"];
  ev.push_back({{"ph", "X"}, {"cat", "kernel"}, {"name", "k"}, {"pid", 0}, {"tid", 7}, {"ts", 1}, {"dur", 1},
                {"args", {{"correlation", "12"}, {"External id", -4}}}});
  ev.push_back({{"ph", "X"}, {"name", "no cat"}, {"pid", "Spans"}, {"tid", 1}, {"ts", 1}, {"dur", 1}});
  ev.push_back({{"ph", "i"}, {"name", "instant"}});
  const KinetoTrace t = parse_kineto_trace(j.dump(), "odd");
  ASSERT_EQ(t.slices.size(), 1u);
  EXPECT_EQ(t.slices[0].correlation, -1);
  EXPECT_EQ(t.slices[0].external_id, -1);
  EXPECT_EQ(t.ignored_events, 2u);
  EXPECT_TRUE(find_forwards(t).empty());

  // 100k events written as text (a DOM would cost more than the read): 1000
  // forwards of 49 launches and kernels each.
  std::string text = R"({"traceEvents":[)";
  int64_t corr = 0;
  for (int f = 0; f < 1000; ++f) {
    const int64_t t0 = 1000 + f * 1000;
    text += fmt::format(R"({{"ph":"X","cat":"user_annotation","name":"attn_fwd","pid":1,"tid":1,"ts":{},"dur":500}},)", t0);
    for (int k = 0; k < 49; ++k, ++corr)
      text += fmt::format(R"({{"ph":"X","cat":"cuda_runtime","name":"l","pid":1,"tid":1,"ts":{},"dur":1,"args":{{"correlation":{}}}}},)"
                          R"({{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":{},"dur":1,"args":{{"correlation":{}}}}},)",
                          t0 + 1 + k * 2, corr, t0 + 200 + k * 2, corr);
  }
  text.back() = ']';
  text += '}';
  const KinetoTrace big = parse_kineto_trace(text, "big");
  EXPECT_GE(big.slices.size(), 99000u);
  const auto forwards = find_forwards(big);
  ASSERT_EQ(forwards.size(), 1000u);
  for (const Forward& f : forwards) EXPECT_EQ(f.device_work.size(), 49u);
}

}  // namespace
}  // namespace attnprof::report
