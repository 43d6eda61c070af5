// attnprof's own CUDA operators (attnprof::flash_attention,
// attnprof::scaled_masked_softmax) and the variants built on them, against a
// float64 reference. Fresh random inputs every run (seed printed on failure);
// outputs land in memory poisoned with NaN and must be finite everywhere. Pass rule: relative
// Frobenius error <= 2x that of a plain same-dtype implementation
// (matmul/softmax/matmul) and <= 1e-2.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#ifdef ATTNPROF_HAVE_CUDA_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#endif
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "attention_test_inputs.h"
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
                                                   const at::Tensor&, bool, double, int64_t);
using SoftmaxFn = at::Tensor(const at::Tensor&, double, bool);

// attnprof::flash_attention, its window 0 unless given.
struct FlashOp {
  c10::TypedOperatorHandle<FlashFn> handle;
  std::tuple<at::Tensor, at::Tensor> call(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                          double scale, int64_t window = 0) const {
    return handle.call(q, k, v, causal, scale, window);
  }
};
FlashOp flash_op() {
  return {c10::Dispatcher::singleton().findSchemaOrThrow("attnprof::flash_attention", "").typed<FlashFn>()};
}
c10::TypedOperatorHandle<SoftmaxFn> softmax_op() {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow("attnprof::scaled_masked_softmax", "")
      .typed<SoftmaxFn>();
}

using attnprof::relative_frobenius_error;

// A fresh seed for every test run (CPU and CUDA generators), printed with any
// failure of the test that set it.
uint64_t fresh_seed() {
  const uint64_t seed = std::random_device{}();
  at::manual_seed(seed);
  return seed;
}

// The causal mask of both operators, bottom-right aligned: key j hidden from
// query i iff j > i + (sk - sq) (top-left when square), shaped [sq, sk].
at::Tensor causal_mask(int64_t sq, int64_t sk, const at::TensorOptions& opts) {
  return at::ones({sq, sk}, opts.dtype(at::kBool)).triu(sk - sq + 1);
}

at::Tensor masked_scores(const at::Tensor& s, double scale, bool causal) {
  at::Tensor x = s * scale;
  if (causal) x = x.masked_fill(causal_mask(s.size(-2), s.size(-1), s.options()), -INFINITY);
  return x;
}

struct Attention {
  at::Tensor out, lse;
};

// Attention as flash_attention defines it, computed in the inputs' dtype:
// q [b, hq, sq, d] against k, v [b, hkv, sk, d], query head h reading K/V
// head h / (hq / hkv) (by broadcasting, no copy); a row with no visible key
// gives out 0 and lse −inf. In float64 it is the reference; in the inputs'
// own dtype, the error a plain implementation makes.
// A sliding window (window > 0, causal) also hides keys j <= i + (sk - sq) - window.
Attention grouped_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            bool causal, double scale, int64_t window = 0) {
  const int64_t b = q.size(0), hq = q.size(1), sq = q.size(2), d = q.size(3);
  const int64_t hkv = k.size(1), sk = k.size(2);
  const at::Tensor qg = q.reshape({b, hkv, hq / hkv, sq, d});
  at::Tensor s = at::matmul(qg, k.unsqueeze(2).transpose(-2, -1)) * scale;
  if (causal) s = s.masked_fill(causal_mask(sq, sk, s.options()), -INFINITY);
  if (causal && window > 0)
    s = s.masked_fill(at::ones({sq, sk}, s.options().dtype(at::kBool)).tril(sk - sq - window), -INFINITY);
  const at::Tensor p = at::softmax(s, -1).nan_to_num(0.0);  // all −inf rows: NaN -> 0
  return {at::matmul(p, v.unsqueeze(2)).reshape({b, hq, sq, d}),
          at::logsumexp(s, -1).reshape({b, hq, sq})};
}

Attention reference_attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              bool causal, double scale) {
  return grouped_attention(q.to(at::kDouble), k.to(at::kDouble), v.to(at::kDouble), causal, scale);
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

// The pass rule for attnprof::flash_attention's output and log-sum-exp: out
// within 2x the plain same-dtype error of float64 (and <= 1e-2), lse within
// 1e-3 relative; rows that see no key exactly 0 and −inf, every other value finite.
void expect_matches_reference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                              const at::Tensor& out, const at::Tensor& lse, bool causal, double scale) {
  ASSERT_EQ(out.sizes(), q.sizes());
  ASSERT_EQ(out.scalar_type(), q.scalar_type());
  ASSERT_EQ(lse.sizes(), (std::vector<int64_t>{q.size(0), q.size(1), q.size(2)}));
  ASSERT_EQ(lse.scalar_type(), at::kFloat);
  ASSERT_TRUE(at::isfinite(out).all().item<bool>()) << "output not fully written (NaN/inf left)";
  const Attention ref = reference_attention(q, k, v, causal, scale);
  const at::Tensor visible = at::isfinite(ref.lse);
  const at::Tensor hidden = visible.logical_not();
  const int64_t n_hidden = hidden.sum().item<int64_t>();
  if (n_hidden > 0) {
    EXPECT_TRUE((lse.masked_select(hidden) == -INFINITY).all().item<bool>())
        << "a row that sees no key must have lse -inf";
    EXPECT_TRUE((out.masked_select(hidden.unsqueeze(-1).expand(out.sizes())) == 0).all().item<bool>())
        << "a row that sees no key must be 0";
  }
  ASSERT_GT(visible.sum().item<int64_t>(), 0);
  const at::Tensor lse_seen = lse.masked_select(visible).to(at::kDouble);
  const at::Tensor ref_seen = ref.lse.masked_select(visible);
  ASSERT_TRUE(at::isfinite(lse_seen).all().item<bool>()) << "lse not fully written (NaN/inf left)";
  const double lse_err = (lse_seen - ref_seen).abs().max().item<double>();
  EXPECT_LE(lse_err, 1e-3 * (1 + ref_seen.abs().max().item<double>()));

  const double err = relative_frobenius_error(out, ref.out);
  const double err_plain =
      relative_frobenius_error(grouped_attention(q, k, v, causal, scale).out, ref.out);
  // The 1e-6 floor only matters where both are exact (one key: out = v).
  EXPECT_LE(err, 2 * err_plain + 1e-6) << "plain same-dtype error " << err_plain;
  EXPECT_LE(err, 1e-2);
}

