// summary_json -> read_summary must give back what compare needs, and every
// defect in the input must be a one-line SummaryError naming file and field.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attnprof/io/files.h"
#include "attnprof/report/summary.h"
#include "counters_test_data.h"
#include "test_util.h"

using namespace attnprof;
using namespace attnprof::report;
using nlohmann::json;

namespace {

RunRecord sample() {
  RunRecord r;
  r.variant = "naive";
  r.description = "matmul, \"scale\", softmax";
  r.problem.batch = 4, r.problem.heads_q = 8, r.problem.heads_kv = 2, r.problem.head_dim = 128;
  r.problem.seq_q = 16, r.problem.seq_kv = 1024;
  r.problem.dtype = DType::FP16;
  r.problem.mask = Mask::none;
  r.problem.pass = Pass::fwd_bwd;
  r.problem.device = "cuda:0";
  r.problem.seed = 7;
  r.env = {"2.11.0", "NVIDIA H200", "0.1.0", "12.8"};
  r.schedule = {2, 1, 1, 5};
  r.facts = {{"sdpa_backend", "flash"}, {"mask", "prepared"}};
  r.warnings = {"w1"};
  OpStats a;
  a.name = "aten::bmm";
  a.count = 10, a.cpu_time_total_ns = 123456, a.self_cpu_time_total_ns = 2345, a.device_time_total_ns = 99999,
  a.self_device_time_total_ns = 99001;
  OpStats k;
  k.name = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT";
  k.device = EventDevice::Cuda;
  k.count = 10, k.device_time_total_ns = 5000001, k.self_device_time_total_ns = 5000001;
  OpStats u;
  u.name = "attn_fwd";
  u.is_user_annotation = true;
  u.count = 5, u.cpu_time_total_ns = 1000;
  r.rows = {a, k, u};
  ScopeStats fwd;
  fwd.scope = kForwardScope;
  fwd.calls = 5;
  fwd.cpu_time_avg_us = 12.5;
  fwd.device_time_avg_us = 321.25, fwd.device_time_min_us = 300.5, fwd.device_time_max_us = 350.75;
  fwd.kernels_per_call = 6;
  fwd.kernels = {{"nvjet_sm90_tst", 2, 100.5, 90.25, 110.0}, {"Memcpy DtoD (Device -> Device)", 1, 3.25, 3, 3.5}};
  ScopeStats bwd;
  bwd.scope = kBackwardScope;
  bwd.calls = 5, bwd.cpu_time_avg_us = 40, bwd.device_time_avg_us = 700, bwd.kernels_per_call = 9;
  r.scopes = {fwd, bwd};
  r.peak_memory_bytes = 4.5 * (1 << 30);
  r.tflops = 123.4;
  KernelLaunch l;
  l.name = "nvjet_sm90_tst";
  l.launch_api = "cuLaunchKernelEx";
  l.grid[0] = 132, l.block[0] = 384, l.registers_per_thread = 168, l.shared_memory_bytes = 200000;
  l.est_occupancy_pct = 12.5;
  l.time_us = 50.25;
  KernelLaunch l2 = l;
  l2.est_occupancy_pct.reset();
  r.launches = {l, l2};
  r.timing = EventTiming{10, 5, 2, 300.0, 290.0, 310.0, "cuda_event"};
  r.profiler_overhead = 1.07;
  r.output_finite = false;
  r.trace_file = "naive/x.json.gz", r.table_file = "naive/x.txt", r.summary_file = "naive/x.summary.json";
  return r;
}

std::string error_of(const json& j) {
  try {
    read_summary(j, "s.json");
  } catch (const SummaryError& e) {
    return e.what();
  }
  return "";
}

std::string error_of_text(const std::string& text) {
  try {
    read_summary_text(text, "s.json");
  } catch (const SummaryError& e) {
    return e.what();
  }
  return "";
}

bool one_line(const std::string& s) { return !s.empty() && s.find('\n') == std::string::npos; }

}  // namespace

