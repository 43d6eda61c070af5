// The at-a-glance table from hand-built RunRecords: every note derivation,
// speedup vs naive, the n/a paths, the peak lookup and its override, and the
// written files parsed back.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>

#include "attnprof/io/files.h"
#include "attnprof/report/at_a_glance.h"
#include "counters_test_data.h"
#include "test_util.h"

using namespace attnprof;
using namespace attnprof::report;

namespace {

const char* kNvjet = "nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT";
const char* kSgemm = "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas";
const char* kFlash = "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)";
const char* kDtoD = "Memcpy DtoD (Device -> Device)";
const char* kTriu = "void at::native::triu_tril_kernel<c10::BFloat16, long, false, 4, true>(at::cuda::detail::TensorInfo<c10::BFloat16, long>, at::cuda::detail::TensorInfo<c10::BFloat16 const, long>, long, long, long, long)";

struct K {
  const char* name;
  double count;
  double total_us;
};

RunRecord run(const std::string& variant, double gpu_us, double cpu_us, std::vector<K> kernels) {
  RunRecord r;
  r.variant = variant;
  r.problem.batch = 8, r.problem.heads_q = r.problem.heads_kv = 16, r.problem.head_dim = 64;
  r.problem.seq_q = r.problem.seq_kv = 1024;
  r.problem.dtype = DType::BF16;
  r.problem.device = "cuda:0";
  r.env.device_name = "NVIDIA H200";
  ScopeStats s;
  s.scope = kForwardScope;
  s.calls = 3;
  s.device_time_avg_us = gpu_us;
  s.cpu_time_avg_us = cpu_us;
  for (const K& k : kernels) {
    s.kernels.push_back({k.name, k.count, k.total_us, k.total_us, k.total_us});
    s.kernels_per_call += k.count;
  }
  r.scopes = {s};
  r.tflops = 98.94;  // 10% of the H200's 989.4
  r.peak_memory_bytes = 1.5 * (1 << 30);
  return r;
}

const AtAGlanceOptions kNaiveBaseline{std::nullopt, "naive"};

// Cells as people read them, by column label.
std::map<std::string, std::string> row_of(const Table& t, const std::string& variant) {
  for (const auto& row : t.rows)
    if (display(t, 0, row[0]) == variant) {
      std::map<std::string, std::string> m;
      for (size_t i = 0; i < t.columns.size(); ++i) m[t.columns[i].label] = display(t, i, row[i]);
      return m;
    }
  throw std::runtime_error("no row " + variant);
}

std::vector<RunRecord> story() {
  RunRecord naive = run("naive", 1000, 100, {{kNvjet, 2, 500}, {kDtoD, 1, 100}, {"softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10, false, false>", 1, 400}});
  RunRecord math = run("sdpa-math", 2000, 150, {{kSgemm, 2, 1500}, {kTriu, 1, 100}, {"void at::native::elementwise_kernel<128, 2, at::native::where_kernel_impl>", 1, 400}});
  RunRecord flash = run("sdpa-flash", 100, 300, {{kFlash, 1, 100}});
  KernelLaunch l;
  l.name = kFlash;
  l.launch_api = "cudaLaunchKernel";
  l.est_occupancy_pct = 12.5;
  flash.launches = {l};
  naive.accuracy = Accuracy{0.0021, 1024, 8192, std::nullopt};
  RunRecord skipped;
  skipped.variant = "sdpa-cudnn";
  skipped.problem = naive.problem;
  skipped.status = Status::skipped;
  skipped.reason = "cuDNN attention needs sm80+";
  return {naive, math, flash, skipped};
}

}  // namespace

