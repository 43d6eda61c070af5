#include "attnprof/report/memory_predictor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace attnprof::report {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

Problem shape(int64_t b, int64_t h, int64_t s, int64_t d, bool causal = true) {
  Problem p;
  p.batch = b, p.heads_q = p.heads_kv = h, p.seq_q = p.seq_kv = s, p.head_dim = d;
  p.mask = causal ? Mask::causal_bottom_right : Mask::none;
  return p;
}

// The H200 baseline shape (docs: /work/shared/reference/h200-baseline.md).
Problem baseline_shape() { return shape(4, 16, 4096, 128); }

double predicted_gib(const Problem& shape, MemoryFamily family) {
  const auto p = predict_memory(shape, family);
  EXPECT_TRUE(p.has_value());
  return p ? static_cast<double>(p->peak_bytes) / kGiB : 0.0;
}

void expect_within_10_percent(double predicted, double measured) {
  EXPECT_NEAR(predicted, measured, 0.10 * measured) << "predicted " << predicted << " GiB";
}

TEST(MemoryPredictor, MatchesH200Measurements) {
  expect_within_10_percent(predicted_gib(baseline_shape(), MemoryFamily::materialised_scores_naive), 4.4);
  expect_within_10_percent(predicted_gib(baseline_shape(), MemoryFamily::materialised_scores_inplace), 4.4);
  expect_within_10_percent(predicted_gib(baseline_shape(), MemoryFamily::sdpa_math_fp32), 9.9);
  expect_within_10_percent(predicted_gib(baseline_shape(), MemoryFamily::fused), 0.36);
}

TEST(MemoryPredictor, PartsAddUpToThePeak) {
  for (auto family : {MemoryFamily::materialised_scores_naive, MemoryFamily::sdpa_math_fp32,
                      MemoryFamily::fused}) {
    const auto p = predict_memory(baseline_shape(), family);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->peak_bytes,
              p->resident_bytes + p->working_bytes + p->output_bytes + p->overhead_bytes);
  }
}

MemoryPrediction predict_at_seq(MemoryFamily family, int64_t seq) {
  Problem s = baseline_shape();
  s.seq_q = s.seq_kv = seq;
  const auto p = predict_memory(s, family);
  EXPECT_TRUE(p.has_value());
  return p.value_or(MemoryPrediction{});
}

TEST(MemoryPredictor, ScoreMatrixDominatesAndGrowsQuadratically) {
  const auto at_4k = predict_at_seq(MemoryFamily::materialised_scores_naive, 4096);
  const auto at_8k = predict_at_seq(MemoryFamily::materialised_scores_naive, 8192);
  EXPECT_EQ(at_8k.working_bytes, 4 * at_4k.working_bytes);
  EXPECT_EQ(at_4k.working_bytes, 2 * *score_matrix_bytes(baseline_shape(), 2));
}

TEST(MemoryPredictor, FusedIsLinearInSeq) {
  const auto a = predict_at_seq(MemoryFamily::fused, 4096);
  const auto b = predict_at_seq(MemoryFamily::fused, 4 * 4096);
  EXPECT_EQ(b.resident_bytes + b.output_bytes, 4 * (a.resident_bytes + a.output_bytes));
  EXPECT_EQ(a.working_bytes, 0u);
}

TEST(MemoryPredictor, NonCausalDropsTheMasks) {
  Problem s = baseline_shape();
  const auto causal = predict_memory(s, MemoryFamily::sdpa_math_fp32);
  s.mask = Mask::none;
  const auto plain = predict_memory(s, MemoryFamily::sdpa_math_fp32);
  ASSERT_TRUE(causal && plain);
  EXPECT_EQ(causal->working_bytes - plain->working_bytes, 4096ull * 4096 * (1 + 4));
}

TEST(MemoryPredictor, LongSequenceNeedsFarMoreThanTheGpu) {
  // 1x16x131072 bf16 naive needs two 512 GiB score tensors: clearly not on a 141 GB H200.
  const auto p = predict_memory(shape(1, 16, 131072, 128), MemoryFamily::materialised_scores_naive);
  ASSERT_TRUE(p);
  EXPECT_GT(static_cast<double>(p->peak_bytes) / kGiB, 1000.0);
}

TEST(CheckedProduct, Basics) {
  EXPECT_EQ(checked_product({}), 1u);
  EXPECT_EQ(checked_product({4, 16, 4096, 4096, 2}), 4ull * 16 * 4096 * 4096 * 2);
  EXPECT_EQ(checked_product({0, kInt64Max, kInt64Max}), 0u);
  EXPECT_EQ(checked_product({-1, 2}), std::nullopt);
}

TEST(CheckedProduct, OverflowIsNullopt) {
  EXPECT_EQ(checked_product({kInt64Max, 2}), 0xFFFFFFFFFFFFFFFEull);  // fits in uint64
  EXPECT_EQ(checked_product({kInt64Max, 3}), std::nullopt);
  EXPECT_EQ(checked_product({1ll << 32, 1ll << 32}), std::nullopt);
  EXPECT_EQ(checked_product({1ll << 31, 1ll << 32}), 1ull << 63);
}

TEST(ScoreMatrixBytes, OverflowIsNullopt) {
  // 2^62 elements already: times 2 bytes would be 2^63 (fits), times 4 overflows.
  Problem s = shape(1, 1, 1ll << 31, 64);
  EXPECT_EQ(score_matrix_bytes(s, 2), 1ull << 63);
  EXPECT_EQ(score_matrix_bytes(s, 4), std::nullopt);
  s.batch = 1ll << 20;
  EXPECT_EQ(score_matrix_bytes(s, 1), std::nullopt);
  EXPECT_EQ(score_matrix_bytes(shape(8, 16, 1024, 64), 2), 8ull * 16 * 1024 * 1024 * 2);
}

