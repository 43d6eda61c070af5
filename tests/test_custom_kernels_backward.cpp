// Backward of attnprof's own CUDA operators: attnprof::flash_attention_backward
// (portable), attnprof::flash_attention_backward_sm90 (Hopper) and
// attnprof::scaled_masked_softmax_backward directly, and both forward
// operators through autograd (the dispatcher's Autograd kernels, the
// custom-flash and custom-softmax variants). Gradients are compared with
// float64 autograd on fresh random inputs (the seed is printed on failure);
// outputs land in memory poisoned with NaN and must be finite everywhere. Pass
// rule per gradient: relative Frobenius error <= 2x that of a plain same-dtype
// implementation (its own autograd) and <= 1e-2.
#include <ATen/ATen.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/autograd.h>
#include <torch/cuda.h>
#include <ATen/cuda/CUDAContext.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "attnprof/problem.h"
#include "attnprof/variant.h"
#include "kernels/flash_sm90/flash_sm90_params.h"
#ifdef ATTNPROF_HAVE_CUDA_KERNELS
#include "kernels/operators/backward_choice.h"
#endif
#include "kernels/operators/signatures.h"
#include "variants/torch_problem.h"

namespace attnprof {
std::unique_ptr<Variant> make_custom_softmax();
std::unique_ptr<Variant> make_custom_flash();
}  // namespace attnprof

namespace {

using attnprof::relative_frobenius_error;

bool has_cuda_kernel(const char* op) {
  auto handle = c10::Dispatcher::singleton().findSchema({op, ""});
  return handle && handle->hasKernelForDispatchKey(c10::DispatchKey::CUDA);
}

#define REQUIRE_CUDA_BACKWARD()                                                         \
  do {                                                                                  \
    if (!torch::cuda::is_available())                                                   \
      GTEST_SKIP() << "no CUDA device: the backward kernel tests need a GPU";           \
    if (!has_cuda_kernel("attnprof::flash_attention_backward"))                         \
      GTEST_SKIP() << "attnprof was built without its CUDA kernels";                    \
  } while (0)

using attnprof::ops::op_handle;
using SoftmaxFn = attnprof::ops::ScaledMaskedSoftmaxFn;
using SoftmaxBwdFn = attnprof::ops::ScaledMaskedSoftmaxBackwardFn;

// A fresh seed per case, reported by SCOPED_TRACE when an expectation fails.
uint64_t fresh_seed() {
  static uint64_t counter = 0;
  const uint64_t seed =
      static_cast<uint64_t>(std::chrono::high_resolution_clock::now().time_since_epoch().count()) + ++counter;
  at::manual_seed(seed);
  return seed;
}

// Leaves freed blocks full of NaN in the caching allocator, the sizes the op is
// about to allocate, so an element the kernels do not write stays NaN.
void poison_next_allocations(const std::vector<std::pair<std::vector<int64_t>, at::ScalarType>>& shapes) {
  std::vector<at::Tensor> held;
  for (const auto& [shape, dtype] : shapes)
    held.push_back(at::full(shape, std::numeric_limits<double>::quiet_NaN(),
                            at::TensorOptions().device(at::kCUDA).dtype(dtype)));
}

bool all_finite(const at::Tensor& t) { return at::isfinite(t).all().item<bool>(); }

// [sq, sk] boolean, true where causal masking hides key j from query i:
// bottom-right aligned, j > i + sk - sq.
at::Tensor bottom_right_mask(int64_t sq, int64_t sk, const at::TensorOptions& opts) {
  return at::ones({sq, sk}, opts.dtype(at::kBool)).triu(sk - sq + 1);
}

// softmax over the last dimension of masked scores, with rows where every key
// is masked giving zeros (and zero gradients) instead of NaN.
at::Tensor safe_softmax(const at::Tensor& s, const at::Tensor& mask) {
  if (!mask.defined()) return at::softmax(s, -1);
  const at::Tensor empty_row = mask.all(-1, /*keepdim=*/true);
  const at::Tensor p = at::softmax(s.masked_fill(mask, -INFINITY).masked_fill(empty_row, 0.0), -1);
  return p.masked_fill(mask, 0.0).masked_fill(empty_row, 0.0);
}

struct AttentionGrads {
  at::Tensor out, lse, dq, dk, dv;
};

// Attention and its gradients through autograd in q's dtype: float64 gives the
// reference, bf16/fp16 the plain same-dtype implementation. K and V are
// expanded to the query heads with repeat_interleave, whose backward sums the
// gradients of a group.
AttentionGrads attention_autograd(const at::Tensor& q0, const at::Tensor& k0, const at::Tensor& v0,
                                  const at::Tensor& grad_out, bool causal, double scale) {
  const at::Tensor q = q0.detach().requires_grad_(true);
  const at::Tensor k = k0.detach().requires_grad_(true);
  const at::Tensor v = v0.detach().requires_grad_(true);
  const int64_t group = q.size(1) / k.size(1);
  const at::Tensor ke = k.repeat_interleave(group, 1), ve = v.repeat_interleave(group, 1);
  const at::Tensor s = at::matmul(q, ke.transpose(-2, -1)) * scale;
  const at::Tensor mask = causal ? bottom_right_mask(q.size(2), k.size(2), q.options()) : at::Tensor();
  const at::Tensor out = at::matmul(safe_softmax(s, mask), ve);
  auto grads = torch::autograd::grad({out}, {q, k, v}, {grad_out.to(q.scalar_type())});
  at::Tensor lse = at::logsumexp(causal ? s.detach().masked_fill(mask, -INFINITY) : s.detach(), -1);
  return {out.detach(), lse, grads[0], grads[1], grads[2]};
}

// The pass rule for one gradient. A reference that is exactly zero (every row
// sees one key: softmax is constant, dQ = dK = 0) has no relative error;
// there the result must be zero to within 1e-3 absolute.
void expect_grad(const char* name, const at::Tensor& got, const at::Tensor& plain, const at::Tensor& ref) {
  SCOPED_TRACE(name);
  ASSERT_TRUE(all_finite(got)) << name << " not fully written (NaN/inf left)";
  if (ref.abs().max().item<double>() < 1e-12) {
    EXPECT_LE(got.abs().max().item<double>(), 1e-3);
    return;
  }
  const double err = relative_frobenius_error(got, ref);
  const double err_plain = relative_frobenius_error(plain, ref);
  EXPECT_LE(err, 2 * err_plain + 1e-6) << name << ": plain same-dtype error " << err_plain;
  EXPECT_LE(err, 1e-2) << name;
}

// Fresh inputs of one attention problem with their float64 reference and
// plain same-dtype gradients, and leaf copies that require grad.
struct GradProblem {
  at::Tensor q0, k0, v0, dout;
  AttentionGrads ref, plain;
  at::Tensor q, k, v;
};

GradProblem grad_problem(int64_t b, int64_t h, int64_t s, int64_t d, at::ScalarType dt, bool causal,
                         double scale) {
  GradProblem g;
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dt);
  g.q0 = at::randn({b, h, s, d}, opts);
  g.k0 = at::randn({b, h, s, d}, opts);
  g.v0 = at::randn({b, h, s, d}, opts);
  g.dout = at::randn({b, h, s, d}, opts);
  g.ref = attention_autograd(g.q0.to(at::kDouble), g.k0.to(at::kDouble), g.v0.to(at::kDouble),
                             g.dout.to(at::kDouble), causal, scale);
  g.plain = attention_autograd(g.q0, g.k0, g.v0, g.dout, causal, scale);
  g.q = g.q0.clone().requires_grad_(true);
  g.k = g.k0.clone().requires_grad_(true);
  g.v = g.v0.clone().requires_grad_(true);
  return g;
}