TEST(SummaryReader, RoundTripKeepsEveryField) {
  const RunRecord r = sample();
  const RunRecord b = read_summary(summary_json(r));
  EXPECT_EQ(b.variant, r.variant);
  EXPECT_EQ(b.description, r.description);
  EXPECT_EQ(b.status, Status::ok);
  EXPECT_EQ(b.problem.shape_string(), "4x8/2x16/1024x128");
  EXPECT_EQ(b.problem.file_stem(), r.problem.file_stem());
  EXPECT_EQ(b.problem.dtype, DType::FP16);
  EXPECT_EQ(b.problem.mask, Mask::none);
  EXPECT_EQ(b.problem.pass, Pass::fwd_bwd);
  EXPECT_EQ(b.problem.device, "cuda:0");
  EXPECT_EQ(b.problem.seed, 7u);
  EXPECT_EQ(b.env.device_name, "NVIDIA H200");
  EXPECT_EQ(b.env.cuda_runtime, "12.8");
  EXPECT_EQ(b.schedule.active, 5);
  EXPECT_EQ(b.schedule.warmup_iters, 2);
  ASSERT_EQ(b.facts.size(), 2u);
  EXPECT_EQ(b.warnings, r.warnings);
  ASSERT_EQ(b.rows.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(b.rows[i].name, r.rows[i].name);
    EXPECT_EQ(b.rows[i].device, r.rows[i].device);
    EXPECT_EQ(b.rows[i].is_user_annotation, r.rows[i].is_user_annotation);
    EXPECT_EQ(b.rows[i].count, r.rows[i].count);
    EXPECT_EQ(b.rows[i].cpu_time_total_ns, r.rows[i].cpu_time_total_ns);
    EXPECT_EQ(b.rows[i].self_cpu_time_total_ns, r.rows[i].self_cpu_time_total_ns);
    EXPECT_EQ(b.rows[i].device_time_total_ns, r.rows[i].device_time_total_ns);
    EXPECT_EQ(b.rows[i].self_device_time_total_ns, r.rows[i].self_device_time_total_ns);
  }
  ASSERT_EQ(b.scopes.size(), 2u);
  const ScopeStats& f = b.scopes[0];
  EXPECT_EQ(f.scope, "attn_fwd");
  EXPECT_EQ(f.calls, 5);
  EXPECT_DOUBLE_EQ(f.cpu_time_avg_us, 12.5);
  EXPECT_DOUBLE_EQ(f.device_time_avg_us, 321.25);
  EXPECT_DOUBLE_EQ(f.device_time_min_us, 300.5);
  EXPECT_DOUBLE_EQ(f.device_time_max_us, 350.75);
  EXPECT_DOUBLE_EQ(f.kernels_per_call, 6);
  ASSERT_EQ(f.kernels.size(), 2u);
  EXPECT_EQ(f.kernels[1].name, "Memcpy DtoD (Device -> Device)");
  EXPECT_DOUBLE_EQ(f.kernels[0].count_per_call, 2);
  EXPECT_DOUBLE_EQ(f.kernels[0].time_avg_us, 100.5);
  EXPECT_DOUBLE_EQ(f.kernels[0].time_min_us, 90.25);
  EXPECT_DOUBLE_EQ(f.kernels[0].time_max_us, 110.0);
  EXPECT_EQ(b.scopes[1].scope, "attn_bwd");
  EXPECT_DOUBLE_EQ(b.device_time_us(), 1021.25);
  EXPECT_DOUBLE_EQ(*b.peak_memory_bytes, *r.peak_memory_bytes);
  EXPECT_DOUBLE_EQ(*b.tflops, 123.4);
  ASSERT_EQ(b.launches.size(), 2u);
  EXPECT_EQ(b.launches[0].launch_api, "cuLaunchKernelEx");
  EXPECT_EQ(b.launches[0].grid[0], 132);
  EXPECT_EQ(b.launches[0].block[0], 384);
  EXPECT_EQ(b.launches[0].registers_per_thread, 168);
  EXPECT_EQ(b.launches[0].shared_memory_bytes, 200000);
  EXPECT_DOUBLE_EQ(*b.launches[0].est_occupancy_pct, 12.5);
  EXPECT_FALSE(b.launches[1].est_occupancy_pct);
  EXPECT_DOUBLE_EQ(b.launches[0].time_us, 50.25);
  ASSERT_TRUE(b.timing);
  EXPECT_DOUBLE_EQ(b.timing->median_us, 300.0);
  EXPECT_EQ(b.timing->reps, 5);
  EXPECT_EQ(b.timing->input_sets, 2);
  EXPECT_EQ(b.timing->clock, "cuda_event");
  EXPECT_DOUBLE_EQ(*b.profiler_overhead, 1.07);
  EXPECT_FALSE(b.output_finite);
  EXPECT_EQ(b.summary_file, r.summary_file);
}

