// The counter pass's report layer: the occupancy formula against hand-derived
// values and against CUPTI's own estimates from an H200 trace, the verdict
// rule, the derived figures, the completion of a pass from its run's launch
// facts (analytic FLOPs included), and the counters block and note.
#include <gtest/gtest.h>

#include <cmath>

#include "attnprof/report/counter_report.h"
#include "counters_test_data.h"

using namespace attnprof;
using namespace attnprof::report;
using attnprof::testing::constructed_runs;
using attnprof::testing::h200_limits;

namespace {

// H100/H200 (compute capability 9.0), as the brief of the calculator has them:
// 65536 registers and 228 KB shared memory per SM, 227 KB per block opted in,
// 64 warps and 32 blocks per SM, 1 KB reserved per block.
DeviceLimits hopper() {
  DeviceLimits l;
  l.name = "H100-class";
  l.compute_major = 9, l.compute_minor = 0;
  l.sm_count = 132;
  l.max_threads_per_block = 1024, l.max_threads_per_sm = 2048, l.max_blocks_per_sm = 32;
  l.regs_per_sm = 65536, l.regs_per_block = 65536;
  l.smem_per_sm = 228 * 1024, l.smem_per_block_optin = 227 * 1024, l.smem_reserved_per_block = 1024;
  apply_allocation_rules(l);
  return l;
}

Occupancy occ(int64_t threads, int regs, int64_t smem, int64_t grid = 1 << 20) {
  const auto o = occupancy(hopper(), threads, regs, smem, grid);
  EXPECT_TRUE(o.has_value());
  return o.value_or(Occupancy{});
}

KernelCounters kernel(const char* name, double dur_ns) {
  KernelCounters k;
  k.scope = kForwardScope;
  k.kernel = name;
  k.values.duration_ns = dur_ns;
  return k;
}

}  // namespace

TEST(Occupancy, AllocationRulesFollowTheCalculator) {
  DeviceLimits l;
  l.compute_major = 9;
  apply_allocation_rules(l);
  EXPECT_EQ(l.reg_alloc_unit, 256);
  EXPECT_EQ(l.smem_alloc_unit, 128);
  EXPECT_EQ(l.sub_partitions, 4);
  l.compute_major = 7;
  apply_allocation_rules(l);
  EXPECT_EQ(l.smem_alloc_unit, 256);
  l.compute_major = 6, l.compute_minor = 0;
  apply_allocation_rules(l);
  EXPECT_EQ(l.sub_partitions, 2);
}

