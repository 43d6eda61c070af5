// The attnprof executable as a user meets it: exit codes, one-line errors, and
// the files a run leaves (valid JSON traces with the steps, scopes and metadata).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <random>

#include "attnprof/io/files.h"
#include "test_util.h"

using namespace attnprof::testing;

namespace {

using Result = attnprof::testing::CliResult;

const char* kTiny = "--batch 1 --heads 2 --seq 33 --head-dim 32 --device cpu";

}  // namespace

TEST(Cli, HelpListsFlagsAndExitsZero) {
  const Result r = run_cli("--help");
  EXPECT_EQ(r.rc, 0);
  for (const char* flag : {"--variant", "--dtype", "--device", "--batch", "--heads", "--seq", "--head-dim",
                           "--causal", "--seed", "--out", "--no-gzip", "--sort-by", "--row-limit", "--warmup-iters",
                           "--wait", "--warmup", "--active", "--list-variants"})
    EXPECT_NE(r.out.find(flag), std::string::npos) << flag;
}

TEST(Cli, BadDtypeIsUsageErrorNamingChoices) {
  const Result r = run_cli("--dtype fp12");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("'fp12'"), std::string::npos);
  EXPECT_NE(r.err.find("bf16, fp16, fp32"), std::string::npos);
}

TEST(Cli, BadVariantSuggestsClosest) {
  const Result r = run_cli("--variant sdpa-flsh");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("did you mean 'sdpa-flash'"), std::string::npos) << r.err;
}

TEST(Cli, NonPositiveAndNonNumericSizes) {
  for (const char* args : {"--seq 0", "--batch -3", "--heads 0", "--head-dim -1", "--seq abc", "--active 0"}) {
    const Result r = run_cli(args);
    EXPECT_EQ(r.rc, 2) << args;
    EXPECT_EQ(count_lines(r.err), 1) << args << ": " << r.err;
  }
}

TEST(Cli, BadDeviceAndSortKey) {
  Result r = run_cli("--device tpu");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("cuda:N"), std::string::npos) << r.err;
  r = run_cli("--device cuda:99");
  EXPECT_EQ(r.rc, 2);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  r = run_cli("--sort-by nonsense");
  EXPECT_EQ(r.rc, 2);
  EXPECT_NE(r.err.find("cuda_time_total"), std::string::npos) << r.err;
}

TEST(Cli, UnwritableOutIsExitFourAndWritesNothing) {
  const std::string d = make_temp_dir("unwritable");
  const std::string file = d + "/a_file";
  attnprof::io::write_file_atomic(file, "not a directory");
  for (const std::string out : {file, file + "/sub"}) {
    const Result r = run_cli(std::string(kTiny) + " --out " + out);
    EXPECT_EQ(r.rc, 4) << r.err;
    EXPECT_NE(r.err.find(out), std::string::npos) << r.err;
  }
  EXPECT_EQ(attnprof::io::read_file(file), "not a directory");
  remove_tree(d);
}

TEST(Cli, RepeatedVariantFlagsAccumulate) {
  const std::string d = make_temp_dir("repeat");
  const Result r = run_cli(std::string(kTiny) + " --timing-iters 0 --variant naive --variant inplace,sdpa-math --out " + d);
  EXPECT_EQ(r.rc, 0) << r.err;
  for (const char* v : {"naive", "inplace", "sdpa-math"})
    EXPECT_TRUE(path_exists(d + "/" + v + "/1_2_33_32_bf16_causal.summary.json")) << v;
  EXPECT_NE(r.out.find("At a glance"), std::string::npos);
  EXPECT_TRUE(path_exists(d + "/compare/1_2_33_32_bf16_causal.md"));
  remove_tree(d);
}

TEST(Cli, FullDiskIsExitFourAndLeavesNoPartialFiles) {
  // A 16 KiB tmpfs fills up while the trace, table and summary are written.
  const std::string d = make_temp_dir("fulldisk");
  if (std::system(("mount -t tmpfs -o size=16k tmpfs " + d + " 2>/dev/null").c_str()) != 0) {
    remove_tree(d);
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root): full-disk test skipped";
  }
  const Result r = run_cli(std::string(kTiny) + " --timing-iters 0 --variant naive --no-gzip --out " + d);
  EXPECT_EQ(r.rc, 4) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("No space left on device"), std::string::npos) << r.err;
  for (const std::string& p : list_tree(d)) EXPECT_EQ(p.find(".tmp."), std::string::npos) << p;
  std::system(("umount " + d).c_str());
  remove_tree(d);
}

