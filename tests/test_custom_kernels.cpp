// attnprof's own CUDA operators (attnprof::flash_attention,
// attnprof::scaled_masked_softmax) and the variants built on them, against a
// float64 reference. Fresh random inputs every run; outputs land in memory
// poisoned with NaN and must be finite everywhere. Pass rule: relative
// Frobenius error <= 2x that of a plain same-dtype implementation
// (matmul/softmax/matmul) and <= 1e-2.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "attnprof/problem.h"
#include "attnprof/variant.h"
#include "variants/torch_problem.h"

namespace attnprof {
std::unique_ptr<Variant> make_custom_softmax();
std::unique_ptr<Variant> make_custom_flash();
}  // namespace attnprof

namespace {

#define REQUIRE_CUDA()                                                              \
  do {                                                                              \
    if (!torch::cuda::is_available())                                               \
      GTEST_SKIP() << "no CUDA device: custom kernel tests need a GPU";             \
    if (!c10::Dispatcher::singleton()                                               \
             .findSchemaOrThrow("attnprof::flash_attention", "")                    \
             .hasKernelForDispatchKey(c10::DispatchKey::CUDA))                      \
      GTEST_SKIP() << "attnprof was built without its CUDA kernels";                \
  } while (0)

using FlashFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                   const at::Tensor&, bool, double);
using SoftmaxFn = at::Tensor(const at::Tensor&, double, bool);

c10::TypedOperatorHandle<FlashFn> flash_op() {
  return c10::Dispatcher::singleton().findSchemaOrThrow("attnprof::flash_attention", "").typed<FlashFn>();
}
c10::TypedOperatorHandle<SoftmaxFn> softmax_op() {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow("attnprof::scaled_masked_softmax", "")
      .typed<SoftmaxFn>();
}

using attnprof::relative_frobenius_error;

// Masks key j > query i + sk - sq (bottom-right aligned, top-left when
// square), shaped [sq, sk].
at::Tensor causal_mask(int64_t sq, int64_t sk, const at::TensorOptions& opts) {
  return at::ones({sq, sk}, opts.dtype(at::kBool)).triu(sk - sq + 1);
}

at::Tensor masked_scores(const at::Tensor& s, double scale, bool causal) {
  at::Tensor x = s * scale;
  if (causal) x = x.masked_fill(causal_mask(s.size(-2), s.size(-1), s.options()), -INFINITY);
  return x;
}

// Attention computed in the inputs' own dtype: the error a plain implementation makes.
at::Tensor attention_same_dtype(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                bool causal, double scale) {
  at::Tensor p = at::softmax(masked_scores(at::matmul(q, k.transpose(-2, -1)), scale, causal), -1);
  return at::matmul(p, v);
}

// float64 reference: output and log-sum-exp.
std::tuple<at::Tensor, at::Tensor> attention_reference(const at::Tensor& q, const at::Tensor& k,
                                                       const at::Tensor& v, bool causal,
                                                       double scale) {
  const at::Tensor qd = q.to(at::kDouble), kd = k.to(at::kDouble), vd = v.to(at::kDouble);
  at::Tensor s = masked_scores(at::matmul(qd, kd.transpose(-2, -1)), scale, causal);
  return {at::matmul(at::softmax(s, -1), vd), at::logsumexp(s, -1)};
}

// Leaves a freed block full of NaN in the caching allocator, the size of the
// tensors the op is about to allocate, so an element the kernel does not write
// stays NaN.
void poison_next_allocations(const std::vector<std::pair<std::vector<int64_t>, at::ScalarType>>& shapes) {
  std::vector<at::Tensor> held;
  for (const auto& [shape, dtype] : shapes)
    held.push_back(at::full(shape, std::numeric_limits<double>::quiet_NaN(),
                            at::TensorOptions().device(at::kCUDA).dtype(dtype)));
}

// The pass rule for attnprof::flash_attention's output and log-sum-exp.
void expect_matches_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& out, const at::Tensor& lse, bool causal, double scale) {
  auto [ref, lse_ref] = attention_reference(q, k, v, causal, scale);
  const double err = relative_frobenius_error(out, ref);
  const double err_plain = relative_frobenius_error(attention_same_dtype(q, k, v, causal, scale), ref);
  // The 1e-6 floor only matters at seq 1, where both are exact (out = v).
  EXPECT_LE(err, 2 * err_plain + 1e-6) << "plain same-dtype error " << err_plain;
  EXPECT_LE(err, 1e-2);
  const double lse_err = (lse.to(at::kDouble) - lse_ref).abs().max().item<double>();
  EXPECT_LE(lse_err, 1e-3 * (1 + lse_ref.abs().max().item<double>()));
}

