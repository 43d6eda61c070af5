// attnprof::flash_attention_sm90 (the Hopper kernel) and the custom-flash-sm90
// variant, against a float64 reference. Fresh random inputs every run (the
// seed is in every failure message); outputs land in memory poisoned with NaN
// and must be finite everywhere. Pass rule, as for custom-flash: relative
// Frobenius error <= 2x that of a plain same-dtype implementation
// (matmul/softmax/matmul) and <= 1e-2; the log-sum-exp within 1e-3 relative.
// The GPU tests skip, with the reason, where there is no GPU, no sm_90a kernel
// or no compute capability 9.0 device.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <c10/util/Exception.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>
#ifdef ATTNPROF_HAVE_SM90_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAGraph.h>
#include <c10/cuda/CUDAGuard.h>
#endif

#include <algorithm>
#include <cmath>
#include <iostream>
#include <limits>
#include <map>
#include <functional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <type_traits>
#include <vector>

#include "attention_test_inputs.h"
#include "sm90_test_util.h"
#include "attnprof/problem.h"
#include "kernels/flash_attention/flash_fwd_plan.h"
#include "kernels/flash_sm90/api.h"
#include "kernels/flash_sm90/decode_route.h"
#include "kernels/flash_sm90/flash_bwd_sm90_traits.h"
#include "kernels/flash_sm90/flash_sm90_traits.h"
#include "kernels/flash_sm90/tail_split.h"
#include "kernels/flash_sm90/tile_order.h"
#include "kernels/flash_sm90/flash_sm90_params.h"
#include "kernels/flash_sm90/varlen_tiles.h"
#include "attnprof/variant.h"
#include "variants/factories.h"
#include "variants/torch_problem.h"

namespace {

using attnprof::relative_frobenius_error;

constexpr const char* kOpName = "attnprof::flash_attention_sm90";
using FlashFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                   const at::Tensor&, bool, double);

c10::TypedOperatorHandle<FlashFn> flash_op() {
  return c10::Dispatcher::singleton().findSchemaOrThrow(kOpName, "").typed<FlashFn>();
}

// Why the GPU tests cannot run here, or "" when they can.
std::string why_not_runnable() { return attnprof::testing::sm90_why_not_runnable(kOpName); }

#define REQUIRE_SM90()                                   \
  do {                                                   \
    const std::string why = why_not_runnable();          \
    if (!why.empty()) GTEST_SKIP() << why;               \
  } while (0)

// A fresh seed per test, reported by every failure inside it.
uint64_t fresh_seed() {
  const uint64_t seed = (static_cast<uint64_t>(std::random_device{}()) << 32) | std::random_device{}();
  at::manual_seed(seed);
  return seed;
}

// Keys visible to each query, bottom-right aligned: key j to query i iff
// j <= i + (sk - sq). True where masked, shaped [sq, sk].
at::Tensor causal_mask(int64_t sq, int64_t sk, const at::TensorOptions& opts) {
  return at::ones({sq, sk}, opts.dtype(at::kBool)).triu(sk - sq + 1);
}

// K/V heads repeated to the query heads: query head h reads KV head h / group.
at::Tensor expand_heads(const at::Tensor& kv, int64_t heads_q) {
  return kv.repeat_interleave(heads_q / kv.size(1), /*dim=*/1);
}

// softmax(scale · q kᵀ + mask) v and the log-sum-exp, in the inputs' dtype or
// (reference) in float64. Rows that see no key give 0 and -inf, as the kernel
// is specified to (softmax over all -inf would give NaN).
std::tuple<at::Tensor, at::Tensor> attention(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             bool causal, double scale, bool float64) {
  const at::ScalarType t = float64 ? at::kDouble : q.scalar_type();
  const at::Tensor qd = q.to(t), kd = expand_heads(k, q.size(1)).to(t), vd = expand_heads(v, q.size(1)).to(t);
  at::Tensor s = at::matmul(qd, kd.transpose(-2, -1)) * scale;
  if (causal) s = s.masked_fill(causal_mask(q.size(2), k.size(2), s.options()), -INFINITY);
  const at::Tensor lse = at::logsumexp(s.to(at::kDouble), -1);
  const at::Tensor seen = at::isfinite(lse).unsqueeze(-1);
  at::Tensor p = at::softmax(s, -1).masked_fill(seen.logical_not(), 0);
  return {at::matmul(p, vd), lse};
}

// Leaves freed blocks full of NaN in the caching allocator, the size of the
// tensors the op is about to allocate, so an element it does not write stays NaN.
void poison_next_allocations(const at::Tensor& q) {
  std::vector<at::Tensor> held;
  held.push_back(at::full(q.sizes(), std::numeric_limits<double>::quiet_NaN(), q.options()));
  held.push_back(at::full({q.size(0), q.size(1), q.size(2)}, std::numeric_limits<double>::quiet_NaN(),
                          q.options().dtype(at::kFloat)));
}

// What the cases of one test reached, printed at its end: the evidence that
// the loops ran, and how close they came to the bound.
struct Tally {
  int cases = 0;
  double worst = 0;  // max over cases of err / (2 · plain same-dtype err + 1e-6)
  void print(const char* what) const {
    std::cout << "[ sm90     ] " << what << ": " << cases << " cases, worst error "
              << worst << " of the bound\n";
  }
};

using ForwardCall = std::function<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                      const at::Tensor&, bool, double)>;

// attnprof::flash_attention_sm90 through the dispatcher.
std::tuple<at::Tensor, at::Tensor> call_op(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           bool causal, double scale) {
  return flash_op().call(q, k, v, causal, scale);
}

// Runs the op (or `call`) on (q, k, v) and applies the pass rule.
void check_case(Tally& tally, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale,
                const ForwardCall& call = call_op) {
  poison_next_allocations(q);
  auto [out, lse] = call(q, k, v, causal, scale);
  ASSERT_EQ(out.sizes(), q.sizes());
  ASSERT_EQ(out.scalar_type(), q.scalar_type());
  ASSERT_EQ(lse.sizes(), (std::vector<int64_t>{q.size(0), q.size(1), q.size(2)}));
  ASSERT_EQ(lse.scalar_type(), at::kFloat);
  ASSERT_TRUE(at::isfinite(out).all().item<bool>()) << "output not fully written (NaN/inf left)";
  ASSERT_FALSE(at::isnan(lse).any().item<bool>()) << "lse not fully written (NaN left)";

  auto [ref, lse_ref] = attention(q, k, v, causal, scale, /*float64=*/true);
  auto [plain, plain_lse] = attention(q, k, v, causal, scale, /*float64=*/false);
  (void)plain_lse;
  const double err = relative_frobenius_error(out, ref);
  const double err_plain = relative_frobenius_error(plain, ref);
  const double lse_abs_max = lse_ref.isfinite().any().item<bool>()
                                 ? lse_ref.masked_select(lse_ref.isfinite()).abs().max().item<double>()
                                 : 0.0;
  ++tally.cases;
  if (ref.norm().item<double>() > 0) {
    // The 1e-6 floor only matters where both are exact (one visible key: out = v).
    tally.worst = std::max(tally.worst, err / (2 * err_plain + 1e-6));
    EXPECT_LE(err, 2 * err_plain + 1e-6) << "plain same-dtype error " << err_plain;
    EXPECT_LE(err, 1e-2);
  } else {
    EXPECT_TRUE((out == 0).all().item<bool>()) << "rows that see no key must be 0";
  }
  // Rows that see no key: -inf exactly; the others within 1e-3 relative.
  const at::Tensor seen = lse_ref.isfinite();
  EXPECT_TRUE(at::equal(lse.isfinite(), seen.to(lse.device()))) << "lse finite exactly where a key is visible";
  if (seen.any().item<bool>()) {
    const double lse_err = (lse.to(at::kDouble).masked_select(seen) - lse_ref.masked_select(seen)).abs().max().item<double>();
    EXPECT_LE(lse_err, 1e-3 * (1 + lse_abs_max)) << "lse error (lse depends on Q·Kᵀ only, out on P·V too)";
  }
  const at::Tensor unseen_rows = seen.logical_not().unsqueeze(-1).expand_as(out);
  EXPECT_TRUE((out.masked_select(unseen_rows) == 0).all().item<bool>()) << "rows that see no key must be 0";
}

struct Shape {
  int64_t batch, heads_q, heads_kv, seq_q, seq_k;
};

std::string describe(const Shape& s, int64_t d, at::ScalarType dt, bool causal) {
  return "q [" + std::to_string(s.batch) + ", " + std::to_string(s.heads_q) + ", " + std::to_string(s.seq_q) +
         ", " + std::to_string(d) + "], kv heads " + std::to_string(s.heads_kv) + ", seq_kv " +
         std::to_string(s.seq_k) + (dt == at::kBFloat16 ? " bf16" : " fp16") + (causal ? " causal" : " full");
}