// Stops a case loop after a few failing cases: enough to see the pattern,
// short enough to read (each failing case already names its seed and shape).
class FailureBudget {
 public:
  explicit FailureBudget(int cases) : left_(cases) {}
  // Call after each case; true when the loop should stop.
  bool exhausted() {
    const int parts = testing::UnitTest::GetInstance()->current_test_info()->result()->total_part_count();
    if (parts > seen_) left_ -= 1;
    seen_ = parts;
    return left_ <= 0;
  }

 private:
  int left_;
  int seen_ = 0;
};

using BadCalls = std::vector<std::pair<std::string, std::function<void()>>>;

// Every call must raise a c10::Error whose message names the operator.
void expect_each_rejected(const BadCalls& calls, const std::string& op_name) {
  for (const auto& [what, fn] : calls) {
    SCOPED_TRACE(what);
    try {
      fn();
      ADD_FAILURE() << "accepted";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(op_name), std::string::npos) << e.what();
    }
  }
}

// A square problem of the backward pass on cuda:0, as the runner describes it.
attnprof::Problem backward_problem(int64_t b, int64_t h, int64_t s, int64_t d, at::ScalarType dt, bool causal) {
  attnprof::Problem p;
  p.batch = b, p.heads_q = p.heads_kv = h, p.seq_q = p.seq_kv = s, p.head_dim = d;
  p.mask = causal ? attnprof::Mask::causal_bottom_right : attnprof::Mask::none;
  p.pass = attnprof::Pass::bwd;
  p.device = "cuda:0";
  p.dtype = dt == at::kBFloat16 ? attnprof::DType::BF16 : attnprof::DType::FP16;
  return p;
}