struct FlashCase {
  int64_t batch, heads, seq, head_dim;
  at::ScalarType dtype;
  bool causal;
};

std::string case_name(const testing::TestParamInfo<FlashCase>& info) {
  const auto& c = info.param;
  return "b" + std::to_string(c.batch) + "h" + std::to_string(c.heads) + "s" +
         std::to_string(c.seq) + "d" + std::to_string(c.head_dim) +
         (c.dtype == at::kBFloat16 ? "_bf16" : "_fp16") + (c.causal ? "_causal" : "_full");
}

std::vector<FlashCase> flash_cases() {
  std::vector<FlashCase> cases;
  for (int64_t seq : {1, 17, 63, 64, 65, 1000, 1025, 4096}) {
    std::vector<std::pair<int64_t, int64_t>> bh = {{1, 1}, {3, 5}};
    if (seq == 4096) bh = {{1, 3}};  // keeps the float64 reference under a second
    for (auto [b, h] : bh)
      for (int64_t d : {64, 128})
        for (auto dt : {at::kBFloat16, at::kHalf})
          for (bool causal : {false, true}) cases.push_back({b, h, seq, d, dt, causal});
  }
  return cases;
}

class FlashAttentionOp : public testing::TestWithParam<FlashCase> {};

TEST_P(FlashAttentionOp, MatchesFloat64Reference) {
  REQUIRE_CUDA();
  const FlashCase c = GetParam();
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(c.dtype);
  const at::Tensor q = at::randn({c.batch, c.heads, c.seq, c.head_dim}, opts);
  const at::Tensor k = at::randn({c.batch, c.heads, c.seq, c.head_dim}, opts);
  const at::Tensor v = at::randn({c.batch, c.heads, c.seq, c.head_dim}, opts);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));

  poison_next_allocations({{{c.batch, c.heads, c.seq, c.head_dim}, c.dtype},
                           {{c.batch, c.heads, c.seq}, at::kFloat}});
  auto [out, lse] = flash_op().call(q, k, v, c.causal, scale);
  ASSERT_EQ(out.sizes(), q.sizes());
  ASSERT_EQ(out.scalar_type(), c.dtype);
  ASSERT_EQ(lse.sizes(), (std::vector<int64_t>{c.batch, c.heads, c.seq}));
  ASSERT_TRUE(at::isfinite(out).all().item<bool>()) << "output not fully written (NaN/inf left)";
  ASSERT_TRUE(at::isfinite(lse).all().item<bool>()) << "lse not fully written (NaN/inf left)";

  expect_matches_reference(q, k, v, out, lse, c.causal, scale);
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashAttentionOp, testing::ValuesIn(flash_cases()), case_name);

// Scores that climb (or fall) steadily along the keys, ~±23 in log2 units with
// scale 1: the row max moves by far more than the kernel's rescale slack
// (2^8), so the stale-max path must both skip and take the O rescale, and
// exponents against a stale max reach the slack. Random inputs never do that:
// their row max settles within a few key blocks.
TEST(FlashAttentionOp, RowMaxDriftingAcrossKeyBlocks) {
  REQUIRE_CUDA();
  for (int64_t d : {64, 128})
    for (auto dt : {at::kBFloat16, at::kHalf})
      for (bool causal : {false, true})
        for (double direction : {1.0, -1.0}) {
          SCOPED_TRACE("d" + std::to_string(d) + (dt == at::kHalf ? " fp16" : " bf16") +
                       (causal ? " causal" : " full") + (direction > 0 ? " rising" : " falling"));
          const int64_t b = 2, h = 3, s = 1000;
          const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
          at::Tensor q = at::randn({b, h, s, d}, opts) * 0.1;
          at::Tensor k = at::randn({b, h, s, d}, opts) * 0.1;
          q.select(-1, 0).fill_(4.0);
          k.select(-1, 0).copy_(at::linspace(-4.0 * direction, 4.0 * direction, s, opts));
          q = q.to(dt);
          k = k.to(dt);
          const at::Tensor v = at::randn({b, h, s, d}, opts.dtype(dt));
          poison_next_allocations({{{b, h, s, d}, dt}, {{b, h, s}, at::kFloat}});
          auto [out, lse] = flash_op().call(q, k, v, causal, 1.0);
          ASSERT_TRUE(at::isfinite(out).all().item<bool>());
          expect_matches_reference(q, k, v, out, lse, causal, 1.0);
        }
}