TEST(SummaryReader, Fp8RoundTripsAsADenseForward) {
  RunRecord r = sample();
  r.problem.dtype = DType::FP8, r.problem.pass = Pass::fwd;
  const RunRecord b = read_summary(summary_json(r));
  EXPECT_EQ(b.problem.dtype, DType::FP8);
  EXPECT_EQ(b.problem.file_stem(), r.problem.file_stem());
  EXPECT_NE(r.problem.file_stem().find("_fp8_"), std::string::npos) << r.problem.file_stem();
  json backward = summary_json(r);
  backward["problem"]["pass"] = "bwd";
  EXPECT_NE(error_of(backward).find("field 'problem.pass': fp8 runs dense forward problems only"), std::string::npos)
      << error_of(backward);
  json paged = summary_json(r);
  paged["problem"]["page_size"] = 16;
  EXPECT_NE(error_of(paged).find("field 'problem.page_size'"), std::string::npos) << error_of(paged);
  // --fp8-rotate: in the stem and the file; absent in older files; never on other dtypes.
  EXPECT_FALSE(read_summary(summary_json(r)).problem.fp8_rotated);
  r.problem.fp8_rotated = true;
  const RunRecord rotated = read_summary(summary_json(r));
  EXPECT_TRUE(rotated.problem.fp8_rotated);
  EXPECT_EQ(rotated.problem.file_stem(), r.problem.file_stem());
  EXPECT_NE(r.problem.file_stem().find("_rot"), std::string::npos) << r.problem.file_stem();
  EXPECT_NE(r.problem.config_string().find("rotated"), std::string::npos) << r.problem.config_string();
  json bf16 = summary_json(r);
  bf16["problem"]["dtype"] = "bf16";
  EXPECT_NE(error_of(bf16).find("field 'problem.fp8_rotated': true for bf16 inputs"), std::string::npos)
      << error_of(bf16);
}

TEST(SummaryReader, AccuracyRoundTripsAndIsAbsentInOlderFiles) {
  RunRecord r = sample();
  r.problem.dtype = DType::FP8, r.problem.pass = Pass::fwd;
  r.accuracy = Accuracy{0.0125, r.problem.total_q() / 2, r.problem.total_q(), 0.03};
  const RunRecord b = read_summary(summary_json(r));
  ASSERT_TRUE(b.accuracy);
  EXPECT_DOUBLE_EQ(b.accuracy->rel_error, 0.0125);
  EXPECT_EQ(b.accuracy->rows, r.problem.total_q() / 2);
  EXPECT_EQ(b.accuracy->total_rows, r.problem.total_q());
  EXPECT_DOUBLE_EQ(*b.accuracy->input_quantisation_error, 0.03);
  json j = summary_json(r);
  j["headline"].erase("accuracy");
  EXPECT_FALSE(read_summary(j).accuracy) << "files from before the error column";
  json more = summary_json(r);
  more["headline"]["accuracy"]["rows_compared"] = r.problem.total_q() + 1;
  EXPECT_NE(error_of(more).find("field 'headline.accuracy.rows_compared'"), std::string::npos) << error_of(more);
  json total = summary_json(r);
  total["headline"]["accuracy"]["rows_total"] = 7;
  EXPECT_NE(error_of(total).find("field 'headline.accuracy.rows_total': 7 is not the problem's"), std::string::npos)
      << error_of(total);
  json no_quant = summary_json(r);
  no_quant["headline"]["accuracy"]["input_quantisation_error"] = nullptr;
  EXPECT_NE(error_of(no_quant).find("input_quantisation_error': null for fp8"), std::string::npos) << error_of(no_quant);
  json bf16 = summary_json(r);
  bf16["problem"]["dtype"] = "bf16";
  EXPECT_NE(error_of(bf16).find("input_quantisation_error': set for bf16"), std::string::npos) << error_of(bf16);
  json negative = summary_json(r);
  negative["headline"]["accuracy"]["rel_error_vs_fp64"] = -1;
  EXPECT_NE(error_of(negative).find("headline.accuracy.rel_error_vs_fp64"), std::string::npos);
}

TEST(SummaryReader, CpuRunNullsReadAsAbsent) {
  RunRecord r = sample();
  r.problem.device = "cpu";
  r.peak_memory_bytes.reset();
  r.tflops.reset();
  r.timing.reset();
  const RunRecord b = read_summary(summary_json(r));
  EXPECT_EQ(b.problem.device, "cpu");
  EXPECT_DOUBLE_EQ(b.scopes[0].cpu_time_avg_us, 12.5);
  EXPECT_FALSE(b.tflops);
  EXPECT_FALSE(b.peak_memory_bytes);
  EXPECT_FALSE(b.timing);
}