void run_shapes(const char* what, const std::vector<Shape>& shapes, uint64_t seed,
                const ForwardCall& call = call_op, const std::vector<int64_t>& head_dims = {64, 128}) {
  Tally tally;
  for (const Shape& s : shapes)
    for (int64_t d : head_dims)
      for (auto dt : {at::kBFloat16, at::kHalf})
        for (bool causal : {false, true}) {
          SCOPED_TRACE(describe(s, d, dt, causal) + ", seed " + std::to_string(seed));
          const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dt);
          const at::Tensor q = at::randn({s.batch, s.heads_q, s.seq_q, d}, opts);
          const at::Tensor k = at::randn({s.batch, s.heads_kv, s.seq_k, d}, opts);
          const at::Tensor v = at::randn({s.batch, s.heads_kv, s.seq_k, d}, opts);
          check_case(tally, q, k, v, causal, 1.0 / std::sqrt(static_cast<double>(d)), call);
        }
  tally.print(what);
}

// The custom-flash matrix (odd lengths, both masks, dtypes, head dims) with
// query and key/value heads equal and grouped. 4096 rows with 8 heads is more
// tiles (256) than the H200 has SMs (132): blocks loop over several tiles and
// the pipeline's phases carry from one tile into the next.
TEST(FlashSm90Op, MatchesFloat64Reference) {
  REQUIRE_SM90();
  const uint64_t seed = fresh_seed();
  std::vector<Shape> shapes;
  for (int64_t seq : {1, 17, 65, 127, 1000, 1025})
    for (auto [b, hq, hkv] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 1}, {3, 4, 4}, {2, 8, 2}})
      shapes.push_back({b, hq, hkv, seq, seq});
  shapes.push_back({1, 8, 2, 4096, 4096});
  // 35 heads of 2048 keys: K/V of 35 MB, past 5/8 of a 50 MB L2, so the causal
  // tile order cuts the heads into sections (18 + 17 on the H200), one of
  // them spanning two batch entries.
  shapes.push_back({5, 7, 7, 2048, 2048});
  run_shapes("square, grouped heads", shapes, seed);
}

// seq_q != seq_kv (decode, chunked prefill, and more queries than keys, where
// causal rows at the top see no key) and GQA ratios up to MQA.
TEST(FlashSm90Op, SeqQDiffersFromSeqKv) {
  REQUIRE_SM90();
  const uint64_t seed = fresh_seed();
  run_shapes("seq_q != seq_kv", {{2, 4, 1, 1, 1000},     // decode, MQA
              {1, 16, 1, 3, 4097},    // ratio 16
              {2, 8, 4, 16, 63},      // ratio 2
              {1, 8, 1, 17, 32768},   // long cache, MQA
              {1, 4, 4, 128, 1000},   // chunked prefill
              {2, 8, 2, 1000, 17},    // more queries than keys
              {1, 2, 2, 300, 1},      // one key
              {1, 4, 2, 2100, 3000},  // chunked prefill past the short-causal rows (other tile config)
              {1, 2, 2, 3000, 2100},  // more queries than keys, likewise
              // Short-causal tiles whose first key block is half-width for a
              // warpgroup (kHalfFirstBlock): offset 700, warpgroup 0 of the
              // first tile sees none of that block; offset 133, both
              // warpgroups of the first tile see only its lower half.
              {1, 4, 2, 300, 1000},
              {2, 4, 4, 200, 333}},
             seed);
}

// Decode shapes run the split-KV kernel (decode_route.h): the operator's
// output and lse are attnprof::flash_attention's bit for bit (the same kernel
// on the same plan), also causal with several queries and under GQA and MQA;
// a prefill shape runs the Hopper kernel (a by-name run of its configuration
// gives the same bits).
TEST(FlashSm90Op, DecodeShapesRunTheSplitKvKernel) {
  REQUIRE_SM90();
#ifdef ATTNPROF_HAVE_SM90_KERNELS
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  using PortableFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool,
                                                        double, int64_t);
  const auto portable =
      c10::Dispatcher::singleton().findSchemaOrThrow("attnprof::flash_attention", "").typed<PortableFn>();
  struct Case {
    int64_t b, hq, hkv, sq, sk, d;
  };
  for (const Case c : {Case{8, 32, 8, 1, 4096, 128}, Case{1, 32, 8, 4, 20000, 128}, Case{2, 16, 1, 1, 3000, 64},
                       Case{2, 8, 2, 16, 5000, 64}}) {
    for (const bool causal : {true, false}) {
      SCOPED_TRACE(std::to_string(c.b) + "x" + std::to_string(c.hq) + "/" + std::to_string(c.hkv) + "x" +
                   std::to_string(c.sq) + "x" + std::to_string(c.sk) + "x" + std::to_string(c.d) +
                   (causal ? " causal" : " full"));
      const at::Tensor q = at::randn({c.b, c.hq, c.sq, c.d}, bf16), k = at::randn({c.b, c.hkv, c.sk, c.d}, bf16),
                       v = at::randn({c.b, c.hkv, c.sk, c.d}, bf16);
      const auto plan = attnprof::flash::plan_fwd({c.b, c.hq, c.hkv, c.sq, c.sk, c.d, causal},
                                                  at::cuda::getCurrentDeviceProperties()->multiProcessorCount);
      ASSERT_TRUE(attnprof::flash_sm90::runs_split_kv_decode(plan)) << "not a decode shape for the rule";
      const auto [o1, l1] = flash_op().call(q, k, v, causal, 0.125);
      const auto [o2, l2] = portable.call(q, k, v, causal, 0.125, 0);
      EXPECT_TRUE(at::equal(o1, o2) && at::equal(l1, l2)) << "not the split-KV kernel's bits";
    }
  }
#endif
}

// The row max moves at every key block (attention_test_inputs.h): the running
// max, the O rescale and the sum must stay exact across blocks.
TEST(FlashSm90Op, RowMaxDriftingAcrossKeyBlocks) {
  REQUIRE_SM90();
  const uint64_t seed = fresh_seed();
  Tally tally;
  for (int64_t d : {64, 128})
    for (auto dt : {at::kBFloat16, at::kHalf})
      for (bool causal : {false, true})
        for (double direction : {1.0, -1.0}) {
          SCOPED_TRACE("d" + std::to_string(d) + (dt == at::kHalf ? " fp16" : " bf16") +
                       (causal ? " causal" : " full") + (direction > 0 ? " rising" : " falling") +
                       ", seed " + std::to_string(seed));
          const auto [q, k, v] = attnprof::testing::drifting_max_inputs(2, 3, 1000, d, dt, direction);
          check_case(tally, q, k, v, causal, 1.0);
        }
  tally.print("drifting row max");
}

// The forward keeps its counters per stream and its kernel leaves them
// zeroed (flash_sm90/api.cpp): the causal tile counter, and the tail split's
// per-warp counters. Calls back to back, on a second stream, with the two
// streams' calls interleaved, on cudaStreamPerThread, and replays of a
// captured CUDA graph must all give the bit-identical result of the first
// call (which SM takes a tile, and which piece of a split tile finishes last,
// must not change the result). The first is checked against the float64
// reference; outputs land in NaN-poisoned memory, so a tile never taken, or a
// split tile never merged, after a counter was left dirty shows as NaN.
void expect_repeatable(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale) {
  Tally tally;
  check_case(tally, q, k, v, causal, scale);  // against the float64 reference
  poison_next_allocations(q);
  const at::Tensor first = std::get<0>(flash_op().call(q, k, v, causal, scale));
  ASSERT_TRUE(at::isfinite(first).all().item<bool>());
  auto expect_same = [&](const at::Tensor& out, const std::string& how) {
    EXPECT_TRUE(at::equal(out, first)) << how << ": differs from the first call";
  };
  for (int i = 0; i < 3; ++i) {
    poison_next_allocations(q);
    expect_same(std::get<0>(flash_op().call(q, k, v, causal, scale)), "call " + std::to_string(i + 2));
  }
#ifdef ATTNPROF_HAVE_SM90_KERNELS
  const at::cuda::CUDAStream main = at::cuda::getCurrentCUDAStream();
  const at::cuda::CUDAStream side = at::cuda::getStreamFromPool();
  std::vector<at::Tensor> on_side, on_main;
  side.synchronize();
  main.synchronize();
  for (int i = 0; i < 3; ++i) {  // both streams' kernels may run at once, each on its own counters
    {
      const at::cuda::CUDAStreamGuard guard(side);
      on_side.push_back(std::get<0>(flash_op().call(q, k, v, causal, scale)));
    }
    on_main.push_back(std::get<0>(flash_op().call(q, k, v, causal, scale)));
  }
  side.synchronize();
  for (size_t i = 0; i < on_side.size(); ++i) {
    expect_same(on_side[i], "side stream call " + std::to_string(i + 1));
    expect_same(on_main[i], "main stream call " + std::to_string(i + 1) + " next to the side stream");
  }
  {
    const at::cuda::CUDAStreamGuard guard(at::cuda::getStreamFromExternal(cudaStreamPerThread, q.device().index()));
    poison_next_allocations(q);
    expect_same(std::get<0>(flash_op().call(q, k, v, causal, scale)), "cudaStreamPerThread");
    poison_next_allocations(q);
    expect_same(std::get<0>(flash_op().call(q, k, v, causal, scale)), "cudaStreamPerThread, again");
  }
  at::cuda::CUDAGraph graph;
  at::Tensor captured;
  {
    const at::cuda::CUDAStreamGuard guard(side);
    graph.capture_begin();
    captured = std::get<0>(flash_op().call(q, k, v, causal, scale));
    graph.capture_end();
  }
  for (int i = 0; i < 3; ++i) {
    captured.fill_(std::numeric_limits<double>::quiet_NaN());
    graph.replay();
    torch::cuda::synchronize();
    expect_same(captured, "graph replay " + std::to_string(i + 1));
    expect_same(std::get<0>(flash_op().call(q, k, v, causal, scale)),
                "call after graph replay " + std::to_string(i + 1));
  }
#endif
}