struct FlashCase {
  int64_t batch, heads_q, heads_kv, seq_q, seq_kv, head_dim;
  at::ScalarType dtype;
  bool causal;
};

std::string case_name(const FlashCase& c) {
  return "b" + std::to_string(c.batch) + " hq" + std::to_string(c.heads_q) + " hkv" +
         std::to_string(c.heads_kv) + " sq" + std::to_string(c.seq_q) + " skv" +
         std::to_string(c.seq_kv) + " d" + std::to_string(c.head_dim) +
         (c.dtype == at::kBFloat16 ? " bf16" : " fp16") + (c.causal ? " causal" : " full");
}

// Fresh inputs, NaN-poisoned outputs, the operator, the pass rule.
void run_flash_case(const FlashCase& c) {
  SCOPED_TRACE(case_name(c));
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(c.dtype);
  const at::Tensor q = at::randn({c.batch, c.heads_q, c.seq_q, c.head_dim}, opts);
  const at::Tensor k = at::randn({c.batch, c.heads_kv, c.seq_kv, c.head_dim}, opts);
  const at::Tensor v = at::randn({c.batch, c.heads_kv, c.seq_kv, c.head_dim}, opts);
  const double scale = 1.0 / std::sqrt(static_cast<double>(c.head_dim));
  poison_next_allocations({{{c.batch, c.heads_q, c.seq_q, c.head_dim}, c.dtype},
                           {{c.batch, c.heads_q, c.seq_q}, at::kFloat}});
  auto [out, lse] = flash_op().call(q, k, v, c.causal, scale);
  expect_matches_reference(q, k, v, out, lse, c.causal, scale);
}

// Square shapes with as many K/V heads as query heads: odd lengths around
// the tile sizes (BLOCK_N 48/64, BLOCK_M 128), several batches and heads.
TEST(FlashAttentionOp, SquareShapesMatchFloat64Reference) {
  REQUIRE_CUDA();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int64_t seq : {1, 17, 63, 64, 65, 1000, 1025, 4096}) {
    std::vector<std::pair<int64_t, int64_t>> bh = {{1, 1}, {3, 5}};
    if (seq == 4096) bh = {{1, 3}};  // keeps the float64 reference under a second
    for (auto [b, h] : bh)
      for (int64_t d : {64, 128})
        for (auto dt : {at::kBFloat16, at::kHalf})
          for (bool causal : {false, true}) run_flash_case({b, h, h, seq, seq, d, dt, causal});
  }
}

// Grouped-query and multi-query attention, seq_q != seq_kv, both masks: every
// value of every axis, all pairs of values (and every dtype x head_dim x path
// x mask combination) in 300 cases. The planner (flash_fwd_plan.h) sends
// seq_q <= 17 here to the split-KV decode kernel (1 to 17 m16 row tiles per
// KV head) and seq_q 128 to the prefill kernel; both split the keys when the
// grid is small (most cases here: 2 batches x 2 KV heads), seq_kv 1 and 63
// keep one split. seq_q > seq_kv under the causal mask leaves rows that see
// no key.
TEST(FlashAttentionOp, GroupedQueryAndDecodeShapesMatchFloat64Reference) {
  REQUIRE_CUDA();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct Heads {
    int64_t q, kv;
  };
  const Heads heads[] = {{2, 2}, {4, 2}, {8, 2}, {16, 2}, {32, 2}, {12, 1}};  // ratios 1..16, MQA
  const int64_t seq_qs[] = {1, 3, 16, 17, 128};
  const int64_t seq_kvs[] = {1, 63, 1000, 4097, 32768};
  for (int r = 0; r < 6; ++r)
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j)
        for (int m = 0; m < 2; ++m) {
          const auto dt = (r + i + j + m) % 2 ? at::kHalf : at::kBFloat16;
          const int64_t d = (r / 2 + i + m) % 2 ? 128 : 64;
          run_flash_case({2, heads[r].q, heads[r].kv, seq_qs[i], seq_kvs[j], d, dt, m == 1});
        }
}

// Causal with 300 more queries than keys: the blocks of the first 300 rows
// have no key tile, and their epilogue stages the zero rows in the shared
// memory the Q copies of the block's other warps land in (a barrier keeps them
// apart). Those rows must be 0 on every call: 20 calls per head dim.
TEST(FlashAttentionOp, RowsThatSeeNoKeyAreZeroOnEveryCall) {
  REQUIRE_CUDA();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int rep = 0; rep < 20; ++rep)
    for (int64_t d : {64, 128}) run_flash_case({2, 8, 2, 700, 400, d, at::kBFloat16, true});
}

// Scores that climb (or fall) steadily along the keys, ~±23 in log2 units with
// scale 1: the row max moves by far more than the kernel's rescale slack
// (2^8), so the stale-max path must both skip and take the O rescale, and
// exponents against a stale max reach the slack. Random inputs never do that:
// their row max settles within a few key blocks. Also through the decode
// kernel (2 queries against the same keys).
TEST(FlashAttentionOp, RowMaxDriftingAcrossKeyBlocks) {
  REQUIRE_CUDA();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int64_t sq : {1000, 2})
    for (int64_t d : {64, 128})
      for (auto dt : {at::kBFloat16, at::kHalf})
        for (bool causal : {false, true})
          for (double direction : {1.0, -1.0}) {
            SCOPED_TRACE("sq " + std::to_string(sq) + " d" + std::to_string(d) +
                         (dt == at::kHalf ? " fp16" : " bf16") + (causal ? " causal" : " full") +
                         (direction > 0 ? " rising" : " falling"));
            const int64_t b = 2, h = 3, sk = 1000;
            const auto [q, k, v] = attnprof::testing::drifting_max_inputs(b, h, sq, sk, d, dt, direction);
            poison_next_allocations({{{b, h, sq, d}, dt}, {{b, h, sq}, at::kFloat}});
            auto [out, lse] = flash_op().call(q, k, v, causal, 1.0);
            ASSERT_TRUE(at::isfinite(out).all().item<bool>());
            expect_matches_reference(q, k, v, out, lse, causal, 1.0);
          }
}