TEST(Cli, SingleUnsupportedVariantExitsThree) {
  const Result r = run_cli(std::string(kTiny) + " --variant sdpa-cudnn --out /tmp/attnprof_never_written");
  EXPECT_EQ(r.rc, 3);
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_NE(r.err.find("sdpa-cudnn cannot run here"), std::string::npos) << r.err;
  EXPECT_FALSE(path_exists("/tmp/attnprof_never_written/sdpa-cudnn"));
}

TEST(Cli, RunWritesValidTraceTableAndSummary) {
  const std::string d = make_temp_dir("run");
  for (bool gzip : {true, false}) {
    const Result r = run_cli(std::string(kTiny) + " --variant naive,sdpa-efficient --out " + d +
                             (gzip ? "" : " --no-gzip"));
    ASSERT_EQ(r.rc, 0) << r.err;
    EXPECT_NE(r.out.find("Self CPU time total"), std::string::npos);
    EXPECT_NE(r.out.find("Skipped (1)"), std::string::npos) << r.out;  // efficient has no CPU kernel
    const std::string stem = d + "/naive/1_2_33_32_bf16_causal";
    const std::string trace_path = stem + "/1_2_33_32_bf16_causal" + (gzip ? ".pt.trace.json.gz" : ".pt.trace.json");
    std::string text = attnprof::io::read_file(trace_path);
    if (gzip) text = attnprof::io::gzip_decompress(text);
    const auto trace = nlohmann::json::parse(text);
    ASSERT_TRUE(trace.contains("traceEvents"));
    std::set<std::string> names;
    for (const auto& e : trace["traceEvents"])
      if (e.contains("name")) names.insert(e["name"].get<std::string>());
    EXPECT_TRUE(names.count("ProfilerStep#2") && names.count("ProfilerStep#4")) << "schedule wait=1 warmup=1 active=3";
    EXPECT_FALSE(names.count("ProfilerStep#1")) << "warm-up steps must not be in the trace";
    EXPECT_TRUE(names.count("attn_fwd"));
    ASSERT_TRUE(trace.contains("attnprof"));
    const auto& meta = trace["attnprof"];
    EXPECT_EQ(meta["variant"], "naive");
    EXPECT_EQ(meta["problem"]["seq_q"], 33);
    EXPECT_EQ(meta["problem"]["seq_kv"], 33);
    EXPECT_EQ(meta["problem"]["mask"], "causal");
    EXPECT_EQ(meta["problem"]["dtype"], "bf16");
    EXPECT_EQ(meta["device"], "cpu");
    EXPECT_FALSE(meta["torch_version"].get<std::string>().empty());

    const std::string table = attnprof::io::read_file(stem + ".txt");
    EXPECT_NE(table.find("attn_fwd"), std::string::npos);
    EXPECT_NE(r.out.find(table), std::string::npos) << "the printed table is the file's table";
    const auto summary = nlohmann::json::parse(attnprof::io::read_file(stem + ".summary.json"));
    EXPECT_EQ(summary["variant"], "naive");
    EXPECT_EQ(summary["status"], "ok");
    EXPECT_EQ(summary["schema_version"], 3);
    ASSERT_EQ(summary["headline"]["scopes"].size(), 1u);
    EXPECT_EQ(summary["headline"]["scopes"][0]["scope"], "attn_fwd");
    EXPECT_EQ(summary["headline"]["scopes"][0]["calls"], 3);
    EXPECT_GT(summary["headline"]["scopes"][0]["cpu_time_avg_us"].get<double>(), 0.0);
    EXPECT_FALSE(summary["ops"].empty());
  }
  // No temp files anywhere under the output directory.
  for (const std::string& p : list_tree(d)) EXPECT_EQ(p.find(".tmp."), std::string::npos) << p;
  remove_tree(d);
}