// Causal launches take their tiles from the counter. There are several tiles
// per SM, so blocks take most of theirs from it: one left dirty would hand out
// indices past the end.
TEST(FlashSm90Op, CausalTileCounterReusedAcrossCallsStreamsAndGraphs) {
  REQUIRE_SM90();
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  for (int64_t d : {64, 128}) {
    SCOPED_TRACE("head_dim " + std::to_string(d));
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
    // 4 x 16 heads x 2000 rows: 1024 tiles of 128 rows (both head dims at
    // this length), against 132 SMs on an H200.
    const at::Tensor q = at::randn({4, 16, 2000, d}, opts), k = at::randn({4, 4, 2000, d}, opts),
                     v = at::randn({4, 4, 2000, d}, opts);
#ifdef ATTNPROF_HAVE_SM90_KERNELS
    ASSERT_GT(4 * 16 * ((2000 + 127) / 128), 4 * at::cuda::getCurrentDeviceProperties()->multiProcessorCount)
        << "the test needs several tiles per SM";
#endif
    expect_repeatable(q, k, v, true, 1.0 / std::sqrt(static_cast<double>(d)));
  }
}

#ifdef ATTNPROF_HAVE_SM90_KERNELS
// Whether this device's launch for the shape splits its last round along the
// keys (tail_split.h): the workspace the launch layer asks for says so.
bool tail_split_planned(const Shape& s, int64_t d, at::ScalarType dt, bool causal) {
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  attnprof::flash_sm90::FwdParams p;
  p.batch = static_cast<int>(s.batch);
  p.heads_q = static_cast<int>(s.heads_q);
  p.heads_kv = static_cast<int>(s.heads_kv);
  p.seqlen_q = static_cast<int>(s.seq_q);
  p.seqlen_k = static_cast<int>(s.seq_k);
  p.head_dim = static_cast<int>(d);
  p.num_sms = prop->multiProcessorCount;
  p.l2_bytes = prop->l2CacheSize;
  p.causal = causal;
  p.is_bf16 = dt == at::kBFloat16;
  return attnprof::flash_sm90::fwd_workspace(p).split_partial_bytes > 0;
}
#endif

// Tiles of one cost (no mask, or a causal mask over one query block per head)
// end in a last round cut along the keys, and the pieces merged
// (tail_split.h). Shapes chosen so that it is (asserted, on an H200's 132
// SMs): full rounds before the split one, none (fewer tiles than SMs; one
// tile over many SMs), grouped heads, key tails inside a piece, the causal
// diagonal inside a piece; then the repeat checks, since the merge runs in
// whichever warp counts last.
TEST(FlashSm90Op, TailSplitMatchesReferenceAndRepeats) {
  REQUIRE_SM90();
  const uint64_t seed = fresh_seed();
  struct Case {
    int64_t d;
    Shape s;
    bool causal;
  };
  const std::vector<Case> cases = {
      {128, {1, 48, 12, 768, 2000}, false},  // 288 tiles: 2 full rounds, 24 split
      {128, {2, 8, 2, 200, 5000}, false},    // 32 tiles of 40 key blocks over the SMs
      {128, {1, 16, 16, 128, 4097}, false},  // one key in the last block
      {128, {1, 1, 1, 1, 70000}, false},     // one decode row over many SMs
      {128, {1, 1, 1, 1, 70000}, true},      // causal decode: the same keys
      {128, {2, 8, 2, 100, 5000}, true},     // causal chunk: the diagonal in the last piece
      {64, {1, 48, 12, 768, 2000}, false},   // 192-row tiles: 192, 1 full round
      {64, {2, 4, 1, 150, 3000}, false},     // MQA
      {64, {1, 16, 16, 128, 4097}, false},
      {64, {1, 1, 1, 1, 70000}, false},
      {64, {2, 8, 2, 100, 5000}, true},
  };
  Tally tally;
  for (const Case& c : cases)
    for (auto dt : {at::kBFloat16, at::kHalf}) {
      SCOPED_TRACE(describe(c.s, c.d, dt, c.causal) + ", seed " + std::to_string(seed));
#ifdef ATTNPROF_HAVE_SM90_KERNELS
      if (at::cuda::getCurrentDeviceProperties()->multiProcessorCount == 132)
        ASSERT_TRUE(tail_split_planned(c.s, c.d, dt, c.causal)) << "the case no longer exercises the split";
#endif
      const auto opts = at::TensorOptions().device(at::kCUDA).dtype(dt);
      const at::Tensor q = at::randn({c.s.batch, c.s.heads_q, c.s.seq_q, c.d}, opts);
      const at::Tensor k = at::randn({c.s.batch, c.s.heads_kv, c.s.seq_k, c.d}, opts);
      const at::Tensor v = at::randn({c.s.batch, c.s.heads_kv, c.s.seq_k, c.d}, opts);
      check_case(tally, q, k, v, c.causal, 1.0 / std::sqrt(static_cast<double>(c.d)));
    }
  tally.print("tail split");
  for (int64_t d : {64, 128}) {
    SCOPED_TRACE("repeats, head_dim " + std::to_string(d) + ", seed " + std::to_string(seed));
    const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
    const at::Tensor q = at::randn({1, 48, 768, d}, opts), k = at::randn({1, 12, 2000, d}, opts),
                     v = at::randn({1, 12, 2000, d}, opts);
    expect_repeatable(q, k, v, false, 1.0 / std::sqrt(static_cast<double>(d)));
  }
}

TEST(FlashSm90Op, RejectsBadInputs) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  if (!c10::Dispatcher::singleton().findSchemaOrThrow(kOpName, "").hasKernelForDispatchKey(c10::DispatchKey::CUDA))
    GTEST_SKIP() << "attnprof was built without its sm_90a kernels";
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  const at::Tensor q = at::randn({1, 4, 32, 64}, bf16);
  auto expect_error = [&](const at::Tensor& a, const at::Tensor& b, const at::Tensor& c, const std::string& what) {
    SCOPED_TRACE(what);
    try {
      flash_op().call(a, b, c, true, 0.125);
      ADD_FAILURE() << "no error";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(kOpName), std::string::npos) << e.what();
      if (why_not_runnable().empty())  // on a Hopper GPU the reason must be the input's, not the device's
        EXPECT_NE(std::string(e.what()).find(what), std::string::npos) << e.what();
    }
  };
  const at::Tensor f32 = q.to(at::kFloat);
  expect_error(f32, f32, f32, "supports bf16 and fp16, not fp32");
  const at::Tensor q96 = at::randn({1, 4, 32, 96}, bf16);
  expect_error(q96, q96, q96, "supports head_dim 64 and 128, not 96");
  const at::Tensor qt = at::randn({1, 32, 4, 64}, bf16).transpose(1, 2);
  expect_error(qt, q, q, "must be contiguous");
  expect_error(q, q.to(at::kHalf), q, "must have one dtype");
  // No CPU kernel is registered: the dispatcher refuses, naming the op and the backend.
  expect_error(q.cpu(), q.cpu(), q.cpu(), "'CPU' backend");
  expect_error(q, q.cpu(), q, "k must be a CUDA tensor");
  const at::Tensor kv3 = at::randn({1, 3, 32, 64}, bf16);
  expect_error(q, kv3, kv3, "must be a multiple of key/value heads (3)");
  const at::Tensor kv_b2 = at::randn({2, 4, 32, 64}, bf16);
  expect_error(q, kv_b2, kv_b2, "differ in batch or head_dim");
  expect_error(q, q, at::randn({1, 4, 31, 64}, bf16), "k and v must have one shape");
  expect_error(q[0], q[0], q[0], "[batch, heads_q, seq_q, head_dim]");
  // Contiguous but one element off a 16-byte boundary: TMA cannot read it.
  const at::Tensor flat = at::randn({1 + 4 * 32 * 64}, bf16);
  const at::Tensor shifted = flat.narrow(0, 1, 4 * 32 * 64).view({1, 4, 32, 64});
  expect_error(shifted, q, q, "16-byte aligned");
  EXPECT_THROW(flash_op().call(q, q, q, true, std::nan("")), c10::Error);
  EXPECT_THROW(flash_op().call(q, q, q, true, -1.0), c10::Error);
}

