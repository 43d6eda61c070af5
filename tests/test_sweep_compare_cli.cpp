// `attnprof sweep` and `attnprof compare` as a user meets them: the real
// executable on tiny CPU shapes; exit codes, one-line errors, files parsed back.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>

#include <cstdlib>
#include <set>

#include "attnprof/io/files.h"
#include "test_util.h"

using namespace attnprof::testing;

namespace {

using Result = attnprof::testing::CliResult;

int count(const std::string& s, const std::string& needle) {
  int n = 0;
  for (size_t p = s.find(needle); p != std::string::npos; p = s.find(needle, p + 1)) ++n;
  return n;
}

const char* kFast = "--batch 1 --heads 2 --device cpu --warmup-iters 0 --wait 0 --warmup 0 --active 1";

}  // namespace

TEST(SweepCli, PrintsCountWritesCsvAndSvgs) {
  const std::string d = make_temp_dir("sweep");
  const Result r = run_cli(std::string("sweep --seq 16,32 --head-dim 16 --variant naive,sdpa-math ") + kFast +
                           " --out " + d);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("sweep: 4 configurations", 0), 0u) << r.out;
  EXPECT_NE(r.err.find("[4/4] sdpa-math"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("elapsed"), std::string::npos);
  EXPECT_NE(r.err.find("left"), std::string::npos);

  const std::vector<std::string> csv = split_lines(attnprof::io::read_file(d + "/sweep/sweep.csv"));
  ASSERT_EQ(csv.size(), 5u);
  EXPECT_EQ(csv[0],
            "variant,batch,heads_q,heads_kv,seq_q,seq_kv,head_dim,dtype,mask,window,page_size,pass,status,reason,"
            "gpu_time_us,"
            "event_median_us,cpu_time_us,tflops,kernels_per_step,peak_memory_bytes,rel_error_vs_fp64");
  EXPECT_EQ(csv[1].rfind("naive,1,2,2,16,16,16,bf16,causal,0,0,fwd,ok,", 0), 0u) << csv[1];
  EXPECT_EQ(csv[4].rfind("sdpa-math,1,2,2,32,32,16,bf16,causal,0,0,fwd,ok,", 0), 0u) << csv[4];
  const nlohmann::json j = nlohmann::json::parse(attnprof::io::read_file(d + "/sweep/sweep.json"));
  ASSERT_EQ(j.size(), 4u);
  EXPECT_GT(j[0]["cpu_time_us"].get<double>(), 0.0);
  EXPECT_EQ(j[0]["seq_kv"].get<double>(), 16.0);
  EXPECT_GT(j[0]["rel_error_vs_fp64"].get<double>(), 0.0);  // bf16 against float64
  EXPECT_LT(j[0]["rel_error_vs_fp64"].get<double>(), 2e-2);
  EXPECT_TRUE(j[0]["gpu_time_us"].is_null());

  for (const char* svg : {"/sweep/cpu_time_us.svg", "/sweep/tflops.svg"}) {
    const std::string s = attnprof::io::read_file(d + svg);
    EXPECT_NE(s.find("<svg"), std::string::npos) << svg;
    EXPECT_EQ(count(s, "<path"), 2) << svg;  // one line per variant
    EXPECT_NE(s.find("sequence length"), std::string::npos);
    EXPECT_NE(s.find("naive"), std::string::npos);
    EXPECT_NE(s.find("sdpa-math"), std::string::npos);
  }
  EXPECT_FALSE(path_exists(d + "/sweep/gpu_time_us.svg"));  // CPU run
  EXPECT_TRUE(path_exists(d + "/naive/1_2_16_16_bf16_causal.summary.json"));
  remove_tree(d);
}

TEST(SweepCli, SeveralHeadDimsGetOnePlotEach) {
  const std::string d = make_temp_dir("sweep");
  const Result r = run_cli(std::string("sweep --seq 16 --head-dim 16,32 --variant naive ") + kFast + " --out " + d);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.out.rfind("sweep: 2 configurations", 0), 0u) << r.out;
  for (const char* f : {"cpu_time_us_d16.svg", "cpu_time_us_d32.svg", "tflops_d16.svg", "tflops_d32.svg"})
    EXPECT_TRUE(path_exists(d + "/sweep/" + f)) << f;
  remove_tree(d);
}