TEST(SummaryReader, WrongTypesNameTheField) {
  const json good = summary_json(sample());
  struct Case {
    const char* pointer;
    json value;
    const char* field;
  };
  const std::vector<Case> cases = {
      {"/variant", 3, "'variant'"},
      {"/headline/tflops", "fast", "'headline.tflops'"},
      {"/problem/batch", -1, "'problem.batch'"},
      {"/problem/batch", 1.5, "'problem.batch'"},
      {"/problem/seq_q", 1e30, "'problem.seq_q'"},
      {"/problem/heads_kv", 3, "'problem.heads_kv'"},
      {"/problem/mask", "sliding", "'problem.mask'"},
      {"/problem/pass", "fwd+fwd", "'problem.pass'"},
      {"/problem/head_dim", json(uint64_t(1) << 63), "'problem.head_dim'"},
      {"/problem/dtype", "fp12", "'problem.dtype'"},
      {"/problem/device", "tpu", "'problem.device'"},
      {"/ops/1/count", "ten", "'ops[1].count'"},
      {"/ops/0/device", "gpu", "'ops[0].device'"},
      {"/ops/2/cpu_time_total_us", -5.0, "'ops[2].cpu_time_total_us'"},
      {"/headline/scopes/0/kernels/1/name", nullptr, "'headline.scopes[0].kernels[1].name'"},
      {"/headline/scopes/1/calls", -1, "'headline.scopes[1].calls'"},
      {"/headline/scopes", json::array({1}), "'headline.scopes[0]'"},
      {"/headline", json::array(), "'headline'"},
      {"/launches/0/grid", json::array({1, 2}), "'launches[0].grid'"},
      {"/launches/0/est_occupancy_pct", 400.0, "'launches[0].est_occupancy_pct'"},
      {"/timing/median_us", "x", "'timing.median_us'"},
      {"/facts/mask", 1, "'facts.mask'"},
      {"/status", "great", "'status'"},
      {"/schema_version", kSummarySchemaVersion + 1, "'schema_version'"},
      {"/schema_version", "1", "'schema_version'"},
      {"/tool", "other", "'tool'"},
  };
  for (const Case& c : cases) {
    json j = good;
    j[json::json_pointer(c.pointer)] = c.value;
    const std::string e = error_of(j);
    EXPECT_TRUE(one_line(e)) << c.pointer << ": " << e;
    EXPECT_NE(e.find("s.json"), std::string::npos) << e;
    EXPECT_NE(e.find(c.field), std::string::npos) << c.pointer << ": " << e;
  }
}

TEST(SummaryReader, MissingFieldsAreNamed) {
  const json good = summary_json(sample());
  for (const char* pointer : {"/variant", "/problem", "/headline/scopes", "/headline/scopes/0/kernels/0/time_max_us",
                              "/ops", "/schema_version"}) {
    json j = good;
    const json::json_pointer p(pointer);
    j[p.parent_pointer()].erase(p.back());
    const std::string e = error_of(j);
    EXPECT_NE(e.find("missing"), std::string::npos) << pointer << ": " << e;
  }
  EXPECT_NE(error_of(json::array()).find("expected an object"), std::string::npos);
  EXPECT_NE(error_of(json(3)).find("expected an object"), std::string::npos);
}

TEST(SummaryReader, TruncatedDeepAndHugeTextThrow) {
  const std::string text = summary_json(sample()).dump(2);
  for (size_t cut : {size_t(0), size_t(1), text.size() / 3, text.size() - 2}) {
    const std::string e = error_of_text(text.substr(0, cut));
    EXPECT_TRUE(one_line(e)) << cut << ": " << e;
    EXPECT_NE(e.find("s.json"), std::string::npos);
  }
  EXPECT_NE(error_of_text(std::string(100000, '[') + std::string(100000, ']')).find("nested deeper"),
            std::string::npos);
  EXPECT_NE(error_of_text(std::string(kMaxSummaryBytes + 1, ' ')).find("larger than"), std::string::npos);
  EXPECT_NE(error_of_text("{\"a\": \"\xff\xfe\"}").find("not valid JSON"), std::string::npos);
}