// The tile order (tile_order.h) needs no GPU: every tile exactly once, each
// section a run of whole heads taken longest query block first, and, with
// the greedy hand-out the kernel's atomic counter does, a busiest SM close to
// the average where head-by-head order left a long tail.
using attnprof::flash_sm90::plan_tile_order;
using attnprof::flash_sm90::tile_coord;
using attnprof::flash_sm90::TileOrder;

namespace order {

// Finish time of the busiest of `sms` SMs over the average, work items of
// these costs handed in order to whichever SM is free first.
double busiest_over_average(const std::vector<double>& costs, int sms) {
  std::vector<double> busy(static_cast<size_t>(sms), 0.0);
  double total = 0;
  for (double c : costs) {
    *std::min_element(busy.begin(), busy.end()) += c;
    total += c;
  }
  return *std::max_element(busy.begin(), busy.end()) / (total / sms);
}

// The forward's tiles: a tile of query block m costs m + 1 key blocks
// (causal, square) plus one block of fixed cost.
double tail_ratio(const std::vector<int>& m_blocks, int sms) {
  std::vector<double> costs;
  for (int m : m_blocks) costs.push_back(m + 2.0);
  return busiest_over_average(costs, sms);
}

}  // namespace order

TEST(FlashSm90TileOrder, VisitsEveryTileOnceLongestFirstWithinSections) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 400; ++trial) {
    const int group = 1 << (rng() % 4);
    const int heads = group * (1 + static_cast<int>(rng() % 40));
    const int m_blocks = 1 + static_cast<int>(rng() % 70);
    const int64_t kv_bytes = int64_t{1} << (12 + rng() % 14);
    const int64_t l2 = int64_t{1} << (20 + rng() % 7);
    const int sms = 1 + static_cast<int>(rng() % 140);
    const bool causal = rng() % 4 != 0;
    const bool short_last = rng() % 2 != 0;
    SCOPED_TRACE("heads " + std::to_string(heads) + " group " + std::to_string(group) + " m_blocks " +
                 std::to_string(m_blocks) + " kv " + std::to_string(kv_bytes) + " l2 " + std::to_string(l2) +
                 " sms " + std::to_string(sms) + (causal ? " causal" : " full") +
                 (short_last ? " short last block" : "") + ", seed " + std::to_string(seed));
    const TileOrder o = plan_tile_order(heads, group, m_blocks, kv_bytes, l2, sms, causal, short_last);
    ASSERT_GE(o.section_heads, 1);
    // Without a mask and with a short last block, the heads' last blocks come
    // after every other tile, in head order; the rest is as below.
    const bool last_blocks_at_end = !causal && short_last && m_blocks > 1;
    EXPECT_EQ(o.short_last_heads, last_blocks_at_end ? heads : 0);
    const int ordered_blocks = last_blocks_at_end ? m_blocks - 1 : m_blocks;
    std::vector<int> seen(static_cast<size_t>(heads) * m_blocks, 0);
    int section_first = 0, section_end = 0, prev_m = 0;
    for (int tile = 0; tile < heads * m_blocks; ++tile) {
      const auto c = tile_coord(o, tile);
      ASSERT_TRUE(c.bh >= 0 && c.bh < heads && c.m_block >= 0 && c.m_block < m_blocks) << "tile " << tile;
      ++seen[static_cast<size_t>(c.bh) * m_blocks + c.m_block];
      if (tile >= heads * ordered_blocks) {  // the short last blocks
        ASSERT_EQ(c.bh, tile - heads * ordered_blocks) << "tile " << tile;
        ASSERT_EQ(c.m_block, m_blocks - 1) << "tile " << tile;
      } else if (c.bh >= section_end) {  // a new section starts at its first head, longest block first
        ASSERT_EQ(c.bh, section_end) << "tile " << tile;
        ASSERT_EQ(c.m_block, ordered_blocks - 1) << "tile " << tile;
        section_first = section_end;
        section_end += o.section_heads + (section_first < o.big_sections * (o.section_heads + 1) ? 1 : 0);
      } else {
        ASSERT_GE(c.bh, section_first) << "tile " << tile;
        ASSERT_LE(c.m_block, prev_m) << "tile " << tile << ": a longer block after a shorter one";
      }
      prev_m = c.m_block;
    }
    EXPECT_EQ(section_end, heads);
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; })) << "a tile missed or repeated";
    if (!causal) EXPECT_EQ(o.section_heads, 1) << "equal tiles: head by head";
  }
}

// The operator hands a shape to the split-KV decode kernel when the portable
// planner picks decode and a KV head's query rows fit 64 (one consumer
// warpgroup's rows of a Hopper tile): the
// decode shapes of issue 30 (seq_q 1 to 16 in groups of 4) do, prefill and
// chunked prefill do not.
TEST(FlashSm90DecodeRoute, DecodeShapesOnlyUpToOneTileOfRowsPerKvHead) {
  namespace fl = attnprof::flash;
  struct Case {
    fl::FwdShape shape;
    bool decode;
  };
  const Case cases[] = {
      {{8, 32, 8, 1, 4096, 128, true}, true},     {{8, 32, 8, 1, 32768, 128, true}, true},
      {{8, 32, 8, 1, 131072, 128, true}, true},   {{1, 32, 8, 4, 131072, 128, true}, true},
      {{8, 32, 8, 16, 32768, 128, false}, true},  {{2, 16, 1, 4, 3000, 64, true}, true},  // MQA: 64 rows
      {{2, 16, 1, 5, 3000, 64, true}, false},     // 80 rows per KV head
      {{8, 32, 8, 17, 32768, 128, true}, false},  // 68 rows
      {{4, 16, 16, 4096, 4096, 128, true}, false}, {{1, 16, 16, 16384, 16384, 128, false}, false},
      {{1, 32, 8, 512, 8192, 128, true}, false},  // a chunk of prefill
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::to_string(c.shape.batch) + "x" + std::to_string(c.shape.heads_q) + "/" +
                 std::to_string(c.shape.heads_kv) + "x" + std::to_string(c.shape.seqlen_q) + "x" +
                 std::to_string(c.shape.seqlen_k) + "x" + std::to_string(c.shape.head_dim));
    const fl::FwdPlan plan = fl::plan_fwd(c.shape, 132);
    EXPECT_EQ(attnprof::flash_sm90::runs_split_kv_decode(plan), c.decode);
    if (c.decode) EXPECT_EQ(plan.path, fl::FwdPath::kDecode);
    // The fp8 operator's route: the same shapes (the e4m3 decode tiles have both head dims, 64 and 128),
    // taken when the route is on.
    EXPECT_EQ(attnprof::flash_sm90::fits_fp8_split_kv_decode(plan, c.shape.head_dim), c.decode);
    EXPECT_EQ(attnprof::flash_sm90::runs_fp8_split_kv_decode(plan, c.shape.head_dim),
              c.decode && attnprof::flash_sm90::kFp8DecodeRouteOn);
  }
  // The route's words for the facts: the e4m3 instance, its bf16 combine, the e4m3 tile.
  const fl::FwdPlan decode = fl::plan_fwd({8, 32, 8, 1, 32768, 128, true}, 132);
  ASSERT_GT(decode.num_splits, 1);
  const std::string words = fl::describe_fwd(128, false, decode, /*e4m3=*/true);
  EXPECT_NE(words.find("flash_fwd_splitkv_kernel<e4m3, d128>"), std::string::npos) << words;
  EXPECT_NE(words.find("flash_combine_kernel<bf16, d128>"), std::string::npos) << words;
  EXPECT_NE(words.find("6-stage"), std::string::npos) << words;
  EXPECT_NE(words.find("widened to fp16"), std::string::npos) << words;
  // A head dim without the family's tiles (the fp8 operator's 256) plans nothing to run, and does not divide by 0.
  const fl::FwdPlan d256 = fl::plan_fwd({8, 32, 8, 1, 4096, 256, true}, 132);
  EXPECT_EQ(d256.path, fl::FwdPath::kPrefill);
  EXPECT_FALSE(attnprof::flash_sm90::fits_fp8_split_kv_decode(d256, 256));
}