// --window reaches every point: the windowed ones name it in the table and
// their files; a point the window covers whole runs (and is named) causal.
TEST(SweepCli, WindowAppliesToEveryPoint) {
  const std::string d = make_temp_dir("sweep");
  const Result r = run_cli(std::string("sweep --seq 16,32 --head-dim 16 --window 24 --variant naive ") + kFast +
                           " --out " + d);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::vector<std::string> csv = split_lines(attnprof::io::read_file(d + "/sweep/sweep.csv"));
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[1].rfind("naive,1,2,2,16,16,16,bf16,causal,0,0,fwd,ok,", 0), 0u) << csv[1];
  EXPECT_EQ(csv[2].rfind("naive,1,2,2,32,32,16,bf16,causal,24,0,fwd,ok,", 0), 0u) << csv[2];
  EXPECT_TRUE(path_exists(d + "/naive/1_2_32_16_bf16_causal_w24.summary.json"));
  const Result bad = run_cli(std::string("sweep --seq 16 --head-dim 16 --window 4 --no-causal --variant naive ") +
                             kFast + " --out " + d);
  EXPECT_EQ(bad.rc, 2);
  EXPECT_NE(bad.err.find("--window 4 needs the causal mask"), std::string::npos) << bad.err;
}

// --page-size reaches every point (a paged cache, gathered by naive); a
// backward point is skipped as not a valid problem, with the reason.
TEST(SweepCli, PageSizeAppliesToEveryPoint) {
  const std::string d = make_temp_dir("sweep");
  const Result r = run_cli(std::string("sweep --seq 16,40 --head-dim 16 --page-size 16 --pass fwd,bwd "
                                       "--variant naive ") + kFast + " --out " + d);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::vector<std::string> csv = split_lines(attnprof::io::read_file(d + "/sweep/sweep.csv"));
  ASSERT_EQ(csv.size(), 5u);
  EXPECT_EQ(csv[1].rfind("naive,1,2,2,16,16,16,bf16,causal,0,16,fwd,ok,", 0), 0u) << csv[1];
  EXPECT_NE(csv[3].find(",bwd,skipped,\"not a valid problem: --page-size 16 (a paged KV cache) is"), std::string::npos)
      << csv[3];
  EXPECT_TRUE(path_exists(d + "/naive/1_2_40_16_bf16_causal_p16.summary.json"));
  // Plots of the points that ran, their titles naming the pages; none for the backward, of which none ran.
  EXPECT_NE(attnprof::io::read_file(d + "/sweep/cpu_time_us_fwd.svg").find("causal, paged 16"), std::string::npos);
  EXPECT_FALSE(path_exists(d + "/sweep/cpu_time_us_bwd.svg"));
  remove_tree(d);
}

TEST(SweepCli, PredictedTooLargeIsSkippedWithReason) {
  const std::string d = make_temp_dir("sweep");
  const Result r = run_cli(std::string("sweep --seq 16,2000000 --head-dim 16 --variant naive ") + kFast + " --out " + d);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::vector<std::string> csv = split_lines(attnprof::io::read_file(d + "/sweep/sweep.csv"));
  ASSERT_EQ(csv.size(), 3u);
  EXPECT_EQ(csv[1].rfind("naive,1,2,2,16,16,16,bf16,causal,0,0,fwd,ok,", 0), 0u) << csv[1];
  EXPECT_EQ(csv[2].rfind("naive,1,2,2,2000000,2000000,16,bf16,causal,0,0,fwd,skipped,\"needs ~", 0), 0u) << csv[2];
  EXPECT_NE(csv[2].find("TiB (predicted)"), std::string::npos) << csv[2];
  EXPECT_NE(r.err.find("skipped: needs ~"), std::string::npos) << r.err;
  EXPECT_FALSE(path_exists(d + "/naive/1_2_2000000_16_bf16_causal.summary.json"));
  remove_tree(d);
}

TEST(SweepCli, BadAxesAreUsageErrors) {
  for (const char* args : {"sweep --seq 0", "sweep --seq 16,abc", "sweep --dtype bf16,fp12", "sweep --variant nave",
                           "sweep --head-dim -4", "sweep --device tpu"}) {
    const Result r = run_cli(args);
    EXPECT_EQ(r.rc, 2) << args << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << args << ": " << r.err;
  }
}

TEST(CompareCli, TwoRealRunsFilesAndDirectories) {
  const std::string d = make_temp_dir("compare");
  for (const char* sub : {"/a", "/b"}) {
    const Result r = run_cli(std::string("--variant naive --seq 32 --head-dim 16 ") + kFast + " --out " + d + sub);
    ASSERT_EQ(r.rc, 0) << r.err;
  }
  const std::string a = d + "/a/naive/1_2_32_16_bf16_causal.summary.json", b = d + "/b/naive/1_2_32_16_bf16_causal.summary.json";
  Result r = run_cli("compare " + a + " " + b + " --csv " + d + "/diff.csv --md " + d + "/diff.md");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("forward CPU time"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("aten::softmax"), std::string::npos) << r.out;
  const std::vector<std::string> csv = split_lines(attnprof::io::read_file(d + "/diff.csv"));
  ASSERT_GT(csv.size(), 5u);
  EXPECT_EQ(csv[0], "summary,section,name,device,metric,unit,a,b,ratio_b_over_a,note");
  EXPECT_NE(attnprof::io::read_file(d + "/diff.md").find("| metric"), std::string::npos);

  r = run_cli("compare " + d + "/a " + d + "/b");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("== naive/1_2_32_16_bf16_causal.summary.json"), std::string::npos) << r.out;

  // A pipe or FIFO is read once (the README's `<(zcat a.summary.json.gz)`):
  // reading it a second time for the merged trace found it empty, exit 4.
  const std::string fifo = d + "/b.fifo";
  ASSERT_EQ(std::system(("mkfifo " + fifo).c_str()), 0);
  // The writer waits (in the background) until attnprof opens the FIFO.
  ASSERT_EQ(std::system(("(cat " + b + " > " + fifo + ") &").c_str()), 0);
  r = run_cli("compare " + a + " " + fifo + " --out " + d + "/cmp", 60);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("forward CPU time"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("merged trace: "), std::string::npos) << r.out;
  remove_tree(d);
}