TEST(MemoryPredictor, OverflowAnywhereIsNullopt) {
  const Problem huge = shape(1ll << 20, 1ll << 10, 1ll << 20, 128);
  for (auto family : {MemoryFamily::materialised_scores_naive,
                      MemoryFamily::materialised_scores_inplace, MemoryFamily::sdpa_math_fp32}) {
    EXPECT_EQ(predict_memory(huge, family), std::nullopt);
  }
  // Fused memory is linear in seq, so it still fits...
  EXPECT_TRUE(predict_memory(huge, MemoryFamily::fused).has_value());
  // ...until the per-head tensors themselves overflow.
  EXPECT_EQ(predict_memory(shape(kInt64Max, 2, 2, 2), MemoryFamily::fused), std::nullopt);
  EXPECT_EQ(predict_memory(shape(-1, 16, 1024, 64), MemoryFamily::fused), std::nullopt);
}

// Grouped-query attention: the unfused paths repeat k and v to the query heads
// (two [B, Hq, Skv, D] copies), fused kernels read the shared heads in place.
TEST(MemoryPredictor, GroupedQueryCountsTheExpandedKeysOnlyWhereTheyAreCopied) {
  Problem mha = shape(1, 32, 4096, 128), gqa = mha;
  gqa.heads_kv = 8;
  const auto n_mha = predict_memory(mha, MemoryFamily::materialised_scores_naive);
  const auto n_gqa = predict_memory(gqa, MemoryFamily::materialised_scores_naive);
  ASSERT_TRUE(n_mha && n_gqa);
  const uint64_t head = 1ull * 32 * 4096 * 128 * 2;  // one [B, Hq, S, D] bf16 tensor
  EXPECT_EQ(n_gqa->working_bytes - n_mha->working_bytes, 2 * head);
  EXPECT_EQ(n_mha->resident_bytes - n_gqa->resident_bytes, 2 * (head - head / 4));
  const auto f_mha = predict_memory(mha, MemoryFamily::fused), f_gqa = predict_memory(gqa, MemoryFamily::fused);
  ASSERT_TRUE(f_mha && f_gqa);
  EXPECT_EQ(f_gqa->working_bytes, 0u);
  EXPECT_LT(f_gqa->peak_bytes, f_mha->peak_bytes);
}

// Decode: one query against a long cache; the score matrix is a row per head.
TEST(MemoryPredictor, DecodeScoresAreOneRowPerHead) {
  Problem p = shape(8, 32, 1, 128);
  p.seq_kv = 32768;
  p.heads_kv = 8;
  EXPECT_EQ(score_matrix_bytes(p, 2), 8ull * 32 * 1 * 32768 * 2);
  const auto m = predict_memory(p, MemoryFamily::materialised_scores_inplace);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->resident_bytes, 8ull * 32 * 128 * 2 + 2 * 8ull * 8 * 32768 * 128 * 2 + 32768ull);  // q, k, v, mask
}

// A backward step holds the forward's saved tensors and the gradients too:
// more than the forward for every family, and quadratic in seq for the unfused ones.
TEST(MemoryPredictor, BackwardNeedsMoreThanTheForward) {
  for (auto family : {MemoryFamily::materialised_scores_naive, MemoryFamily::sdpa_math_fp32, MemoryFamily::fused}) {
    Problem f = baseline_shape(), b = f;
    b.pass = Pass::bwd;
    const auto pf = predict_memory(f, family), pb = predict_memory(b, family);
    ASSERT_TRUE(pf && pb);
    EXPECT_GT(pb->peak_bytes, pf->peak_bytes);
    EXPECT_EQ(pb->peak_bytes, pb->resident_bytes + pb->working_bytes + pb->output_bytes + pb->overhead_bytes);
  }
  Problem b = baseline_shape();
  b.pass = Pass::bwd;
  const auto at_4k = predict_memory(b, MemoryFamily::materialised_scores_naive);
  b.seq_q = b.seq_kv = 8192;
  const auto at_8k = predict_memory(b, MemoryFamily::materialised_scores_naive);
  ASSERT_TRUE(at_4k && at_8k);
  EXPECT_GT(double(at_8k->working_bytes), 3.9 * double(at_4k->working_bytes));
}


// fp8 inputs: e4m3 q, k, v (1 byte each) beside their bf16 draws, the
// dequantising path's bf16 copies and float32 temporaries of the largest
// tensor, a bf16 output: at 4x16x4096x128 (32 Mi elements per tensor) fused,
// 3 x 32 Mi (e4m3) + 3 x 64 Mi (draws) resident, 3 x 64 Mi + 256 Mi working,
// 64 Mi output + the log-sum-exp.
TEST(MemoryPredictor, Fp8CountsTheDrawsTheCopiesAndABf16Output) {
  Problem p = baseline_shape();
  p.dtype = DType::FP8;
  const auto m = predict_memory(p, MemoryFamily::fused);
  ASSERT_TRUE(m);
  const uint64_t mi = uint64_t{1} << 20;
  EXPECT_EQ(m->resident_bytes, 3 * 32 * mi + 3 * 64 * mi);
  EXPECT_EQ(m->working_bytes, 3 * 64 * mi + 256 * mi);
  EXPECT_EQ(m->output_bytes, 64 * mi + uint64_t(4 * 16 * 4096) * 4);
}

}  // namespace
}  // namespace attnprof::report
