// Which shapes attnprof::flash_attention_sm90 (and _fp8) hand to the portable
// family's split-KV decode kernel instead of their own (host code: the
// operators and the custom-flash-sm90 variant's facts both ask).
//
// The Hopper kernel's tiles are 64 query rows per warpgroup of one query
// head: at decode (a few queries per head) nearly every row is empty and the
// query heads of a group each read their K/V head again. On the H200 it ran
// 8 x 32q/8kv x 1 x 32768 x 128 in 562 us against the best SDPA backend's
// 245 us, where the split-KV kernel (a KV group's query rows packed into m16
// tiles, the keys split over the SMs, merged by log-sum-exp) reads K and V
// at 4.2-4.6 TB/s, level with or ahead of it (issue 30's measurements).
#pragma once

#include <cstdint>

#include "kernels/common/config_list.h"
#include "kernels/flash_attention/flash_fwd_plan.h"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"

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

// attnprof::flash_attention_sm90_fp8 routes the same shapes, at the head
// dims of flash::DecodeFp8Tiles, to the split-KV kernel reading K and V as
// e4m3 (half the bytes of the 16-bit route). Why: its own kernel has no decode path
// either, and at head_dim 128 writes Vᵀ first (a read and a write of V): on
// the H100 that kernel ran 0.47-0.56x the bf16 operator's speed at 8 x 32q/8kv x 1 x
// {4096..131072} x 128 (docs/notes/flash_sm90_fp8.md).
// On since its GPU test (DecodeRouteWithinTwicePlainFp8OfFloat64) passed on a tree built on the
// H100 by scripts/setup.sh (6940aca): 1.56-1.95x the bf16 operator at head_dim 128 there, 94-101%
// of a device copy's bandwidth from 32768 keys (BENCHMARKS.md, "FP8 decode").
constexpr bool kFp8DecodeRouteOn = true;

// Whether the shape fits the e4m3 route (plan and head dim), whether or not it is on.
inline bool fits_fp8_split_kv_decode(const flash::FwdPlan& plan, int64_t head_dim) {
  return runs_split_kv_decode(plan) && kernels::has_head_dim(flash::DecodeFp8Tiles{}, head_dim);
}
inline bool runs_fp8_split_kv_decode(const flash::FwdPlan& plan, int64_t head_dim) {
  return kFp8DecodeRouteOn && fits_fp8_split_kv_decode(plan, head_dim);
}

// The split-KV kernel on e4m3 q, k, v (p.is_fp8, descales set; p.plan from
// flash::plan_fwd), then the combine kernel (bf16 output) when the keys are
// split; on `stream`. Defined in decode_fp8_launch.cu (sm_90a).
void run_fp8_decode(const flash::FwdParams& p, CUstream_st* stream);

}  // namespace attnprof::flash_sm90