// expect_error(what, call, message): call() throws a c10::Error naming `op` and containing `message`.
auto expect_op_error(std::string op) {
  return [op](const std::string& what, auto&& call, const std::string& message) {
    SCOPED_TRACE(what);
    try {
      call();
      ADD_FAILURE() << "no error";
    } catch (const c10::Error& e) {
      const std::string text = e.what();
      EXPECT_NE(text.find(op), std::string::npos) << text;
      EXPECT_NE(text.find(message), std::string::npos) << text;
    }
  };
}

// Every bad input is a c10::Error naming the operator, never a launch.
TEST(FlashAttentionOp, RejectsBadInputs) {
  REQUIRE_CUDA();
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor q = at::randn({1, 4, 32, 64}, bf16);
  const at::Tensor kv = at::randn({1, 2, 40, 64}, bf16);
  const auto expect_error = expect_op_error("attnprof::flash_attention");
  auto call = [](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c) {
    return [=] { flash_op().call(a, b, c, true, 0.125); };
  };
  expect_error("fp32", call(q.to(at::kFloat), kv.to(at::kFloat), kv.to(at::kFloat)), "supports bf16 and fp16, not fp32");
  expect_error("mixed dtypes", call(q, kv.to(at::kHalf), kv), "one dtype");
  const at::Tensor q96 = at::randn({1, 2, 32, 96}, bf16);
  expect_error("head_dim 96", call(q96, q96, q96), "supports head_dim 64 and 128, not 96");
  expect_error("head_dim mismatch", call(q, at::randn({1, 2, 40, 128}, bf16), at::randn({1, 2, 40, 128}, bf16)),
               "differ in batch or head_dim");
  expect_error("batch mismatch", call(q, at::randn({2, 2, 40, 64}, bf16), at::randn({2, 2, 40, 64}, bf16)),
               "differ in batch or head_dim");
  expect_error("heads not a multiple", call(q, at::randn({1, 3, 40, 64}, bf16), at::randn({1, 3, 40, 64}, bf16)),
               "must be a multiple of key/value heads (3)");
  expect_error("no kv heads", call(q, at::randn({1, 0, 40, 64}, bf16), at::randn({1, 0, 40, 64}, bf16)),
               "at least one head");
  expect_error("k, v shapes differ", call(q, kv, at::randn({1, 2, 41, 64}, bf16)), "one shape");
  expect_error("rank 3", call(q[0], kv[0], kv[0]), "[batch, heads_q, seq_q, head_dim]");
  expect_error("non-contiguous q", call(at::randn({1, 32, 4, 64}, bf16).transpose(1, 2), kv, kv), "contiguous");
  expect_error("non-contiguous v", call(q, kv, at::randn({1, 40, 2, 64}, bf16).transpose(1, 2)), "contiguous");
  expect_error("k on the cpu", call(q, kv.cpu(), kv.cpu()), "k must be a CUDA tensor");
  expect_error("all on the cpu", call(q.cpu(), kv.cpu(), kv.cpu()), "CPU");  // no CPU kernel
  expect_error("undefined", call(q, at::Tensor(), kv), "undefined");
  expect_error("scale", [&] { flash_op().call(q, kv, kv, true, std::nan("")); }, "scale");
  // Past the 32-bit limits, without the memory: zero-size tensors with one huge dimension.
  expect_error("seq_q past the grid", call(at::empty({0, 4, int64_t{1} << 31, 64}, bf16), kv.narrow(0, 0, 0), kv.narrow(0, 0, 0)),
               "sizes too large");
  expect_error("seq_kv past 32 bits", call(q.narrow(0, 0, 0), at::empty({0, 2, int64_t{1} << 32, 64}, bf16), at::empty({0, 2, int64_t{1} << 32, 64}, bf16)),
               "sizes too large");
  expect_error("batch x heads past 32 bits", call(at::empty({int64_t{1} << 20, int64_t{1} << 12, 0, 64}, bf16), at::empty({int64_t{1} << 20, 1, 0, 64}, bf16), at::empty({int64_t{1} << 20, 1, 0, 64}, bf16)),
               "sizes too large");
}

// Empty tensors are fine: empty outputs; no keys at all gives zeros and -inf.
TEST(FlashAttentionOp, EmptyInputs) {
  REQUIRE_CUDA();
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  auto [out, lse] = flash_op().call(at::randn({2, 4, 0, 64}, bf16), at::randn({2, 2, 5, 64}, bf16),
                                    at::randn({2, 2, 5, 64}, bf16), true, 0.125);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 4, 0, 64}));
  EXPECT_EQ(lse.sizes(), (std::vector<int64_t>{2, 4, 0}));
  auto [out0, lse0] = flash_op().call(at::randn({2, 4, 3, 64}, bf16), at::randn({2, 2, 0, 64}, bf16),
                                      at::randn({2, 2, 0, 64}, bf16), false, 0.125);
  EXPECT_TRUE((out0 == 0).all().item<bool>());
  EXPECT_TRUE((lse0 == -INFINITY).all().item<bool>());
}

// attnprof::flash_attention_paged, through the dispatcher.
using PagedFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                   const at::Tensor&, int64_t, bool, double, int64_t);
c10::TypedOperatorHandle<PagedFn> paged_op() {
  return c10::Dispatcher::singleton().findSchemaOrThrow("attnprof::flash_attention_paged", "").typed<PagedFn>();
}