// Each case worked by hand from the calculator's rules (see the comments).
TEST(Occupancy, HandDerivedHopperValues) {
  // FlashAttention-2's forward: 255 regs x 32 = 8160 -> 8192 per warp; 16384
  // per sub-partition hold 2 warps -> 8 warps per SM -> 2 blocks of 4 warps.
  // Shared memory 48 KB + 1 KB -> 4 blocks. 8 of 64 warps.
  Occupancy o = occ(128, 255, 49152);
  EXPECT_EQ(o.by_registers, 2);
  EXPECT_EQ(o.by_shared_memory, 4);
  EXPECT_EQ(o.blocks_per_sm, 2);
  EXPECT_EQ(o.limiter, OccupancyLimiter::registers);
  EXPECT_DOUBLE_EQ(o.theoretical_pct, 12.5);
  // An elementwise kernel: 32 regs -> 1024 per warp -> 64 warps; 16 blocks of 4 warps, all 64 warps.
  o = occ(128, 32, 0);
  EXPECT_EQ(o.by_registers, 16);
  EXPECT_EQ(o.by_warps, 16);
  EXPECT_DOUBLE_EQ(o.theoretical_pct, 100.0);
  EXPECT_EQ(o.limiter, OccupancyLimiter::warps);
  // Warp-sized blocks: the 32-block limit binds first (32 warps = 50%).
  o = occ(32, 16, 0);
  EXPECT_EQ(o.blocks_per_sm, 32);
  EXPECT_EQ(o.limiter, OccupancyLimiter::blocks);
  EXPECT_DOUBLE_EQ(o.theoretical_pct, 50.0);
  // nvjet: 384 threads (12 warps), 168 regs -> 5376 per warp -> 3 warps per
  // sub-partition -> 12 warps -> 1 block; 213188 B + 1 KB -> 214272 B -> 1
  // block. A tie of the two: registers are named first. 12 of 64 warps.
  o = occ(384, 168, 213188);
  EXPECT_EQ(o.by_registers, 1);
  EXPECT_EQ(o.by_shared_memory, 1);
  EXPECT_EQ(o.limiter, OccupancyLimiter::registers);
  EXPECT_DOUBLE_EQ(o.theoretical_pct, 18.75);
  // Two 100 KB blocks fit (2 x (102400 + 1024) = 206848 <= 233472), three do not.
  o = occ(128, 32, 100 * 1024);
  EXPECT_EQ(o.by_shared_memory, 2);
  EXPECT_EQ(o.limiter, OccupancyLimiter::shared_memory);
  EXPECT_DOUBLE_EQ(o.theoretical_pct, 12.5);
  // The opt-in maximum, 227 KB, fits once; one byte more cannot launch.
  EXPECT_EQ(occ(128, 32, 227 * 1024).blocks_per_sm, 1);
  EXPECT_EQ(occ(128, 32, 227 * 1024 + 1).blocks_per_sm, 0);
  EXPECT_EQ(occ(128, 32, 227 * 1024 + 1).limiter, OccupancyLimiter::shared_memory);
  // 1024 threads x 64 regs is exactly the 65536-register block limit: 1 block, 50%.
  o = occ(1024, 64, 0);
  EXPECT_EQ(o.blocks_per_sm, 1);
  EXPECT_DOUBLE_EQ(o.theoretical_pct, 50.0);
  // 65 regs -> 2080 -> 2304 per warp x 32 warps = 73728: past the block's registers.
  EXPECT_EQ(occ(1024, 65, 0).blocks_per_sm, 0);
  EXPECT_EQ(occ(1024, 65, 0).limiter, OccupancyLimiter::registers);
  // More than 255 registers, or more than 1024 threads, cannot launch.
  EXPECT_EQ(occ(128, 256, 0).blocks_per_sm, 0);
  EXPECT_EQ(occ(1056, 16, 0).blocks_per_sm, 0);
  // A block of 40 threads takes 2 warps.
  EXPECT_EQ(occ(40, 32, 0).warps_per_sm, 32 * 2);
}

TEST(Occupancy, GridLimitedIsCuptisModel) {
  // 512 blocks of 128 threads on 132 SMs: 3.88 blocks per SM of the 16 that fit.
  const Occupancy o = occ(128, 16, 0, 512);
  EXPECT_DOUBLE_EQ(o.theoretical_pct, 100.0);
  EXPECT_NEAR(o.grid_limited_pct, 100.0 * 512.0 / 132.0 * 128.0 / 2048.0, 1e-9);
  // A grid larger than the SMs hold: the theoretical figure.
  EXPECT_DOUBLE_EQ(occ(128, 255, 49152, 1024).grid_limited_pct, 12.5);
}

TEST(Occupancy, UnknownLimitsOrBlockGiveNothing) {
  EXPECT_FALSE(occupancy(hopper(), 0, 32, 0, 1));
  EXPECT_FALSE(occupancy(DeviceLimits{}, 128, 32, 0, 1)) << "no SMs, no shared memory: limits not known";
  // Registers not reported (0): not a limit we can judge.
  EXPECT_EQ(occ(128, 0, 0).limiter, OccupancyLimiter::warps);
}

// CUPTI's "est. achieved occupancy %" for every launch of an H200 run that it
// could model (it reports 0 for a block past 48 KB of shared memory): the
// formula's grid-limited figure, rounded, is the same number.
TEST(Occupancy, AgreesWithCuptiOnEveryH200LaunchItModels) {
  const nlohmann::json j = attnprof::testing::read_test_json("h200_launches_8x16x1024x64.json");
  const DeviceLimits l = h200_limits();
  int compared = 0, unmodelled = 0;
  for (const nlohmann::json& k : j["kernels"]) {
    const int64_t threads = int64_t(k["block"][0]) * int64_t(k["block"][1]) * int64_t(k["block"][2]);
    const int64_t blocks = int64_t(k["grid"][0]) * int64_t(k["grid"][1]) * int64_t(k["grid"][2]);
    const int64_t smem = k["shared memory"];
    const auto o = occupancy(l, threads, k["registers per thread"], smem, blocks);
    ASSERT_TRUE(o) << k["name"];
    const int cupti = k["est. achieved occupancy %"];
    if (cupti > 0) {
      EXPECT_EQ(std::lround(o->grid_limited_pct), cupti) << k["name"] << ": " << o->grid_limited_pct;
      ++compared;
    } else {
      // What CUPTI left out: more than 48 KB of shared memory, or a grid of one block.
      EXPECT_TRUE(smem > 48 * 1024 || std::lround(o->grid_limited_pct) == 0) << k["name"];
      EXPECT_GT(o->theoretical_pct, 0.0) << k["name"];
      ++unmodelled;
    }
  }
  EXPECT_GE(compared, 15);
  EXPECT_GE(unmodelled, 4);
}

