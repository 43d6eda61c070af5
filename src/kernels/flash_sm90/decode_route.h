// Which shapes attnprof::flash_attention_sm90 hands to the portable family's
// split-KV decode kernel instead of its own (host code only: the operator
// and the custom-flash-sm90 variant's facts both ask).
//
// The Hopper kernel's tiles are 64 query rows per warpgroup of one query
// head: at decode (a few queries per head) nearly every row is empty and the
// query heads of a group each read their K/V head again. On the H200 it ran
// 8 x 32q/8kv x 1 x 32768 x 128 in 562 us against the best SDPA backend's
// 245 us, where the split-KV kernel (a KV group's query rows packed into m16
// tiles, the keys split over the SMs, merged by log-sum-exp) reads K and V
// at 4.2-4.6 TB/s, level with or ahead of it (issue 30's measurements).
#pragma once

#include "kernels/flash_attention/flash_fwd_plan.h"

namespace attnprof::flash_sm90 {

// Query rows per KV head (group · seq_q) up to which the decode kernel runs:
// one 64-row wgmma tile's worth. The decode shapes (seq_q 1 to 16,
// groups of 4: 4 to 64 rows) fall within it; the crossover above it is not
// measured against this kernel (the portable planner's rule weighs the
// portable prefill kernel, about 1.7x slower than this one).
constexpr int kDecodeMaxRowsPerKvHead = 64;

// `plan`: the portable planner's for the call (flash::plan_fwd).
inline bool runs_split_kv_decode(const flash::FwdPlan& plan) {
  return plan.path == flash::FwdPath::kDecode && plan.group * plan.seqlen_q <= kDecodeMaxRowsPerKvHead;
}

}  // namespace attnprof::flash_sm90