// The paged kernels run the contiguous kernels' tiles in the same order, so
// reading K/V through a random block table must give the contiguous
// operator's output and lse bit for bit: page sizes 1, 16, 64, 256, both
// paths (decode: few queries per KV head; prefill), GQA, key counts that fill
// no page exactly (the tail rows hold NaN), windows; and the float64 bound.
TEST(FlashAttentionPagedOp, MatchesTheContiguousOperatorBitwise) {
  REQUIRE_CUDA();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct PagedCase {
    int64_t b, hq, hkv, sq, sk, d;
    bool causal;
    int64_t window;
  };
  const PagedCase cases[] = {{4, 32, 8, 1, 3001, 128, true, 0},  {2, 8, 2, 37, 1100, 64, true, 0},
                             {1, 4, 4, 300, 300, 128, true, 0},  {2, 4, 1, 5, 777, 64, false, 0},
                             {2, 8, 2, 1, 1100, 128, true, 17},  {1, 2, 2, 200, 1000, 64, true, 256},
                             {3, 2, 2, 1, 1, 64, true, 0},       {1, 16, 16, 1, 70000, 128, true, 0}};
  for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dtype);
    for (const PagedCase& c : cases) {
      for (const int64_t page : {1, 16, 64, 256}) {
        SCOPED_TRACE(std::to_string(c.b) + "x" + std::to_string(c.hq) + "/" + std::to_string(c.hkv) + "x" +
                     std::to_string(c.sq) + "/" + std::to_string(c.sk) + "x" + std::to_string(c.d) +
                     (c.causal ? " causal" : " full") + " window " + std::to_string(c.window) + " page " +
                     std::to_string(page) + " " + c10::toString(dtype));
        const at::Tensor q = at::randn({c.b, c.hq, c.sq, c.d}, opts);
        const at::Tensor k = at::randn({c.b, c.hkv, c.sk, c.d}, opts), v = at::randn({c.b, c.hkv, c.sk, c.d}, opts);
        const attnprof::PagedKv kv = attnprof::paged_copy(k, v, page);
        const double scale = 1.0 / std::sqrt(double(c.d));
        const auto [out, lse] = paged_op().call(q, kv.k_cache, kv.v_cache, kv.block_table, c.sk, c.causal, scale,
                                                c.window);
        const auto [ref_out, ref_lse] = flash_op().call(q, k, v, c.causal, scale, c.window);
        ASSERT_TRUE(at::isfinite(out).all().item<bool>());
        EXPECT_TRUE(at::equal(out, ref_out)) << "max |diff| " << (out - ref_out).abs().max().item<float>();
        EXPECT_TRUE(at::equal(lse, ref_lse));
        if (c.sk <= 3001) {  // the float64 check on the shapes that fit it quickly
          attnprof::Problem p;
          p.batch = c.b, p.heads_q = c.hq, p.heads_kv = c.hkv, p.seq_q = c.sq, p.seq_kv = c.sk, p.head_dim = c.d;
          p.mask = c.causal ? attnprof::Mask::causal_bottom_right : attnprof::Mask::none;
          p.window = c.window;
          const attnprof::Inputs in{q, k, v, {}, {}};
          EXPECT_LE(relative_frobenius_error(out, attnprof::reference_attention(p, in)), 1e-2);
        }
      }
    }
  }
}

// Fewer keys than the table holds (seqlen_k), and no key at all.
TEST(FlashAttentionPagedOp, SeqlenKTrimsTheLastPageAndZeroKeysGiveZeros) {
  REQUIRE_CUDA();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor q = at::randn({2, 4, 1, 64}, bf16);
  const at::Tensor k = at::randn({2, 2, 128, 64}, bf16), v = at::randn({2, 2, 128, 64}, bf16);
  const attnprof::PagedKv kv = attnprof::paged_copy(k, v, 64);
  for (const int64_t keys : {int64_t{100}, int64_t{65}, int64_t{1}}) {
    const auto [out, lse] = paged_op().call(q, kv.k_cache, kv.v_cache, kv.block_table, keys, true, 0.125, 0);
    const auto [ref, ref_lse] = flash_op().call(q, k.narrow(2, 0, keys).contiguous(), v.narrow(2, 0, keys).contiguous(),
                                                true, 0.125);
    EXPECT_TRUE(at::equal(out, ref)) << keys << " keys";
  }
  const auto [all, all_lse] = paged_op().call(q, kv.k_cache, kv.v_cache, kv.block_table, -1, true, 0.125, 0);
  EXPECT_TRUE(at::equal(all, std::get<0>(flash_op().call(q, k, v, true, 0.125)))) << "-1: every key of the table";
  const auto [none, none_lse] = paged_op().call(q, kv.k_cache, kv.v_cache, kv.block_table, 0, true, 0.125, 0);
  EXPECT_TRUE((none == 0).all().item<bool>());
  EXPECT_TRUE((none_lse == -INFINITY).all().item<bool>());
  // Under a window the pages before it are neither checked nor used: a server may have freed them.
  const attnprof::PagedKv small = attnprof::paged_copy(k, v, 16);  // 8 pages per sequence
  at::Tensor table = small.block_table.clone();
  table.narrow(1, 0, 4).fill_(1000);  // keys 0 .. 63; query 0 of 1 sees keys 84 .. 99 under a 16-key window
  const auto [windowed, w_lse] = paged_op().call(q, small.k_cache, small.v_cache, table, 100, true, 0.125, 16);
  const auto [w_ref, w_ref_lse] = flash_op().call(q, k.narrow(2, 0, 100).contiguous(), v.narrow(2, 0, 100).contiguous(),
                                                  true, 0.125, 16);
  EXPECT_TRUE(at::equal(windowed, w_ref));
  table.narrow(1, 5, 1).fill_(1000);  // key 84's page: inside the window, refused
  EXPECT_THROW(paged_op().call(q, small.k_cache, small.v_cache, table, 100, true, 0.125, 16), c10::Error);
}