struct BwdCase {
  int64_t sq, sk, hq, hkv, d;
  at::ScalarType dtype;
  bool causal;
  int64_t b = 2;
};

std::string describe(const BwdCase& c, uint64_t seed) {
  return "b" + std::to_string(c.b) + " hq" + std::to_string(c.hq) + " hkv" + std::to_string(c.hkv) +
         " sq" + std::to_string(c.sq) + " sk" + std::to_string(c.sk) + " d" + std::to_string(c.d) +
         (c.dtype == at::kBFloat16 ? " bf16" : " fp16") + (c.causal ? " causal" : " full") +
         " seed " + std::to_string(seed);
}

using BwdCall = std::function<std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
    const at::Tensor& lse, bool causal, double scale)>;

// One case of a backward operator on its own: out and lse come from the
// float64 reference (rounded to the dtype / float32), so the case needs no
// forward support for grouped heads or seq_q != seq_k.
void check_backward_case(const BwdCall& call, const BwdCase& c) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE(describe(c, seed));
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(c.dtype);
  const at::Tensor q = at::randn({c.b, c.hq, c.sq, c.d}, opts);
  const at::Tensor k = at::randn({c.b, c.hkv, c.sk, c.d}, opts);
  const at::Tensor v = at::randn({c.b, c.hkv, c.sk, c.d}, opts);
  const at::Tensor dout = at::randn({c.b, c.hq, c.sq, c.d}, opts);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.d));
  const AttentionGrads ref = attention_autograd(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble),
                                                dout.to(at::kDouble), c.causal, scale);
  const AttentionGrads plain = attention_autograd(q, k, v, dout, c.causal, scale);
  const at::Tensor out = ref.out.to(c.dtype), lse = ref.lse.to(at::kFloat);

  const int64_t sq_pad = (c.sq + 127) / 128 * 128;
  poison_next_allocations({{{c.b, c.hq, c.sq, c.d}, c.dtype},
                           {{c.b, c.hkv, c.sk, c.d}, c.dtype},
                           {{c.b, c.hkv, c.sk, c.d}, c.dtype},
                           {{c.b, c.hq, sq_pad, c.d}, at::kFloat},
                           {{2, c.b, c.hq, sq_pad}, at::kFloat}});
  auto [dq, dk, dv] = call(dout, q, k, v, out, lse, c.causal, scale);
  ASSERT_EQ(dq.sizes(), q.sizes());
  ASSERT_EQ(dk.sizes(), k.sizes());
  ASSERT_EQ(dv.sizes(), v.sizes());
  ASSERT_EQ(dq.scalar_type(), c.dtype);
  expect_grad("dq", dq, plain.dq, ref.dq);
  expect_grad("dk", dk, plain.dk, ref.dk);
  expect_grad("dv", dv, plain.dv, ref.dv);
}

// A backward operator on its own over seq_q / seq_k pairs, grouped heads,
// dtypes and masks (check_backward_case). `call` runs it; head_dims: the ones
// it takes.
void check_backward_op(const BwdCall& call, const std::vector<int64_t>& head_dims = {64, 128}) {
  const std::vector<std::pair<int64_t, int64_t>> seqs = {
      {1, 1},    {17, 17},   {65, 65},    {1000, 1000}, {1025, 1025},
      {17, 1000}, {1, 1025}, {1025, 65},  {128, 4096}};  // seq_q > seq_k: rows with no key (causal)
  const std::vector<std::pair<int64_t, int64_t>> heads = {{4, 4}, {8, 2}, {4, 1}};  // GQA 1, 4, MQA
  FailureBudget budget(8);
  for (auto [sq, sk] : seqs)
    for (auto [hq, hkv] : heads)
      for (int64_t d : head_dims)
        for (auto dt : {at::kBFloat16, at::kHalf})
          for (bool causal : {false, true}) {
            check_backward_case(call, BwdCase{sq, sk, hq, hkv, d, dt, causal});
            if (budget.exhausted()) return;
          }
}

