// Every registered variant against a float64 reference, on CPU always and on
// CUDA when a GPU is present: fresh random inputs each run, relative Frobenius
// error (pooled over a few draws per case) within 2x that of a plain same-dtype
// implementation and under the dtype's cap. Variants that cannot run a case say
// why through supports(), and the test records that instead of failing.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>

#include "attnprof/variant.h"
#include "variants/torch_problem.h"

using namespace attnprof;

namespace {

struct Shape {
  int64_t b, hq, hkv, sq, skv, d;
};
// seq not a multiple of 64, seq = 1, odd batch/heads, two head dims; grouped-
// query (4 query heads on 2 KV heads) and multi-query (3 on 1) heads; a decode
// step (1 query against 77 keys) and a chunk of 5 queries against 40 keys.
const std::vector<Shape> kShapes = {{1, 1, 1, 1, 1, 64},    {2, 3, 3, 77, 77, 64},  {1, 2, 2, 128, 128, 32},
                         {3, 1, 1, 200, 200, 128}, {2, 4, 2, 33, 33, 64}, {1, 3, 1, 1, 77, 64},
                         {2, 4, 1, 5, 40, 32}};

// Sliding windows (Problem::window) on shapes long enough for a window to
// skip whole key tiles (1100 keys: 17 tiles of 64) and to cross tile edges:
// square prefill, grouped-query, a chunk of 37 queries and a multi-query
// decode step against 1100 keys.
const std::vector<Shape> kWindowShapes = {{1, 2, 2, 1100, 1100, 64}, {2, 4, 2, 300, 300, 128}, {1, 3, 3, 37, 1100, 64},
                               {1, 4, 1, 1, 1100, 64}};
// 1 (the diagonal only), an odd width, a width that crosses tiles, and one
// past every sequence (hides nothing: the plain causal result).
const int64_t kWindows[] = {1, 17, 256, 2000};

// The masks a case runs: causal or not, and a window (0: none); and the KV
// cache's layout (page_size 0: contiguous).
struct MaskCase {
  bool causal;
  int64_t window;
  int64_t page_size = 0;
};
const std::vector<MaskCase> kPlainMasks = {{true, 0}, {false, 0}};
std::vector<MaskCase> window_masks() {
  std::vector<MaskCase> m;
  for (int64_t w : kWindows) m.push_back({true, w});
  return m;
}

// A paged KV cache (Problem::page_size): pages of 1, 16, 64 and 256 tokens in
// a random order, on shapes whose key counts fill no page exactly (the last
// page's tail holds NaN: a reader past the sequence shows), a single key, a
// multi-query decode step and a chunk of 37 queries; causal, full and the
// windows of the window tests (1, 17, 256, one past every sequence).
const std::vector<Shape> kPagedShapes = {{2, 4, 2, 1, 1100, 64}, {1, 3, 3, 37, 1100, 64}, {2, 2, 2, 77, 77, 128},
                                         {1, 2, 1, 1, 1, 64}};
const std::vector<MaskCase> kPagedMasks = {{true, 0, 1},    {false, 0, 16},  {true, 17, 16}, {true, 1, 64},
                                           {true, 0, 64},   {false, 0, 256}, {true, 256, 256},
                                           {true, 2000, 1}};

// Variable-length batches (Problem::seqlens): lengths including 1, odd ones
// and one sequence far longer than the rest; prefill (every token a query),
// decode (one query per sequence) and a chunk of 3 against per-sequence
// lengths; causal, full and windows 1 and 17; grouped- and multi-query heads.
struct VarlenCase {
  int64_t hq, hkv, d;
  std::vector<int64_t> lengths;
  int64_t seq_q;  // 0: prefill
  bool causal;
  int64_t window;
};
const std::vector<VarlenCase> kVarlenCases = {
    {4, 2, 64, {1, 77, 300, 5}, 0, true, 0},  {2, 2, 32, {130, 1, 9}, 0, false, 0},
    {3, 1, 64, {600, 3, 41}, 0, true, 17},    {4, 1, 64, {1, 200, 33}, 0, true, 1},
    {4, 2, 128, {90, 7, 1000}, 1, true, 0},   {2, 1, 64, {50, 12, 400}, 3, true, 0},
    {2, 2, 64, {50, 12, 400}, 3, false, 0},   {2, 2, 64, {3, 1000, 4, 2}, 0, true, 256}};

struct Case {
  std::string device;
  DType dtype;
};

// Above rounding, a fused variant may differ from the plain same-dtype
// formula by summation order only; fp32 results differ by rounding alone.
double floor_for(DType d) { return d == DType::FP32 ? 2e-6 : 0.0; }
// The absolute cap on one draw (the 2x-plain rule on the pool is the test):
// the plain bf16 formula itself passes 1e-2 on 0.2% of draws at 1x4/1x1/1100x64
// causal (dq, dk of 4 query rows: median 0.005, max 0.0137 over 3000 draws),
// which failed CI once (naive, dk 0.0112, seed 3522794712).
double cap_for(DType d) { return d == DType::FP32 ? 1e-5 : 2e-2; }

class VariantParity : public ::testing::TestWithParam<Case> {
 protected:
  void SetUp() override {
    if (GetParam().device != "cpu" && !torch::cuda::is_available())
      GTEST_SKIP() << "no CUDA device: CUDA parity tests skipped (they run on the GPU machine)";
    // A different seed every run: the fast path must compute the same function on any input.
    seed_ = std::random_device{}();
    at::manual_seed(seed_);
  }
  uint64_t seed_ = 0;
};

Problem problem_of(const Shape& s, const Case& c, MaskCase m, Pass pass) {
  Problem p;
  p.batch = s.b, p.heads_q = s.hq, p.heads_kv = s.hkv, p.seq_q = s.sq, p.seq_kv = s.skv, p.head_dim = s.d;
  p.dtype = c.dtype;
  p.mask = m.causal ? Mask::causal_bottom_right : Mask::none;
  p.window = m.window;
  p.page_size = m.page_size;
  p.pass = pass;
  p.device = c.device;
  return p;
}

// Attention in `dtype` by the textbook formula, differentiable: the float64
// reference when dtype is kDouble, "a plain same-dtype implementation" otherwise.
at::Tensor plain_attention(const Problem& p, const Inputs& in, at::ScalarType dtype, std::vector<at::Tensor>& leaves) {
  leaves = {in.q.detach().to(dtype).requires_grad_(), in.k.detach().to(dtype).requires_grad_(),
            in.v.detach().to(dtype).requires_grad_()};
  at::Tensor scores = at::matmul(leaves[0], expand_kv_heads(leaves[1], p.heads_q).transpose(-2, -1)) * p.softmax_scale();
  if (const at::Tensor mask = hidden_keys_mask(p, scores.options()); mask.defined())
    scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(scores, -1), expand_kv_heads(leaves[2], p.heads_q));
}