TEST(FlashAttentionOp, RejectsBadInputs) {
  REQUIRE_CUDA();
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor q = at::randn({1, 2, 32, 64}, bf16);
  EXPECT_THROW(flash_op().call(q.to(at::kFloat), q.to(at::kFloat), q.to(at::kFloat), true, 0.125), c10::Error);
  const at::Tensor q96 = at::randn({1, 2, 32, 96}, bf16);
  EXPECT_THROW(flash_op().call(q96, q96, q96, true, 0.1), c10::Error);
  const at::Tensor qt = at::randn({1, 32, 2, 64}, bf16).transpose(1, 2);  // non-contiguous
  EXPECT_THROW(flash_op().call(qt, q, q, true, 0.125), c10::Error);
  EXPECT_THROW(flash_op().call(q, q.to(at::kHalf), q, true, 0.125), c10::Error);
  EXPECT_THROW(flash_op().call(q.cpu(), q.cpu(), q.cpu(), true, 0.125), c10::Error);
  try {
    flash_op().call(q96, q96, q96, true, 0.1);
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("head_dim must be 64 or 128, got 96"), std::string::npos) << e.what();
  }
}

struct SoftmaxCase {
  std::vector<int64_t> shape;
  at::ScalarType dtype;
};

TEST(ScaledMaskedSoftmaxOp, MatchesFloat64Reference) {
  REQUIRE_CUDA();
  // Vectorised warp path (aligned rows up to 4096 16-bit / 2048 fp32 columns)
  // and the block path (odd lengths, longer rows), square and not.
  const std::vector<SoftmaxCase> cases = {
      {{2, 3, 17, 17}, at::kBFloat16},     {{1, 1, 1, 1}, at::kBFloat16},
      {{2, 3, 64, 64}, at::kHalf},         {{3, 5, 65, 65}, at::kBFloat16},
      {{1, 2, 1000, 1000}, at::kHalf},     {{1, 2, 1025, 1025}, at::kBFloat16},
      {{1, 2, 4096, 4096}, at::kBFloat16}, {{1, 1, 3000, 8192}, at::kHalf},
      {{2, 2, 100, 2048}, at::kFloat},     {{1, 2, 300, 4096}, at::kFloat},
      {{7, 1000}, at::kFloat},             {{2, 3, 40, 264}, at::kBFloat16},
  };
  for (const auto& c : cases) {
    for (bool causal : {false, true}) {
      SCOPED_TRACE(testing::Message() << "shape " << at::IntArrayRef(c.shape) << " dtype "
                                      << c.dtype << " causal " << causal);
      const auto opts = at::TensorOptions().device(at::kCUDA).dtype(c.dtype);
      const at::Tensor s = at::randn(c.shape, opts) * 4;
      const double scale = 0.37;
      poison_next_allocations({{c.shape, c.dtype}});
      const at::Tensor p = softmax_op().call(s, scale, causal);
      ASSERT_EQ(p.sizes(), s.sizes());
      ASSERT_TRUE(at::isfinite(p).all().item<bool>()) << "output not fully written";
      const at::Tensor ref = at::softmax(masked_scores(s.to(at::kDouble), scale, causal), -1);
      const at::Tensor plain = at::softmax(masked_scores(s, scale, causal), -1);
      const double err = relative_frobenius_error(p, ref);
      const double err_plain = relative_frobenius_error(plain, ref);
      EXPECT_LE(err, 2 * err_plain + 1e-6) << "plain same-dtype error " << err_plain;
      EXPECT_LE(err, 1e-2);
      if (causal) {
        const at::Tensor above = causal_mask(s.size(-2), s.size(-1), s.options()).expand(s.sizes());
        EXPECT_TRUE((p.masked_select(above) == 0).all().item<bool>()) << "masked entries not zero";
      }
    }
  }
}