// Bad inputs a flash backward operator must reject with an error naming it.
// tensor_maps: the Hopper operator's extra rule, 16-byte aligned bases.
void check_backward_rejects(const char* op_name, bool tensor_maps) {
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor q = at::randn({1, 4, 32, 64}, bf16), k = at::randn({1, 2, 48, 64}, bf16);
  const at::Tensor lse = at::zeros({1, 4, 32}, bf16.dtype(at::kFloat));
  auto bwd = attnprof::ops::flash_backward_op(op_name);
  auto call = [&](const at::Tensor& g, const at::Tensor& qq, const at::Tensor& kk, const at::Tensor& vv,
                  const at::Tensor& o, const at::Tensor& l, double scale) {
    return bwd.call(g, qq, kk, vv, o, l, true, scale);
  };
  EXPECT_NO_THROW(call(q, q, k, k, q, lse, 0.125));  // the valid call the cases below break
  BadCalls bad = {
      {"fp32 inputs", [&] { call(q.to(at::kFloat), q.to(at::kFloat), k.to(at::kFloat), k.to(at::kFloat), q.to(at::kFloat), lse, 0.125); }},
      {"mixed dtypes", [&] { call(q, q, k.to(at::kHalf), k, q, lse, 0.125); }},
      {"lse not float32", [&] { call(q, q, k, k, q, lse.to(at::kBFloat16), 0.125); }},
      {"head_dim 96", [&] {
         const at::Tensor q96 = at::randn({1, 4, 32, 96}, bf16), k96 = at::randn({1, 2, 48, 96}, bf16);
         call(q96, q96, k96, k96, q96, lse, 0.125);
       }},
      {"kv heads not dividing", [&] {
         const at::Tensor k3 = at::randn({1, 3, 48, 64}, bf16);
         call(q, q, k3, k3, q, lse, 0.125);
       }},
      {"zero kv heads", [&] {
         const at::Tensor k0 = at::randn({1, 0, 48, 64}, bf16);
         call(q, q, k0, k0, q, lse, 0.125);
       }},
      {"k and v shapes differ", [&] { call(q, q, k, k.narrow(2, 0, 40).contiguous(), q, lse, 0.125); }},
      {"out shape", [&] { call(q, q, k, k, q.narrow(2, 0, 16).contiguous(), lse, 0.125); }},
      {"grad_out shape", [&] { call(q.narrow(2, 0, 16).contiguous(), q, k, k, q, lse, 0.125); }},
      {"lse shape", [&] { call(q, q, k, k, q, lse.narrow(2, 0, 16).contiguous(), 0.125); }},
      {"batch differs", [&] {
         const at::Tensor k2 = at::randn({2, 2, 48, 64}, bf16);
         call(q, q, k2, k2, q, lse, 0.125);
       }},
      {"rank 3", [&] { call(q[0], q[0], k[0], k[0], q[0], lse, 0.125); }},
      {"non-contiguous", [&] { call(q, q.transpose(2, 3).contiguous().transpose(2, 3), k, k, q, lse, 0.125); }},
      {"on the CPU", [&] { call(q.cpu(), q.cpu(), k.cpu(), k.cpu(), q.cpu(), lse.cpu(), 0.125); }},
      {"one tensor on the CPU", [&] { call(q, q, k.cpu(), k, q, lse, 0.125); }},
      {"undefined grad_out", [&] { call(at::Tensor(), q, k, k, q, lse, 0.125); }},
      {"scale 0", [&] { call(q, q, k, k, q, lse, 0.0); }},
      {"scale nan", [&] { call(q, q, k, k, q, lse, std::nan("")); }},
      {"scale inf", [&] { call(q, q, k, k, q, lse, INFINITY); }},
  };
  // A view one element into its storage: contiguous, but 2 bytes off the
  // 16-byte alignment TMA needs.
  const at::Tensor q_off = at::randn({q.numel() + 1}, bf16).narrow(0, 1, q.numel()).view(q.sizes());
  if (tensor_maps) {
    bad.push_back({"q misaligned", [&] { call(q, q_off, k, k, q, lse, 0.125); }});
    bad.push_back({"grad_out misaligned", [&] { call(q_off, q, k, k, q, lse, 0.125); }});
  }
  expect_each_rejected(bad, op_name);
}

// The operator `op_name`, called through the dispatcher.
BwdCall bwd_op(const char* op_name) {
  return [handle = attnprof::ops::flash_backward_op(op_name)](const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k,
                                                   const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse,
                                                   bool causal, double scale) {
    return handle.call(dout, q, k, v, out, lse, causal, scale);
  };
}

// The Hopper backward's by-name operator, and one of its configurations
// called through it; the names of those built.
using ConfigBwdFn = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&, const at::Tensor&,
    bool, double, c10::string_view);
constexpr const char* kConfigBwdOp = "attnprof::flash_attention_backward_sm90_config";

BwdCall bwd_config_op(const std::string& name) {
  return [handle = op_handle<ConfigBwdFn>(kConfigBwdOp), name](const at::Tensor& dout, const at::Tensor& q,
                                                                const at::Tensor& k, const at::Tensor& v,
                                                                const at::Tensor& out, const at::Tensor& lse,
                                                                bool causal, double scale) {
    return handle.call(dout, q, k, v, out, lse, causal, scale, name);
  };
}

std::vector<std::string> built_bwd_configs() {
  return op_handle<std::vector<std::string>(bool)>("attnprof::flash_attention_sm90_configs").call(true);
}

