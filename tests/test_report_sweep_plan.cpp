// A sweep's points and the Problem a point that is not a valid problem is
// reported under. Pure: no LibTorch.
#include "attnprof/sweep_plan.h"

#include <gtest/gtest.h>

namespace attnprof {
namespace {

// The point's fields as they are, unchecked: kv-heads that do not divide the
// heads, more queries than keys under the causal mask.
TEST(SweepPlan, AFallbackProblemKeepsThePointsFieldsUnchecked) {
  SweepAxes a;
  a.variant = {"naive"}, a.dtype = {"fp16"}, a.pass = {"bwd"};
  a.batch = {2}, a.heads = {4}, a.kv_heads = {3}, a.head_dim = {16};
  a.seq_q = {64}, a.seq_kv = {32};
  const std::vector<SweepPoint> points = sweep_points(a);
  ASSERT_EQ(points.size(), 1u);
  const Problem p = fallback_problem(points.front(), /*causal=*/true);
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.heads_q, 4);
  EXPECT_EQ(p.heads_kv, 3);
  EXPECT_EQ(p.seq_q, 64);
  EXPECT_EQ(p.seq_kv, 32);
  EXPECT_EQ(p.head_dim, 16);
  EXPECT_EQ(p.dtype, DType::FP16);
  EXPECT_EQ(p.pass, Pass::bwd);
  EXPECT_EQ(p.mask, Mask::causal_bottom_right);
  EXPECT_EQ(p.device, Problem{}.device) << "the device is the caller's to set";

  SweepPoint sp = points.front();
  sp.kv_heads = 0;  // as heads
  sp.dtype = "fp12", sp.pass = "sideways";
  const Problem q = fallback_problem(sp, /*causal=*/false);
  EXPECT_EQ(q.heads_kv, 4);
  EXPECT_EQ(q.dtype, DType::BF16);
  EXPECT_EQ(q.pass, Pass::fwd);
  EXPECT_EQ(q.mask, Mask::none);
}

}  // namespace
}  // namespace attnprof
