// Every registered variant against a float64 reference, on CPU always and on
// CUDA when a GPU is present: fresh random inputs each run, relative Frobenius
// error within the dtype's tolerance. Variants that cannot run a case say why
// through supports(), and the test records that instead of failing.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <iostream>
#include <random>
#include <set>

#include "attnprof/variant.h"
#include "variants/torch_problem.h"

using namespace attnprof;

namespace {

double tolerance(DType d) { return d == DType::FP32 ? 1e-5 : 1e-2; }

struct Shape {
  int64_t b, h, s, d;
};
// seq not a multiple of 64, seq = 1, odd batch/heads, two head dims.
const Shape kShapes[] = {{1, 1, 1, 64}, {2, 3, 77, 64}, {1, 2, 128, 32}, {3, 1, 200, 128}};

struct Case {
  std::string device;
  DType dtype;
};

class VariantParity : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (GetParam().device != "cpu" && !torch::cuda::is_available())
      GTEST_SKIP() << "no CUDA device: CUDA parity tests skipped (they run on the GPU machine)";
    // A different seed every run: the fast path must compute the same function on any input.
    at::manual_seed(std::random_device{}());
  }
};

}  // namespace

TEST_P(VariantParity, MatchesFloat64Reference) {
  const Case c = GetParam();
  int ran = 0;
  for (const auto& entry : variant_registry()) {
    for (const Shape& s : kShapes) {
      for (bool causal : {true, false}) {
        Problem p;
        p.batch = s.b, p.heads = s.h, p.seq = s.s, p.head_dim = s.d;
        p.dtype = c.dtype;
        p.causal = causal;
        p.device = c.device;
        auto v = entry.make();
        const Support sup = v->supports(p);
        SCOPED_TRACE(entry.name + " " + p.shape_string() + (causal ? " causal" : " full"));
        if (!sup.ok) {
          EXPECT_FALSE(sup.reason.empty()) << "an unsupported case must say why";
          continue;
        }
        const Inputs in = random_inputs(p);
        v->prepare(p, in.q, in.k, in.v);
        const at::Tensor out = v->forward(in.q, in.k, in.v);
        ASSERT_EQ(out.sizes(), in.q.sizes());
        ASSERT_EQ(out.scalar_type(), in.q.scalar_type());
        ASSERT_TRUE(at::isfinite(out).all().item<bool>());
        const double err = relative_frobenius_error(out, reference_attention(p, in));
        EXPECT_LE(err, tolerance(c.dtype)) << "relative Frobenius error " << err;
        ++ran;
      }
    }
  }
  EXPECT_GT(ran, 0);
  std::cout << "[ parity   ] " << c.device << " " << dtype_name(c.dtype) << ": " << ran << " variant/shape cases checked\n";
}

INSTANTIATE_TEST_SUITE_P(Cpu, VariantParity,
                         ::testing::Values(Case{"cpu", DType::FP32}, Case{"cpu", DType::BF16},
                                           Case{"cpu", DType::FP16}),
                         [](const auto& info) { return std::string(dtype_name(info.param.dtype)); });
INSTANTIATE_TEST_SUITE_P(Cuda, VariantParity,
                         ::testing::Values(Case{"cuda:0", DType::FP32}, Case{"cuda:0", DType::BF16},
                                           Case{"cuda:0", DType::FP16}),
                         [](const auto& info) { return std::string(dtype_name(info.param.dtype)); });

TEST(Registry, NamesAreUniqueAndFactoriesAgree) {
  std::set<std::string> seen;
  for (const auto& e : variant_registry()) {
    EXPECT_TRUE(seen.insert(e.name).second) << e.name;
    auto v = e.make();
    EXPECT_EQ(v->name(), e.name);
    EXPECT_FALSE(v->description().empty());
  }
  EXPECT_EQ(make_variant("no-such-variant"), nullptr);
  for (const char* core : {"naive", "inplace", "sdpa-math", "sdpa-efficient", "sdpa-flash", "sdpa-cudnn", "sdpa-auto"})
    EXPECT_TRUE(seen.count(core)) << core;
}

TEST(SdpaVariants, BackendFlagsAreRestored) {
  auto& ctx = at::globalContext();
  const bool flash = ctx.userEnabledFlashSDP(), math = ctx.userEnabledMathSDP(),
             eff = ctx.userEnabledMemEfficientSDP(), cudnn = ctx.userEnabledCuDNNSDP();
  Problem p;
  p.batch = 1, p.heads = 2, p.seq = 16, p.head_dim = 32, p.dtype = DType::FP32;
  for (const char* name : {"sdpa-math", "sdpa-flash", "sdpa-efficient", "sdpa-cudnn"}) {
    auto v = make_variant(name);
    const Support s = v->supports(p);
    if (s.ok) {
      const Inputs in = random_inputs(p);
      v->prepare(p, in.q, in.k, in.v);
      v->forward(in.q, in.k, in.v);
    }
    EXPECT_EQ(ctx.userEnabledFlashSDP(), flash) << name;
    EXPECT_EQ(ctx.userEnabledMathSDP(), math) << name;
    EXPECT_EQ(ctx.userEnabledMemEfficientSDP(), eff) << name;
    EXPECT_EQ(ctx.userEnabledCuDNNSDP(), cudnn) << name;
  }
}

TEST(SdpaVariants, RefusedBackendGivesAReason) {
  Problem p;
  p.batch = 1, p.heads = 1, p.seq = 8, p.head_dim = 64, p.dtype = DType::BF16;
  p.device = "cpu";
  const Support s = make_variant("sdpa-cudnn")->supports(p);
  EXPECT_FALSE(s.ok);
  EXPECT_NE(s.reason.find("CUDA"), std::string::npos) << s.reason;
  if (torch::cuda::is_available()) {
    // fp32 is outside FlashAttention's dtypes: PyTorch's own warning is the reason.
    p.device = "cuda:0";
    p.dtype = DType::FP32;
    const Support f = make_variant("sdpa-flash")->supports(p);
    EXPECT_FALSE(f.ok);
    EXPECT_NE(f.reason.find("Flash attention"), std::string::npos) << f.reason;
  }
}
