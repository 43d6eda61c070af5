// --counters as a user meets it without a GPU: the run goes on, one note says
// why there are no counters (once per run, not per variant), exit 0, the
// summaries record the reason, no calibration and no roofline. With a GPU the
// same runs write the counters block, the roofline and the calibration cache.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <torch/cuda.h>

#include "attnprof/io/files.h"
#include "test_util.h"

using namespace attnprof::testing;

namespace {

const char* kTiny = "--batch 1 --heads 2 --seq 32 --head-dim 16 --device cpu -q --counters";
const char* kCpuNote =
    "note: --counters: no hardware counters: the problem runs on the CPU; hardware counters need a CUDA device";

int count(const std::string& hay, const std::string& needle) {
  int n = 0;
  for (size_t at = hay.find(needle); at != std::string::npos; at = hay.find(needle, at + 1)) ++n;
  return n;
}

nlohmann::json summary(const std::string& dir, const std::string& variant, const std::string& stem) {
  return nlohmann::json::parse(attnprof::io::read_file(dir + "/" + variant + "/" + stem + ".summary.json"));
}

}  // namespace

TEST(CountersCli, FlagIsListedForRunsAndSweeps) {
  for (const char* args : {"--help", "sweep --help"}) {
    const CliResult r = run_cli(args);
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("--counters"), std::string::npos) << args;
  }
}

TEST(CountersCli, OnTheCpuANoteOnceAndExitZero) {
  const std::string d = make_temp_dir("counters_cpu");
  ASSERT_FALSE(d.empty());
  const CliResult r = run_cli(std::string(kTiny) + " --variant naive,inplace --out " + d, "XDG_CACHE_HOME=" + d + "/cache");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(count(r.err, kCpuNote), 1) << "once per run, not per variant: " << r.err;
  for (const char* v : {"naive", "inplace"}) {
    const nlohmann::json s = summary(d, v, "1_2_32_16_bf16_causal");
    EXPECT_EQ(s["status"], "ok");
    EXPECT_EQ(s["counters"]["state"], "unavailable");
    EXPECT_EQ(s["counters"]["reason"], "the problem runs on the CPU; hardware counters need a CUDA device");
    EXPECT_TRUE(s["counters"]["kernels"].empty());
    EXPECT_EQ(s["files"]["roofline"], "");
  }
  // The per-variant text and the at-a-glance say it too; no roofline, no calibration.
  EXPECT_NE(r.out.find("hardware counters     : unavailable: the problem runs on the CPU"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("verdict"), std::string::npos) << "the counter columns, filled with the state: " << r.out;
  EXPECT_FALSE(attnprof::io::path_exists(d + "/compare/1_2_32_16_bf16_causal.roofline.svg"));
  EXPECT_FALSE(attnprof::io::path_exists(d + "/cache")) << "no calibration without a counter pass";
  const nlohmann::json glance = nlohmann::json::parse(attnprof::io::read_file(d + "/compare/1_2_32_16_bf16_causal.json"));
  EXPECT_EQ(glance[0]["verdict"], "unavailable");
  // Without --counters: no counters object, no columns.
  const CliResult plain = run_cli("--batch 1 --heads 2 --seq 32 --head-dim 16 --device cpu -q --variant naive --out " + d);
  ASSERT_EQ(plain.rc, 0) << plain.err;
  EXPECT_TRUE(plain.err.empty()) << plain.err;
  EXPECT_TRUE(summary(d, "naive", "1_2_32_16_bf16_causal")["counters"].is_null());
  remove_tree(d);
}

TEST(CountersCli, SweepTakesItToo) {
  const std::string d = make_temp_dir("counters_sweep");
  ASSERT_FALSE(d.empty());
  const CliResult r = run_cli("sweep --seq 16,32 --head-dim 16 --batch 1 --heads 2 --variant naive --device cpu -q "
                              "--counters --out " + d);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(count(r.err, kCpuNote), 1) << r.err;
  EXPECT_EQ(summary(d, "naive", "1_2_16_16_bf16_causal")["counters"]["state"], "unavailable");
  remove_tree(d);
}

// On the GPU machine: the counter pass runs after the timing, the record says
// what it found. While the collector reports unavailable (no permission, or a
// build without it), the run still succeeds with the note; once it collects,
// the counters, verdicts, roofline and the calibration cache are all there.
TEST(CountersCli, OnTheGpuCountersRooflineAndCalibrationCache) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: the counter pass needs a GPU";
  const std::string d = make_temp_dir("counters_gpu");
  ASSERT_FALSE(d.empty());
  const std::string env = "XDG_CACHE_HOME=" + d + "/cache";
  const std::string args = "--variant naive,sdpa-flash --batch 2 --heads 4 --seq 512 --head-dim 64 -q --counters --out " + d;
  const CliResult r = run_cli(args, env, 600);
  ASSERT_EQ(r.rc, 0) << r.err;
  const nlohmann::json s = summary(d, "naive", "2_4_512_64_bf16_causal");
  ASSERT_TRUE(s["counters"].is_object());
  if (s["counters"]["state"] != "collected") {
    EXPECT_NE(r.err.find("note: --counters: no hardware counters: "), std::string::npos) << r.err;
    GTEST_SKIP() << "counter pass " << s["counters"]["state"] << ": " << s["counters"]["reason"];
  }
  EXPECT_GE(s["counters"]["kernels"].size(), 4u);
  for (const auto& k : s["counters"]["kernels"]) {
    EXPECT_GT(k["values"]["duration_ns"].get<double>(), 0.0) << k["kernel"];
    EXPECT_FALSE(k["derived"]["verdict"].get<std::string>().empty());
    EXPECT_GT(k["theoretical_occupancy_pct"].get<double>(), 0.0) << k["kernel"];
  }
  const auto& c = s["counters"]["ceilings"];
  ASSERT_TRUE(c.is_object());
  EXPECT_GT(c["gemm_bf16_tflops"].get<double>(), 0.0);
  EXPECT_GT(c["copy_gbps"].get<double>(), 0.0);
  EXPECT_EQ(c["gemm_n"], 8192);
  EXPECT_TRUE(attnprof::io::path_exists(d + "/naive/2_4_512_64_bf16_causal.roofline.svg"));
  EXPECT_TRUE(attnprof::io::path_exists(d + "/compare/2_4_512_64_bf16_causal.roofline.svg"));
  EXPECT_NE(r.out.find("ceilings (measured)"), std::string::npos);
  // The cache: one file, read by the next run instead of measuring again.
  const std::vector<std::string> cached = list_tree(d + "/cache/attnprof/ceilings");
  ASSERT_EQ(cached.size(), 2u) << "the directory and one file";
  const CliResult again = run_cli(args, env, 600);
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.out.find("cached, measured"), std::string::npos) << again.out;
  remove_tree(d);
}