// Fresh random draws per (variant, shape, mask) case whose errors are pooled
// before the 2x-plain rule is applied. On one draw the ratio variant error /
// plain error is heavy-tailed on tiny problems, because plain's error is now
// and then small by luck: custom-softmax 1x3/1x1/77x64 bf16 causal backward
// (seq_q = 1, so dk is a sum of 3 rank-1 terms) failed once on an H200 with dk
// 0.00609 against plain 0.002576, a ratio of 2.36 (seed 4024354430), while 150
// seeds of that case gave dk ratios of median 0.94, p99 1.44, max 1.48 (dq max
// 1.81): the variant is as accurate as plain. A CPU stand-in for that case
// (scale and softmax fused in fp32, as custom-softmax does; dk median 0.95,
// p99 1.40 on one draw) put the ratio above 2 on 1.4e-3 of single draws, 1e-4
// of 4-draw pools (max 2.21), and none of 10,000 8-draw pools (p99.9 1.36, max
// 1.64). Its forward, and the gradients of the 5x40 and 200x200 shapes, stayed
// below 1.2 on one draw. Pooling averages the luck out of the denominator; the
// bound stays 2x plain. Small problems (up to kSmallScores scores per head) get
// kSmallDraws draws; larger ones, whose single-draw ratios are narrow,
// kLargeDraws, so the run (its time goes to the large shapes) takes about twice
// as long as with one draw, not eight times.
constexpr int kSmallDraws = 8;
constexpr int kLargeDraws = 2;
constexpr int64_t kSmallScores = 1024;
// Small counts the pairs a head computes (visible_pairs): a query that sees
// one key under a 1-key window reduces as little as a tiny problem does
// (sdpa-flash's CPU dv at 1x4/1x1/1100x64, window 1, bf16 measured 1.34 and
// 2.47 times plain on two draws, seed 3895734042: a sum of 4 bf16 rows).
int draws_for(const Problem& p) { return p.visible_pairs() <= kSmallScores ? kSmallDraws : kLargeDraws; }