TEST(AtAGlance, PeakLookupByDeviceNameAndDtype) {
  EXPECT_DOUBLE_EQ(lookup_peak_tflops("NVIDIA H200", DType::BF16)->tflops, 989.4);
  EXPECT_DOUBLE_EQ(lookup_peak_tflops("NVIDIA H200", DType::FP32)->tflops, 66.9);
  EXPECT_DOUBLE_EQ(lookup_peak_tflops("NVIDIA H200", DType::FP8)->tflops, 1978.9);
  EXPECT_EQ(lookup_peak_tflops("NVIDIA H200", DType::FP8)->basis, "fp8 (e4m3) tensor cores, dense");
  EXPECT_DOUBLE_EQ(lookup_peak_tflops("NVIDIA H100 PCIe", DType::FP8)->tflops, 1513);
  EXPECT_FALSE(lookup_peak_tflops("NVIDIA A100-SXM4-80GB", DType::FP8)) << "no fp8 tensor cores";
  EXPECT_EQ(lookup_peak_tflops("NVIDIA H200", DType::FP32)->basis, "fp32 CUDA cores");
  EXPECT_DOUBLE_EQ(lookup_peak_tflops("NVIDIA H100 PCIe", DType::FP16)->tflops, 756.5);
  EXPECT_DOUBLE_EQ(lookup_peak_tflops("NVIDIA H100 80GB HBM3", DType::BF16)->tflops, 989.4);
  EXPECT_DOUBLE_EQ(lookup_peak_tflops("NVIDIA A100-SXM4-80GB", DType::BF16)->tflops, 312);
  EXPECT_DOUBLE_EQ(lookup_peak_tflops("NVIDIA A10", DType::BF16)->tflops, 125);
  EXPECT_DOUBLE_EQ(lookup_peak_tflops("NVIDIA A10G", DType::BF16)->tflops, 70);
  EXPECT_DOUBLE_EQ(lookup_peak_tflops("NVIDIA L4", DType::BF16)->tflops, 121);
  EXPECT_DOUBLE_EQ(lookup_peak_tflops("NVIDIA L40S", DType::BF16)->tflops, 362);
  EXPECT_DOUBLE_EQ(lookup_peak_tflops("NVIDIA GeForce RTX 4090", DType::FP16)->tflops, 165.2);
  EXPECT_FALSE(lookup_peak_tflops("Tesla V100-SXM2-16GB", DType::BF16));  // no bf16 tensor cores
  EXPECT_FALSE(lookup_peak_tflops("CPU", DType::BF16));
  EXPECT_FALSE(lookup_peak_tflops("Some Future GPU", DType::BF16));
  EXPECT_DOUBLE_EQ(*lookup_spec_dram_gbps("NVIDIA H200"), 4800);
  EXPECT_DOUBLE_EQ(*lookup_spec_dram_gbps("NVIDIA H100 80GB HBM3"), 3350);
  EXPECT_DOUBLE_EQ(*lookup_spec_dram_gbps("NVIDIA H100 PCIe"), 2000);
  EXPECT_FALSE(lookup_spec_dram_gbps("NVIDIA A100-SXM4-40GB")) << "40 and 80 GB A100s differ";
  EXPECT_FALSE(lookup_spec_dram_gbps("CPU"));
}

