// The counter pass (profiler/counters.h) on a GPU: the counters say what the
// hardware did, checked on kernels whose behaviour is known.
//  - a dense bf16 GEMM (cuBLAS) keeps the tensor pipe >= 85% busy, runs wgmma
//    on Hopper, and executes the GEMM's 2·M·N·K FLOPs (padding may add a few %);
//  - a large device-to-device copy moves >= 85% of the DRAM peak, and its
//    counted bytes are the bytes copied;
//  - sdpa-math's GEMMs (FP32 CUDA cores) execute no tensor math at all, the
//    claim the kernel names (sgemm, xmma_gemm_f32f32) only suggest;
//  - custom-flash-sm90 runs wgmma, custom-flash mma.sync.
// The tensor-op FLOP counters (ops_path) are what says "tensor math": the
// HMMA-pipe instruction count is not, since on the H200 it also counts
// conversions (the bf16<->fp32 kernels of sdpa-math, our dQ conversion: tens
// of thousands each, with no tensor FLOP), and it includes every wgmma.
//  - a backward pass counts the kernels autograd launches from its own thread.
// Without a GPU, or where the counters cannot be read (permission), each test
// skips and says why.
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cstdio>
#include <optional>
#include <memory>
#include <string>

#include "attnprof/variant.h"
#include "profiler/counters.h"
#include "variants/torch_problem.h"

namespace {

using attnprof::Problem;
using attnprof::report::CounterPass;
using attnprof::report::KernelCounters;

// A "variant" whose forward is one known operation on its own tensors.
class OneOp : public attnprof::Variant {
 public:
  enum class Kind { gemm, copy, read };
  explicit OneOp(Kind kind) : kind_(kind) {}
  std::string name() const override { return kind_ == Kind::gemm ? "gemm" : kind_ == Kind::copy ? "copy" : "read"; }
  std::string description() const override { return name(); }
  attnprof::Support supports(const Problem&) const override { return attnprof::Support::yes(); }
  void prepare(const Problem&, const at::Tensor&, const at::Tensor&, const at::Tensor&) override {
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(kind_ == Kind::gemm ? at::kBFloat16 : at::kFloat);
    if (kind_ == Kind::gemm) {
      a_ = at::randn({kGemm, kGemm}, opts);
      b_ = at::randn({kGemm, kGemm}, opts);
    } else if (kind_ == Kind::copy) {
      a_ = at::randn({kCopyElems}, opts);
      b_ = at::empty_like(a_);
    } else {
      a_ = at::randn({kReadElems}, opts);
    }
  }
  at::Tensor forward(const at::Tensor& q, const at::Tensor&, const at::Tensor&) override {
    // A copy kernel, not copy_: a same-type copy_ is a cudaMemcpy, which has no range.
    if (kind_ == Kind::gemm) (void)at::matmul(a_, b_);
    else if (kind_ == Kind::copy) at::neg_out(b_, a_);
    else (void)a_.sum();
    return q;
  }
  static constexpr int64_t kGemm = 8192;
  static constexpr int64_t kCopyElems = int64_t(1) << 30;  // 4 GiB of float32
  static constexpr int64_t kReadElems = int64_t(1) << 28;  // 1 GiB of float32