// Squared errors and squared reference norms, in float64, summed over draws:
// the pooled relative Frobenius error is sqrt(sum ||out - ref||^2 / sum ||ref||^2)
// (one draw gives relative_frobenius_error).
struct PooledError {
  double err_sq = 0.0, ref_sq = 0.0;
  std::vector<double> per_draw;  // each draw's own relative error, for the failure message
  // Adds one draw; returns its own relative error.
  double add(const at::Tensor& out, const at::Tensor& ref) {
    const at::Tensor o = out.detach().to(at::kDouble), r = ref.detach().to(at::kDouble).to(o.device());
    const double e = (o - r).pow(2).sum().item<double>(), n = r.pow(2).sum().item<double>();
    err_sq += e, ref_sq += n;
    per_draw.push_back(std::sqrt(e / n));
    return per_draw.back();
  }
  double value() const { return std::sqrt(err_sq / ref_sq); }
};

// A variant's output (or one gradient) and the plain same-dtype one, pooled
// over the draws of one case, by name ("out", "dq", ...).
class ParityPool {
 public:
  // `out` is the variant's, `plain` the plain same-dtype implementation's, both against `ref`.
  // Returns the variant's relative error on this draw (for the per-draw cap).
  double add(const std::string& name, const at::Tensor& out, const at::Tensor& plain, const at::Tensor& ref) {
    auto& e = errors_[name];
    e.plain.add(plain, ref);
    return e.variant.add(out, ref);
  }
  // The project's rule on the pooled errors: variant <= max(2x plain, floor).
  void expect_within_twice_plain(double floor) const {
    for (const auto& [name, e] : errors_) {
      const double err = e.variant.value(), plain = e.plain.value();
      std::ostringstream draws;
      for (size_t i = 0; i < e.variant.per_draw.size(); ++i)
        draws << (i ? ", " : "") << e.variant.per_draw[i] << " vs " << e.plain.per_draw[i];
      EXPECT_LE(err, std::max(2 * plain, floor))
          << name << " relative Frobenius error " << err << ", plain " << plain << ", pooled over "
          << e.variant.per_draw.size() << " draws (per draw: " << draws.str() << ")";
    }
  }

 private:
  struct Pair {
    PooledError variant, plain;
  };
  std::map<std::string, Pair> errors_;
};