TEST(FlashAttentionPagedOp, RejectsBadInputs) {
  REQUIRE_CUDA();
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor q = at::randn({2, 4, 1, 64}, bf16);
  const at::Tensor k = at::randn({2, 2, 40, 64}, bf16);
  const attnprof::PagedKv kv = attnprof::paged_copy(k, k, 16);  // 3 pages per sequence, 6 in the pool
  const auto expect_error = expect_op_error("attnprof::flash_attention_paged");
  auto call = [&](const at::Tensor& kc, const at::Tensor& vc, const at::Tensor& table, int64_t keys,
                  bool causal = true, int64_t window = 0) {
    return [=] { paged_op().call(q, kc, vc, table, keys, causal, 0.125, window); };
  };
  const at::Tensor& kc = kv.k_cache;
  const at::Tensor& t = kv.block_table;
  expect_error("int64 table", call(kc, kc, t.to(at::kLong), 40), "block_table must be int32");
  expect_error("table on the CPU", call(kc, kc, t.cpu(), 40), "block_table must be a CUDA tensor");
  expect_error("table rank 1", call(kc, kc, t.flatten(), 40), "block_table [batch, pages_per_seq]");
  expect_error("table rows", call(kc, kc, t.narrow(0, 0, 1), 40), "block_table has 1 rows");
  expect_error("seqlen_k past the table", call(kc, kc, t, 49), "seqlen_k 49 must be -1");
  expect_error("seqlen_k -2", call(kc, kc, t, -2), "seqlen_k -2");
  expect_error("page past the pool", call(kc, kc, t.clone().fill_(6), 40), "names page 6");
  expect_error("negative page", call(kc, kc, t.clone().fill_(-1), 40), "names page -1");
  expect_error("page size 3", call(at::randn({6, 2, 3, 64}, bf16), at::randn({6, 2, 3, 64}, bf16), t, 9),
               "must be a power of two");
  expect_error("pools differ", call(kc, kc.narrow(0, 0, 5).contiguous(), t, 40), "one shape");
  expect_error("pool dtype", call(kc.to(at::kHalf), kc.to(at::kHalf), t, 40), "one dtype");
  expect_error("heads", call(at::randn({6, 3, 16, 64}, bf16), at::randn({6, 3, 16, 64}, bf16), t, 40),
               "multiple of the cache's key/value heads");
  expect_error("head_dim", call(at::randn({6, 2, 16, 128}, bf16), at::randn({6, 2, 16, 128}, bf16), t, 40),
               "head_dim 128");
  expect_error("strided pool", call(at::randn({6, 16, 2, 64}, bf16).transpose(1, 2), kc, t, 40), "contiguous");
  expect_error("window without causal", call(kc, kc, t, 40, false, 8), "needs causal=True");
  // Unused columns may hold anything; a table written in place is checked again.
  at::Tensor table = t.clone();
  table.narrow(1, 2, 1).fill_(1000);
  EXPECT_NO_THROW(paged_op().call(q, kc, kc, table, 32, true, 0.125, 0)) << "the third page is unused at 32 keys";
  EXPECT_NO_THROW(paged_op().call(q, kc, kc, t, 40, true, 0.125, 0));
  at::Tensor edited = t.clone();
  EXPECT_NO_THROW(paged_op().call(q, kc, kc, edited, 40, true, 0.125, 0));
  edited[1][0] = 99;  // in place: a new version of a table already checked
  expect_error("an edited table", [&] { paged_op().call(q, kc, kc, edited, 40, true, 0.125, 0); }, "names page 99");
}

// The packed variable-length operators share one schema: the portable
// kernel's attnprof::flash_attention_varlen and the Hopper kernel's
// attnprof::flash_attention_sm90_varlen (no sliding window). Each test below
// runs once per operator (the parameter), through the dispatcher.
using VarlenFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                    const at::Tensor&, const at::Tensor&, int64_t, int64_t, bool,
                                                    double, int64_t);
constexpr const char* kHopperVarlenOp = "attnprof::flash_attention_sm90_varlen";

class FlashAttentionVarlenOp : public testing::TestWithParam<const char*> {
 protected:
  std::string op_name() const { return GetParam(); }
  bool hopper() const { return op_name() == kHopperVarlenOp; }
  c10::TypedOperatorHandle<VarlenFn> varlen_op() const {
    return c10::Dispatcher::singleton().findSchemaOrThrow(GetParam(), "").typed<VarlenFn>();
  }
  // Why this operator cannot run here, or "".
  std::string unavailable() const {
    if (!c10::Dispatcher::singleton().findSchemaOrThrow(GetParam(), "").hasKernelForDispatchKey(
            c10::DispatchKey::CUDA))
      return op_name() + " has no CUDA kernel in this build";
#ifdef ATTNPROF_HAVE_CUDA_KERNELS
    const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
    if (hopper() && (prop->major != 9 || prop->minor != 0))
      return op_name() + " needs a compute capability 9.0 GPU; this is " + prop->name;
#endif
    return "";
  }
};

#define REQUIRE_VARLEN_OP()                          \
  do {                                               \
    REQUIRE_CUDA();                                  \
    const std::string why = unavailable();           \
    if (!why.empty()) GTEST_SKIP() << why;           \
  } while (0)

INSTANTIATE_TEST_SUITE_P(Kernels, FlashAttentionVarlenOp,
                         testing::Values("attnprof::flash_attention_varlen", kHopperVarlenOp),
                         [](const testing::TestParamInfo<const char*>& info) {
                           return std::string(info.param) == kHopperVarlenOp ? std::string("sm90")
                                                                             : std::string("portable");
                         });

// int32 offsets [0, l0, l0 + l1, ...] on the GPU.
at::Tensor offsets_of(const std::vector<int64_t>& lengths) {
  std::vector<int32_t> cu = {0};
  for (int64_t n : lengths) cu.push_back(cu.back() + int32_t(n));
  return at::tensor(cu, at::TensorOptions().dtype(at::kInt)).cuda();
}

// A packed variable-length batch against each sequence computed on its own:
// float64 and the plain same-dtype formula per sequence (causal bottom-right
// with its own lengths, the window too), pooled over the batch. Lengths of 1,
// odd ones, one sequence far longer than the rest, queries and keys of
// different lengths (decode rows, a chunk, a sequence with more queries than
// keys whose first rows see nothing), GQA and MQA, both head dims, windows.
// n lengths from 1 to 600, spread by a fixed stride from `start`.
std::vector<int64_t> many_lengths(int n, int64_t start) {
  std::vector<int64_t> lengths;
  for (int i = 0; i < n; ++i) lengths.push_back((start + 97 * i) % 600 + 1);
  return lengths;
}