TEST(Verdict, ThresholdAndTieRules) {
  EXPECT_EQ(verdict(91.4, 3.0, 20.0).text, "memory-bound: 91% of DRAM peak");
  EXPECT_EQ(verdict(91.4, 3.0, 20.0).bound, Bound::memory);
  EXPECT_EQ(verdict(10.0, 76.2, 80.0).text, "tensor-bound: pipe 76% active") << "SM% counts the pipe: not compute";
  EXPECT_EQ(verdict(14.0, 0.0, 72.0).text, "compute-bound: SM 72% busy");
  EXPECT_EQ(verdict(12.0, 3.0, 20.0).text, "latency-bound: none above 60% (DRAM 12%, pipe 3%, SM 20%)");
  EXPECT_EQ(verdict(12.0, 3.0, std::nullopt).text, "latency-bound: none above 60% (DRAM 12%, pipe 3%)");
  // Exactly at the threshold counts; just under does not.
  EXPECT_EQ(verdict(60.0, 0.0, 0.0).bound, Bound::memory);
  EXPECT_EQ(verdict(59.9, 0.0, 0.0).bound, Bound::latency);
  // Both reach it: the higher decides; a tie goes to memory.
  EXPECT_EQ(verdict(65.0, 70.0, 0.0).bound, Bound::tensor);
  EXPECT_EQ(verdict(75.0, 70.0, 0.0).bound, Bound::memory);
  EXPECT_EQ(verdict(70.0, 70.0, 0.0).bound, Bound::memory);
  EXPECT_EQ(verdict(61.0, 10.0, 80.0).bound, Bound::compute);
  EXPECT_DOUBLE_EQ(verdict(61.0, 10.0, 80.0).pct, 80.0);
  // Missing figures: no latency verdict without both DRAM and the pipe.
  EXPECT_EQ(verdict(std::nullopt, 3.0, 20.0).bound, Bound::unknown);
  EXPECT_EQ(verdict(12.0, std::nullopt, 20.0).bound, Bound::unknown);
  EXPECT_EQ(verdict(std::nullopt, std::nullopt, 90.0).bound, Bound::compute);
  EXPECT_EQ(verdict(std::nullopt, 65.0, std::nullopt).bound, Bound::tensor);
  EXPECT_EQ(verdict(std::nan(""), 10.0, 10.0).bound, Bound::unknown);
  for (Bound b : {Bound::memory, Bound::tensor, Bound::compute, Bound::latency, Bound::unknown})
    EXPECT_EQ(parse_bound(bound_name(b)), b);
}