// Calls fn(problem, prepared variant, inputs, pool) draws_for(problem) times for every
// registered variant on every problem it supports, each time on fresh inputs
// from the generator (at::manual_seed in SetUp decides every draw, so the
// printed seed reproduces them all) with the variant prepared for them; then
// checks what fn added to the pool against 2x plain. Returns how many cases
// ran. A case a variant refuses must say why.
template <class F>
int for_each_supported_problem(const Case& c, const std::vector<Problem>& problems, F&& fn) {
  int ran = 0;
  for (const auto& entry : variant_registry()) {
    for (const Problem& p : problems) {
      auto v = entry.make();
      const Support sup = v->supports(p);
      SCOPED_TRACE(entry.name + " " + p.shape_string() + " " + p.config_string());
      if (!sup.ok) {
        EXPECT_FALSE(sup.reason.empty()) << "an unsupported case must say why";
        continue;
      }
      ParityPool pool;
      const int draws = draws_for(p);
      for (int draw = 0; draw < draws; ++draw) {
        SCOPED_TRACE("draw " + std::to_string(draw + 1) + " of " + std::to_string(draws));
        const Inputs in = random_inputs(p);
        // prepare may read the tensors (SDPA's route, custom-flash's plan): once per draw.
        v->prepare(p, in.q, in.k, in.v);
        fn(p, *v, in, pool);
      }
      pool.expect_within_twice_plain(floor_for(c.dtype));
      ++ran;
    }
  }
  return ran;
}

// for_each_supported_problem on every shape x mask for `pass`.
template <class F>
int for_each_supported_case(const Case& c, Pass pass, const std::vector<Shape>& shapes, const std::vector<MaskCase>& masks,
                            F&& fn) {
  std::vector<Problem> problems;
  for (const Shape& s : shapes)
    for (const MaskCase& mask : masks) problems.push_back(problem_of(s, c, mask, pass));
  return for_each_supported_problem(c, problems, std::forward<F>(fn));
}

// Every variant's forward on `shapes` x `masks` against float64.
int check_forward(const Case& c, const std::vector<Shape>& shapes, const std::vector<MaskCase>& masks) {
  return for_each_supported_case(c, Pass::fwd, shapes, masks,
                                 [&](const Problem& p, Variant& v, const Inputs& in, ParityPool& pool) {
    const at::Tensor out = forward_of(v, p, in);  // forward_paged on a paged problem
    ASSERT_EQ(out.sizes(), in.q.sizes());
    ASSERT_EQ(out.scalar_type(), in.q.scalar_type());
    ASSERT_TRUE(at::isfinite(out).all().item<bool>());
    const at::Tensor ref = reference_attention(p, in);
    std::vector<at::Tensor> unused;
    // An absolute cap on every draw; the 2x-plain rule on the pool (for_each_supported_case).
    EXPECT_LE(pool.add("out", out, plain_attention(p, in, in.q.scalar_type(), unused), ref), cap_for(c.dtype));
  });
}

// Every variant's forward on the variable-length batches against float64,
// compared on the real rows (a padded variant's padding rows only need be finite).
int check_varlen_forward(const Case& c) {
  std::vector<Problem> problems;
  for (const VarlenCase& v : kVarlenCases) {
    Problem p;
    p.batch = int64_t(v.lengths.size()), p.heads_q = v.hq, p.heads_kv = v.hkv, p.head_dim = v.d;
    p.seqlens = v.lengths;
    p.seq_kv = *std::max_element(v.lengths.begin(), v.lengths.end());
    p.seq_q = v.seq_q > 0 ? v.seq_q : p.seq_kv;
    p.mask = v.causal ? Mask::causal_bottom_right : Mask::none;
    p.window = v.window;
    p.dtype = c.dtype;
    p.device = c.device;
    problems.push_back(p);
  }
  return for_each_supported_problem(c, problems, [&](const Problem& p, Variant& v, const Inputs& in, ParityPool& pool) {
    const at::Tensor out = forward_of(v, p, in);
    if (v.reads_packed())
      ASSERT_EQ(out.sizes(), at::IntArrayRef({p.total_q(), p.heads_q, p.head_dim})) << "packed rows";
    else
      ASSERT_EQ(out.sizes(), in.q.sizes()) << "the padded batch";
    ASSERT_EQ(out.scalar_type(), in.q.scalar_type());
    ASSERT_TRUE(at::isfinite(out).all().item<bool>()) << "padding rows too";
    const at::Tensor ref = real_rows(p, reference_attention(p, in));
    // The plain same-dtype formula per sequence, unpadded, as the reference is.
    std::vector<at::Tensor> parts, unused;
    for (int64_t b = 0; b < p.batch; ++b) {
      const Sequence seq = sequence_of(p, in, b);
      parts.push_back(plain_attention(seq.problem, seq.inputs, in.q.scalar_type(), unused)[0].transpose(0, 1));
    }
    const at::Tensor plain = at::cat(parts, 0);
    EXPECT_LE(pool.add("out", real_rows(p, out), plain, ref), cap_for(c.dtype));
  });
}