TEST(ScaledMaskedSoftmaxOp, FullyMaskedRowsGiveZeros) {
  REQUIRE_CUDA();
  for (int64_t sk : {64, 63, 4096, 5000}) {  // warp path and block path
    SCOPED_TRACE(testing::Message() << "seq_k " << sk);
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
    at::Tensor s = at::randn({2, 8, sk}, opts);
    s.select(1, 3).fill_(-INFINITY);
    s.select(1, 6).fill_(-INFINITY);
    for (bool causal : {false, true}) {
      const at::Tensor p = softmax_op().call(s, 0.5, causal);
      ASSERT_TRUE(at::isfinite(p).all().item<bool>()) << "NaN in a fully masked row";
      EXPECT_TRUE((p.select(1, 3) == 0).all().item<bool>());
      EXPECT_TRUE((p.select(1, 6) == 0).all().item<bool>());
      const at::Tensor sums = p.select(1, 0).to(at::kFloat).sum(-1);
      EXPECT_TRUE(at::allclose(sums, at::ones_like(sums), 1e-2, 1e-2));
    }
  }
}

TEST(ScaledMaskedSoftmaxOp, RejectsBadInputs) {
  REQUIRE_CUDA();
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor s = at::randn({2, 64, 64}, opts);
  EXPECT_THROW(softmax_op().call(s.transpose(1, 2), 1.0, true), c10::Error);
  EXPECT_THROW(softmax_op().call(s.to(at::kDouble), 1.0, true), c10::Error);
  EXPECT_THROW(softmax_op().call(s.to(at::kInt), 1.0, true), c10::Error);
  EXPECT_THROW(softmax_op().call(s.cpu(), 1.0, true), c10::Error);
  try {
    softmax_op().call(s.transpose(1, 2), 1.0, true);
  } catch (const c10::Error& e) {
    EXPECT_NE(std::string(e.what()).find("must be contiguous"), std::string::npos) << e.what();
  }
}

// supports() needs no GPU: it must answer with a reason, never crash.
TEST(CustomVariants, SupportsGivesReasons) {
  attnprof::Problem p;
  p.device = "cpu";
  for (auto make : {attnprof::make_custom_flash, attnprof::make_custom_softmax}) {
    const auto v = make();
    const attnprof::Support s = v->supports(p);
    EXPECT_FALSE(s.ok) << v->name();
    EXPECT_FALSE(s.reason.empty()) << v->name();
  }
  const auto flash = attnprof::make_custom_flash();
  EXPECT_EQ(flash->name(), "custom-flash");
  EXPECT_EQ(attnprof::make_custom_softmax()->name(), "custom-softmax");
#ifdef ATTNPROF_HAVE_CUDA_KERNELS
  EXPECT_NE(flash->supports(p).reason.find("needs a CUDA device (this run is on cpu)"), std::string::npos);
  p.device = "cuda:0";
  p.head_dim = 96;
  EXPECT_NE(flash->supports(p).reason.find("head_dim 64 and 128, not 96"), std::string::npos);
  p.head_dim = 64;
  p.dtype = attnprof::DType::FP32;
  EXPECT_NE(flash->supports(p).reason.find("not fp32"), std::string::npos);
  p.dtype = attnprof::DType::BF16;
  EXPECT_TRUE(flash->supports(p).ok) << flash->supports(p).reason;
#else
  EXPECT_NE(flash->supports(p).reason.find("CUDA kernels"), std::string::npos);
#endif
}

TEST(CustomVariants, ForwardMatchesReference) {
  REQUIRE_CUDA();
  for (bool causal : {true, false}) {
    attnprof::Problem p;
    p.batch = 2, p.heads = 3, p.seq = 333, p.head_dim = 128, p.causal = causal, p.device = "cuda:0";
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
    const at::Tensor q = at::randn({p.batch, p.heads, p.seq, p.head_dim}, opts);
    const at::Tensor k = at::randn({p.batch, p.heads, p.seq, p.head_dim}, opts);
    const at::Tensor v = at::randn({p.batch, p.heads, p.seq, p.head_dim}, opts);
    const double scale = p.softmax_scale();
    const at::Tensor ref = std::get<0>(attention_reference(q, k, v, causal, scale));
    const double err_plain = relative_frobenius_error(attention_same_dtype(q, k, v, causal, scale), ref);
    for (auto make : {attnprof::make_custom_flash, attnprof::make_custom_softmax}) {
      auto var = make();
      SCOPED_TRACE(var->name() + (causal ? " causal" : " full"));
      ASSERT_TRUE(var->supports(p).ok) << var->supports(p).reason;
      var->prepare(p, q, k, v);
      const at::Tensor out = var->forward(q, k, v);
      ASSERT_TRUE(at::isfinite(out).all().item<bool>());
      const double err = relative_frobenius_error(out, ref);
      EXPECT_LE(err, 2 * err_plain + 1e-6);
      EXPECT_LE(err, 1e-2);
    }
  }
}

}  // namespace