TEST(KernelFigures, DerivedFromCountersAndCeilings) {
  KernelCounters k = kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", 100000.0);  // 100 us
  k.values.dram_read_bytes = 100e6, k.values.dram_write_bytes = 200e6;
  k.values.tensor_flops = 17e9, k.values.gmma_inst = 1e6, k.values.hmma_inst = 0;
  k.values.tensor_active_pct = 20, k.values.sm_throughput_pct = 30, k.values.dram_throughput_pct = 70;
  DeviceCeilings c;
  c.copy_gbps = 4000;
  KernelFigures f = kernel_figures(k, c);
  EXPECT_DOUBLE_EQ(*f.dram_bytes, 300e6);
  EXPECT_DOUBLE_EQ(*f.dram_gbps, 3000.0);
  EXPECT_DOUBLE_EQ(*f.dram_pct, 75.0);
  EXPECT_TRUE(f.dram_pct_of_measured_ceiling);
  EXPECT_DOUBLE_EQ(*f.tflops, 170.0);
  EXPECT_FALSE(f.flops_analytic);
  EXPECT_NEAR(*f.flop_per_byte, 17e9 / 300e6, 1e-9);
  EXPECT_EQ(f.tensor_family, TensorFamily::wgmma);
  EXPECT_EQ(f.verdict.text, "memory-bound: 75% of DRAM peak");
  // Without ceilings: the hardware's own % of peak, said to be that.
  f = kernel_figures(k, std::nullopt);
  EXPECT_DOUBLE_EQ(*f.dram_pct, 70.0);
  EXPECT_FALSE(f.dram_pct_of_measured_ceiling);
  // No FLOPs counted: the analytic figure, labelled.
  k.values.tensor_flops = 0;
  k.analytic_flops = 10e9;
  f = kernel_figures(k, c);
  EXPECT_TRUE(f.flops_analytic);
  EXPECT_DOUBLE_EQ(*f.tflops, 100.0);
  // CUDA-core FLOPs count as executed FLOPs.
  k.values.cuda_core_flops = 1e9;
  f = kernel_figures(k, c);
  EXPECT_FALSE(f.flops_analytic);
  EXPECT_DOUBLE_EQ(*f.flops, 1e9);
  // Tensor families: HMMA-pipe instructions without tensor FLOPs are
  // conversions (a cast kernel on the H200), not mma.sync.
  k.values.gmma_inst = 0, k.values.hmma_inst = 5;
  EXPECT_EQ(kernel_figures(k, c).tensor_family, TensorFamily::none);
  k.values.tensor_flops = 2e9;
  EXPECT_EQ(kernel_figures(k, c).tensor_family, TensorFamily::mma_sync);
  k.values.gmma_inst = 7;  // wgmma runs show HMMA-pipe instructions and FLOPs too
  EXPECT_EQ(kernel_figures(k, c).tensor_family, TensorFamily::wgmma);
  // Without a FLOP counter the HMMA count decides.
  k.values.tensor_flops.reset(), k.values.gmma_inst = 0;
  EXPECT_EQ(kernel_figures(k, c).tensor_family, TensorFamily::mma_sync);
  k.values.hmma_inst = 0;
  EXPECT_EQ(kernel_figures(k, c).tensor_family, TensorFamily::none);
  k.values.gmma_inst.reset(), k.values.hmma_inst.reset();
  EXPECT_FALSE(kernel_figures(k, c).tensor_family);
  k.values.tensor_flops = 0;
  // No duration: no rates.
  k.values.duration_ns.reset();
  f = kernel_figures(k, c);
  EXPECT_FALSE(f.dram_gbps);
  EXPECT_FALSE(f.tflops);
}

