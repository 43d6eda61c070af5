// Split-KV decode forward and the combine kernel: device code only.
//
// Decode has few queries per KV head (group · seqlen_q rows, group = query
// heads per K/V head), so the work is reading K and V once. One block takes
// one m16 tile of those rows — the query heads of a KV group packed together,
// so each K/V byte is read once per group — against one split of the keys
// (blockIdx.y). Each K/V tile of kBlockN keys, streamed through a cp.async
// ring, is shared by the warps, each taking kWarpKeys of its keys with its own
// online softmax; at the end the warps merge through shared memory. With
// one split the block writes the output; with more, fp32 partials that
// flash_combine_kernel merges by their log-sum-exps (as for split prefill).
// kPaged reads the K/V tiles from a paged cache through its block table
// (tile_ops.cuh, KVSource). On e4m3 inputs (Traits::kFp8: the Hopper fp8
// operator's decode route) the tiles stay e4m3 and the fragments widen to
// fp16 (tile_ops_fp8.cuh); each row's scores take its query head's q descale
// times the KV head's k descale before the softmax, O the v descale before
// the merge, and the output is bf16.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/grid_dependency.cuh"
#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm80_primitives.cuh"
#include "kernels/flash_attention/epilogue_fwd.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"
#include "kernels/flash_attention/masking.cuh"
#include "kernels/flash_attention/online_softmax.cuh"
#include "kernels/flash_attention/tile_ops.cuh"
#include "kernels/flash_attention/tile_ops_fp8.cuh"

namespace attnprof::flash {

namespace detail {

// The block's m16 tile of packed query rows into the Q tile: packed row r of
// the KV group is query r % seqlen_q of query head h_kv · group + r /
// seqlen_q; rows past the group's end become zeros.
template <typename Traits>
__device__ __forceinline__ void load_group_q(const FwdParams& p, uint32_t sQ_addr, int b, int h_kv, int r0, int rows,
                                             int tid) {
  using Element = typename Traits::Element;
  constexpr int kD = Traits::kHeadDim;
  constexpr int kBM = Traits::kBlockM;
  constexpr int kCh = Traits::kChunksPerRow;
  const Element* q = static_cast<const Element*>(p.q) + b * p.q_batch_stride;
#pragma unroll
  for (int idx = tid; idx < kBM * kCh; idx += Traits::kNThreads) {
    const int rr = idx / kCh;
    const int c = idx % kCh;
    const int r = r0 + rr;
    const bool valid = r < rows;
    const int head = h_kv * p.group + (valid ? r / p.seqlen_q : 0);
    const int query = valid ? r % p.seqlen_q : 0;
    const Element* src = q + head * p.q_head_stride + static_cast<int64_t>(query) * kD + c * Traits::kChunkElems;
    cp_async_16(sQ_addr + Traits::smem_offset(rr, c) * Traits::kElemBytes, valid ? src : q, valid);
  }
}

}  // namespace detail

template <typename Traits, bool kCausal, bool kPaged>
__global__ void __launch_bounds__(Traits::kNThreads, Traits::kMinBlocksPerSm)
    flash_fwd_splitkv_kernel(const __grid_constant__ FwdParams p) {
  using Element = typename Traits::Element;
  using namespace detail;
  constexpr int kD = Traits::kHeadDim;
  constexpr int kBM = Traits::kBlockM;  // 16 packed query rows
  constexpr int kBN = Traits::kBlockN;
  constexpr int kNWarps = Traits::kNWarps;
  constexpr int kWarpKeys = Traits::kWarpKeys;
  constexpr int kStages = Traits::kStages;
  constexpr int kDSteps = kD / 16;
  constexpr int kSTiles = kWarpKeys / 8;  // n8 tiles of this warp's S
  constexpr int kOTiles = kD / 8;
  constexpr int kTileBytes = Traits::kSmemKVTileBytes;
  constexpr uint32_t kRowBytes = Traits::kRowBytes;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  const SmemTiles<Traits> smem(smem_raw);
  const uint32_t sQ_addr = smem.q, sK_addr = smem.k, sV_addr = smem.v;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int b = blockIdx.x / p.heads_kv;
  const int h_kv = blockIdx.x % p.heads_kv;
  const int split = blockIdx.y;
  // Packed row r of this KV group is query r % seqlen_q of query head
  // h_kv · group + r / seqlen_q; in [batch, heads_q, seqlen_q] order the
  // group's rows are consecutive, from group_row0.
  const int rows = p.group * p.seqlen_q;
  const int r0 = blockIdx.z * kBM;
  const int64_t group_row0 =
      (static_cast<int64_t>(b) * p.heads_q + static_cast<int64_t>(h_kv) * p.group) * p.seqlen_q;

  const auto kv = kv_source<Element, kPaged>(p, b, h_kv);
  const KeyMask<kCausal> mask{p};

  // As in flash_fwd_kernel (a multiple of kBN from the planner); the packed
  // rows hold queries from 0 on, so a window starts at query 0's oldest key.
  const int tiles_per_split = (p.plan.keys_per_split + kBN - 1) / kBN;
  const int n_begin = max(split * tiles_per_split, mask.first_tile(0, kBN));
  const int n_end = min((p.seqlen_k + kBN - 1) / kBN, split * tiles_per_split + tiles_per_split);

  // Prologue: the Q tile (rows past the group's end are zeros) with the first
  // key tile, then the next kStages-2; tile n in ring stage n % kStages, one
  // commit group per tile, as in flash_fwd_kernel.
  load_group_q<Traits>(p, sQ_addr, b, h_kv, r0, rows, tid);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) load_kv_tile_or_none(smem, kv, n_begin + s, n_end, p.seqlen_k, tid);