TEST_P(FlashAttentionVarlenOp, EverySequenceMatchesFloat64OnItsOwn) {
  REQUIRE_VARLEN_OP();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  struct VarlenCase {
    int64_t hq, hkv, d;
    std::vector<int64_t> q_lens, k_lens;
    bool causal;
    int64_t window;
    int64_t extra_max = 0;  // max_seqlen_q/k passed this much above the longest
  };
  const std::vector<VarlenCase> cases = {
      {4, 2, 64, {1, 77, 300, 5}, {1, 77, 300, 5}, true, 0},
      {8, 8, 128, {130, 1, 9, 1000}, {130, 1, 9, 1000}, false, 0},
      {32, 8, 128, {3000, 2, 64, 128, 129}, {3000, 2, 64, 128, 129}, true, 0},
      {32, 8, 128, {1, 1, 1}, {90, 7, 1000}, true, 0},
      {4, 1, 64, {3, 3, 3}, {50, 12, 400}, true, 0},
      {4, 2, 64, {5, 40}, {3, 40}, true, 0},
      {4, 2, 64, {600, 3, 41}, {600, 3, 41}, true, 17},
      {8, 2, 128, {1000, 200, 1}, {1000, 200, 1}, true, 256},
      // Rows that see no key at d128 (every warp's Q rows): no keys at all, and causal with 290 more queries
      // than keys (the blocks of the first rows have no key tile); max_seqlen above the longest.
      {4, 2, 128, {300, 7, 200}, {10, 0, 200}, true, 0, 70},
      {4, 4, 64, {300, 130}, {0, 5}, false, 0},
      // Keys longer than the queries without a mask; many sequences (the Hopper kernel walks their offsets).
      {8, 4, 128, {300, 129, 64}, {1000, 129, 700}, false, 0},
      {4, 1, 64, many_lengths(40, 1), many_lengths(40, 1), true, 0},
      {8, 2, 128, many_lengths(33, 7), many_lengths(33, 7), false, 0}};
  for (const at::ScalarType dtype : {at::kBFloat16, at::kHalf}) {
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dtype);
    for (const VarlenCase& c : cases) {
      std::string name = std::to_string(c.hq) + "/" + std::to_string(c.hkv) + " d" + std::to_string(c.d) + " q";
      for (int64_t n : c.q_lens) name += " " + std::to_string(n);
      name += " k";
      for (int64_t n : c.k_lens) name += " " + std::to_string(n);
      SCOPED_TRACE(name + (c.causal ? " causal" : " full") + " window " + std::to_string(c.window) + " " +
                   c10::toString(dtype));
      if (hopper() && c.window > 0) continue;  // refused (RejectsBadInputs)
      int64_t total_q = 0, total_k = 0, max_q = 0, max_k = 0;
      for (size_t b = 0; b < c.q_lens.size(); ++b) {
        total_q += c.q_lens[b], total_k += c.k_lens[b];
        max_q = std::max(max_q, c.q_lens[b]), max_k = std::max(max_k, c.k_lens[b]);
      }
      const at::Tensor q = at::randn({total_q, c.hq, c.d}, opts);
      const at::Tensor k = at::randn({total_k, c.hkv, c.d}, opts), v = at::randn({total_k, c.hkv, c.d}, opts);
      const double scale = 1.0 / std::sqrt(double(c.d));
      // The offsets first: allocated after the poison they could take its freed blocks.
      const at::Tensor cu_q = offsets_of(c.q_lens), cu_k = offsets_of(c.k_lens);
      poison_next_allocations({{{total_q, c.hq, c.d}, dtype}, {{c.hq, total_q}, at::kFloat}});
      // A max_seqlen above the longest sequence is allowed (the grid covers more rows than needed).
      const auto [out, lse] = varlen_op().call(q, k, v, cu_q, cu_k, max_q + c.extra_max, max_k + c.extra_max,
                                               c.causal, scale, c.window);
      ASSERT_EQ(out.sizes(), q.sizes());
      ASSERT_EQ(lse.sizes(), (std::vector<int64_t>{c.hq, total_q}));
      ASSERT_FALSE(at::isnan(out).any().item<bool>()) << "output not fully written";
      ASSERT_FALSE(at::isnan(lse).any().item<bool>()) << "lse not fully written";
      std::vector<at::Tensor> ref_out, plain_out, ref_lse;
      int64_t q0 = 0, k0 = 0;
      for (size_t b = 0; b < c.q_lens.size(); ++b) {
        // [len, h, d] -> [1, h, len, d]
        const auto seq = [](const at::Tensor& t, int64_t r0, int64_t n) { return t.narrow(0, r0, n).transpose(0, 1).unsqueeze(0); };
        const at::Tensor qb = seq(q, q0, c.q_lens[b]), kb = seq(k, k0, c.k_lens[b]), vb = seq(v, k0, c.k_lens[b]);
        const Attention ref = grouped_attention(qb.to(at::kDouble), kb.to(at::kDouble), vb.to(at::kDouble), c.causal,
                                                scale, c.window);
        ref_out.push_back(ref.out[0].transpose(0, 1));
        ref_lse.push_back(ref.lse[0]);
        plain_out.push_back(grouped_attention(qb, kb, vb, c.causal, scale, c.window).out[0].transpose(0, 1));
        q0 += c.q_lens[b], k0 += c.k_lens[b];
      }
      const at::Tensor ref = at::cat(ref_out, 0), plain = at::cat(plain_out, 0), ref_l = at::cat(ref_lse, 1);
      // Rows that see no key: out 0, lse -inf; the others finite.
      const at::Tensor seen = at::isfinite(ref_l);
      EXPECT_TRUE(at::equal(at::isfinite(lse), seen)) << "lse -inf exactly where a row sees no key";
      EXPECT_TRUE((out.masked_select(seen.logical_not().transpose(0, 1).unsqueeze(-1).expand(out.sizes())) == 0)
                      .all()
                      .item<bool>());
      const at::Tensor l = lse.masked_select(seen).to(at::kDouble), rl = ref_l.masked_select(seen);
      EXPECT_LE((l - rl).abs().max().item<double>(), 1e-3 * (1 + rl.abs().max().item<double>()));
      const double err = relative_frobenius_error(out, ref), err_plain = relative_frobenius_error(plain.nan_to_num(0.0), ref);
      EXPECT_LE(err, 2 * err_plain + 1e-6) << "plain same-dtype error " << err_plain;
      EXPECT_LE(err, 1e-2);
    }
  }
}