// --counters: DRAM %, tensor pipe %, occupancy and the verdict of each run's
// longest counted kernel, and "% of peak" against the measured GEMM ceiling.
TEST(AtAGlance, CounterColumnsFromTheDominantKernel) {
  std::vector<RunRecord> runs = attnprof::testing::constructed_runs();
  RunRecord skipped = runs[0];
  skipped.variant = "sdpa-cudnn";
  skipped.status = Status::skipped;
  skipped.reason = "cuDNN attention needs sm80+";
  skipped.counters.reset();
  runs.push_back(skipped);
  RunRecord no_gpu_counters = runs[0];
  no_gpu_counters.variant = "inplace";
  no_gpu_counters.counters->state = CounterPass::State::unavailable;
  no_gpu_counters.counters->kernels.clear();
  runs.push_back(no_gpu_counters);
  const Table t = at_a_glance_table(runs, kNaiveBaseline);
  std::vector<std::string> labels;
  for (const Column& c : t.columns) labels.push_back(c.label);
  ASSERT_EQ(labels.size(), 19u);
  EXPECT_EQ(std::vector<std::string>(labels.end() - 5, labels.end()),
            (std::vector<std::string>{"DRAM %", "tensor pipe %", "occupancy", "verdict", "note"}));
  // naive's longest kernel is the softmax (175 us): 536870912 B / 175 us / 4000 GB/s.
  auto naive = row_of(t, "naive");
  EXPECT_EQ(naive["DRAM %"], "77%");
  EXPECT_EQ(naive["tensor pipe %"], "0%");
  EXPECT_EQ(naive["occupancy"], "58%");
  EXPECT_EQ(naive["verdict"], "memory-bound: 77% of DRAM peak");
  EXPECT_EQ(row_of(t, "sdpa-math")["verdict"], "compute-bound: SM 72% busy") << "the fp32 GEMM";
  EXPECT_EQ(row_of(t, "sdpa-flash")["verdict"], "latency-bound: none above 60% (DRAM 18%, pipe 41%, SM 48%)");
  EXPECT_EQ(row_of(t, "custom-flash-sm90")["verdict"], "tensor-bound: pipe 66% active");
  EXPECT_EQ(row_of(t, "sdpa-cudnn")["verdict"], "n/a");
  EXPECT_EQ(row_of(t, "sdpa-cudnn")["note"], "skipped: cuDNN attention needs sm80+");
  EXPECT_EQ(row_of(t, "inplace")["verdict"], "unavailable");
  // % of peak: the run's TFLOP/s over the measured 700, not the datasheet's 989.4.
  EXPECT_EQ(row_of(t, "custom-flash-sm90")["% of peak"],
            fmt::format("{:.1f}%", 100.0 * *runs[3].tflops / 700.0));
  const std::string header = at_a_glance_header(runs, kNaiveBaseline);
  EXPECT_NE(header.find("peak 700 TFLOP/s measured (bf16 GEMM on this GPU; datasheet 989.4)"), std::string::npos)
      << header;
  // --peak-tflops still wins.
  EXPECT_EQ(row_of(at_a_glance_table(runs, {100.0, "naive"}), "custom-flash-sm90")["% of peak"],
            fmt::format("{:.1f}%", *runs[3].tflops));
  // Without any counter pass, no counter columns.
  EXPECT_EQ(at_a_glance_table(story(), kNaiveBaseline).columns.size(), 15u);
  const nlohmann::json j = to_json(t);
  EXPECT_DOUBLE_EQ(j[0]["tensor_pipe_pct"].get<double>(), 0.0);
  EXPECT_TRUE(j[4]["dram_pct"].is_null());
}

TEST(AtAGlance, RowsFiguresAndSpeedup) {
  const Table t = at_a_glance_table(story(), kNaiveBaseline);
  ASSERT_EQ(t.rows.size(), 4u);
  auto naive = row_of(t, "naive"), math = row_of(t, "sdpa-math"), flash = row_of(t, "sdpa-flash");
  EXPECT_EQ(naive["vs naive"], "1.00x");
  EXPECT_EQ(math["vs naive"], "0.50x");
  EXPECT_EQ(flash["vs naive"], "10.00x");
  EXPECT_EQ(naive["kernels/fwd"], "4");
  EXPECT_EQ(naive["GPU time profiled (us)"], "1000.0");
  EXPECT_EQ(naive["GPU time event median (us)"], "n/a");  // no timing
  EXPECT_EQ(naive["% of peak"], "10.0%");
  EXPECT_EQ(naive["peak memory"], "1.50 GiB");
  EXPECT_EQ(naive["error vs fp64"], "0.0021");
  EXPECT_EQ(flash["error vs fp64"], "n/a");
  EXPECT_EQ(naive["math path"], "tensor cores (bf16)");
  EXPECT_EQ(math["math path"], "CUDA cores (fp32)");
  EXPECT_EQ(naive["fused kernel"], "n/a");  // nvjet is 50%, not dominant
  EXPECT_EQ(flash["fused kernel"], "pytorch_flash::flash_fwd_kernel (100%)");
  EXPECT_EQ(flash["launch API"], "cudaLaunchKernel");
  EXPECT_EQ(naive["launch API"], "n/a");
  auto cudnn = row_of(t, "sdpa-cudnn");
  EXPECT_EQ(cudnn["status"], "skipped");
  EXPECT_EQ(cudnn["note"], "skipped: cuDNN attention needs sm80+");
  EXPECT_EQ(cudnn["GPU time profiled (us)"], "n/a");
}