  // This thread's rows g and g + 8 of the tile, as query indices for the mask.
  const int row_in_tile = lane / 4;
  int query_of[2];
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = r0 + row_in_tile + 8 * half;
    query_of[half] = r < rows ? r % p.seqlen_q : 0;
  }
  auto query_row = [&](int, int half) { return query_of[half]; };
  OnlineSoftmax<1, Traits::kRescaleSlack> softmax;
  float acc_o[1][kOTiles][4];
  softmax.init(acc_o);

  const uint32_t q_off = sQ_addr + LaneOffsets<Traits>::q(lane, 0);
  // This warp's keys of each tile start kWarpKeys · warp rows in; a whole
  // number of 8-row swizzle periods, so the lane offsets hold.
  const uint32_t k_lane_off = warp * kWarpKeys * kRowBytes + LaneOffsets<Traits>::k(lane);
  const uint32_t v_lane_off = warp * kWarpKeys * kRowBytes + LaneOffsets<Traits>::v(lane);
  uint32_t q_regs[1][kDSteps][4];
  const float scale_log2 = p.scale_log2;
  // e4m3: the descales of this thread's two rows' scores (rows past the
  // group's end: any head's; their Q is zeros).
  [[maybe_unused]] float qk_descale[2];
  if constexpr (Traits::kFp8) {
    const float k_descale = p.k_descale[b * p.heads_kv + h_kv];
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int r = r0 + row_in_tile + 8 * half;
      const int head = h_kv * p.group + (r < rows ? r / p.seqlen_q : 0);
      qk_descale[half] = p.q_descale[b * p.heads_q + head] * k_descale;
    }
  }

  for (int n = n_begin; n < n_end; ++n) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile n visible to all; every warp is done with tile n-1
    load_kv_tile_or_none(smem, kv, n + kStages - 1, n_end, p.seqlen_k, tid);
    if (n == n_begin) {
      if constexpr (Traits::kFp8) {
        load_q_fp8<Traits>(q_regs, q_off);
      } else {
#pragma unroll
        for (int ks = 0; ks < kDSteps; ++ks) ldmatrix_x4(q_regs[0][ks], q_frag_addr<Traits>(q_off, 0, ks));
      }
    }

    const int stage = n % kStages;
    const uint32_t k_off = sK_addr + stage * kTileBytes + k_lane_off;
    const uint32_t v_off = sV_addr + stage * kTileBytes + v_lane_off;
    const int n0 = n * kBN + warp * kWarpKeys;  // this warp's first key
    float acc_s[1][kSTiles][4];
    if constexpr (Traits::kFp8) {
      gemm_qk_fp8<Traits>(acc_s, q_regs, k_off);
#pragma unroll
      for (int t = 0; t < kSTiles; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) acc_s[0][t][e] *= qk_descale[e / 2];
    } else {
      gemm_qk<Traits>(acc_s, q_regs, q_off, k_off);
    }
    // Query indices 0 and seqlen_q - 1 bound every row's: a tile needs the
    // test only near the end of the keys (or a window's start).
    if (mask.tile_needs_mask(n0, kWarpKeys, 0, p.seqlen_q - 1)) mask.apply(acc_s, n0, lane, query_row);
    softmax.update(acc_s, acc_o, scale_log2);
    if constexpr (Traits::kFp8) gemm_pv_fp8<Traits>(acc_o, acc_s, v_off);
    else gemm_pv<Traits>(acc_o, acc_s, v_off);
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with the ring: it becomes the merge buffer
  if constexpr (Traits::kFp8) {
    const float v_descale = p.v_descale[b * p.heads_kv + h_kv];
#pragma unroll
    for (int t = 0; t < kOTiles; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc_o[0][t][e] *= v_descale;
  }

  float* merge_o = reinterpret_cast<float*>(smem.q_ptr + Traits::kSmemQBytes);  // [kNWarps][kBM][kD]
  float* merge_max = merge_o + kNWarps * kBM * kD;                              // [kNWarps][kBM]
  float* merge_sum = merge_max + kNWarps * kBM;                                  // [kNWarps][kBM]
  write_warp_partials<Traits>(merge_o, merge_max, merge_sum, warp, lane, row_in_tile, acc_o, softmax);
  __syncthreads();

  store_merged_rows<Traits>(p, merge_o, merge_max, merge_sum, b, h_kv, split, r0, rows, group_row0, tid, scale_log2);
}

