// The Hopper forward's epilogue (device code): a consumer warpgroup's O rows,
// still in the wgmma accumulator layout, normalised and stored straight from
// registers, with the log-sum-exp; for a piece of a tail-split tile
// (tail_split.h), first the merge of every piece through the workspace.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm80_primitives.cuh"  // exp2_approx
#include "kernels/flash_sm90/kernel_args_fwd_sm90.h"
#include "kernels/flash_sm90/softmax_sm90.cuh"
#include "kernels/flash_sm90/tail_split.h"
#include "kernels/flash_sm90/tile_scheduler_fwd_sm90.cuh"

namespace attnprof::flash_sm90::detail {

using namespace kernels;

// The output's element type: the inputs', or bf16 for 8-bit inputs.
template <typename Element>
struct OutputOf {
  using type = Element;
};
template <>
struct OutputOf<__nv_fp8_e4m3> {
  using type = __nv_bfloat16;
};

// A tile's head's scales: the softmax scale of its scores (times q's and k's
// descales with 8-bit inputs, whose scores are of the scaled values) and what
// the normalised output is multiplied by (v's descale; 1).
struct HeadScales {
  float scale;
  float scale_log2;
  float out;
};
template <typename Traits>
__device__ __forceinline__ HeadScales head_scales(const KernelArgs& a, const Tile& t) {
  if constexpr (Traits::kFp8) {
    const int kv = dense_kv_head(a, t.bh, a.heads_q / a.heads_kv);
    const float qk = __ldg(a.q_descale + t.bh) * __ldg(a.k_descale + kv);
    return {a.scale * qk, a.scale_log2 * qk, __ldg(a.v_descale + kv)};
  } else {
    return {a.scale, a.scale_log2, 1.f};
  }
}

// Floats of one tail-split slot: per consumer thread its O accumulator, then
// its two rows' max and (quad-complete) sum, thread-fastest (coalesced).
template <typename Traits>
inline constexpr int kSplitSlotFloats = 128 * Traits::kConsumerWarpgroups * (Traits::kORegs + 4);

// A piece of a split tile: this warp's rows of O (unnormalised), max and sum
// into the piece's slot, then counted on the tile's counter for this warp.
// Returns false unless this warp counted last; then o and st hold every
// piece's rows merged, slot by slot in block order, as one whole tile would.
// scale_log2: the one the pieces' maxima were taken with (an 8-bit head's
// descaled one).
template <typename Traits>
__device__ __forceinline__ bool merge_tail_piece(const KernelArgs& a, const TailPiece& t, int cwg, int warp, int lane,
                                                 float scale_log2, float (&o)[Traits::kORegs], RowState& st) {
  constexpr int kStride = 128 * Traits::kConsumerWarpgroups;
  constexpr int kO = Traits::kORegs;
  const int64_t thread = cwg * 128 + warp * 32 + lane;
  float* mine = a.split_partials + static_cast<int64_t>(t.slot) * kSplitSlotFloats<Traits> + thread;
#pragma unroll
  for (int r = 0; r < kO; ++r) __stcg(mine + r * kStride, o[r]);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    __stcg(mine + (kO + i) * kStride, st.max[i]);
    __stcg(mine + (kO + 2 + i) * kStride, st.sum[i]);
  }
  __threadfence();  // the slot, before the count below
  __syncwarp();
  int* counter = a.split_counters + t.split_tile * Traits::kConsumerWarps + cwg * 4 + warp;
  int counted = 0;
  if (lane == 0) counted = atomicAdd(counter, 1);
  if (__shfl_sync(0xffffffffu, counted, 0) != t.count - 1) return false;
  if (lane == 0) atomicExch(counter, 0);  // every piece has counted: zero again for the next launch
  // The other pieces' slots, after their counts: lane 0 read the count, and
  // a shuffle orders no memory, so the warp syncs (ordering its lanes after
  // lane 0's atomic) before each lane's fence and loads.
  __syncwarp();
  __threadfence();
  const float* slots = a.split_partials + thread;
  float mx[2] = {-INFINITY, -INFINITY};
  for (int j = 0; j < t.count; ++j) {
    const float* src =
        slots + static_cast<int64_t>(tail_slot(a.split, t.first_block + j, t.split_tile)) * kSplitSlotFloats<Traits>;
#pragma unroll
    for (int i = 0; i < 2; ++i) mx[i] = fmaxf(mx[i], __ldcg(src + (kO + i) * kStride));
  }
#pragma unroll
  for (int r = 0; r < kO; ++r) o[r] = 0.f;
  float sum[2] = {0.f, 0.f};
  for (int j = 0; j < t.count; ++j) {
    const float* src =
        slots + static_cast<int64_t>(tail_slot(a.split, t.first_block + j, t.split_tile)) * kSplitSlotFloats<Traits>;
    float w[2];
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const float m = __ldcg(src + (kO + i) * kStride);
      w[i] = m == -INFINITY ? 0.f : kernels::exp2_approx((m - mx[i]) * scale_log2);
      sum[i] += w[i] * __ldcg(src + (kO + 2 + i) * kStride);
    }
#pragma unroll
    for (int r = 0; r < kO; ++r) o[r] += w[(r / 2) % 2] * __ldcg(src + r * kStride);
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    st.max[i] = mx[i];
    st.sum[i] = sum[i];
  }
  return true;
}