TEST(AtAGlance, EveryNote) {
  const std::vector<RunRecord> s = story();
  EXPECT_EQ(at_a_glance_note(s[0]), "DtoD Memcpy present");
  EXPECT_EQ(at_a_glance_note(s[1]), "FP32 upcast; causal mask materialised");
  EXPECT_EQ(at_a_glance_note(s[2]), "single fused kernel; low occupancy (12%); CPU time above GPU time");
  RunRecord fp32 = s[1];
  fp32.problem.dtype = DType::FP32;  // fp32 GEMM on fp32 inputs is no upcast
  EXPECT_EQ(at_a_glance_note(fp32), "causal mask materialised");
  RunRecord cpu = s[0];
  cpu.problem.device = "cpu";
  cpu.scopes[0].kernels.clear();
  OpStats w;
  w.name = "aten::where";
  cpu.rows = {w};
  cpu.scopes[0].cpu_time_avg_us = 1e6;  // CPU time above "GPU time" means nothing on CPU
  EXPECT_EQ(at_a_glance_note(cpu), "causal mask materialised");
  RunRecord nan = s[2];
  nan.launches.clear();
  nan.scopes[0].cpu_time_avg_us = 1;
  nan.output_finite = false;
  EXPECT_EQ(at_a_glance_note(nan), "single fused kernel; output has NaN/Inf");
  // A paged cache: the gather (aten::index) among the ops, or the pages read by the kernel.
  RunRecord paged = s[2];
  paged.launches.clear();
  paged.scopes[0].cpu_time_avg_us = 1;
  paged.problem.page_size = 16;
  EXPECT_EQ(at_a_glance_note(paged), "KV pages read in the kernel; single fused kernel");
  OpStats index;
  index.name = "aten::index";
  paged.rows.push_back(index);
  EXPECT_EQ(at_a_glance_note(paged), "KV pages gathered first; single fused kernel");
}

TEST(AtAGlance, NaPathsCpuNoNaiveAndOverride) {
  std::vector<RunRecord> s = story();
  s.erase(s.begin());  // no naive
  Table t = at_a_glance_table(s, kNaiveBaseline);
  EXPECT_EQ(row_of(t, "sdpa-flash")["vs naive"], "n/a");

  AtAGlanceOptions o = kNaiveBaseline;
  o.peak_tflops = 197.88;
  t = at_a_glance_table(s, o);
  EXPECT_EQ(row_of(t, "sdpa-flash")["% of peak"], "50.0%");
  EXPECT_NE(at_a_glance_header(s, o).find("--peak-tflops"), std::string::npos);

  for (RunRecord& r : s) r.env.device_name = "Mystery GPU";
  t = at_a_glance_table(s, kNaiveBaseline);
  EXPECT_EQ(row_of(t, "sdpa-flash")["% of peak"], "n/a");
  EXPECT_NE(at_a_glance_header(s).find("peak unknown"), std::string::npos);

  std::vector<RunRecord> cpu = story();
  for (RunRecord& r : cpu) r.problem.device = "cpu", r.env.device_name = "CPU";
  for (RunRecord& r : cpu)
    for (ScopeStats& sc : r.scopes) sc.kernels.clear();
  t = at_a_glance_table(cpu, kNaiveBaseline);
  auto naive = row_of(t, "naive"), math = row_of(t, "sdpa-math");
  EXPECT_EQ(naive["GPU time profiled (us)"], "n/a");
  EXPECT_EQ(naive["kernels/fwd"], "n/a");
  EXPECT_EQ(naive["% of peak"], "n/a");
  EXPECT_EQ(naive["math path"], "n/a");
  EXPECT_EQ(naive["TFLOP/s"], "98.9");
  EXPECT_EQ(math["vs naive"], "0.67x");  // by CPU time: 100 / 150
}