TEST(AnalyticFlops, GemmsAndTheLongestFusedKernel) {
  Problem p;
  p.batch = 2, p.heads_q = 4, p.heads_kv = 4, p.seq_q = 128, p.seq_kv = 256, p.head_dim = 64;
  const double gemm = 2.0 * 2 * 4 * 128 * 256 * 64;
  EXPECT_DOUBLE_EQ(*analytic_kernel_flops(p, kernel("sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas", 1), false), gemm);
  EXPECT_DOUBLE_EQ(*analytic_kernel_flops(p, kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT", 1), false), gemm);
  const KernelCounters flash = kernel("void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64> >(pytorch_flash::Flash_fwd_params)", 1);
  EXPECT_DOUBLE_EQ(*analytic_kernel_flops(p, flash, true), p.forward_flops());
  EXPECT_FALSE(analytic_kernel_flops(p, flash, false)) << "only the longest fused kernel of a scope";
  KernelCounters bwd = kernel("void attnprof::flash_sm90::flash_bwd_sm90_kernel<T>(A)", 1);
  bwd.scope = kBackwardScope;
  EXPECT_DOUBLE_EQ(*analytic_kernel_flops(p, bwd, true), 2.5 * p.forward_flops());
  EXPECT_FALSE(analytic_kernel_flops(p, kernel("void (anonymous namespace)::softmax_warp_forward<float>(float*)", 1), true));
  EXPECT_FALSE(analytic_kernel_flops(p, kernel("void attnprof::softmax::scaled_masked_softmax_warp_forward<T>()", 1), true))
      << "our softmax kernel is not attention";
}

TEST(CompleteCounters, LaunchShapesOccupancyAndAnalyticFlopsFromTheRun) {
  const std::vector<RunRecord> runs = constructed_runs();
  ASSERT_EQ(runs.size(), 4u);
  const RunRecord& math = runs[1];
  ASSERT_EQ(math.variant, "sdpa-math");
  ASSERT_TRUE(math.counters);
  for (const KernelCounters& k : math.counters->kernels) {
    SCOPED_TRACE(k.kernel);
    EXPECT_GT(k.block[0], 0) << "every counted kernel found its launch";
    ASSERT_TRUE(k.theoretical_occupancy_pct);
    EXPECT_FALSE(k.occupancy_limiter.empty());
  }
  // The fp32 GEMMs count no tensor FLOPs and (in this data) no CUDA-core FLOPs: analytic.
  const KernelCounters& sgemm = math.counters->kernels[3];
  EXPECT_NE(sgemm.kernel.find("sm80_xmma_gemm_f32f32"), std::string::npos);
  ASSERT_TRUE(sgemm.analytic_flops);
  EXPECT_DOUBLE_EQ(*sgemm.analytic_flops, 2.0 * 8 * 16 * 1024 * 1024 * 64);
  // 128 threads, 255 registers, 33792 B: 2 blocks by registers, 12.5%.
  EXPECT_DOUBLE_EQ(*sgemm.theoretical_occupancy_pct, 12.5);
  EXPECT_EQ(sgemm.occupancy_limiter, "registers");
  // Counted FLOPs leave no analytic figure; elementwise kernels get none.
  EXPECT_FALSE(runs[0].counters->kernels[0].analytic_flops);
  EXPECT_FALSE(math.counters->kernels[0].analytic_flops);
  // The launches themselves carry the formula's figures (the --kernels column).
  for (const KernelLaunch& l : runs[2].launches) EXPECT_DOUBLE_EQ(*l.theoretical_occupancy_pct, 12.5);
}

TEST(CompleteCounters, MatchesByNameInOrderWithinTheScope) {
  RunRecord r;
  r.problem.device = "cuda:0";
  r.device_limits = hopper();
  ScopeStats fwd, bwd;
  fwd.scope = kForwardScope, bwd.scope = kBackwardScope;
  auto add = [&](ScopeStats& s, const char* name, int threads) {
    KernelLaunch l;
    l.name = name;
    l.block[0] = threads, l.grid[0] = 1000, l.registers_per_thread = 32;
    r.launches.push_back(l);
    s.first_call.push_back({name, r.launches.size(), 1.0});
  };
  add(fwd, "a", 64), add(fwd, "Memset (Device)", 0), add(fwd, "b", 128), add(fwd, "a", 256);
  add(bwd, "a", 512);
  r.scopes = {fwd, bwd};
  CounterPass pass;
  pass.state = CounterPass::State::collected;
  // Indices count kernels only (no counters for a memset); the backward's "a" is its own.
  for (auto [scope, name, index] : {std::tuple{kForwardScope, "a", 0}, std::tuple{kForwardScope, "b", 1},
                                    std::tuple{kForwardScope, "a", 2}, std::tuple{kBackwardScope, "a", 0},
                                    std::tuple{kForwardScope, "unknown", 3}}) {
    KernelCounters k = kernel(name, 1.0);
    k.scope = scope, k.index = index;
    pass.kernels.push_back(k);
  }
  complete_counters(pass, r);
  EXPECT_EQ(pass.kernels[0].block[0], 64);
  EXPECT_EQ(pass.kernels[1].block[0], 128);
  EXPECT_EQ(pass.kernels[2].block[0], 256) << "the second 'a' of the forward";
  EXPECT_EQ(pass.kernels[3].block[0], 512) << "the backward's 'a'";
  EXPECT_EQ(pass.kernels[4].block[0], 0) << "no launch of that name: no shape";
  EXPECT_FALSE(pass.kernels[4].theoretical_occupancy_pct);
  EXPECT_DOUBLE_EQ(*pass.kernels[2].theoretical_occupancy_pct, 100.0);
}

TEST(CountersText, BlockShowsCeilingsFiguresAndVerdicts) {
  const std::vector<RunRecord> runs = constructed_runs();
  const std::string naive = counters_text(runs[0]);
  EXPECT_NE(naive.find("hardware counters     : 5 kernels of one forward (test data; pass 1.5 s)"), std::string::npos) << naive;
  EXPECT_NE(naive.find("bf16 GEMM 700 TFLOP/s"), std::string::npos) << naive;
  EXPECT_NE(naive.find("DRAM copy 4000 GB/s (spec 4800)"), std::string::npos) << "spec beside the measured: " << naive;
  EXPECT_NE(naive.find("memory-bound: 89% of DRAM peak"), std::string::npos) << "the scale kernel: " << naive;
  EXPECT_NE(naive.find("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT"), std::string::npos);
  EXPECT_NE(naive.find("wgmma"), std::string::npos);
  EXPECT_NE(naive.find("1980 MHz"), std::string::npos);
  const std::string math = counters_text(runs[1]);
  EXPECT_NE(math.find("compute-bound: SM 72% busy"), std::string::npos) << math;
  EXPECT_NE(math.find("16.4*"), std::string::npos) << "analytic TFLOP/s marked: " << math;
  EXPECT_NE(math.find("* analytic FLOPs"), std::string::npos);
  EXPECT_NE(math.find("12% / 12%"), std::string::npos) << "achieved / theoretical occupancy: " << math;
  const std::string flash = counters_text(runs[2]);
  EXPECT_NE(flash.find("mma.sync"), std::string::npos);
  EXPECT_NE(flash.find("latency-bound: none above 60% (DRAM 18%, pipe 41%, SM 48%)"), std::string::npos) << flash;
  EXPECT_NE(counters_text(runs[3]).find("tensor-bound: pipe 66% active"), std::string::npos);
  // Without ceilings, DRAM % is the hardware's and says so.
  const std::string bare = counters_text(constructed_runs(false)[0]);
  EXPECT_EQ(bare.find("ceilings (measured)"), std::string::npos);
  EXPECT_NE(bare.find("of the hardware's peak"), std::string::npos) << bare;
  EXPECT_NE(bare.find("memory-bound: 86% of DRAM peak"), std::string::npos) << bare;
}

TEST(CountersText, PassesThatCollectedNothingAreOneLine) {
  RunRecord r;
  EXPECT_EQ(counters_text(r), "") << "no --counters, no block";
  r.counters.emplace();
  r.counters->state = CounterPass::State::unavailable;
  r.counters->reason = "the problem runs on the CPU; hardware counters need a CUDA device";
  EXPECT_EQ(counters_text(r), "  hardware counters     : unavailable: " + r.counters->reason + "\n");
  EXPECT_EQ(counters_note(*r.counters), "no hardware counters: " + r.counters->reason);
  r.counters->reason = "CUPTI_ERROR_INSUFFICIENT_PRIVILEGES (ERR_NVGPUCTRPERM)";
  const std::string note = counters_note(*r.counters);
  EXPECT_NE(note.find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos) << note;
  EXPECT_EQ(note.find('\n'), std::string::npos);
  r.counters->reason = "ERR_NVGPUCTRPERM: set NVreg_RestrictProfilingToAdminUsers=0";
  EXPECT_EQ(counters_note(*r.counters), "no hardware counters: " + r.counters->reason) << "named once";
  r.counters->state = CounterPass::State::failed;
  r.counters->reason = "cuptiProfilerBeginPass: error";
  EXPECT_EQ(counters_note(*r.counters), "the counter pass failed: cuptiProfilerBeginPass: error");
  r.counters->state = CounterPass::State::interrupted;
  EXPECT_EQ(counters_note(*r.counters), "") << "the interruption line says it";
  r.counters->state = CounterPass::State::collected;
  EXPECT_EQ(counters_note(*r.counters), "");
}

TEST(CounterNames, RoundTrip) {
  for (TensorFamily f : {TensorFamily::none, TensorFamily::mma_sync, TensorFamily::wgmma})
    EXPECT_EQ(parse_tensor_family(tensor_family_name(f)), f);
  using S = CounterPass::State;
  for (S s : {S::collected, S::unavailable, S::failed, S::interrupted}) EXPECT_EQ(parse_counter_state(counter_state_name(s)), s);
  EXPECT_FALSE(parse_counter_state("done"));
  EXPECT_STREQ(tensor_family_name(TensorFamily::mma_sync), "mma.sync");
}