TEST(SummaryReader, FilesPlainGzipMissingAndBombs) {
  const std::string d = attnprof::testing::make_temp_dir("reader");
  ASSERT_FALSE(d.empty());
  const std::string text = summary_json(sample()).dump(2);
  io::write_file_atomic(d + "/a.summary.json", text);
  io::write_file_atomic(d + "/a.summary.json.gz", io::gzip_compress(text));
  EXPECT_EQ(read_summary_file(d + "/a.summary.json").variant, "naive");
  EXPECT_EQ(read_summary_file(d + "/a.summary.json.gz").scopes.at(0).kernels.size(), 2u);

  auto error_of_file = [](const std::string& path) -> std::string {
    try {
      read_summary_file(path);
    } catch (const SummaryError& e) {
      return e.what();
    }
    return "";
  };
  std::string e = error_of_file(d + "/missing.json");
  EXPECT_NE(e.find("missing.json: cannot read"), std::string::npos) << e;
  e = error_of_file(d);
  EXPECT_NE(e.find("cannot read"), std::string::npos) << e;
  const std::string gz = io::gzip_compress(text);
  io::write_file_atomic(d + "/t.gz", gz.substr(0, gz.size() / 2));
  e = error_of_file(d + "/t.gz");
  EXPECT_NE(e.find("truncated gzip"), std::string::npos) << e;
  // 64 MiB of spaces compresses to ~64 KiB: refused while inflating.
  io::write_file_atomic(d + "/bomb.gz", io::gzip_compress(std::string(size_t(64) << 20, ' ')));
  e = error_of_file(d + "/bomb.gz");
  EXPECT_NE(e.find("expands past"), std::string::npos) << e;
  io::write_file_atomic(d + "/big.json", std::string(kMaxSummaryBytes + 10, ' '));
  e = error_of_file(d + "/big.json");
  EXPECT_NE(e.find("larger than"), std::string::npos) << e;
  attnprof::testing::remove_tree(d);
}

// Found by tests/fuzz/summary_reader.cpp: a number past double's range is
// nlohmann's out_of_range.406, not a parse_error, and escaped read_summary_text
// (`attnprof compare` exited 1 with nlohmann's raw message instead of 4).
TEST(SummaryReader, NumberOverflowIsASummaryError) {
  for (const char* text : {"{\"schema_version\": 1e999}", "[34.84516666e666664]", "{\"a\": -1e400}"}) {
    const std::string e = error_of_text(text);
    EXPECT_NE(e.find("s.json: not valid JSON (number overflow"), std::string::npos) << text << ": " << e;
    EXPECT_TRUE(one_line(e)) << e;
  }
}

// attnprof 0.1 wrote schema 1 (square problems, forward only); compare still
// reads those files, as the seed corpus's real CPU summary shows.
TEST(SummaryReader, ReadsSchemaOne) {
  const RunRecord r = read_summary_file(std::string(ATTNPROF_SOURCE_DIR) +
                                        "/tests/fuzz/corpus/summary_reader/naive_cpu.summary.json");
  EXPECT_EQ(r.variant, "naive");
  EXPECT_EQ(r.problem.heads_q, r.problem.heads_kv);
  EXPECT_EQ(r.problem.seq_q, r.problem.seq_kv);
  EXPECT_EQ(r.problem.pass, Pass::fwd);
  ASSERT_EQ(r.scopes.size(), 1u);
  EXPECT_EQ(r.scopes[0].scope, "attn_fwd");
  EXPECT_GT(r.scopes[0].calls, 0);
  EXPECT_GT(r.scopes[0].cpu_time_avg_us, 0.0);
  EXPECT_FALSE(r.rows.empty());

  json v1 = {{"schema_version", 1}, {"tool", "attnprof"}, {"variant", "sdpa-flash"}, {"description", ""},
             {"status", "ok"}, {"reason", ""},
             {"problem", {{"batch", 8}, {"heads", 16}, {"seq", 1024}, {"head_dim", 64}, {"dtype", "bf16"},
                          {"causal", true}, {"device", "cuda:0"}}},
             {"environment", {{"torch_version", "2.11.0"}, {"device_name", "NVIDIA H200"}, {"cuda_runtime", "13.0"},
                              {"attnprof_version", "0.1.0"}}},
             {"schedule", {{"warmup_iters", 3}, {"wait", 1}, {"warmup", 1}, {"active", 3}}},
             {"facts", json::object()}, {"warnings", json::array()},
             {"headline", {{"forwards_profiled", 3}, {"forward_cuda_time_avg_us", 94.0},
                           {"forward_cpu_time_avg_us", 82.9}, {"kernels_per_forward", 1},
                           {"kernels", {{{"name", "flash_fwd_kernel"}, {"count", 1}, {"time_us", 94.0}}}},
                           {"tflops", 183.0}, {"peak_memory_bytes", 17301504}}},
             {"files", {{"trace", "t"}, {"table", "t"}, {"summary", "s"}}}, {"ops", json::array()}};
  const RunRecord b = read_summary(v1);
  EXPECT_EQ(b.problem.file_stem(), "8_16_1024_64_bf16_causal");
  EXPECT_DOUBLE_EQ(b.device_time_us(), 94.0);
  EXPECT_DOUBLE_EQ(b.scopes[0].kernels.at(0).time_avg_us, 94.0);
  EXPECT_FALSE(b.timing);
  v1["problem"]["causal"] = "yes";
  EXPECT_NE(error_of(v1).find("'problem.mask'"), std::string::npos) << error_of(v1);
}