TEST(AtAGlance, BaselineComesFromTheCaller) {
  const Table t = at_a_glance_table(story(), {std::nullopt, "sdpa-flash"});
  EXPECT_EQ(t.columns[6].label, "vs sdpa-flash");
  EXPECT_EQ(t.columns[6].key, "speedup_vs_sdpa-flash");
  EXPECT_EQ(row_of(t, "naive")["vs sdpa-flash"], "0.10x");
  EXPECT_EQ(row_of(t, "sdpa-flash")["vs sdpa-flash"], "1.00x");
}

TEST(AtAGlance, BackwardPassCountsKernelsPerStep) {
  std::vector<RunRecord> s = story();
  for (RunRecord& r : s) r.problem.pass = Pass::bwd;
  const Table t = at_a_glance_table(s, kNaiveBaseline);
  EXPECT_EQ(t.columns[2].label, "kernels/step");
  EXPECT_EQ(t.columns[2].key, "kernels_per_step");
  EXPECT_NE(at_a_glance_header(s).find("causal bwd"), std::string::npos) << at_a_glance_header(s);
}

TEST(AtAGlance, WritesFourFilesThatParseBack) {
  const std::string dir = attnprof::testing::make_temp_dir("glance");
  ASSERT_FALSE(dir.empty());
  const std::vector<std::string> paths = write_at_a_glance(story(), dir, kNaiveBaseline);
  ASSERT_EQ(paths.size(), 4u);
  const std::string stem = dir + "/compare/8_16_1024_64_bf16_causal";
  for (const char* ext : {".txt", ".csv", ".md", ".json"})
    EXPECT_TRUE(attnprof::testing::path_exists(stem + ext)) << ext;

  // JSON and CSV carry numbers as numbers under keys with their units.
  const nlohmann::json j = nlohmann::json::parse(io::read_file(stem + ".json"));
  ASSERT_EQ(j.size(), 4u);
  EXPECT_EQ(j[2]["variant"], "sdpa-flash");
  EXPECT_DOUBLE_EQ(j[2]["speedup_vs_naive"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j[0]["pct_of_peak"].get<double>(), 10.0);
  EXPECT_DOUBLE_EQ(j[0]["peak_memory_bytes"].get<double>(), 1.5 * (1 << 30));
  EXPECT_TRUE(j[0]["gpu_time_event_median_us"].is_null());
  // The error against float64 where the run measured it, null where not.
  EXPECT_DOUBLE_EQ(j[0]["rel_error_vs_fp64"].get<double>(), 0.0021);
  EXPECT_TRUE(j[2]["rel_error_vs_fp64"].is_null());
  EXPECT_EQ(j[1]["note"], "FP32 upcast; causal mask materialised");

  // CSV: header plus one record per variant; the note with "; " needs no quotes,
  // the skipped reason has none either, so splitting on ',' is exact here.
  const std::string csv = io::read_file(stem + ".csv");
  std::vector<std::string> lines;
  for (size_t pos = 0, nl; (nl = csv.find('\n', pos)) != std::string::npos; pos = nl + 1)
    lines.push_back(csv.substr(pos, nl - pos));
  ASSERT_EQ(lines.size(), 5u);
  EXPECT_EQ(lines[0].substr(0, 67), "variant,status,kernels_per_fwd,gpu_time_profiled_us,gpu_time_event_");
  EXPECT_EQ(lines[1].substr(0, 23), "naive,ok,4,1000,,100,1,") << lines[1];
  EXPECT_EQ(lines[4], "sdpa-cudnn,skipped,,,,,,,,,,,,,skipped: cuDNN attention needs sm80+");

  const std::string md = io::read_file(stem + ".md");
  EXPECT_EQ(md.rfind("**attnprof at a glance: 8x16x1024x64 bf16 causal on cuda:0 (NVIDIA H200; peak 989.4 TFLOP/s", 0), 0u)
      << md.substr(0, 200);
  EXPECT_NE(md.find("| sdpa-flash"), std::string::npos);
  EXPECT_NE(md.find(" 10.00x |"), std::string::npos);
  EXPECT_EQ(io::read_file(stem + ".txt").rfind("attnprof at a glance:", 0), 0u);
  EXPECT_THROW(write_at_a_glance({}, dir), std::invalid_argument);
  attnprof::testing::remove_tree(dir);
}