TEST(FlashAttentionBackwardOp, MatchesFloat64Autograd) {
  REQUIRE_CUDA_BACKWARD();
  check_backward_op(bwd_op("attnprof::flash_attention_backward"));
}

// The Hopper backward runs only where it was built and on compute capability
// 9.0; elsewhere these tests say why they skip.
#define REQUIRE_SM90_BACKWARD()                                                                      \
  do {                                                                                               \
    REQUIRE_CUDA_BACKWARD();                                                                         \
    if (!has_cuda_kernel("attnprof::flash_attention_backward_sm90"))                                 \
      GTEST_SKIP() << "attnprof was built without its sm_90a kernels";                               \
    const auto cap = at::cuda::getCurrentDeviceProperties();                                         \
    if (cap->major != 9 || cap->minor != 0)                                                          \
      GTEST_SKIP() << "the Hopper backward needs a compute capability 9.0 GPU, this one is "         \
                   << cap->major << "." << cap->minor;                                               \
  } while (0)

TEST(FlashAttentionBackwardSm90Op, MatchesFloat64Autograd) {
  REQUIRE_SM90_BACKWARD();
  check_backward_op(bwd_op("attnprof::flash_attention_backward_sm90"));
}

// attnprof::flash_attention_backward_sm90_config runs each configuration the
// build has by name (the operator's own and the alternatives of
// -DATTNPROF_KERNEL_CONFIGS): every one passes the same cases at its head dim;
// a name that is not built, or is for another head dim, is refused.
TEST(FlashAttentionBackwardSm90Op, EachBuiltConfigurationByNameMatchesFloat64Autograd) {
  REQUIRE_SM90_BACKWARD();
  const auto by_name = op_handle<ConfigBwdFn>(kConfigBwdOp);
  const auto names = built_bwd_configs();
  ASSERT_FALSE(names.empty());
  for (const std::string& name : names) {
    SCOPED_TRACE(name);
    const auto* entry = attnprof::flash_sm90::find_bwd_config(name, /*is_bf16=*/true);
    ASSERT_NE(entry, nullptr);
    check_backward_op(bwd_config_op(name), {entry->head_dim});
  }
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor q = at::randn({1, 4, 32, 64}, bf16), lse = at::zeros({1, 4, 32}, bf16.dtype(at::kFloat));
  expect_each_rejected({{"a name that is not built", [&] { by_name.call(q, q, q, q, q, lse, true, 0.125, "no_such"); }},
                        {"a configuration for head_dim 128", [&] {
                           by_name.call(q, q, q, q, q, lse, true, 0.125, "sm90_bwd_hdim128");
                         }}},
                       kConfigBwdOp);
}

// Shapes of at least 3 tiles per SM on this GPU through the Hopper backward
// operator and every head_dim-128 configuration built by name: with the
// persistent one (sm90_bwd_hdim128_persistent, one block per SM walking the
// tiles without a mask, tile_scheduler_bwd_sm90.cuh) every hand-over between
// a block's tiles (K and V, the Q/dO stages, the dS buffers, the dQ writer) is
// crossed; tiles of 1 step (fewer than the stages) and of many, partial key
// blocks, grouped heads, seq_q != seq_k, and one causal case.
TEST(FlashAttentionBackwardSm90Op, ManyTilesPerSmMatchFloat64Autograd) {
  REQUIRE_SM90_BACKWARD();
  const int64_t sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
  const auto batch_for = [&](int64_t hkv, int64_t sk) {
    const int64_t tiles_per_batch = hkv * ((sk + 127) / 128);
    return (3 * sms + tiles_per_batch - 1) / tiles_per_batch;
  };
  std::vector<std::pair<std::string, BwdCall>> calls = {
      {"the operator", bwd_op("attnprof::flash_attention_backward_sm90")}};
  for (const std::string& name : built_bwd_configs()) {
    const auto* entry = attnprof::flash_sm90::find_bwd_config(name, /*is_bf16=*/true);
    if (entry != nullptr && entry->head_dim == 128) calls.push_back({name, bwd_config_op(name)});
  }
  for (const auto& [what, call] : calls) {
    SCOPED_TRACE(what);
    for (BwdCase c : {BwdCase{1000, 1000, 16, 16, 128, at::kBFloat16, false},
                      BwdCase{333, 1500, 12, 4, 128, at::kHalf, false},
                      BwdCase{65, 4100, 4, 1, 128, at::kBFloat16, false},
                      BwdCase{17, 2000, 8, 8, 128, at::kHalf, false},
                      BwdCase{1000, 1000, 16, 16, 128, at::kBFloat16, true}}) {
      c.b = batch_for(c.hkv, c.sk);
      check_backward_case(call, c);
    }
  }
}