// Strings from a file reach the terminal: control characters (ANSI escapes,
// line breaks) come back as visible \xNN, so messages stay one line and raw.
TEST(SummaryReader, ControlCharactersAreMadeVisible) {
  RunRecord r = sample();
  r.description = "red \x1b[31mALERT\x1b[0m\nsecond line";
  r.facts = {{"k\r", "v\x07"}};
  const RunRecord b = read_summary(summary_json(r));
  EXPECT_EQ(b.description, "red \\x1b[31mALERT\\x1b[0m\\x0asecond line");
  EXPECT_EQ(b.facts.at(0).first, "k\\x0d");
  EXPECT_EQ(b.facts.at(0).second, "v\\x07");
  json j = summary_json(sample());
  j["status"] = "ok\x1b[2J\nwiped";
  const std::string e = error_of(j);
  EXPECT_TRUE(one_line(e)) << e;
  EXPECT_EQ(e.find('\x1b'), std::string::npos) << e;
}

// Schema 3: the counter pass, the device limits and each launch's occupancy
// figures come back; the derived figures are written for people and scripts.
TEST(SummaryReader, RoundTripKeepsTheCounterPass) {
  const RunRecord r = attnprof::testing::constructed_runs()[1];  // sdpa-math: analytic FLOPs too
  ASSERT_TRUE(r.counters && r.device_limits);
  const json j = summary_json(r);
  EXPECT_EQ(j["schema_version"], 3);
  const json& k3 = j["counters"]["kernels"][3];
  EXPECT_EQ(k3["derived"]["verdict"], "compute-bound: SM 72% busy");
  EXPECT_EQ(k3["derived"]["flops_basis"], "analytic");
  EXPECT_EQ(k3["derived"]["dram_pct_of"], "measured copy ceiling");
  EXPECT_EQ(k3["derived"]["bound"], "compute-bound");
  EXPECT_TRUE(k3["derived"]["tensor_family"] == "none");
  EXPECT_EQ(j["counters"]["ceilings"]["gemm_bf16_tflops"], 700.0);
  const RunRecord b = read_summary(j);
  ASSERT_TRUE(b.counters);
  const CounterPass& p = *b.counters;
  EXPECT_EQ(p.state, CounterPass::State::collected);
  EXPECT_EQ(p.route, "test data");
  EXPECT_DOUBLE_EQ(p.wall_s, 1.5);
  ASSERT_EQ(p.kernels.size(), r.counters->kernels.size());
  for (size_t i = 0; i < p.kernels.size(); ++i) {
    const KernelCounters &x = p.kernels[i], &y = r.counters->kernels[i];
    EXPECT_EQ(x.kernel, y.kernel);
    EXPECT_EQ(x.scope, y.scope);
    EXPECT_EQ(x.index, y.index);
    EXPECT_EQ(x.values.duration_ns, y.values.duration_ns);
    EXPECT_EQ(x.values.dram_read_bytes, y.values.dram_read_bytes);
    EXPECT_EQ(x.values.tensor_flops, y.values.tensor_flops);
    EXPECT_EQ(x.values.cuda_core_flops, y.values.cuda_core_flops);
    EXPECT_EQ(x.values.l2_hit_rate_pct, y.values.l2_hit_rate_pct);
    EXPECT_EQ(x.values.achieved_occupancy_pct, y.values.achieved_occupancy_pct);
    EXPECT_EQ(x.theoretical_occupancy_pct, y.theoretical_occupancy_pct);
    EXPECT_EQ(x.occupancy_limiter, y.occupancy_limiter);
    EXPECT_EQ(x.analytic_flops, y.analytic_flops);
    EXPECT_EQ(std::vector<int>(x.grid, x.grid + 3), std::vector<int>(y.grid, y.grid + 3));
    EXPECT_EQ(x.registers_per_thread, y.registers_per_thread);
    EXPECT_EQ(x.shared_memory_bytes, y.shared_memory_bytes);
    EXPECT_EQ(kernel_figures(x, p.ceilings).verdict.text, kernel_figures(y, r.counters->ceilings).verdict.text);
  }
  ASSERT_TRUE(p.ceilings);
  EXPECT_DOUBLE_EQ(p.ceilings->copy_gbps, 4000.0);
  EXPECT_EQ(p.ceilings->gemm_n, 8192);
  EXPECT_EQ(b.device_limits->sm_count, 132);
  EXPECT_EQ(b.device_limits->smem_per_block_optin, 232448);
  EXPECT_EQ(b.device_limits->smem_alloc_unit, 128);
  ASSERT_EQ(b.launches.size(), r.launches.size());
  EXPECT_EQ(b.launches[3].theoretical_occupancy_pct, r.launches[3].theoretical_occupancy_pct);
  EXPECT_EQ(b.launches[3].occupancy_limiter, "registers");
  EXPECT_EQ(b.launches[3].grid_occupancy_pct, r.launches[3].grid_occupancy_pct);
  // A pass that collected nothing keeps its reason; no pass at all reads as none.
  RunRecord u = sample();
  u.counters.emplace();
  u.counters->reason = "the problem runs on the CPU";
  const RunRecord ub = read_summary(summary_json(u));
  EXPECT_EQ(ub.counters->state, CounterPass::State::unavailable);
  EXPECT_EQ(ub.counters->reason, "the problem runs on the CPU");
  EXPECT_FALSE(ub.counters->ceilings);
  EXPECT_FALSE(read_summary(summary_json(sample())).counters);
  EXPECT_TRUE(summary_json(sample())["counters"].is_null());
}