 private:
  Kind kind_;
  at::Tensor a_, b_;
};

Problem small_problem(attnprof::Pass pass = attnprof::Pass::fwd, int64_t head_dim = 64) {
  Problem p;
  p.batch = 2, p.heads_q = p.heads_kv = 8, p.seq_q = p.seq_kv = 1024, p.head_dim = head_dim;
  p.device = "cuda:0";
  p.pass = pass;
  return p;
}

// One line per counted kernel, for the log (ctest -V) of a run on the GPU.
void dump(const CounterPass& pass) {
  const auto f = [](const std::optional<double>& v) { return v ? *v : -1.0; };
  std::printf("counter pass: %zu kernels, %.2f s\n", pass.kernels.size(), pass.wall_s);
  for (const auto& [phase, ms] : pass.phases_ms) std::printf("  phase %s: %.0f ms\n", phase.c_str(), ms);
  for (const KernelCounters& k : pass.kernels)
    std::printf("  %s #%d: %.1f us @ %.0f MHz, DRAM %.3g+%.3g B (%.1f%%), SM %.1f%%, tensor %.1f%%, gmma %.3g, hmma %.3g, "
                "tensor FLOP %.4g, CUDA-core FLOP %.4g, occupancy %.1f%%, L2 hit %.1f%%\n",
                k.scope.c_str(), k.index, f(k.values.duration_ns) / 1e3, f(k.values.sm_clock_hz) / 1e6,
                f(k.values.dram_read_bytes), f(k.values.dram_write_bytes), f(k.values.dram_throughput_pct),
                f(k.values.sm_throughput_pct), f(k.values.tensor_active_pct), f(k.values.gmma_inst),
                f(k.values.hmma_inst), f(k.values.tensor_flops), f(k.values.cuda_core_flops),
                f(k.values.achieved_occupancy_pct),
                f(k.values.l2_hit_rate_pct));
}

// Runs the counter pass of `v` on p; skips the test when counters cannot be read here.
#define COUNT_OR_SKIP(pass_var, variant_ref, problem)                                               \
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: the counter pass needs a GPU"; \
  const attnprof::Inputs pass_var##_in = attnprof::random_inputs(problem);                         \
  (variant_ref).prepare(problem, pass_var##_in.q, pass_var##_in.k, pass_var##_in.v);               \
  const CounterPass pass_var = attnprof::collect_counters((variant_ref), (problem), pass_var##_in); \
  if (pass_var.state == CounterPass::State::unavailable) GTEST_SKIP() << pass_var.reason;           \
  ASSERT_EQ(pass_var.state, CounterPass::State::collected) << pass_var.reason;                      \
  dump(pass_var);                                                                                  \
  ASSERT_FALSE(pass_var.kernels.empty())

const KernelCounters& longest(const CounterPass& pass) {
  return *std::max_element(pass.kernels.begin(), pass.kernels.end(), [](const auto& a, const auto& b) {
    return a.values.duration_ns.value_or(0) < b.values.duration_ns.value_or(0);
  });
}

bool hopper() { return at::cuda::getCurrentDeviceProperties()->major == 9; }

TEST(CounterPassGpu, GemmKeepsTheTensorPipeBusy) {
  OneOp gemm(OneOp::Kind::gemm);
  const Problem p = small_problem();
  COUNT_OR_SKIP(pass, gemm, p);
  const KernelCounters& k = longest(pass);
  ASSERT_TRUE(k.values.tensor_active_pct.has_value());
  EXPECT_GE(*k.values.tensor_active_pct, 85.0);
  const double flops = 2.0 * OneOp::kGemm * OneOp::kGemm * OneOp::kGemm;
  ASSERT_TRUE(k.values.tensor_flops.has_value()) << "no tensor-op counter on this chip";
  EXPECT_GE(*k.values.tensor_flops, 0.99 * flops);
  EXPECT_LE(*k.values.tensor_flops, 1.10 * flops);  // tile padding (65/64 seen on the H200)
  if (hopper()) {
    EXPECT_GT(k.values.gmma_inst.value_or(0), 0.0) << "cuBLAS runs wgmma on Hopper";
  }
  EXPECT_GT(k.values.duration_ns.value_or(0), 0.0);
  EXPECT_GT(k.values.sm_clock_hz.value_or(0), 1e8);
}

TEST(CounterPassGpu, CopyMovesItsBytesNearTheDramPeak) {
  OneOp copy(OneOp::Kind::copy);
  const Problem p = small_problem();
  COUNT_OR_SKIP(pass, copy, p);
  // Past 2^31 elements PyTorch splits the copy into launches (two on the H200).
  double read = 0, written = 0;
  for (const KernelCounters& k : pass.kernels) {
    ASSERT_TRUE(k.values.dram_read_bytes && k.values.dram_write_bytes && k.values.dram_throughput_pct);
    read += *k.values.dram_read_bytes, written += *k.values.dram_write_bytes;
    EXPECT_GE(*k.values.dram_throughput_pct, 85.0) << "kernel " << k.index;
    EXPECT_EQ(k.values.tensor_flops.value_or(0), 0.0);
  }
  const double bytes = 4.0 * OneOp::kCopyElems;  // read once and written once
  EXPECT_NEAR(read / bytes, 1.0, 0.05);
  EXPECT_NEAR(written / bytes, 1.0, 0.05);
}

// A kernel that only reads writes nothing: the first kernel of a counted scope
// does not inherit the dirty lines the range profiler's start leaves in the L2
// (before the scope began on a cold L2, this kernel counted 27 MB written on the H200).
TEST(CounterPassGpu, AReadOnlyKernelFirstInItsScopeCountsNoWrites) {
  OneOp read(OneOp::Kind::read);
  const Problem p = small_problem();
  COUNT_OR_SKIP(pass, read, p);
  ASSERT_EQ(pass.kernels.size(), 1u) << "the L2 eviction's own kernels must not be reported";
  const KernelCounters& k = pass.kernels.front();
  ASSERT_TRUE(k.values.dram_read_bytes && k.values.dram_write_bytes);
  EXPECT_LT(*k.values.dram_write_bytes, 1e6);
  EXPECT_NEAR(*k.values.dram_read_bytes / (4.0 * OneOp::kReadElems), 1.0, 0.02);
}

TEST(CounterPassGpu, SdpaMathRunsNoTensorMath) {
  auto v = attnprof::make_variant("sdpa-math");
  Problem p = small_problem();
  p.dtype = attnprof::DType::BF16;
  COUNT_OR_SKIP(pass, *v, p);
  int long_kernels = 0;
  double cuda_core_flops = 0;
  bool counted_cuda_core = false;
  for (const KernelCounters& k : pass.kernels) {
    EXPECT_EQ(k.values.gmma_inst.value_or(-1), 0.0) << "kernel " << k.index;
    ASSERT_TRUE(k.values.tensor_flops.has_value()) << "no tensor-op counter on this chip";
    EXPECT_EQ(*k.values.tensor_flops, 0.0) << "kernel " << k.index;
    EXPECT_LT(k.values.tensor_active_pct.value_or(100), 5.0) << "kernel " << k.index;
    long_kernels += k.values.duration_ns.value_or(0) > 40e3;  // the two GEMMs and the longest elementwise ones
    cuda_core_flops += k.values.cuda_core_flops.value_or(0);
    counted_cuda_core = counted_cuda_core || k.values.cuda_core_flops.has_value();
  }
  EXPECT_GE(long_kernels, 2);
  // Its GEMMs' FLOPs are FP32 FMAs: at least the problem's (the unmasked square, causal or not).
  if (counted_cuda_core) EXPECT_GE(cuda_core_flops, p.forward_flops());
  else std::printf("note: no CUDA-core FLOP counters here (SASS metrics refused)\n");
}

TEST(CounterPassGpu, OurKernelsUseTheirTensorInstructions) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: the counter pass needs a GPU";
  for (const char* name : {"custom-flash", "custom-flash-sm90"}) {
    SCOPED_TRACE(name);
    auto v = attnprof::make_variant(name);
    const Problem p = small_problem();
    if (const attnprof::Support s = v->supports(p); !s.ok) {
      std::printf("note: %s skipped: %s\n", name, s.reason.c_str());
      continue;
    }
    COUNT_OR_SKIP(pass, *v, p);
    const KernelCounters& k = longest(pass);
    const bool sm90 = std::string(name) == "custom-flash-sm90";
    if (sm90) EXPECT_GT(k.values.gmma_inst.value_or(0), 0.0);
    else EXPECT_EQ(k.values.gmma_inst.value_or(-1), 0.0);  // mma.sync: tensor FLOPs without wgmma
    EXPECT_GT(k.values.tensor_flops.value_or(0), 0.5 * p.forward_flops());
  }
}

// autograd launches a backward's kernels from its device thread; the range
// profiler is per context, so they are counted, under attn_bwd.
TEST(CounterPassGpu, BackwardKernelsAreCounted) {
  auto v = attnprof::make_variant("custom-flash");
  const Problem p = small_problem(attnprof::Pass::fwd_bwd);
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device: the counter pass needs a GPU";
  if (const attnprof::Support s = v->supports(p); !s.ok) GTEST_SKIP() << s.reason;
  COUNT_OR_SKIP(pass, *v, p);
  int fwd = 0, bwd = 0;
  for (const KernelCounters& k : pass.kernels) (k.scope == "attn_fwd" ? fwd : bwd) += 1;
  EXPECT_GE(fwd, 1);
  EXPECT_GE(bwd, 3);  // preprocess, main kernel, dQ conversion
}

}  // namespace