// The split planner's contract on decode shapes (flash_fwd_plan.h), for every
// GPU size: no empty split, every key in one, and a split grid that keeps the
// resident-block slots at least kDecodeSplitShareOfBest as full as the best
// split count could (whole waves; at most 128 splits of at least 4 key tiles).
// Before the rule judged counts as they run, 1x32q/8kv x 4 x 131072 on 132 SMs
// took 29 splits (232 of 264 slots) where 32 fill 256.
TEST(FlashFwdPlan, DecodeSplitsFillTheSlotsWithoutAnEmptySplit) {
  namespace fl = attnprof::flash;
  auto ceil_div = [](int64_t a, int64_t b) { return (a + b - 1) / b; };
  int checked_splits = 0;
  for (int sms : {1, 78, 114, 132, 144})
    for (int64_t batch : {1, 2, 3, 8})
      for (int64_t heads_kv : {1, 2, 8})
        for (int64_t group : {1, 4, 8})
          for (int64_t seq_q : {1, 4})
            for (int64_t seq_k : {1, 63, 64, 300, 4096, 8191, 32768, 70001, 131072, 1 << 20})
              for (int64_t head_dim : {64, 128}) {
                const fl::FwdShape shape{batch, heads_kv * group, heads_kv, seq_q, seq_k, head_dim, true};
                const fl::FwdPlan plan = fl::plan_fwd(shape, sms);
                if (plan.path != fl::FwdPath::kDecode) continue;
                SCOPED_TRACE(std::to_string(batch) + "x" + std::to_string(heads_kv * group) + "/" +
                             std::to_string(heads_kv) + "x" + std::to_string(seq_q) + "x" + std::to_string(seq_k) +
                             "x" + std::to_string(head_dim) + " on " + std::to_string(sms) + " SMs");
                using D64 = fl::DecodeKernelTraits<fl::DecodeTileD64, short>;
                using D128 = fl::DecodeKernelTraits<fl::DecodeTileD128, short>;
                const int64_t block_n = head_dim == 64 ? D64::kBlockN : D128::kBlockN;
                const int64_t slots_per_sm =
                    head_dim == 64 ? fl::DecodeTileD64::kBlocksPerSm : fl::DecodeTileD128::kBlocksPerSm;
                ASSERT_EQ(plan.keys_per_split % block_n, 0);
                ASSERT_GE(int64_t{plan.num_splits} * plan.keys_per_split, seq_k) << "keys left out";
                ASSERT_LT(int64_t{plan.num_splits - 1} * plan.keys_per_split, std::max<int64_t>(seq_k, 1))
                    << "an empty split";
                if (plan.num_splits == 1) continue;
                ++checked_splits;
                const int64_t blocks = batch * heads_kv * plan.row_tiles, slots = sms * slots_per_sm;
                const int64_t n_tiles = ceil_div(seq_k, block_n);
                auto fill = [&](int64_t splits) {  // blocks over slots in whole waves
                  const double waves = static_cast<double>(blocks * splits) / static_cast<double>(slots);
                  return waves / std::ceil(waves);
                };
                double best = 0;
                for (int64_t s = 1; s <= std::clamp<int64_t>(n_tiles / 4, 1, 128); ++s)
                  best = std::max(best, fill(ceil_div(n_tiles, ceil_div(n_tiles, s))));
                EXPECT_GE(fill(plan.num_splits), fl::kDecodeSplitShareOfBest * best - 1e-12)
                    << plan.num_splits << " splits of " << plan.keys_per_split << " keys";
              }
  EXPECT_GT(checked_splits, 100) << "the sweep must reach split grids";
}

// A cursor of varlen_tiles.h with the tile shape it walks.
template <int kRows_, int kKeys_>
struct VarlenWalk {
  static constexpr int kRows = kRows_, kKeys = kKeys_;
  attnprof::flash_sm90::VarlenCursor<kRows, kKeys> walk;
};

// A packed batch's walk (varlen_tiles.h), as the kernel's producers take it:
// blocks each taking increasing items (its blockIdx, then the counter's next)
// with a cursor of its own. Every (sequence, head, query block) comes exactly
// once, each sequence's last query block first, with its rows, lengths and
// key blocks (under causal masking none past its last row's diagonal);
// sequences of no rows, and ones whose offsets lie outside the tensors, have
// none; every item past the last tile is no work.
TEST(FlashSm90VarlenTiles, EveryTileOfEverySequenceOnceWhateverBlockTakesIt) {
  using attnprof::flash_sm90::PackedBatchArgs;
  using attnprof::flash_sm90::Tile;
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  auto walk = [&](auto cursor_type, int trial) {
    using Cursor = decltype(cursor_type);
    constexpr int kBM = Cursor::kRows, kBN = Cursor::kKeys;
    const int batch = 1 + static_cast<int>(rng() % 40);
    const int heads = 1 + static_cast<int>(rng() % 9);
    const bool causal = rng() % 2 != 0;
    std::vector<int> len_q(batch), len_k(batch);
    for (int b = 0; b < batch; ++b) {
      const int kind = static_cast<int>(rng() % 6);  // none, one, odd short, long, far longer, any
      len_q[b] = kind == 0 ? 0 : kind == 1 ? 1 : kind == 2 ? 1 + 2 * static_cast<int>(rng() % 100)
                 : kind == 3 ? 1 + static_cast<int>(rng() % 2000) : kind == 4 ? 5000 + static_cast<int>(rng() % 4000)
                             : static_cast<int>(rng() % 700);
      len_k[b] = rng() % 3 == 0 ? static_cast<int>(rng() % 3000) : len_q[b];
    }
    std::vector<int> cu_q(batch + 1, 0), cu_k(batch + 1, 0);
    for (int b = 0; b < batch; ++b) cu_q[b + 1] = cu_q[b] + len_q[b], cu_k[b + 1] = cu_k[b] + len_k[b];
    PackedBatchArgs a;
    a.cu_seqlens_q = cu_q.data();
    a.cu_seqlens_k = cu_k.data();
    a.batch = batch;
    a.heads_q = heads;
    a.total_q = cu_q[batch];
    a.total_k = cu_k[batch];
    a.max_seqlen_q = *std::max_element(len_q.begin(), len_q.end()) + static_cast<int>(rng() % 3);
    a.max_seqlen_k = *std::max_element(len_k.begin(), len_k.end());
    a.causal = causal;
    // Offsets of one sequence moved past the rows after the check (a captured graph replayed): skipped.
    int corrupt = -1;
    if (batch > 1 && rng() % 4 == 0) {
      corrupt = static_cast<int>(rng() % (batch - 1));
      cu_q[corrupt + 1] = a.total_q + 5;  // sequence `corrupt` ends, and the next starts, past the rows
    }
    auto inside = [&](int b) {
      const int q0 = cu_q[b], q1 = cu_q[b + 1], k0 = cu_k[b], k1 = cu_k[b + 1];
      return 0 <= q0 && q0 <= q1 && q1 <= a.total_q && q1 - q0 <= a.max_seqlen_q && 0 <= k0 && k0 <= k1 &&
             k1 <= a.total_k && k1 - k0 <= a.max_seqlen_k;
    };
    const int bound = batch * heads * ((a.max_seqlen_q + kBM - 1) / kBM);
    SCOPED_TRACE("trial " + std::to_string(trial) + " block " + std::to_string(kBM) + " batch " +
                 std::to_string(batch) + " heads " + std::to_string(heads) + (causal ? " causal" : " full") +
                 " corrupt " + std::to_string(corrupt) + ", seed " + std::to_string(seed));
    // Blocks take items as the kernel's do: item b first, then the counter's, in the order asked.
    const int blocks = 1 + static_cast<int>(rng() % 140);
    std::vector<Cursor> cursors(blocks);
    std::vector<bool> done(blocks, false);
    std::map<std::tuple<int, int, int>, int> seen;  // (sequence by q0/len, head, block) -> times
    int real = 0;
    for (int b = 0; b < batch; ++b) real += inside(b) ? (cu_q[b + 1] - cu_q[b] + kBM - 1) / kBM * heads : 0;
    int next = std::min(blocks, bound);
    std::vector<int> item(blocks);
    for (int i = 0; i < blocks; ++i) item[i] = i < bound ? i : -1;
    for (;;) {
      std::vector<int> live;
      for (int i = 0; i < blocks; ++i) if (!done[i]) live.push_back(i);
      if (live.empty()) break;
      const int i = live[rng() % live.size()];
      if (item[i] < 0) { done[i] = true; continue; }
      if (!cursors[i].walk.seek(a, item[i])) {
        ASSERT_GE(item[i], real) << "item " << item[i] << " said past the end";
        done[i] = true;
        continue;
      }
      ASSERT_LT(item[i], real) << "item " << item[i] << " past the tiles";
      const Tile t = cursors[i].walk.tile(a, item[i]);
      const int b = cursors[i].walk.b;
      ASSERT_TRUE(inside(b)) << "sequence " << b << " has offsets outside the rows";
      ASSERT_EQ(t.q0, cu_q[b]);
      ASSERT_EQ(t.k0, cu_k[b]);
      ASSERT_EQ(t.len_q, cu_q[b + 1] - cu_q[b]);
      ASSERT_EQ(t.len_k, cu_k[b + 1] - cu_k[b]);
      ASSERT_TRUE(t.bh >= 0 && t.bh < heads && t.m_block >= 0 && t.m_block * kBM < t.len_q) << "item " << item[i];
      int n_hi = (t.len_k + kBN - 1) / kBN;
      if (causal) {
        const int last_key = std::min((t.m_block + 1) * kBM, t.len_q) - 1 + t.len_k - t.len_q;
        n_hi = last_key < 0 ? 0 : std::min(n_hi, last_key / kBN + 1);
      }
      ASSERT_EQ(t.n_hi, n_hi) << "item " << item[i];
      ++seen[{b, t.bh, t.m_block}];
      // Within a sequence: the last query block first, heads fastest (item order).
      const int r = item[i] - cursors[i].walk.first;
      ASSERT_EQ(t.m_block, (t.len_q + kBM - 1) / kBM - 1 - r / heads);
      ASSERT_EQ(t.bh, r % heads);
      item[i] = next < bound ? next++ : -1;
    }
    for (int b = 0; b < batch; ++b) {
      const int blocks_b = inside(b) ? (cu_q[b + 1] - cu_q[b] + kBM - 1) / kBM : 0;
      for (int h = 0; h < heads; ++h)
        for (int m = 0; m < blocks_b; ++m)
          ASSERT_EQ((seen[{b, h, m}]), 1) << "sequence " << b << " head " << h << " block " << m;
    }
    int total = 0;
    for (const auto& [key, n] : seen) total += n;
    EXPECT_EQ(total, real) << "a tile outside the sequences";
  };
  // Tiles of 128 query rows (2 consumers) and 192 (3), 128 keys.
  for (int trial = 0; trial < 300; ++trial) {
    walk(VarlenWalk<128, 128>{}, trial);
    walk(VarlenWalk<192, 128>{}, trial);
  }
}