// dq, dk, dv of every variant that has a backward here, against float64
// autograd of the textbook formula, through the same out.backward(grad_out)
// the runner calls; each gradient pooled over the draws on its own.
int check_gradients(const Case& c, const std::vector<Shape>& shapes, const std::vector<MaskCase>& masks) {
  return for_each_supported_case(c, Pass::bwd, shapes, masks,
                                 [&](const Problem& p, Variant& v, const Inputs& in, ParityPool& pool) {
    v.forward(in.q, in.k, in.v).backward(in.grad_out);
    std::vector<at::Tensor> ref_leaves, plain_leaves;
    plain_attention(p, in, at::kDouble, ref_leaves).backward(in.grad_out.to(at::kDouble));
    plain_attention(p, in, in.q.scalar_type(), plain_leaves).backward(in.grad_out);
    const char* names[] = {"dq", "dk", "dv"};
    const at::Tensor* inputs[] = {&in.q, &in.k, &in.v};
    for (int i = 0; i < 3; ++i) {
      const at::Tensor& g = inputs[i]->grad();
      ASSERT_TRUE(g.defined()) << names[i];
      ASSERT_EQ(g.sizes(), inputs[i]->sizes()) << names[i];
      ASSERT_TRUE(at::isfinite(g).all().item<bool>()) << names[i];
      const at::Tensor& ref = ref_leaves[i].grad();
      if (ref.norm().item<double>() == 0.0) {
        // One visible key: softmax is constant, dq and dk are exactly zero;
        // relative to grad_out, what a variant returns must be rounding.
        EXPECT_LE(g.to(at::kDouble).norm().item<double>(),
                  cap_for(c.dtype) * in.grad_out.to(at::kDouble).norm().item<double>())
            << names[i];
        continue;
      }
      // An absolute cap on every draw; the 2x-plain rule on the pool.
      EXPECT_LE(pool.add(names[i], g, plain_leaves[i].grad(), ref), cap_for(c.dtype)) << names[i];
    }
  });
}

// The cases a check ran, printed with `label`; at least one must have.
void expect_cases_ran(const char* label, const Case& c, int ran) {
  EXPECT_GT(ran, 0);
  std::cout << "[ " << label << " ] " << c.device << " " << dtype_name(c.dtype) << ": " << ran
            << " variant/shape cases checked\n";
}

}  // namespace

TEST_P(VariantParity, ForwardMatchesFloat64Reference) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  expect_cases_ran("parity  ", GetParam(), check_forward(GetParam(), kShapes, kPlainMasks));
}

TEST_P(VariantParity, GradientsMatchFloat64Autograd) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  expect_cases_ran("gradient", GetParam(), check_gradients(GetParam(), kShapes, kPlainMasks));
}

// Sliding windows: every variant that takes one (or masks it) against the
// float64 reference with the window; the others refuse with a reason.
TEST_P(VariantParity, WindowedForwardMatchesFloat64Reference) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  expect_cases_ran("window  ", GetParam(), check_forward(GetParam(), kWindowShapes, window_masks()));
}

TEST_P(VariantParity, WindowedGradientsMatchFloat64Autograd) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  expect_cases_ran("window ∇", GetParam(), check_gradients(GetParam(), kWindowShapes, window_masks()));
}

