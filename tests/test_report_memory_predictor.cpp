#include "attnprof/report/memory_predictor.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

namespace attnprof::report {
namespace {

constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

// The H200 baseline shape (docs: /work/shared/reference/h200-baseline.md).
AttentionShape baseline_shape() { return {4, 16, 4096, 128, 2, true}; }

double predicted_gib(const AttentionShape& shape, MemoryFamily family) {
  const auto p = predict_forward_memory(shape, family);
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
    const auto p = predict_forward_memory(baseline_shape(), family);
    ASSERT_TRUE(p);
    EXPECT_EQ(p->peak_bytes,
              p->resident_bytes + p->working_bytes + p->output_bytes + p->overhead_bytes);
  }
}

ForwardMemoryPrediction predict_at_seq(MemoryFamily family, int64_t seq) {
  AttentionShape s = baseline_shape();
  s.seq = seq;
  const auto p = predict_forward_memory(s, family);
  EXPECT_TRUE(p.has_value());
  return p.value_or(ForwardMemoryPrediction{});
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
  AttentionShape s = baseline_shape();
  const auto causal = predict_forward_memory(s, MemoryFamily::sdpa_math_fp32);
  s.causal = false;
  const auto plain = predict_forward_memory(s, MemoryFamily::sdpa_math_fp32);
  ASSERT_TRUE(causal && plain);
  EXPECT_EQ(causal->working_bytes - plain->working_bytes, 4096ull * 4096 * (1 + 4));
}

TEST(MemoryPredictor, LongSequenceNeedsFarMoreThanTheGpu) {
  // 1x16x131072 bf16 naive needs two 512 GiB score tensors: clearly not on a 141 GB H200.
  const auto p = predict_forward_memory({1, 16, 131072, 128, 2, true},
                                        MemoryFamily::materialised_scores_naive);
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
  AttentionShape s{1, 1, 1ll << 31, 64, 2, true};
  EXPECT_EQ(score_matrix_bytes(s, 2), 1ull << 63);
  EXPECT_EQ(score_matrix_bytes(s, 4), std::nullopt);
  s.batch = 1ll << 20;
  EXPECT_EQ(score_matrix_bytes(s, 1), std::nullopt);
  EXPECT_EQ(score_matrix_bytes({8, 16, 1024, 64, 2, true}, 2), 8ull * 16 * 1024 * 1024 * 2);
}

TEST(MemoryPredictor, OverflowAnywhereIsNullopt) {
  const AttentionShape huge{1ll << 20, 1ll << 10, 1ll << 20, 128, 2, true};
  for (auto family : {MemoryFamily::materialised_scores_naive,
                      MemoryFamily::materialised_scores_inplace, MemoryFamily::sdpa_math_fp32}) {
    EXPECT_EQ(predict_forward_memory(huge, family), std::nullopt);
  }
  // Fused memory is linear in seq, so it still fits...
  EXPECT_TRUE(predict_forward_memory(huge, MemoryFamily::fused).has_value());
  // ...until the per-head tensors themselves overflow.
  EXPECT_EQ(predict_forward_memory({kInt64Max, 2, 2, 2, 2, true}, MemoryFamily::fused),
            std::nullopt);
  EXPECT_EQ(predict_forward_memory({-1, 16, 1024, 64, 2, true}, MemoryFamily::fused),
            std::nullopt);
}

}  // namespace
}  // namespace attnprof::report