// Merges the key splits of every row: lse = log Σ_s exp(lse_s),
// O = Σ_s exp(lse_s − lse) · O_s. A row no split saw (all lse_s = −inf)
// gets zeros and −inf. kHeadDim / 4 threads per row, 4 columns each.
template <typename Element, int kHeadDim>
__global__ void __launch_bounds__(128) flash_combine_kernel(const __grid_constant__ FwdParams p) {
  constexpr int kThreadsPerRow = kHeadDim / 4;
  constexpr int kRowsPerBlock = 128 / kThreadsPerRow;
  constexpr float kLog2e = 1.4426950408889634f;
  const int64_t rows_total = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kThreadsPerRow;
  if (row >= rows_total) return;
  const int c = (threadIdx.x % kThreadsPerRow) * 4;
  const int splits = p.plan.num_splits;
  // Launched with programmatic stream serialization (launch_flash_combine):
  // the partials are read only once the kernel that wrote them has completed.
  kernels::grid_dependency_wait();

  float m = -INFINITY;
  for (int s = 0; s < splits; ++s) m = fmaxf(m, p.lse_accum[s * rows_total + row]);
  float l = 0.f;
  float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
  if (m != -INFINITY) {
    for (int s = 0; s < splits; ++s) {
      const float w = kernels::exp2_approx((p.lse_accum[s * rows_total + row] - m) * kLog2e);
      const float4 o_s = *reinterpret_cast<const float4*>(p.o_accum + (s * rows_total + row) * kHeadDim + c);
      l += w;
      acc.x += w * o_s.x, acc.y += w * o_s.y, acc.z += w * o_s.z, acc.w += w * o_s.w;
    }
  }
  const float inv = l > 0.f ? 1.f / l : 0.f;
  const int64_t bh = row / p.seqlen_q;
  const int query = static_cast<int>(row % p.seqlen_q);
  Element* o = static_cast<Element*>(p.o) + (bh / p.heads_q) * p.o_batch_stride +
               (bh % p.heads_q) * p.o_head_stride + static_cast<int64_t>(query) * kHeadDim + c;
  *reinterpret_cast<uint2*>(o) = make_uint2(kernels::pack2<Element>(acc.x * inv, acc.y * inv),
                                            kernels::pack2<Element>(acc.z * inv, acc.w * inv));
  if (c == 0) p.lse[row] = l > 0.f ? m + logf(l) : -INFINITY;
}

}  // namespace attnprof::flash