// A paged cache: every variant reads it (through its kernel or by gathering
// the pages first) and must give the contiguous result, against float64.
TEST_P(VariantParity, PagedForwardMatchesFloat64Reference) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  expect_cases_ran("paged   ", GetParam(), check_forward(GetParam(), kPagedShapes, kPagedMasks));
}

// A variable-length batch: every variant runs it packed (through a varlen
// kernel) or padded under a mask, and must give each sequence's own result.
TEST_P(VariantParity, VarlenForwardMatchesFloat64Reference) {
  SCOPED_TRACE("seed " + std::to_string(seed_));
  expect_cases_ran("varlen  ", GetParam(), check_varlen_forward(GetParam()));
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
  // The CLI and reports ask tags, never names: exactly one baseline, a default sweep.
  EXPECT_EQ(variants_tagged(VariantTag::baseline).size(), 1u);
  EXPECT_FALSE(variants_tagged(VariantTag::default_sweep).empty());
  for (const char* core : {"naive", "inplace", "sdpa-math", "sdpa-efficient", "sdpa-flash", "sdpa-cudnn", "sdpa-auto"})
    EXPECT_TRUE(seen.count(core)) << core;
}

TEST(SdpaVariants, BackendFlagsAreRestored) {
  auto& ctx = at::globalContext();
  const bool flash = ctx.userEnabledFlashSDP(), math = ctx.userEnabledMathSDP(),
             eff = ctx.userEnabledMemEfficientSDP(), cudnn = ctx.userEnabledCuDNNSDP();
  Problem p;
  p.batch = 1, p.heads_q = p.heads_kv = 2, p.seq_q = p.seq_kv = 16, p.head_dim = 32, p.dtype = DType::FP32;
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
  p.batch = 1, p.heads_q = p.heads_kv = 1, p.seq_q = p.seq_kv = 8, p.head_dim = 64, p.dtype = DType::BF16;
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

// The bottom-right mask reaches each SDPA backend the way PyTorch's
// causal_lower_right does; the facts say which route was taken.
TEST(SdpaVariants, LowerRightCausalRouteIsReported) {
  Problem p;
  p.batch = 1, p.heads_q = 4, p.heads_kv = 2, p.seq_q = 5, p.seq_kv = 40, p.head_dim = 32;
  p.dtype = DType::FP32;
  auto v = make_variant("sdpa-math");
  ASSERT_TRUE(v->supports(p).ok);
  const Inputs in = random_inputs(p);
  v->prepare(p, in.q, in.k, in.v);
  bool said = false;
  for (const Fact& f : v->facts()) said = said || f.value.find("materialised") != std::string::npos;
  EXPECT_TRUE(said);
  // One query sees every key under the bottom-right mask: nothing to materialise.
  p.seq_q = 1;
  const Inputs one = random_inputs(p);
  v->prepare(p, one.q, one.k, one.v);
  EXPECT_TRUE(v->facts().empty());
}

// A backward pass of our fused variant names its backward kernels (read from
// the traits they are built with), a forward pass does not; prepare needs no
// GPU, so this runs everywhere.
TEST(CustomFlashFacts, BackwardPassNamesTheBackwardKernels) {
  Problem p;
  p.batch = 1, p.heads_q = 2, p.heads_kv = 2, p.seq_q = 16, p.seq_kv = 16, p.head_dim = 64;
  auto has_bwd = [](const Variant& v) {
    for (const Fact& f : v.facts())
      if (f.key == "backward kernels") return f.value.find("flash_bwd_kernel") != std::string::npos;
    return false;
  };
  auto v = make_variant("custom-flash");
  const Inputs in = random_inputs(p);
  v->prepare(p, in.q, in.k, in.v);
  EXPECT_FALSE(has_bwd(*v));
  p.pass = Pass::bwd;
  v->prepare(p, in.q, in.k, in.v);
  EXPECT_TRUE(has_bwd(*v));
}

// The paged cache the runner builds: a random permutation of pages, key j of
// sequence b at row j % page of page table[b][j / page], NaN past the keys,
// and gathering it back gives k exactly.
TEST(PagedKv, CopyPlacesEveryKeyAndGatherRestoresIt) {
  at::manual_seed(7);
  for (const int64_t page : {1, 16, 64, 256, 48}) {
    SCOPED_TRACE("page " + std::to_string(page));
    const at::Tensor k = at::randn({3, 2, 77, 8}), v = at::randn({3, 2, 77, 8});
    const PagedKv kv = paged_copy(k, v, page);
    // One sequence in pages of one token: the reordering is a view there, the pool must not be.
    EXPECT_TRUE(paged_copy(k.narrow(0, 0, 1), v.narrow(0, 0, 1), 1).k_cache.is_contiguous());
    const int64_t per_seq = (77 + page - 1) / page;
    ASSERT_EQ(kv.block_table.sizes(), (std::vector<int64_t>{3, per_seq}));
    EXPECT_EQ(kv.block_table.scalar_type(), at::kInt);
    ASSERT_EQ(kv.k_cache.sizes(), (std::vector<int64_t>{3 * per_seq, 2, page, 8}));
    EXPECT_TRUE(kv.k_cache.is_contiguous() && kv.v_cache.is_contiguous()) << "the kernels read contiguous pools";
    EXPECT_EQ(kv.page_size(), page);
    EXPECT_TRUE(at::equal(std::get<0>(at::sort(kv.block_table.flatten())), at::arange(3 * per_seq, at::kInt)))
        << "the table is a permutation of the pool's pages";
    const auto table = kv.block_table.accessor<int, 2>();
    for (const auto& [b, h, j] : {std::tuple{0, 0, 0}, {2, 1, 76}, {1, 0, 33}, {2, 0, 64}}) {
      const at::Tensor row = kv.k_cache[table[b][j / page]][h][j % page];
      EXPECT_TRUE(at::equal(row, k[b][h][j])) << "key " << j << " of sequence " << b << ", head " << h;
    }
    if (77 % page != 0)
      EXPECT_TRUE(at::isnan(kv.v_cache[table[0][per_seq - 1]][0][77 % page]).all().item<bool>())
          << "the last page's tail holds NaN";
    EXPECT_TRUE(at::equal(gather_pages(kv.k_cache, kv.block_table, 77), k));
    EXPECT_TRUE(at::equal(gather_pages(kv.v_cache, kv.block_table, 77), v));
    const at::Tensor gathered = gather_pages(kv.k_cache, kv.block_table, 77);
    EXPECT_TRUE(gathered.is_contiguous());
  }
}

// Every variant reads a paged problem: with its own kernel (reads_pages), or
// by the default gather; a paged problem's facts never claim what it is not.
TEST(PagedKv, EveryVariantEitherReadsPagesOrGathersThem) {
  Problem p;
  p.batch = 2, p.heads_q = 2, p.heads_kv = 1, p.seq_q = 1, p.seq_kv = 50, p.head_dim = 64;
  p.dtype = DType::FP32;
  p.page_size = 16;
  at::manual_seed(3);
  const Inputs in = random_inputs(p);
  ASSERT_TRUE(in.paged.block_table.defined());
  const at::Tensor ref = reference_attention(p, in);
  int gathered = 0;
  for (const auto& entry : variant_registry()) {
    auto v = entry.make();
    if (!v->supports(p).ok) continue;
    SCOPED_TRACE(entry.name);
    v->prepare(p, in.q, in.k, in.v);
    EXPECT_FALSE(v->reads_pages()) << "no CPU kernel reads pages";
    EXPECT_LE(relative_frobenius_error(forward_of(*v, p, in), ref), 1e-5);
    ++gathered;
  }
  EXPECT_GT(gathered, 0);
}

// The mask of chosen query rows is the whole mask's rows: every alignment, a
// window, and more keys than queries.
TEST(Reference, MaskOfRowsIsTheMasksRows) {
  for (const Mask m : {Mask::causal_bottom_right, Mask::causal_top_left, Mask::none})
    for (const int64_t window : {int64_t{0}, int64_t{3}})
      for (const auto [sq, skv] : {std::pair<int64_t, int64_t>{9, 9}, {4, 13}}) {
        Problem p;
        p.seq_q = sq, p.seq_kv = skv, p.mask = m;
        p.window = m == Mask::causal_bottom_right ? window : 0;
        const at::Tensor rows = at::tensor(std::vector<int64_t>{sq - 1, 0, 2}, at::kLong);
        const at::Tensor whole = hidden_keys_mask(p, at::TensorOptions());
        const at::Tensor part = hidden_keys_of_rows(p, rows);
        ASSERT_EQ(whole.defined(), part.defined()) << mask_name(m);
        if (whole.defined()) EXPECT_TRUE(whole.index_select(0, rows).equal(part)) << mask_name(m) << " w" << window;
      }
}

// sampled_output_error reads evenly spaced rows within its budget, the last
// row always, and every row when they fit; variable-length batches too.
TEST(Reference, SampledErrorComparesRowsWithinItsBudget) {
  at::manual_seed(11);
  Problem p;
  p.batch = 2, p.heads_q = 4, p.heads_kv = 2, p.seq_q = p.seq_kv = 64, p.head_dim = 16;
  p.dtype = DType::FP32, p.device = "cpu";
  const Inputs in = random_inputs(p);
  const at::Tensor ref = reference_attention(p, in);
  const int64_t per_row = p.batch * p.heads_q * p.seq_kv;

  const Accuracy all = sampled_output_error(p, in, ref.to(at::kFloat), int64_t{1} << 40);
  EXPECT_EQ(all.rows, 128);
  EXPECT_EQ(all.total_rows, 128);
  EXPECT_NEAR(all.rel_error, relative_frobenius_error(ref.to(at::kFloat), ref), 1e-12);
  EXPECT_GT(all.rel_error, 0.0);  // float32 rounding of the reference

  // Four rows of 64: 63, 42, 21, 0. A wrong row 1 is not among them; a wrong last row always is.
  at::Tensor wrong_row1 = ref.clone(), wrong_last = ref.clone();
  wrong_row1.select(2, 1).add_(1.0);
  wrong_last.select(2, 63).add_(1.0);
  const Accuracy four = sampled_output_error(p, in, wrong_row1, 4 * per_row);
  EXPECT_EQ(four.rows, 8);
  EXPECT_EQ(four.rel_error, 0.0);
  EXPECT_GT(sampled_output_error(p, in, wrong_row1, int64_t{1} << 40).rel_error, 0.01);
  const Accuracy one = sampled_output_error(p, in, wrong_last, 1);  // a budget below one row: the last row
  EXPECT_EQ(one.rows, 2);
  EXPECT_GT(one.rel_error, 0.1);

  // A variable-length batch, compared from its packed rows, sequence by sequence.
  Problem v = p;
  v.seqlens = {5, 64}, v.mask = Mask::causal_bottom_right;
  const Inputs vin = random_inputs(v);
  const at::Tensor packed = real_rows(v, reference_attention(v, vin));
  const Accuracy ve = sampled_output_error(v, vin, packed, int64_t{1} << 40);
  EXPECT_EQ(ve.rows, 69);
  EXPECT_EQ(ve.total_rows, 69);
  EXPECT_EQ(ve.rel_error, 0.0);
  at::Tensor off = packed.clone();
  off.select(0, 4).add_(1.0);  // the first sequence's last query
  EXPECT_GT(sampled_output_error(v, vin, off, 1).rel_error, 0.1);
}
