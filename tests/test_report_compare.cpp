// Before/after diffs on hand-built RunRecords: ratios, n/a paths, op matching
// by (name, device), directory pairing; written tables parsed back.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "attnprof/io/files.h"
#include "attnprof/report/compare.h"
#include "attnprof/report/summary.h"
#include "test_util.h"

using namespace attnprof;
using namespace attnprof::report;

namespace {

OpStats op(const std::string& name, EventDevice dev, int64_t count, int64_t self_cpu_ns, int64_t self_dev_ns) {
  OpStats s;
  s.name = name;
  s.device = dev;
  s.count = count;
  s.self_cpu_time_total_ns = self_cpu_ns;
  s.cpu_time_total_ns = self_cpu_ns;
  s.self_device_time_total_ns = self_dev_ns;
  s.device_time_total_ns = self_dev_ns;
  return s;
}

RunRecord cuda_run(double gpu_us, double cpu_us) {
  RunRecord r;
  r.variant = "naive";
  r.problem.device = "cuda:0";
  r.env.device_name = "NVIDIA H200";
  ScopeStats s;
  s.scope = kForwardScope;
  s.calls = 2;
  s.device_time_avg_us = gpu_us;
  s.cpu_time_avg_us = cpu_us;
  s.kernels_per_call = 6;
  r.scopes = {s};
  r.tflops = 100.0;
  r.peak_memory_bytes = 1024.0 * 1024 * 1024;
  r.timing = EventTiming{10, 5, 1, gpu_us * 0.9, 0, 0, "cuda_event"};
  r.rows = {op("aten::bmm", EventDevice::Cpu, 4, 40000, 0), op("gemm_kernel", EventDevice::Cuda, 4, 0, 800000),
            op("aten::masked_fill", EventDevice::Cpu, 2, 10000, 0)};
  return r;
}

const MetricDiff& metric(const Comparison& c, const std::string& name) {
  for (const MetricDiff& m : c.headline)
    if (m.metric == name) return m;
  throw std::runtime_error("no metric " + name);
}

const OpDiff& op_diff(const Comparison& c, const std::string& name) {
  for (const OpDiff& d : c.ops)
    if (d.name == name) return d;
  throw std::runtime_error("no op " + name);
}

}  // namespace

TEST(Compare, HeadlineRatiosAreAfterOverBefore) {
  RunRecord a = cuda_run(1000, 200), b = cuda_run(250, 100);
  b.scopes[0].kernels_per_call = 1;
  b.tflops = 400.0;
  b.peak_memory_bytes.reset();
  a.accuracy = Accuracy{0.004, 1, 1, std::nullopt}, b.accuracy = Accuracy{0.002, 1, 1, std::nullopt};
  const Comparison c = compare_runs(a, b, "before", "after");
  EXPECT_DOUBLE_EQ(*metric(c, "forward GPU time (profiled)").ratio(), 0.25);
  EXPECT_DOUBLE_EQ(*metric(c, "forward GPU time (event median)").ratio(), 0.25);
  EXPECT_DOUBLE_EQ(*metric(c, "forward CPU time").ratio(), 0.5);
  EXPECT_DOUBLE_EQ(*metric(c, "kernels per forward").ratio(), 1.0 / 6.0);
  EXPECT_DOUBLE_EQ(*metric(c, "TFLOP/s").ratio(), 4.0);
  EXPECT_FALSE(metric(c, "peak memory").ratio());  // missing on one side
  EXPECT_DOUBLE_EQ(*metric(c, "error vs fp64").ratio(), 0.5);
  EXPECT_TRUE(c.notes.empty());

  const Table t = headline_table(c);
  ASSERT_EQ(t.columns.size(), 4u);
  bool saw = false;
  for (const auto& row : t.rows)
    if (display(t, 0, row[0]) == "peak memory") {
      saw = true;
      EXPECT_EQ(display(t, 1, row[1]), "1.00 GiB");
      EXPECT_EQ(display(t, 2, row[2]), "n/a");
      EXPECT_EQ(display(t, 3, row[3]), "n/a");
    }
  EXPECT_TRUE(saw);
  EXPECT_EQ(format_ratio(0.25), "0.25x");
  EXPECT_EQ(format_ratio(std::nullopt), "n/a");
}