TEST(SummaryReader, CounterFieldsAreValidated) {
  const json good = summary_json(attnprof::testing::constructed_runs()[0]);
  struct Case {
    const char* pointer;
    json value;
    const char* field;
  };
  for (const Case& c : std::vector<Case>{
           {"/counters/state", "done", "'counters.state'"},
           {"/counters/kernels/0/values/duration_ns", "x", "'counters.kernels[0].values.duration_ns'"},
           {"/counters/kernels/1/values/tensor_active_pct", 5000.0, "'counters.kernels[1].values.tensor_active_pct'"},
           {"/counters/kernels/0/grid", json::array({1}), "'counters.kernels[0].grid'"},
           {"/counters/ceilings/copy_gbps", -1.0, "'counters.ceilings.copy_gbps'"},
           {"/counters/kernels", json::object(), "'counters.kernels'"},
           {"/device_limits/sm_count", -1, "'device_limits.sm_count'"},
           {"/launches/0/theoretical_occupancy_pct", 101.0, "'launches[0].theoretical_occupancy_pct'"},
       }) {
    json j = good;
    j[json::json_pointer(c.pointer)] = c.value;
    const std::string e = error_of(j);
    EXPECT_TRUE(one_line(e)) << c.pointer << ": " << e;
    EXPECT_NE(e.find(c.field), std::string::npos) << c.pointer << ": " << e;
  }
  json j = good;
  j["counters"]["kernels"][0]["values"].erase("duration_ns");
  EXPECT_NE(error_of(j).find("'counters.kernels[0].values.duration_ns': missing"), std::string::npos) << error_of(j);
}

// Schema 2 (attnprof before the counter pass): a real CPU summary of that
// version, and a CUDA one with launches, read with no counters, no device
// limits and no occupancy figures.
TEST(SummaryReader, ReadsSchemaTwo) {
  const RunRecord r =
      read_summary_file(std::string(ATTNPROF_SOURCE_DIR) + "/tests/data/summaries/naive_cpu_schema2.summary.json");
  EXPECT_EQ(r.variant, "naive");
  EXPECT_FALSE(r.counters);
  EXPECT_FALSE(r.device_limits);
  EXPECT_TRUE(r.roofline_file.empty());
  EXPECT_FALSE(r.rows.empty());
  json v2 = summary_json(sample());
  v2["schema_version"] = 2;
  for (const char* key : {"counters", "device_limits"}) v2.erase(key);
  v2["files"].erase("roofline");
  for (json& l : v2["launches"])
    for (const char* key : {"theoretical_occupancy_pct", "occupancy_limiter", "grid_occupancy_pct"}) l.erase(key);
  const RunRecord b = read_summary(v2);
  ASSERT_EQ(b.launches.size(), 2u);
  EXPECT_FALSE(b.launches[0].theoretical_occupancy_pct);
  EXPECT_EQ(b.launches[0].occupancy_limiter, "");
  EXPECT_DOUBLE_EQ(*b.launches[0].est_occupancy_pct, 12.5) << "CUPTI's figure stays";
  EXPECT_FALSE(b.counters);
  // The same file claiming schema 3 lacks the new fields: named.
  v2["schema_version"] = 3;
  EXPECT_NE(error_of(v2).find("'launches[0].theoretical_occupancy_pct': missing"), std::string::npos) << error_of(v2);
}