// Without a mask the kernel hands tile t to SM t mod SMs. Modelled with a
// short tile costing its share of busy warpgroups, the short tiles at the end
// keep every SM within its round-robin share of long tiles plus of short ones.
TEST(FlashSm90TileOrder, FullMaskShortTilesSpreadOnAnH200) {
  constexpr int kSms = 132;
  struct Case {
    int batch_heads, seq, block_m;
  };
  for (const Case& c : {Case{128, 1024, 192}, Case{64, 1000, 128}, Case{16, 16383 - 63, 128}, Case{32, 2100, 192},
                        Case{256, 500, 192}, Case{8, 64, 128}}) {
    SCOPED_TRACE(std::to_string(c.batch_heads) + " heads x " + std::to_string(c.seq) + " rows, tiles of " +
                 std::to_string(c.block_m));
    const int m_blocks = (c.seq + c.block_m - 1) / c.block_m;
    const int tail = c.seq % c.block_m;
    const bool short_last = tail != 0 && tail <= c.block_m - 64;
    const double short_cost = short_last ? static_cast<double>((tail + 63) / 64) / (c.block_m / 64) : 1.0;
    const TileOrder o = plan_tile_order(c.batch_heads, 1, m_blocks, int64_t{1} << 20, int64_t{50} << 20, kSms,
                                        false, short_last);
    auto busiest = [&](auto m_block_of) {
      std::vector<double> busy(kSms, 0.0);
      for (int t = 0; t < c.batch_heads * m_blocks; ++t)
        busy[static_cast<size_t>(t % kSms)] += m_block_of(t) == m_blocks - 1 ? short_cost : 1.0;
      return *std::max_element(busy.begin(), busy.end());
    };
    const double ours = busiest([&](int t) { return tile_coord(o, t).m_block; });
    const double in_place = busiest([&](int t) { return m_blocks - 1 - t % m_blocks; });
    const int short_tiles = short_last ? c.batch_heads : 0;
    const int long_tiles = c.batch_heads * m_blocks - short_tiles;
    const double bound = (long_tiles + kSms - 1) / kSms + (short_tiles + kSms - 1) / kSms * short_cost;
    std::cout << "[ sm90     ] full " << c.batch_heads << "x" << c.seq << " /" << c.block_m << ": busiest SM "
              << ours << " tiles (short ones in place: " << in_place << ")\n";
    EXPECT_LE(ours, bound + 1e-9);
    EXPECT_LE(ours, in_place + 1e-9);
  }
}

TEST(FlashSm90TileOrder, CausalTailNearTheAverageOnAnH200) {
  constexpr int kSms = 132;
  constexpr int64_t kL2 = 50 * 1024 * 1024;
  struct Case {
    int batch_heads, seq, head_dim;
  };
  for (const Case& c : {Case{64, 4096, 128}, Case{128, 1024, 64}, Case{16, 16384, 128}, Case{64, 8192, 128},
                        Case{32, 2048, 128}, Case{256, 512, 64}}) {
    SCOPED_TRACE(std::to_string(c.batch_heads) + " heads x " + std::to_string(c.seq) + " x d" +
                 std::to_string(c.head_dim));
    const int m_blocks = (c.seq + 127) / 128;
    const TileOrder o =
        plan_tile_order(c.batch_heads, 1, m_blocks, int64_t{4} * c.seq * c.head_dim, kL2, kSms, true, false);
    std::vector<int> sectioned, head_by_head;
    for (int t = 0; t < c.batch_heads * m_blocks; ++t) {
      sectioned.push_back(tile_coord(o, t).m_block);
      head_by_head.push_back(m_blocks - 1 - t % m_blocks);
    }
    const double ours = order::tail_ratio(sectioned, kSms);
    const double before = order::tail_ratio(head_by_head, kSms);
    std::cout << "[ sm90     ] " << c.batch_heads << "x" << c.seq << " d" << c.head_dim << ": busiest SM "
              << ours << " of the average (head by head: " << before << "), " << o.section_heads
              << " heads per section\n";
    EXPECT_LE(ours, 1.035);
    EXPECT_LE(ours, before + 1e-9);
  }
}

// The Hopper backward's block order (plan_bwd_block_order, bwd_block) needs
// no GPU: every (slab, key block) once, slab by slab without a mask, and under
// causal masking, with each block handed to the first free SM as the hardware
// does (one block per SM), a busiest SM close to the average where slab by
// slab left a tail.
using attnprof::flash_sm90::bwd_block;
using attnprof::flash_sm90::plan_bwd_block_order;

TEST(FlashSm90BwdOrder, EveryBlockOnceSlabBySlabWithoutAMask) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  for (int trial = 0; trial < 400; ++trial) {
    const int slabs = 1 + static_cast<int>(rng() % 200);
    const int group = 1 << (rng() % 4);
    const int n_blocks = 1 + static_cast<int>(rng() % 140);
    const int seqlen_q = 1 + static_cast<int>(rng() % 20000);
    const int64_t l2 = int64_t{1} << (20 + rng() % 7);
    const int sms = 1 + static_cast<int>(rng() % 140);
    const bool causal = rng() % 3 != 0;
    SCOPED_TRACE("slabs " + std::to_string(slabs) + " group " + std::to_string(group) + " n_blocks " +
                 std::to_string(n_blocks) + " seqlen_q " + std::to_string(seqlen_q) + " l2 " + std::to_string(l2) +
                 " sms " + std::to_string(sms) + (causal ? " causal" : " full") + ", seed " + std::to_string(seed));
    const TileOrder o = plan_bwd_block_order(slabs, group, n_blocks, seqlen_q, 128, l2, sms, causal);
    std::vector<int> seen(static_cast<size_t>(slabs) * n_blocks, 0);
    for (int blk = 0; blk < slabs * n_blocks; ++blk) {
      const auto b = bwd_block(o, blk);
      ASSERT_TRUE(b.slab >= 0 && b.slab < slabs && b.n_block >= 0 && b.n_block < n_blocks) << "block " << blk;
      ++seen[static_cast<size_t>(b.slab) * n_blocks + b.n_block];
      if (!causal) {
        ASSERT_EQ(b.slab, blk / n_blocks) << "block " << blk;
        ASSERT_EQ(b.n_block, blk % n_blocks) << "block " << blk;
      }
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](int n) { return n == 1; })) << "a block missed or repeated";
  }
}