// Both Hopper-capable forward operators record an autograd node whose
// backward runs the Hopper kernel on this GPU (kernels/operators/autograd.cpp); the
// gradients match, for square and grouped-query shapes.
TEST(FlashAttentionBackwardSm90Op, ThroughAutogradFromBothForwards) {
  REQUIRE_SM90_BACKWARD();
  FailureBudget budget(4);
  for (const char* fwd_name : {"attnprof::flash_attention", "attnprof::flash_attention_sm90"})
    for (const auto& [b, hq, hkv, s, d] : std::vector<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t>>{
             {2, 3, 3, 333, 128}, {1, 8, 2, 1025, 64}, {2, 4, 1, 200, 128}, {1, 2, 2, 1, 64}})
      for (auto dt : {at::kBFloat16, at::kHalf})
        for (bool causal : {false, true}) {
          const uint64_t seed = fresh_seed();
          SCOPED_TRACE(testing::Message() << fwd_name << " " << b << "x" << hq << "/" << hkv << "x" << s << "x" << d
                                          << " " << dt << (causal ? " causal" : " full") << " seed " << seed);
          const double scale = 1.0 / std::sqrt(static_cast<double>(d));
          const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dt);
          const at::Tensor q0 = at::randn({b, hq, s, d}, opts), k0 = at::randn({b, hkv, s, d}, opts);
          const at::Tensor v0 = at::randn({b, hkv, s, d}, opts), dout = at::randn({b, hq, s, d}, opts);
          const AttentionGrads ref = attention_autograd(q0.to(at::kDouble), k0.to(at::kDouble), v0.to(at::kDouble),
                                                        dout.to(at::kDouble), causal, scale);
          const AttentionGrads plain = attention_autograd(q0, k0, v0, dout, causal, scale);
          const at::Tensor q = q0.clone().requires_grad_(true), k = k0.clone().requires_grad_(true);
          const at::Tensor v = v0.clone().requires_grad_(true);
          auto [out, lse] = attnprof::ops::flash_forward_op(fwd_name).call(q, k, v, causal, scale);
          ASSERT_TRUE(out.grad_fn() != nullptr) << "no autograd node recorded";
#ifdef ATTNPROF_HAVE_CUDA_KERNELS  // (always, where REQUIRE_SM90_BACKWARD lets the test run)
          // The node's choice (kernels/operators/backward_choice.h) must be the Hopper kernel here.
          ASSERT_TRUE(attnprof::kernels::hopper_backward_applies({&q, &k, &v, &dout}));
#endif
          out.backward(dout);
          expect_grad("dq", q.grad(), plain.dq, ref.dq);
          expect_grad("dk", k.grad(), plain.dk, ref.dk);
          expect_grad("dv", v.grad(), plain.dv, ref.dv);
          if (budget.exhausted()) return;
        }
}

// Everything the portable operator rejects, plus what the tensor maps need.
TEST(FlashAttentionBackwardSm90Op, RejectsBadInputs) {
  REQUIRE_SM90_BACKWARD();
  check_backward_rejects("attnprof::flash_attention_backward_sm90", /*tensor_maps=*/true);
}