TEST(CompareCli, BadInputsExitFourWithOneLine) {
  const std::string d = make_temp_dir("compare");
  attnprof::io::write_file_atomic(d + "/bad.summary.json", "{\"schema_version\": 1, \"variant\": ");
  attnprof::io::write_file_atomic(d + "/typed.summary.json", "{\"schema_version\": 1, \"variant\": 3}");
  for (const std::string& args : {"compare " + d + "/bad.summary.json " + d + "/typed.summary.json",
                                  "compare " + d + "/typed.summary.json " + d + "/typed.summary.json",
                                  "compare " + d + "/missing.json " + d + "/bad.summary.json"}) {
    const Result r = run_cli(args);
    EXPECT_EQ(r.rc, 4) << args << ": " << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << args << ": " << r.err;
    EXPECT_NE(r.err.find(d + "/"), std::string::npos) << r.err;  // names the file
  }
  Result r = run_cli("compare " + d + "/bad.summary.json " + d);
  EXPECT_EQ(r.rc, 2) << r.err;  // a file and a directory
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  r = run_cli("compare " + d + "/bad.summary.json");
  EXPECT_EQ(r.rc, 2) << r.err;
  remove_tree(d);
}

// Issue 17: a multi-variant run and compare on two folders each write one
// merged Perfetto trace (a process per run, aligned) and one picture of one
// call per run; a backward-only pass shows attn_bwd.
TEST(ComparisonTraceCli, MultiVariantRunAndCompareWriteMergedTraceAndTimeline) {
  const std::string d = make_temp_dir("merged");
  for (const char* pass : {"fwd", "bwd"}) {
    for (const char* sub : {"/a", "/b"}) {
      const Result r = run_cli(std::string("--variant naive,sdpa-math --seq 32 --head-dim 16 --timing-iters 0 --pass ") +
                               pass + " " + kFast + " --out " + d + sub);
      ASSERT_EQ(r.rc, 0) << r.err;
      EXPECT_NE(r.out.find("merged trace: "), std::string::npos) << r.out;
    }
    const std::string stem = std::string("1_2_32_16_bf16_causal") + (pass == std::string("bwd") ? "_bwd" : "");
    const auto trace = nlohmann::json::parse(
        attnprof::io::gzip_decompress(attnprof::io::read_file(d + "/a/compare/" + stem + ".trace.json.gz")));
    std::set<std::string> processes;
    for (const auto& e : trace["traceEvents"])
      if (e.value("ph", "") == "M" && e.value("name", "") == "process_name")
        processes.insert(e["args"]["name"].get<std::string>().substr(0, 9));
    EXPECT_EQ(processes, (std::set<std::string>{"naive \xE2\x80\x94", "sdpa-math"})) << pass;
    const std::string svg = attnprof::io::read_file(d + "/a/compare/" + stem + ".timeline.svg");
    EXPECT_NE(svg.find(pass == std::string("bwd") ? "attn_bwd" : "attn_fwd"), std::string::npos) << pass;
    EXPECT_EQ(svg.find("<script"), std::string::npos);

    const Result c = run_cli("compare " + d + "/a " + d + "/b --out " + d + "/c");
    ASSERT_EQ(c.rc, 0) << c.err;
    const std::string ab = attnprof::io::read_file(d + "/c/compare/" + stem + ".timeline.svg");
    // One row per side of each variant, labelled alike.
    EXPECT_GE(count(ab, "naive \xC2\xB7 A"), 1) << pass;
    EXPECT_EQ(count(ab, "naive \xC2\xB7 A"), count(ab, "naive \xC2\xB7 B")) << pass;
    EXPECT_EQ(count(ab, "sdpa-math \xC2\xB7 A"), count(ab, "sdpa-math \xC2\xB7 B")) << pass;
    EXPECT_GE(count(ab, "sdpa-math \xC2\xB7 B"), 1) << pass;
  }
  remove_tree(d);
}