// 4 x 4 transpose of 32-bit values across the 4 lanes of a quad (q = lane %
// 4): on entry x[k] is element (q, k), on return element (k, q). Two
// butterfly steps, each 2 shuffles: across lanes q ^ 1, then q ^ 2.
__device__ __forceinline__ void quad_transpose(uint32_t (&x)[4], int q) {
  const bool odd = q & 1;
  const uint32_t r0 = __shfl_xor_sync(0xffffffffu, odd ? x[0] : x[1], 1);
  const uint32_t r1 = __shfl_xor_sync(0xffffffffu, odd ? x[2] : x[3], 1);
  const uint32_t a[4] = {odd ? r0 : x[0], odd ? x[1] : r0, odd ? r1 : x[2], odd ? x[3] : r1};
  const bool high = q & 2;
  const uint32_t u0 = __shfl_xor_sync(0xffffffffu, high ? a[0] : a[2], 2);
  const uint32_t u1 = __shfl_xor_sync(0xffffffffu, high ? a[1] : a[3], 2);
  x[0] = high ? u0 : a[0];
  x[1] = high ? u1 : a[1];
  x[2] = high ? a[2] : u0;
  x[3] = high ? a[3] : u1;
}

// One of a thread's two rows of O (r: its row g or g + 8), times inv, into
// dst (the row's first element). In the accumulator layout the 4 lanes of a
// quad hold 2 columns each of every 8-column block: stored as they are, each
// warp instruction writes 8 rows x 16 bytes, half of every 32-byte sector,
// and the stores cost 2.8% of the kernel at 4x16x4096x128 full (ncu 792.6
// against 770.7 us with them left out, H200, 2026-12-01). Transposed
// within the quad, each lane holds one whole block of every 4: 16-byte
// stores, 8 rows x 64 bytes per instruction, an eighth of the instructions.
// All lanes run the shuffles; only rows inside the sequence store.
template <typename Element, int kD, int kORegs>
__device__ __forceinline__ void store_row(const float (&o)[kORegs], int r, float inv, Element* dst, int q,
                                          bool store) {
  static_assert(kD % 32 == 0, "whole groups of 4 8-column blocks");
  static_assert(kORegs >= kD / 2, "O's first kD columns (kSumByGemm's sums follow)");
#pragma unroll
  for (int g = 0; g < kD / 32; ++g) {
    uint32_t x[4];
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      const int c = 4 * g + k;  // 8-column block
      x[k] = pack2<Element>(o[4 * c + 2 * r] * inv, o[4 * c + 2 * r + 1] * inv);
    }
    quad_transpose(x, q);
    if (store) reinterpret_cast<uint4*>(dst)[4 * g + q] = make_uint4(x[0], x[1], x[2], x[3]);
  }
}

// Normalises this thread's two rows of O and stores them straight from
// registers (16-byte stores after a transpose within each quad, store_row
// above; rows past seqlen_q are skipped), then their log-sum-exp. A row that
// saw no key has sum 0: it gets zeros and -inf. hs: the tile's head's scales
// (the sums carry P's 2^kExpOffset, which the log-sum-exp takes out).
template <typename Traits>
__device__ __forceinline__ void store_tile(const KernelArgs& a, const Tile& t, int row0, int lane,
                                           const float (&o)[Traits::kORegs], const RowState& st,
                                           const HeadScales& hs) {
  using Element = typename OutputOf<typename Traits::Element>::type;
  constexpr int kD = Traits::kHeadDim;
  // A packed batch: row r of the sequence is packed row q0 + r of [total_q][Hq][D], lse [Hq][total_q].
  const int seqlen_q = seqlen_q_of<Traits>(a, t);
  const int64_t row_stride = Traits::kVarlen ? int64_t{a.heads_q} * kD : kD;
  Element* out = static_cast<Element*>(a.o) + (Traits::kVarlen ? t.q0 * row_stride + t.bh * kD
                                                                 : static_cast<int64_t>(t.bh) * a.seqlen_q * kD);
  float* lse = a.lse + (Traits::kVarlen ? static_cast<int64_t>(t.bh) * a.packed.total_q + t.q0
                                        : static_cast<int64_t>(t.bh) * a.seqlen_q);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int row = row0 + 8 * r;
    const float inv = st.sum[r] > 0.f ? hs.out / st.sum[r] : 0.f;
    store_row<Element, kD>(o, r, inv, out + row * row_stride, lane % 4, row < seqlen_q);
    constexpr float kOffsetLn = Traits::kExpOffset * 0.69314718055994531f;  // 2^kExpOffset, as a natural log
    if (row < seqlen_q && lane % 4 == 0)
      lse[row] = st.sum[r] > 0.f ? st.max[r] * hs.scale + (logf(st.sum[r]) - kOffsetLn) : -INFINITY;
  }
}

}  // namespace attnprof::flash_sm90::detail