// End to end through the dispatcher's Autograd kernel (forward + backward
// kernels), the custom-flash variant, and a broadcast gradient (out.sum()).
// Square shapes: the forward's own contract.
TEST(FlashAttentionBackwardOp, ThroughAutograd) {
  REQUIRE_CUDA_BACKWARD();
  struct Shape {
    int64_t b, h, s, d;
  };
  FailureBudget budget(4);
  for (const Shape sh : {Shape{2, 3, 333, 128}, Shape{1, 4, 1, 64}, Shape{2, 2, 1025, 64}, Shape{1, 2, 17, 128}})
    for (auto dt : {at::kBFloat16, at::kHalf})
      for (bool causal : {false, true}) {
        const uint64_t seed = fresh_seed();
        SCOPED_TRACE(testing::Message() << sh.b << "x" << sh.h << "x" << sh.s << "x" << sh.d << " " << dt
                                        << (causal ? " causal" : " full") << " seed " << seed);
        const double scale = 1.0 / std::sqrt(static_cast<double>(sh.d));
        const GradProblem g = grad_problem(sh.b, sh.h, sh.s, sh.d, dt, causal, scale);
        const at::Tensor &q = g.q, &k = g.k, &v = g.v, &dout = g.dout;
        const AttentionGrads &ref = g.ref, &plain = g.plain;
        auto [out, lse] = attnprof::ops::flash_forward_op("attnprof::flash_attention").call(q, k, v, causal, scale);
        ASSERT_TRUE(out.grad_fn() != nullptr) << "no autograd node recorded";
        EXPECT_NE(out.grad_fn()->name().find("FlashAttentionFunction"), std::string::npos)
            << out.grad_fn()->name();
        EXPECT_FALSE(lse.requires_grad()) << "lse is not differentiable";
        out.backward(dout);
        expect_grad("dq", q.grad(), plain.dq, ref.dq);
        expect_grad("dk", k.grad(), plain.dk, ref.dk);
        expect_grad("dv", v.grad(), plain.dv, ref.dv);

        // The custom-flash variant calls the operator through the dispatcher.
        const attnprof::Problem p = backward_problem(sh.b, sh.h, sh.s, sh.d, dt, causal);
        auto var = attnprof::make_custom_flash();
        ASSERT_TRUE(var->supports(p).ok) << var->supports(p).reason;
        var->prepare(p, q, k, v);
        for (const at::Tensor& t : {q, k, v}) t.mutable_grad().reset();
        var->forward(q, k, v).backward(dout);
        expect_grad("custom-flash dq", q.grad(), plain.dq, ref.dq);
        expect_grad("custom-flash dv", v.grad(), plain.dv, ref.dv);

        // out.sum(): autograd hands over a broadcast (stride 0) gradient of ones.
        for (const at::Tensor& t : {q, k, v}) t.mutable_grad().reset();
        std::get<0>(attnprof::ops::flash_forward_op("attnprof::flash_attention").call(q, k, v, causal, scale)).sum().backward();
        const at::Tensor ones = at::ones_like(dout);
        const AttentionGrads ref1 = attention_autograd(g.q0.to(at::kDouble), g.k0.to(at::kDouble),
                                                       g.v0.to(at::kDouble), ones.to(at::kDouble), causal, scale);
        const AttentionGrads plain1 = attention_autograd(g.q0, g.k0, g.v0, ones, causal, scale);
        expect_grad("sum() dk", k.grad(), plain1.dk, ref1.dk);
        expect_grad("sum() dv", v.grad(), plain1.dv, ref1.dv);
        if (budget.exhausted()) return;
      }
}

TEST(FlashAttentionBackwardOp, RejectsBadInputs) {
  REQUIRE_CUDA_BACKWARD();
  check_backward_rejects("attnprof::flash_attention_backward", /*tensor_maps=*/false);
}

// Forward: bottom-right causal mask when seq_q != seq_k (rows that see no key
// give zeros). Backward: the fused kernel on its own (warp, four-warp and
// block paths) and through autograd.
TEST(ScaledMaskedSoftmaxBackwardOp, MatchesFloat64Autograd) {
  REQUIRE_CUDA_BACKWARD();
  struct Case {
    std::vector<int64_t> shape;
    at::ScalarType dtype;
  };
  const std::vector<Case> cases = {
      {{2, 3, 17, 17}, at::kBFloat16},  {{1, 1, 1, 1}, at::kHalf},         {{3, 5, 64, 64}, at::kBFloat16},
      {{2, 3, 40, 17}, at::kHalf},      {{2, 3, 17, 40}, at::kBFloat16},   {{1, 2, 1000, 1000}, at::kHalf},
      {{1, 2, 1025, 1025}, at::kBFloat16}, {{1, 2, 300, 4096}, at::kBFloat16}, {{1, 2, 100, 4096}, at::kFloat},
      {{1, 1, 64, 8192}, at::kHalf},    {{1, 1, 40, 10000}, at::kBFloat16}, {{7, 1000}, at::kFloat},
      {{2, 2, 96, 2048}, at::kFloat},   {{2, 3, 120, 24}, at::kFloat}};
  auto fwd = op_handle<SoftmaxFn>("attnprof::scaled_masked_softmax");
  auto bwd = op_handle<SoftmaxBwdFn>("attnprof::scaled_masked_softmax_backward");
  FailureBudget budget(6);
  for (const auto& c : cases)
    for (bool causal : {false, true}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(testing::Message() << "shape " << at::IntArrayRef(c.shape) << " " << c.dtype
                                      << (causal ? " causal" : " full") << " seed " << seed);
      const auto opts = at::TensorOptions().device(at::kCUDA).dtype(c.dtype);
      const at::Tensor s = at::randn(c.shape, opts) * 4;
      const at::Tensor g = at::randn(c.shape, opts);
      const double scale = 0.37;
      const int64_t sq = c.shape.size() >= 2 ? c.shape[c.shape.size() - 2] : 1, sk = c.shape.back();
      const at::Tensor mask = causal ? bottom_right_mask(sq, sk, opts) : at::Tensor();

      // Reference and plain: softmax(scale · s) through autograd.
      auto softmax_grad = [&](const at::Tensor& x0, const at::Tensor& gx) {
        const at::Tensor x = x0.detach().requires_grad_(true);
        const at::Tensor y = safe_softmax(x * scale, mask.defined() ? mask.expand(x.sizes()) : mask);
        return std::pair{y.detach(), torch::autograd::grad({y}, {x}, {gx})[0]};
      };
      const auto [y_ref, dx_ref] = softmax_grad(s.to(at::kDouble), g.to(at::kDouble));
      const auto [y_plain, dx_plain] = softmax_grad(s, g);

      // Forward, bottom-right masked.
      poison_next_allocations({{c.shape, c.dtype}});
      const at::Tensor y = fwd.call(s, scale, causal);
      ASSERT_TRUE(all_finite(y)) << "forward output not fully written";
      const double err_fwd = relative_frobenius_error(y, y_ref);
      EXPECT_LE(err_fwd, 2 * relative_frobenius_error(y_plain, y_ref) + 1e-6);
      EXPECT_LE(err_fwd, 1e-2);
      if (causal) {
        EXPECT_TRUE((y.masked_select(mask.expand(y.sizes())) == 0).all().item<bool>()) << "masked entries not zero";
      }

      // Backward on the kernel's own forward output.
      poison_next_allocations({{c.shape, c.dtype}});
      const at::Tensor dx = bwd.call(g, y, scale);
      ASSERT_EQ(dx.sizes(), s.sizes());
      expect_grad("grad_scores", dx, dx_plain, dx_ref);

      // Through the Autograd kernel.
      const at::Tensor x = s.clone().requires_grad_(true);
      const at::Tensor y2 = fwd.call(x, scale, causal);
      ASSERT_TRUE(y2.grad_fn() != nullptr);
      EXPECT_NE(y2.grad_fn()->name().find("ScaledMaskedSoftmaxFunction"), std::string::npos) << y2.grad_fn()->name();
      y2.backward(g);
      expect_grad("autograd grad_scores", x.grad(), dx_plain, dx_ref);
      if (budget.exhausted()) return;
    }
}