// The keys after a sequence's end in its last key tile belong to the next
// sequence: masked, and its values never reach this sequence's output, even
// non-finite ones (0 · inf is NaN). Each sequence gives the bits it gives
// alone, where those keys lie past the tensor.
TEST_P(FlashAttentionVarlenOp, ASequenceNeverSeesItsNeighboursValues) {
  REQUIRE_VARLEN_OP();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (const int64_t d : {64, 128}) {
    for (const double poison : {double(INFINITY), std::numeric_limits<double>::quiet_NaN()}) {
      SCOPED_TRACE("head_dim " + std::to_string(d) + ", next sequence's keys and values " + std::to_string(poison));
      const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
      const at::Tensor q = at::randn({77 + 300, 8, d}, bf16);
      at::Tensor k = at::randn({77 + 300, 2, d}, bf16), v = at::randn({77 + 300, 2, d}, bf16);
      k.narrow(0, 77, 300).fill_(poison);
      v.narrow(0, 77, 300).fill_(poison);
      for (const bool causal : {true, false}) {
        const auto [out, lse] = varlen_op().call(q, k, v, offsets_of({77, 300}), offsets_of({77, 300}), 300, 300,
                                                 causal, 0.125, 0);
        const auto [alone, alone_lse] =
            varlen_op().call(q.narrow(0, 0, 77).contiguous(), k.narrow(0, 0, 77).contiguous(),
                             v.narrow(0, 0, 77).contiguous(), offsets_of({77}), offsets_of({77}), 77, 77, causal, 0.125, 0);
        EXPECT_TRUE(at::isfinite(out.narrow(0, 0, 77)).all().item<bool>()) << (causal ? "causal" : "full");
        EXPECT_TRUE(at::equal(out.narrow(0, 0, 77), alone) && at::equal(lse.narrow(1, 0, 77), alone_lse))
            << (causal ? "causal" : "full") << ": not the bits of the sequence alone";
      }
    }
  }
}

// Empty batches and sequences: no rows, no keys (zeros and -inf), no queries.
TEST_P(FlashAttentionVarlenOp, EmptySequences) {
  REQUIRE_VARLEN_OP();
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  // Rows but no heads: empty outputs, no launch.
  const auto [no_heads, no_heads_lse] = varlen_op().call(at::empty({5, 0, 64}, bf16), at::empty({5, 1, 64}, bf16),
                                                         at::empty({5, 1, 64}, bf16), offsets_of({5}), offsets_of({5}),
                                                         5, 5, true, 0.125, 0);
  EXPECT_EQ(no_heads.numel(), 0);
  const at::Tensor none = at::empty({0, 4, 64}, bf16);
  const auto [out0, lse0] = varlen_op().call(none, none.narrow(1, 0, 2), none.narrow(1, 0, 2), offsets_of({}),
                                             offsets_of({}), 0, 0, true, 0.125, 0);
  EXPECT_EQ(out0.numel(), 0);
  EXPECT_EQ(lse0.sizes(), (std::vector<int64_t>{4, 0}));
  const at::Tensor q = at::randn({7, 4, 64}, bf16), k = at::randn({9, 2, 64}, bf16), v = at::randn({9, 2, 64}, bf16);
  // Sequence 0: 3 queries, no key; sequence 1: no query, 4 keys; sequence 2: 4 queries, 5 keys.
  const auto [out, lse] = varlen_op().call(q, k, v, offsets_of({3, 0, 4}), offsets_of({0, 4, 5}), 4, 5, false,
                                           0.125, 0);
  EXPECT_TRUE((out.narrow(0, 0, 3) == 0).all().item<bool>());
  EXPECT_TRUE((lse.narrow(1, 0, 3) == -INFINITY).all().item<bool>());
  // Rows but not a single key in the batch: zeros and -inf everywhere.
  const auto [out_nokeys, lse_nokeys] = varlen_op().call(q, at::empty({0, 2, 64}, bf16), at::empty({0, 2, 64}, bf16),
                                                         offsets_of({3, 4}), offsets_of({0, 0}), 4, 0, true, 0.125, 0);
  EXPECT_TRUE((out_nokeys == 0).all().item<bool>());
  EXPECT_TRUE((lse_nokeys == -INFINITY).all().item<bool>());
  const Attention ref = grouped_attention(q.narrow(0, 3, 4).transpose(0, 1).unsqueeze(0).to(at::kDouble),
                                          k.narrow(0, 4, 5).transpose(0, 1).unsqueeze(0).to(at::kDouble),
                                          v.narrow(0, 4, 5).transpose(0, 1).unsqueeze(0).to(at::kDouble), false, 0.125);
  EXPECT_LE(relative_frobenius_error(out.narrow(0, 3, 4), ref.out[0].transpose(0, 1)), 1e-2);
}