TEST(FlashSm90BwdOrder, CausalTailNearTheAverageOnAnH100) {
  constexpr int kSms = 132;
  constexpr int64_t kL2 = 50 * 1024 * 1024;
  struct Case {
    int batch, heads_q, heads_kv, seq, head_dim;
  };
  // The issue-30 backward points and a few more; query blocks of 64 rows at
  // head_dim 128, 128 at 64, key blocks of 128 (flash_bwd_sm90_traits.h).
  for (const Case& c : {Case{4, 16, 16, 4096, 128}, Case{1, 16, 16, 16384, 128}, Case{4, 32, 8, 4096, 128},
                        Case{8, 16, 16, 1024, 64}, Case{2, 16, 16, 8192, 128}, Case{16, 32, 8, 2048, 128},
                        Case{32, 16, 16, 512, 64}}) {
    SCOPED_TRACE(std::to_string(c.batch) + "x" + std::to_string(c.heads_q) + "/" + std::to_string(c.heads_kv) + "x" +
                 std::to_string(c.seq) + "x" + std::to_string(c.head_dim));
    const int block_m = c.head_dim == 128 ? 64 : 128, block_n = 128;
    const int group = c.heads_q / c.heads_kv, slabs = c.batch * c.heads_kv;
    const int n_blocks = (c.seq + block_n - 1) / block_n, m_blocks = (c.seq + block_m - 1) / block_m;
    // A block's work: its query blocks (those from its first key's row on) for
    // each query head of the group, plus two of fixed cost (K, V in; dK, dV out).
    auto cost = [&](int n) { return 2.0 + group * (m_blocks - n * block_n / block_m); };
    auto busiest = [&](auto n_of) {
      std::vector<double> costs;
      for (int blk = 0; blk < slabs * n_blocks; ++blk) costs.push_back(cost(n_of(blk)));
      return order::busiest_over_average(costs, kSms);
    };
    const TileOrder o = plan_bwd_block_order(slabs, group, n_blocks, c.seq, c.head_dim, kL2, kSms, true);
    const double ours = busiest([&](int blk) { return bwd_block(o, blk).n_block; });
    const double slab_by_slab = busiest([&](int blk) { return blk % n_blocks; });
    std::cout << "[ sm90     ] backward causal: busiest SM " << ours << " of the average (slab by slab "
              << slab_by_slab << "), " << o.section_heads << " slabs per section\n";
    EXPECT_LE(ours, 1.035);
    EXPECT_LE(ours, slab_by_slab + 1e-9);
  }
}

// The tail split (tail_split.h) needs no GPU: the plan covers every key block
// of every split tile exactly once, in at most two pieces per block, with
// slots and piece lists the kernel's merge can find; the full rounds before
// it stay whole tiles, t to block t mod grid.
using attnprof::flash_sm90::plan_tail_split;
using attnprof::flash_sm90::tail_piece;
using attnprof::flash_sm90::tail_pieces;
using attnprof::flash_sm90::tail_slot;
using attnprof::flash_sm90::TailPiece;
using attnprof::flash_sm90::TailSplit;

TEST(FlashSm90TailSplit, CoversEveryKeyBlockOnceInAtMostTwoPiecesPerBlock) {
  const uint64_t seed = fresh_seed();
  std::mt19937_64 rng(seed);
  int planned = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    const int sms = 1 + static_cast<int>(rng() % 160);
    const int tiles = 1 + static_cast<int>(rng() % (trial % 2 ? 8 * sms : sms + 4));
    const int n_blocks = 1 + static_cast<int>(rng() % (trial % 3 ? 80 : 3000));
    SCOPED_TRACE("tiles " + std::to_string(tiles) + " n_blocks " + std::to_string(n_blocks) + " sms " +
                 std::to_string(sms) + ", seed " + std::to_string(seed));
    const TailSplit s = plan_tail_split(tiles, n_blocks, sms, true);
    ASSERT_GE(s.grid, 1);
    ASSERT_LE(s.grid, sms);
    if (s.tiles == 0) {
      EXPECT_EQ(s.grid, std::min(tiles, sms));
      EXPECT_EQ(s.first_tile, tiles);
      EXPECT_EQ(tail_pieces(s, 0), 0);
      continue;
    }
    ++planned;
    ASSERT_EQ(s.first_tile + s.tiles, tiles);
    ASSERT_LT(s.tiles, sms) << "only the last, partial round is split";
    ASSERT_EQ(s.first_tile % s.grid, 0) << "whole rounds before the split";
    if (s.first_tile > 0) ASSERT_EQ(s.grid, sms);
    ASSERT_GE(s.chunk, 1);
    ASSERT_LT(s.chunk, n_blocks);
    std::vector<int> covered(static_cast<size_t>(s.tiles) * n_blocks, 0);
    std::vector<std::vector<int>> holders(static_cast<size_t>(s.tiles));
    std::vector<int> slots;
    for (int b = 0; b < s.grid; ++b) {
      const int pieces = tail_pieces(s, b);
      ASSERT_LE(pieces, 2);
      for (int k = 0; k < pieces; ++k) {
        const TailPiece p = tail_piece(s, b, k);
        ASSERT_TRUE(p.split_tile >= 0 && p.split_tile < s.tiles) << "block " << b;
        ASSERT_TRUE(p.n_lo >= 0 && p.n_lo < p.n_hi && p.n_hi <= n_blocks) << "block " << b;
        for (int n = p.n_lo; n < p.n_hi; ++n) ++covered[static_cast<size_t>(p.split_tile) * n_blocks + n];
        holders[static_cast<size_t>(p.split_tile)].push_back(b);
        EXPECT_EQ(p.slot, 2 * b + k);
        EXPECT_EQ(tail_slot(s, b, p.split_tile), p.slot) << "the merge finds the slot";
        slots.push_back(p.slot);
      }
    }
    EXPECT_EQ(tail_pieces(s, s.grid), 0) << "no range past the grid";
    EXPECT_TRUE(std::all_of(covered.begin(), covered.end(), [](int c) { return c == 1; }))
        << "a key block missed or repeated";
    std::sort(slots.begin(), slots.end());
    EXPECT_TRUE(std::adjacent_find(slots.begin(), slots.end()) == slots.end()) << "two pieces share a slot";
    for (int t = 0; t < s.tiles; ++t) {
      const std::vector<int>& h = holders[static_cast<size_t>(t)];
      ASSERT_FALSE(h.empty());
      for (int b : h) {  // every piece of the tile names the same, complete list of holders
        const int k = tail_slot(s, b, t) - 2 * b;
        const TailPiece p = tail_piece(s, b, k);
        EXPECT_EQ(p.first_block, h.front());
        EXPECT_EQ(p.count, static_cast<int>(h.size()));
        EXPECT_EQ(h.back() - h.front() + 1, p.count) << "holders are consecutive blocks";
      }
    }
  }
  EXPECT_GT(planned, 300) << "too few trials planned a split to mean anything";
}

// On the H200's 132 SMs: the benchmark shapes without a mask end in a partial
// round, which the split shortens; modelled per SM as key blocks plus one
// block of fixed cost per tile or piece (the merge not counted), the busiest
// SM finishes at least 2% sooner. Nothing is split where the tiles fill whole
// rounds, where the caller does not allow it, or where it would gain little.
TEST(FlashSm90TailSplit, ShortensTheLastRoundOnAnH200) {
  constexpr int kSms = 132;
  auto busiest = [&](const TailSplit& s, int n) {
    std::vector<double> busy(kSms, 0.0);
    for (int t = 0; t < s.first_tile; ++t) busy[static_cast<size_t>(t % s.grid)] += n + 1.0;
    for (int b = 0; b < s.grid; ++b)
      for (int k = 0; k < tail_pieces(s, b); ++k) {
        const TailPiece p = tail_piece(s, b, k);
        busy[static_cast<size_t>(b)] += p.n_hi - p.n_lo + 1.0;
      }
    return *std::max_element(busy.begin(), busy.end());
  };
  struct Case {
    const char* what;
    int tiles, n_blocks;
  };
  for (const Case& c : {Case{"4x16x4096x128", 2048, 32}, Case{"4x16x8192x128", 4096, 64},
                        Case{"1x16x16384x128", 2048, 128}, Case{"16 decode rows x 32768 keys", 16, 256},
                        Case{"8x32 decode rows x 32768 keys", 256, 256}}) {
    SCOPED_TRACE(c.what);
    const TailSplit s = plan_tail_split(c.tiles, c.n_blocks, kSms, true);
    const TailSplit whole = plan_tail_split(c.tiles, c.n_blocks, kSms, false);
    ASSERT_GT(s.tiles, 0);
    EXPECT_EQ(whole.tiles, 0);
    const double split_time = busiest(s, c.n_blocks), whole_time = busiest(whole, c.n_blocks);
    std::cout << "[ sm90     ] " << c.what << ": " << s.tiles << " tiles split into ranges of " << s.chunk
              << " key blocks; busiest SM " << split_time << " against " << whole_time << " blocks\n";
    EXPECT_LE(split_time, 0.98 * whole_time);
  }
  EXPECT_EQ(plan_tail_split(8 * kSms, 32, kSms, true).tiles, 0) << "whole rounds";
  EXPECT_EQ(plan_tail_split(2048, 32, kSms, false).tiles, 0) << "not allowed";
  EXPECT_EQ(plan_tail_split(2048, 1, kSms, true).tiles, 0) << "one key block: nothing to cut";
  EXPECT_EQ(plan_tail_split(1024, 16, kSms, true).tiles, 0) << "a last round of 100 tiles: under 1% to gain";
}