// custom-softmax end to end: matmul, our softmax, matmul, and back.
TEST(ScaledMaskedSoftmaxBackwardOp, CustomSoftmaxVariantThroughAutograd) {
  REQUIRE_CUDA_BACKWARD();
  for (bool causal : {false, true})
    for (auto dt : {at::kBFloat16, at::kHalf}) {
      const uint64_t seed = fresh_seed();
      SCOPED_TRACE(testing::Message() << dt << (causal ? " causal" : " full") << " seed " << seed);
      const attnprof::Problem p = backward_problem(2, 3, 333, 64, dt, causal);
      const GradProblem g = grad_problem(p.batch, p.heads_q, p.seq_q, p.head_dim, dt, causal, p.softmax_scale());
      const at::Tensor &q = g.q, &k = g.k, &v = g.v;
      auto var = attnprof::make_custom_softmax();
      ASSERT_TRUE(var->supports(p).ok) << var->supports(p).reason;
      var->prepare(p, q, k, v);
      var->forward(q, k, v).backward(g.dout);
      expect_grad("dq", q.grad(), g.plain.dq, g.ref.dq);
      expect_grad("dk", k.grad(), g.plain.dk, g.ref.dk);
      expect_grad("dv", v.grad(), g.plain.dv, g.ref.dv);
    }
}

TEST(ScaledMaskedSoftmaxBackwardOp, RejectsBadInputs) {
  REQUIRE_CUDA_BACKWARD();
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor y = at::rand({2, 64, 64}, opts), g = at::randn({2, 64, 64}, opts);
  auto bwd = op_handle<SoftmaxBwdFn>("attnprof::scaled_masked_softmax_backward");
  EXPECT_NO_THROW(bwd.call(g, y, 1.0));
  const BadCalls bad = {
      {"non-contiguous", [&] { bwd.call(g.transpose(1, 2), y, 1.0); }},
      {"shapes differ", [&] { bwd.call(g.narrow(2, 0, 32).contiguous(), y, 1.0); }},
      {"dtypes differ", [&] { bwd.call(g.to(at::kHalf), y, 1.0); }},
      {"float64", [&] { bwd.call(g.to(at::kDouble), y.to(at::kDouble), 1.0); }},
      {"int", [&] { bwd.call(g.to(at::kInt), y.to(at::kInt), 1.0); }},
      {"on the CPU", [&] { bwd.call(g.cpu(), y.cpu(), 1.0); }},
      {"one tensor on the CPU", [&] { bwd.call(g.cpu(), y, 1.0); }},
      {"scalar", [&] { bwd.call(g.sum(), y.sum(), 1.0); }},
      {"scale inf", [&] { bwd.call(g, y, INFINITY); }},
      {"undefined", [&] { bwd.call(at::Tensor(), y, 1.0); }},
  };
  expect_each_rejected(bad, "attnprof::scaled_masked_softmax_backward");
}

}  // namespace