// Issue 10's data-loss bug: the causal and the non-causal run of one shape
// used to share every file name, so the second overwrote the first.
TEST(Cli, EveryProblemAxisHasItsOwnFiles) {
  const std::string d = make_temp_dir("stems");
  const std::string base = " --device cpu --batch 1 --heads 2 --seq 16 --head-dim 16 --variant naive --timing-iters 0 --out " + d;
  for (const char* extra : {"", " --no-causal", " --kv-heads 1", " --seq-q 4", " --pass bwd",
                            " --pass fwd+bwd"}) {
    const Result r = run_cli(base + extra);
    ASSERT_EQ(r.rc, 0) << extra << ": " << r.err;
  }
  std::set<std::string> summaries;
  for (const std::string& p : list_tree(d + "/naive"))
    if (p.size() > 13 && p.compare(p.size() - 13, 13, ".summary.json") == 0) summaries.insert(p.substr(d.size() + 7));
  EXPECT_EQ(summaries, (std::set<std::string>{"1_2_16_16_bf16_causal.summary.json", "1_2_16_16_bf16_full.summary.json",
                                              "1_2_16_16_bf16_causal_hkv1.summary.json",
                                              "1_2_4_16_bf16_causal_kv16.summary.json",
                                              "1_2_16_16_bf16_causal_bwd.summary.json",
                                              "1_2_16_16_bf16_causal_fwdbwd.summary.json"}));
  const auto bwd = nlohmann::json::parse(attnprof::io::read_file(d + "/naive/1_2_16_16_bf16_causal_fwdbwd.summary.json"));
  ASSERT_EQ(bwd["headline"]["scopes"].size(), 2u);
  EXPECT_EQ(bwd["headline"]["scopes"][1]["scope"], "attn_bwd");
  EXPECT_EQ(bwd["problem"]["pass"], "fwd+bwd");
  remove_tree(d);
}

TEST(Cli, ListVariantsSaysWhatRunsHere) {
  const Result r = run_cli("--list-variants --device cpu");
  EXPECT_EQ(r.rc, 0);
  EXPECT_NE(r.out.find("naive"), std::string::npos);
  EXPECT_NE(r.out.find("cannot run here"), std::string::npos);
  EXPECT_NE(r.out.find("runs here"), std::string::npos);
}

// A variable-length batch end to end on the CPU: the lengths set the batch,
// name the files, reach the summary, and each variant says how it ran the
// batch (padded under a mask, with the share that is padding); a backward is
// refused with exit 2 before anything is written.
TEST(Cli, SeqlensRunAPaddedBatchAndSayItsWaste) {
  const std::string d = make_temp_dir("varlen");
  const Result r = run_cli("--seqlens 5,40,1 --heads 2 --kv-heads 1 --head-dim 16 --device cpu --timing-iters 0 "
                           "--variant naive,sdpa-math --out " + d);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("padded batch ("), std::string::npos) << r.out;
  for (const char* v : {"naive", "sdpa-math"}) {
    std::string summary;
    for (const auto& e : std::filesystem::directory_iterator(d + "/" + v))
      if (e.path().string().find("_vl3-") != std::string::npos && e.path().string().find(".summary.json") != std::string::npos)
        summary = e.path().string();
    ASSERT_FALSE(summary.empty()) << v;
    EXPECT_NE(summary.find("/3_2_40_16_bf16_causal_hkv1_vl3-"), std::string::npos) << summary;
    const nlohmann::json j = nlohmann::json::parse(attnprof::io::read_file(summary));
    EXPECT_EQ(j["problem"]["seqlens"], nlohmann::json({5, 40, 1})) << v;
    EXPECT_EQ(j["problem"]["batch"], 3) << v;
    const std::string fact = j["facts"].value("variable lengths", "");
    EXPECT_EQ(fact.rfind("3 sequences of 1-40 keys and as many queries, padded to 40: ", 0), 0u) << v << ": " << fact;
    EXPECT_NE(fact.find("% of the padded query-key area"), std::string::npos) << fact;
    EXPECT_NE(j.dump().find("\"output_finite\":true"), std::string::npos) << v;
  }
  remove_tree(d);
  // --varlen-layout padded: its own files, the layout in the summary and the fact.
  const std::string e = make_temp_dir("varlen_padded");
  const Result padded = run_cli("--seqlens 5,40,1 --head-dim 16 --device cpu --timing-iters 0 --variant naive "
                                "--varlen-layout padded --out " + e);
  ASSERT_EQ(padded.rc, 0) << padded.err;
  std::string summary;
  for (const auto& f : std::filesystem::directory_iterator(e + "/naive"))
    if (f.path().string().find("-padded.summary.json") != std::string::npos) summary = f.path().string();
  ASSERT_FALSE(summary.empty());
  const nlohmann::json j = nlohmann::json::parse(attnprof::io::read_file(summary));
  EXPECT_EQ(j["problem"]["varlen_padded"], true);
  EXPECT_NE(j["facts"].value("variable lengths", "").find("(--varlen-layout padded)"), std::string::npos) << j["facts"];
  remove_tree(e);
  const Result bwd = run_cli("--seqlens 5,40 --device cpu --pass bwd --out /tmp/attnprof_never_written");
  EXPECT_EQ(bwd.rc, 2);
  EXPECT_NE(bwd.err.find("runs the forward only"), std::string::npos) << bwd.err;
  EXPECT_FALSE(path_exists("/tmp/attnprof_never_written"));
}