TEST(Compare, CpuRunsHaveNoGpuFiguresAndZeroBaseIsNa) {
  RunRecord a = cuda_run(0, 0), b = cuda_run(0, 50);
  a.problem.device = b.problem.device = "cpu";
  const Comparison c = compare_runs(a, b);
  EXPECT_FALSE(metric(c, "forward GPU time (profiled)").a);
  EXPECT_FALSE(metric(c, "forward GPU time (event median)").b);
  EXPECT_FALSE(metric(c, "kernels per forward").a);
  EXPECT_FALSE(metric(c, "forward CPU time").ratio());  // A is 0
}

TEST(Compare, OpsMatchByNameAndDeviceAndMarkOneSided) {
  RunRecord a = cuda_run(1000, 200), b = cuda_run(500, 200);
  b.rows = {op("aten::bmm", EventDevice::Cpu, 4, 20000, 0), op("gemm_kernel", EventDevice::Cuda, 4, 0, 200000),
            op("flash_fwd", EventDevice::Cuda, 2, 0, 900000),
            // Same name, other device: a different row.
            op("aten::masked_fill", EventDevice::Cuda, 2, 0, 1000)};
  const Comparison c = compare_runs(a, b);
  EXPECT_EQ(c.ops.size(), 5u);
  const OpDiff& bmm = op_diff(c, "aten::bmm");
  EXPECT_DOUBLE_EQ(*bmm.self_cpu_us_a, 20.0);  // 40 us over 2 forwards
  EXPECT_DOUBLE_EQ(*bmm.self_cpu_us_b, 10.0);
  EXPECT_DOUBLE_EQ(*bmm.calls_a, 2.0);
  EXPECT_EQ(bmm.note, "");
  EXPECT_EQ(op_diff(c, "flash_fwd").note, "only in B");
  EXPECT_FALSE(op_diff(c, "flash_fwd").device_us_a);
  int masked = 0;
  for (const OpDiff& d : c.ops)
    if (d.name == "aten::masked_fill") {
      ++masked;
      EXPECT_EQ(d.note, d.device == "cpu" ? "only in A" : "only in B");
    }
  EXPECT_EQ(masked, 2);
  // Largest device time on either side first.
  EXPECT_EQ(c.ops.front().name, "flash_fwd");
  const Table t = ops_table(c);
  EXPECT_EQ(t.rows.size(), 5u);
  for (const auto& row : t.rows) EXPECT_EQ(row.size(), t.columns.size());
}

TEST(Compare, DifferentProblemsAndStatusesAreNoted) {
  RunRecord a = cuda_run(1, 1), b = cuda_run(1, 1);
  b.problem.seq_q = b.problem.seq_kv = 2048;
  b.variant = "sdpa-flash";
  b.status = Status::skipped;
  b.reason = "no flash here";
  const Comparison c = compare_runs(a, b);
  ASSERT_EQ(c.notes.size(), 3u);
  EXPECT_NE(c.notes[0].find("different problems"), std::string::npos);
  EXPECT_NE(c.notes[1].find("different variants"), std::string::npos);
  EXPECT_NE(c.notes[2].find("no flash here"), std::string::npos);
  EXPECT_FALSE(metric(c, "forward GPU time (profiled)").b);
}

// Two variable-length batches of one shape line (count, shortest, longest)
// but other lengths are different problems too: the note names the lengths.
TEST(Compare, OtherSequenceLengthsAreADifferentProblem) {
  RunRecord a = cuda_run(1, 1), b = cuda_run(1, 1);
  a.problem.batch = b.problem.batch = 3;
  a.problem.seq_q = a.problem.seq_kv = b.problem.seq_q = b.problem.seq_kv = 40;
  a.problem.seqlens = {5, 40, 1};
  b.problem.seqlens = {6, 40, 1};
  ASSERT_EQ(a.problem.config_string(), b.problem.config_string());
  const Comparison c = compare_runs(a, b);
  ASSERT_EQ(c.notes.size(), 1u);
  EXPECT_NE(c.notes[0].find("with other sequence lengths (A 5,40,1, B 6,40,1)"), std::string::npos) << c.notes[0];
  b.problem.seqlens = a.problem.seqlens;
  EXPECT_TRUE(compare_runs(a, b).notes.empty());
}