// supports() needs no GPU: it must answer with a reason, never crash.
TEST(CustomFlashSm90Variant, SupportsGivesReasons) {
  const auto v = attnprof::make_custom_flash_sm90();
  EXPECT_EQ(v->name(), "custom-flash-sm90");
  EXPECT_FALSE(v->description().empty());
  attnprof::Problem p;
  p.device = "cpu";
  const attnprof::Support cpu = v->supports(p);
  EXPECT_FALSE(cpu.ok);
#if !defined(ATTNPROF_HAVE_CUDA_KERNELS)
  EXPECT_NE(cpu.reason.find("CUDA kernels"), std::string::npos) << cpu.reason;
#elif !defined(ATTNPROF_HAVE_SM90_KERNELS)
  EXPECT_NE(cpu.reason.find("sm_90a kernels"), std::string::npos) << cpu.reason;
#else
  EXPECT_NE(cpu.reason.find("needs a CUDA device (this run is on cpu)"), std::string::npos) << cpu.reason;
  if (torch::cuda::is_available()) {
    p.device = "cuda:0";
    const attnprof::Support gpu = v->supports(p);
    if (why_not_runnable().empty()) {
      EXPECT_TRUE(gpu.ok) << gpu.reason;
      p.head_dim = 96;
      EXPECT_NE(v->supports(p).reason.find("head_dim 64 and 128, not 96"), std::string::npos);
      p.head_dim = 64;
      p.dtype = attnprof::DType::FP32;
      EXPECT_NE(v->supports(p).reason.find("not fp32"), std::string::npos);
    } else {
      EXPECT_FALSE(gpu.ok);
      EXPECT_NE(gpu.reason.find("compute capability 9.0"), std::string::npos) << gpu.reason;
    }
  }
#endif
  bool facts_name_the_kernel = false;
  for (const auto& f : v->facts()) facts_name_the_kernel |= f.value.find("flash_fwd_sm90_kernel") != std::string::npos;
  EXPECT_TRUE(facts_name_the_kernel);
}


// The operator takes the head dims of its configuration lists; the by-name one any (its configuration's,
// checked after), so an alternative may add one. Off a Hopper GPU both give the device's reason.
TEST(FlashSm90Boundary, TheOperatorsHeadDimsAndByNameAny) {
  attnprof::kernels::KernelQuery query;
  query.head_dim = 96;
  if (why_not_runnable().empty()) query.device = c10::Device(c10::kCUDA, 0);
  const std::optional<std::string> own = attnprof::flash_sm90::unsupported(query);
  const std::optional<std::string> any = attnprof::flash_sm90::unsupported_any_head_dim(query);
  ASSERT_TRUE(own.has_value());
  if (why_not_runnable().empty()) {
    EXPECT_NE(own->find("head_dim 64 and 128, not 96"), std::string::npos) << *own;
    EXPECT_FALSE(any.has_value()) << *any;
  } else {
    EXPECT_EQ(any, own);
  }
  query.head_dim = 128;
  EXPECT_EQ(attnprof::flash_sm90::unsupported_any_head_dim(query), attnprof::flash_sm90::unsupported(query));
  query.dtype = at::kFloat;
  ASSERT_TRUE(attnprof::flash_sm90::unsupported_any_head_dim(query).has_value());
  if (why_not_runnable().empty())
    EXPECT_NE(attnprof::flash_sm90::unsupported_any_head_dim(query)->find("not fp32"), std::string::npos);
}


using ConfigFwdFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool,
                                                      double, c10::string_view);
constexpr const char* kConfigOp = "attnprof::flash_attention_sm90_config";

std::vector<std::string> built_configs(bool backward) {
  return c10::Dispatcher::singleton()
      .findSchemaOrThrow("attnprof::flash_attention_sm90_configs", "")
      .typed<std::vector<std::string>(bool)>()
      .call(backward);
}

// Whether a configuration runs packed variable-length batches only (the
// forward's kVarlen; the backward's have none).
template <typename C, typename = void>
struct PackedBatchConfig : std::false_type {};
template <typename C>
struct PackedBatchConfig<C, std::void_t<decltype(C::kVarlen)>> : std::bool_constant<C::kVarlen> {};

// Every configuration of the operators' lists is built and runs by name; of
// the alternatives, exactly those ATTNPROF_KERNEL_CONFIGS asked for (no GPU
// needed: the registry fills as the library loads).
TEST(FlashSm90Configs, TheBuildRegistersEveryListedConfigurationByName) {
#ifndef ATTNPROF_HAVE_SM90_KERNELS
  GTEST_SKIP() << "attnprof was built without its sm_90a kernels: no configuration is built";
#else
  namespace fs = attnprof::flash_sm90;
  auto expect = [](const std::vector<std::string>& built, auto configs, auto alternatives) {
    std::set<std::string> listed, allowed;
    // The packed-batch configurations run through flash_attention_sm90_varlen only: not by name.
    attnprof::kernels::for_each_config(configs, [&](auto c) {
      if constexpr (!PackedBatchConfig<decltype(c)>::value) listed.insert(decltype(c)::kName);
    });
    allowed = listed;
    attnprof::kernels::for_each_config(alternatives, [&](auto c) { allowed.insert(decltype(c)::kName); });
    const std::set<std::string> got(built.begin(), built.end());
    EXPECT_EQ(got.size(), built.size()) << "a name listed twice";
    for (const std::string& n : listed) EXPECT_EQ(got.count(n), 1u) << n << " is not built";
    for (const std::string& n : got) EXPECT_EQ(allowed.count(n), 1u) << n << " is no listed configuration";
  };
  expect(built_configs(false), fs::Sm90FwdConfigs{}, fs::Sm90FwdAlternatives{});
  expect(built_configs(true), fs::Sm90BwdConfigs{}, fs::Sm90BwdAlternatives{});
#endif
}

// Each built forward configuration by name passes the pass rule at its head
// dim; the operator's own configuration gives the operator's bits (the same
// kernel); names that are not built or are for another head dim are refused.
TEST(FlashSm90Configs, EachBuiltConfigurationByNameMatchesFloat64Reference) {
  REQUIRE_SM90();
  const uint64_t seed = fresh_seed();
  const auto by_name = c10::Dispatcher::singleton().findSchemaOrThrow(kConfigOp, "").typed<ConfigFwdFn>();
  for (const std::string& name : built_configs(false)) {
    SCOPED_TRACE(name);
    const auto* entry = attnprof::flash_sm90::find_fwd_config(name, /*is_bf16=*/true);
    ASSERT_NE(entry, nullptr);
    run_shapes(name.c_str(), {{1, 1, 1, 17, 17}, {2, 8, 2, 1000, 1000}, {1, 4, 2, 300, 1000}, {2, 4, 1, 1, 1000},
                              {1, 8, 2, 4096, 4096}},
               seed,
               [&](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale) {
                 return by_name.call(q, k, v, causal, scale, name);
               },
               {entry->head_dim});
  }
  const auto bf16 = at::TensorOptions().device(at::kCUDA).dtype(at::kBFloat16);
  for (auto [d, seq, causal, own] : {std::tuple<int64_t, int64_t, bool, const char*>{128, 1000, true, "sm90_fwd_hdim128"},
                                     {64, 1000, true, "sm90_fwd_hdim64_short_causal"},
                                     {64, 1000, false, "sm90_fwd_hdim64"}}) {
    SCOPED_TRACE(std::string(own) + ", seed " + std::to_string(seed));
    const at::Tensor q = at::randn({2, 4, seq, d}, bf16), k = at::randn({2, 4, seq, d}, bf16),
                     v = at::randn({2, 4, seq, d}, bf16);
    auto [o1, l1] = flash_op().call(q, k, v, causal, 0.125);
    auto [o2, l2] = by_name.call(q, k, v, causal, 0.125, own);
    EXPECT_TRUE(at::equal(o1, o2) && at::equal(l1, l2)) << "the operator's own configuration by name differs";
  }
  const at::Tensor q = at::randn({1, 4, 32, 64}, bf16);
  for (auto [name, why] : {std::pair<const char*, const char*>{"no_such", "no configuration 'no_such' in this build"},
                           {"sm90_fwd_hdim128", "is for head_dim 128"},
                           {"sm90_fwd_hdim64_varlen", "runs packed variable-length batches only"}}) {
    try {
      by_name.call(q, q, q, true, 0.125, name);
      ADD_FAILURE() << name << ": no error";
    } catch (const c10::Error& e) {
      EXPECT_NE(std::string(e.what()).find(kConfigOp), std::string::npos) << e.what();
      EXPECT_NE(std::string(e.what()).find(why), std::string::npos) << e.what();
    }
  }
}

}  // namespace