// A variable-length batch's lengths survive the round trip (and name the same
// files); a file without them reads as equal lengths; lengths that do not
// describe the batch are refused with the field named, never indexed past.
TEST(SummaryReader, SeqlensRoundTripAndAreChecked) {
  RunRecord r = sample();
  r.problem.pass = Pass::fwd;
  r.problem.batch = 4, r.problem.seqlens = {1, 1024, 77, 300}, r.problem.seq_q = r.problem.seq_kv = 1024;
  const RunRecord b = read_summary(summary_json(r));
  EXPECT_EQ(b.problem.seqlens, r.problem.seqlens);
  EXPECT_EQ(b.problem.file_stem(), r.problem.file_stem());
  EXPECT_DOUBLE_EQ(b.problem.flops(), r.problem.flops());
  json j = summary_json(r);
  EXPECT_EQ(j["problem"]["seqlens"], json({1, 1024, 77, 300}));
  j["problem"].erase("seqlens");
  EXPECT_TRUE(read_summary(j).problem.seqlens.empty()) << "older files: equal lengths";
  const auto with = [&](json lengths, int64_t batch, int64_t seq_q) {
    json k = summary_json(r);
    k["problem"]["seqlens"] = std::move(lengths);
    k["problem"]["batch"] = batch;
    k["problem"]["seq_q"] = seq_q;
    return error_of(k);
  };
  EXPECT_NE(with({1, 1024, 77}, 4, 1024).find("field 'problem.seqlens': 3 lengths for a batch of 4"), std::string::npos)
      << with({1, 1024, 77}, 4, 1024);
  EXPECT_NE(with({1, 1000, 77, 3}, 4, 1024).find("the longest is 1000, not seq_kv 1024"), std::string::npos);
  EXPECT_NE(with({8, 1024, 77, 300}, 4, 16).find("field 'problem.seq_q': 16 is more than the shortest sequence (8)"),
            std::string::npos);
  EXPECT_NE(with({0, 1024, 77, 300}, 4, 1024).find("problem.seqlens[0]"), std::string::npos);
  EXPECT_NE(with({"a", 1024, 77, 300}, 4, 1024).find("expected an integer"), std::string::npos);
  EXPECT_NE(with(json::object(), 4, 1024).find("problem.seqlens"), std::string::npos);
  EXPECT_NE(with(json(std::vector<int>(5000, 1024)), 5000, 1024).find("more than 4096"), std::string::npos);
  for (const auto& e : {with({1, 1024, 77}, 4, 1024), with({0, 1024, 77, 300}, 4, 1024)}) EXPECT_TRUE(one_line(e)) << e;
  // Combinations attnprof never writes: lengths with pages, lengths with a backward.
  json paged = summary_json(r);
  paged["problem"]["page_size"] = 16;
  EXPECT_NE(error_of(paged).find("field 'problem.page_size': 16 with seqlens"), std::string::npos) << error_of(paged);
  json backward = summary_json(r);
  backward["problem"]["pass"] = "bwd";
  EXPECT_NE(error_of(backward).find("field 'problem.pass': bwd with seqlens"), std::string::npos) << error_of(backward);
  // --varlen-layout padded round-trips (absent in older files: packed where a variant can); never without lengths.
  r.problem.varlen_padded = true;
  const RunRecord padded = read_summary(summary_json(r));
  EXPECT_TRUE(padded.problem.varlen_padded);
  EXPECT_EQ(padded.problem.file_stem(), r.problem.file_stem());
  EXPECT_FALSE(read_summary(j).problem.varlen_padded);
  json equal = summary_json(r);
  equal["problem"].erase("seqlens");
  equal["problem"]["batch"] = 4;
  EXPECT_NE(error_of(equal).find("field 'problem.varlen_padded': true without seqlens"), std::string::npos)
      << error_of(equal);
}