TEST_P(FlashAttentionVarlenOp, RejectsBadInputs) {
  REQUIRE_VARLEN_OP();
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor q = at::randn({10, 4, 64}, bf16), k = at::randn({12, 2, 64}, bf16);
  const at::Tensor cq = offsets_of({4, 6}), ck = offsets_of({5, 7});
  const auto expect_error = expect_op_error(op_name());
  auto call = [f = varlen_op()](const at::Tensor& q_, const at::Tensor& k_, const at::Tensor& v_,
                                const at::Tensor& cq_, const at::Tensor& ck_, int64_t mq = 6, int64_t mk = 7,
                                bool causal = true, int64_t window = 0) {
    return [=] { f.call(q_, k_, v_, cq_, ck_, mq, mk, causal, 0.125, window); };
  };
  EXPECT_NO_THROW(call(q, k, k, cq, ck)());
  expect_error("int64 offsets", call(q, k, k, cq.to(at::kLong), ck), "must be int32");
  expect_error("offsets on the CPU", call(q, k, k, cq.cpu(), ck), "cu_seqlens_q must be a CUDA tensor");
  expect_error("rank 4 q", call(q.unsqueeze(0), k, k, cq, ck), "[total_q, heads_q, head_dim]");
  expect_error("offsets of two batches", call(q, k, k, cq, offsets_of({12})), "batch + 1 offsets");
  expect_error("not from 0", call(q, k, k, cq + 1, ck), "cu_seqlens_q[0] must be 0");
  expect_error("decreasing", call(q, k, k, at::tensor(std::vector<int32_t>{0, 11, 10}, at::kInt).cuda(), ck, 11),
               "must not decrease");
  const at::Tensor shifted = at::cat({q.flatten(), q.flatten().narrow(0, 0, 1)}).narrow(0, 1, q.numel()).view(q.sizes());
  ASSERT_TRUE(shifted.is_contiguous());
  expect_error("one element into its storage", call(shifted, k, k, cq, ck), "16-byte boundary");
  expect_error("short of the rows", call(q, k, k, offsets_of({4, 5}), ck), "ends at 9, not at the 10 packed rows");
  expect_error("longer than max", call(q, k, k, cq, ck, 5, 7), "more than max_seqlen 5");
  expect_error("negative max", call(q, k, k, cq, ck, -1, 7), "max_seqlen_q -1");
  expect_error("k, v shapes differ", call(q, k, k.narrow(0, 0, 11).contiguous(), cq, ck), "one shape");
  expect_error("heads", call(q, at::randn({12, 3, 64}, bf16), at::randn({12, 3, 64}, bf16), cq, ck),
               "multiple of key/value heads (3)");
  expect_error("head_dim", call(q, at::randn({12, 2, 128}, bf16), at::randn({12, 2, 128}, bf16), cq, ck),
               "head_dim 128");
  expect_error("dtype", call(q, k.to(at::kHalf), k, cq, ck), "one dtype");
  expect_error("fp32", call(q.to(at::kFloat), k.to(at::kFloat), k.to(at::kFloat), cq, ck), "not fp32");
  expect_error("strided q", call(at::randn({4, 10, 64}, bf16).transpose(0, 1), k, k, cq, ck), "contiguous");
  expect_error("window without causal", call(q, k, k, cq, ck, 6, 7, false, 8), "needs causal=True");
  if (hopper()) {
    expect_error("a window", call(q, k, k, cq, ck, 6, 7, true, 3), "no sliding window");
    EXPECT_NO_THROW(call(q, k, k, cq, ck, 6, 7, true, 7)()) << "a window of every key hides none";
  }
  // A max_seqlen far above the rows: the kernels bound their grids by the rows (no in-bounds sequence is
  // longer) and give the same bits.
  {
    const int64_t huge = std::numeric_limits<int32_t>::max();
    const at::Tensor v = at::randn({12, 2, 64}, bf16);
    const auto [o1, l1] = varlen_op().call(q, k, v, cq, ck, 6, 7, true, 0.125, 0);
    const auto [o2, l2] = varlen_op().call(q, k, v, cq, ck, huge, huge, true, 0.125, 0);
    EXPECT_TRUE(at::equal(o1, o2) && at::equal(l1, l2)) << "max_seqlen 2^31 - 1 changed the result";
  }
  // Offsets written in place are checked again.
  at::Tensor edited = ck.clone();
  EXPECT_NO_THROW(call(q, k, k, cq, edited)());
  edited[1] = 13;
  expect_error("an edited offset", call(q, k, k, cq, edited), "more than max_seqlen 7");
}

// Offsets are not checked while a CUDA graph is captured; edited afterwards
// (as a server reuses a captured graph with new lengths) past the tensors, the
// kernel skips those sequences instead of reading outside them: the replay
// ends without a device error, and the valid sequence is still right.
TEST_P(FlashAttentionVarlenOp, OffsetsEditedAfterCaptureStayInsideTheTensors) {
  REQUIRE_VARLEN_OP();
#ifdef ATTNPROF_HAVE_CUDA_KERNELS
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor q = at::randn({40, 4, 64}, bf16), k = at::randn({40, 2, 64}, bf16), v = at::randn({40, 2, 64}, bf16);
  at::Tensor cu = offsets_of({10, 30});
  const at::cuda::CUDAStream side = at::cuda::getStreamFromPool();
  at::cuda::CUDAGraph graph;
  at::Tensor out;
  {
    const at::cuda::CUDAStreamGuard guard(side);
    graph.capture_begin();
    out = std::get<0>(varlen_op().call(q, k, v, cu, cu, 30, 30, true, 0.125, 0));
    graph.capture_end();
  }
  const at::Tensor ref = std::get<0>(varlen_op().call(q, k, v, offsets_of({10, 30}), offsets_of({10, 30}), 30, 30,
                                                      true, 0.125, 0));
  cu.copy_(at::tensor(std::vector<int32_t>{0, 10, 1000000}, at::kInt));  // sequence 1 now ends far past the rows
  graph.replay();
  torch::cuda::synchronize();  // a read outside the tensors would fail here
  EXPECT_TRUE(at::equal(out.narrow(0, 0, 10), ref.narrow(0, 0, 10))) << "sequence 0 unchanged";
  EXPECT_NO_THROW(varlen_op().call(q, k, v, offsets_of({10, 30}), offsets_of({10, 30}), 30, 30, true, 0.125, 0));
#endif
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
  // A variable-length batch: packed, never padded under a mask (--varlen-layout padded).
  p.seqlens = {5, 64}, p.batch = 2, p.seq_q = p.seq_kv = 64;
  EXPECT_TRUE(flash->supports(p).ok) << flash->supports(p).reason;
  p.varlen_padded = true;
  EXPECT_NE(flash->supports(p).reason.find("never padded under a mask: drop --varlen-layout padded"),
            std::string::npos)
      << flash->supports(p).reason;
#else
  EXPECT_NE(flash->supports(p).reason.find("CUDA kernels"), std::string::npos);
#endif
}

TEST(CustomVariants, ForwardMatchesReference) {
  REQUIRE_CUDA();
  for (bool causal : {true, false}) {
    attnprof::Problem p;
    p.batch = 2, p.heads_q = p.heads_kv = 3, p.seq_q = p.seq_kv = 333, p.head_dim = 128, p.device = "cuda:0";
    p.mask = causal ? attnprof::Mask::causal_bottom_right : attnprof::Mask::none;
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
    const at::Tensor q = at::randn({p.batch, p.heads_q, p.seq_q, p.head_dim}, opts);
    const at::Tensor k = at::randn({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, opts);
    const at::Tensor v = at::randn({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, opts);
    const double scale = p.softmax_scale();
    const at::Tensor ref = reference_attention(q, k, v, causal, scale).out;
    const double err_plain = relative_frobenius_error(grouped_attention(q, k, v, causal, scale).out, ref);
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