TEST(Compare, BackwardRunsNameTheirMetricsAndPerStepOps) {
  RunRecord a = cuda_run(1000, 200), b = cuda_run(500, 100);
  a.problem.pass = b.problem.pass = Pass::bwd;
  const Comparison c = compare_runs(a, b);
  EXPECT_DOUBLE_EQ(*metric(c, "backward GPU time (profiled)").ratio(), 0.5);
  EXPECT_EQ(c.per, "step");
  EXPECT_EQ(ops_table(c).columns[2].label, "calls/step A");
  b.problem.pass = Pass::fwd;
  EXPECT_NE(compare_runs(a, b).notes.at(0).find("different problems"), std::string::npos);
}

TEST(Compare, DirectoriesPairByRelativePathAndTablesParseBack) {
  const std::string root = attnprof::testing::make_temp_dir("compare");
  ASSERT_FALSE(root.empty());
  const std::string a = root + "/a", b = root + "/b";
  RunRecord ra = cuda_run(1000, 10), rb = cuda_run(500, 10);
  for (const auto& [dir, r] : {std::pair{a, ra}, std::pair{b, rb}}) {
    io::ensure_writable_dir(dir + "/naive");
    io::write_file_atomic(dir + "/naive/1_2_3_4_bf16.summary.json", summary_json(r).dump());
  }
  io::ensure_writable_dir(a + "/inplace");
  io::write_file_atomic(a + "/inplace/x.summary.json", summary_json(ra).dump());
  io::write_file_atomic(b + "/naive/notes.txt", "not a summary");
  const DirectoryComparison d = compare_directories(a, b);
  ASSERT_EQ(d.pairs.size(), 1u);
  EXPECT_EQ(d.pairs[0].relative_path, "naive/1_2_3_4_bf16.summary.json");
  EXPECT_EQ(d.only_in_a, std::vector<std::string>{"inplace/x.summary.json"});
  EXPECT_TRUE(d.only_in_b.empty());
  EXPECT_DOUBLE_EQ(*metric(d.pairs[0].comparison, "forward GPU time (profiled)").ratio(), 0.5);

  // CSV: one long table, parse the header and the GPU-time row back.
  const std::string csv = to_csv(comparison_long_table(d.pairs));
  EXPECT_EQ(csv.substr(0, csv.find('\n')), "summary,section,name,device,metric,unit,a,b,ratio_b_over_a,note");
  EXPECT_NE(csv.find("naive/1_2_3_4_bf16.summary.json,headline,,,forward GPU time (profiled),us,1000,500,0.5,"),
            std::string::npos)
      << csv;
  const nlohmann::json j = to_json(comparison_long_table(d.pairs));
  ASSERT_TRUE(j.is_array());
  bool found = false;
  for (const auto& row : j)
    if (row["name"] == "gemm_kernel" && row["metric"] == "self device time per forward") {
      found = true;
      EXPECT_EQ(row["unit"], "us");
      EXPECT_DOUBLE_EQ(row["a"].get<double>(), 400.0);
      EXPECT_DOUBLE_EQ(row["ratio_b_over_a"].get<double>(), 1.0);
    }
  EXPECT_TRUE(found);
  const std::string text = comparison_text(d.pairs, d.only_in_a, d.only_in_b);
  EXPECT_NE(text.find("only in A: inplace/x.summary.json"), std::string::npos);
  const std::string md = comparison_markdown(d.pairs, d.only_in_a, d.only_in_b);
  EXPECT_NE(md.find("| metric"), std::string::npos);

  // A malformed summary is named in the error.
  io::write_file_atomic(b + "/inplace_bad.summary.json", "{");
  io::ensure_writable_dir(b + "/inplace");
  io::write_file_atomic(b + "/inplace/x.summary.json", "{\"schema_version\": 1}");
  try {
    compare_directories(a, b);
    FAIL() << "expected SummaryError";
  } catch (const SummaryError& e) {
    EXPECT_NE(std::string(e.what()).find("inplace/x.summary.json"), std::string::npos) << e.what();
  }
  EXPECT_THROW(compare_directories(root + "/missing", b), SummaryError);
  attnprof::testing::remove_tree(root);
}
