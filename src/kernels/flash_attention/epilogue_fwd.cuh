// The portable forward kernels' epilogues (device code): a block's O rows,
// normalised, from the mma.sync accumulators to the output (staged through
// shared memory for 16-byte stores) or, with split keys, to the fp32 partials
// that flash_combine_kernel merges; and the log-sum-exp of each row.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm80_primitives.cuh"  // exp2_approx
#include "kernels/flash_attention/flash_params.h"
#include "kernels/flash_attention/tile_ops.cuh"  // HeadDimStride
#include "kernels/flash_attention/tile_ops_fp8.cuh"  // fp8_o_columns

namespace attnprof::flash::detail {

using namespace kernels;

// Split keys: this split's O (normalised by its own sum) and lse, in fp32
// straight from the accumulators; flash_combine_kernel merges the splits.
template <typename Traits, int kMT, typename Softmax, typename QueryRow>
__device__ __forceinline__ void store_split_partials(const FwdParams& p, int bh, int lane,
                                                     const float (&acc_o)[kMT][Traits::kHeadDim / 8][4],
                                                     const float (&inv_sum)[kMT][2], const Softmax& softmax,
                                                     QueryRow&& query_row) {
  constexpr int kD = Traits::kHeadDim;
  constexpr int kOTiles = kD / 8;
  const int64_t split_row0 =
      blockIdx.z * (static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q) + static_cast<int64_t>(bh) * p.seqlen_q;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int grow = query_row(mt, i);
      if (grow >= p.seqlen_q) continue;
      float* dst = p.o_accum + (split_row0 + grow) * kD + (lane % 4) * 2;
#pragma unroll
      for (int t = 0; t < kOTiles; ++t)
        *reinterpret_cast<float2*>(dst + t * 8) =
            make_float2(acc_o[mt][t][2 * i] * inv_sum[mt][i], acc_o[mt][t][2 * i + 1] * inv_sum[mt][i]);
      if (lane % 4 == 0) p.lse_accum[split_row0 + grow] = softmax.lse(mt, i, p.scale);
    }
}

// Normalise, stage the warp's rows through its own rows of the Q tile (only
// this warp ever read them), then write them with 16-byte stores; then lse
// per row. A row that saw no key (causal, seqlen_q > seqlen_k) gets −inf and
// zeros. `o` and `lse` point at row 0 of the block's (sequence and) head, the
// rows `row_stride` elements apart: the compile-time head dim for
// [batch][heads][seq][head_dim] (store_output), heads · head_dim for a packed
// variable-length batch.
template <typename Traits, int kMT, typename Softmax, typename QueryRow, typename RowStride>
__device__ __forceinline__ void store_output_rows(const FwdParams& p, typename Traits::Element* sQ,
                                                  typename Traits::Element* o, RowStride row_stride, float* lse,
                                                  int seqlen_q, int m0, int warp_row0, int row_in_tile, int lane,
                                                  const float (&acc_o)[kMT][Traits::kHeadDim / 8][4],
                                                  const float (&inv_sum)[kMT][2], const Softmax& softmax,
                                                  QueryRow&& query_row) {
  using Element = typename Traits::Element;
  constexpr int kOTiles = Traits::kHeadDim / 8;
  constexpr int kWarpRows = Traits::kWarpRows;
  __syncwarp();  // Q fragments read from smem by every lane before the overwrite
  uint32_t* sQ32 = reinterpret_cast<uint32_t*>(sQ);
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int t = 0; t < kOTiles; ++t)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = warp_row0 + mt * 16 + row_in_tile + 8 * i;
        const int off = Traits::smem_offset(r, t) + (lane % 4) * 2;
        sQ32[off / 2] = pack2<Element>(acc_o[mt][t][2 * i] * inv_sum[mt][i],
                                       acc_o[mt][t][2 * i + 1] * inv_sum[mt][i]);
      }
  __syncwarp();
  constexpr int kCh = Traits::kChunksPerRow;
#pragma unroll
  for (int i = 0; i < kWarpRows * kCh / 32; ++i) {
    const int idx = i * 32 + lane;
    const int r = warp_row0 + idx / kCh;
    const int c = idx % kCh;
    const int grow = m0 + r;
    if (grow < seqlen_q) {
      const uint4 val = *reinterpret_cast<const uint4*>(sQ + Traits::smem_offset(r, c));
      *reinterpret_cast<uint4*>(o + static_cast<int64_t>(grow) * row_stride + c * Traits::kChunkElems) = val;
    }
  }
  if (lane % 4 == 0) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int grow = query_row(mt, i);
        if (grow < seqlen_q) lse[grow] = softmax.lse(mt, i, p.scale);
      }
  }
}

// store_output_rows for (batch b, query head h) of [batch][heads][seq][head_dim].
template <typename Traits, int kMT, typename Softmax, typename QueryRow>
__device__ __forceinline__ void store_output(const FwdParams& p, typename Traits::Element* sQ, int b, int h, int bh,
                                             int m0, int warp_row0, int row_in_tile, int lane,
                                             const float (&acc_o)[kMT][Traits::kHeadDim / 8][4],
                                             const float (&inv_sum)[kMT][2], const Softmax& softmax,
                                             QueryRow&& query_row) {
  using Element = typename Traits::Element;
  store_output_rows<Traits>(p, sQ, static_cast<Element*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride,
                            HeadDimStride<Traits>{}, p.lse + static_cast<int64_t>(bh) * p.seqlen_q, p.seqlen_q, m0,
                            warp_row0, row_in_tile, lane, acc_o, inv_sum, softmax, query_row);
}

// Split-KV decode: the block's warps each ran their own keys, so they merge
// through shared memory (the ring, free after the main loop): each writes its
// unnormalised O against its own max m_w with sum l_w; with M = max_w m_w,
// O = Σ_w 2^{(m_w − M)c} O_w / Σ_w 2^{(m_w − M)c} l_w (store_merged_rows,
// after a __syncthreads). merge_o: [kNWarps][kBlockM][kHeadDim]; merge_max,
// merge_sum: [kNWarps][kBlockM]. (The pointers come from the caller: derived
// here instead, either part compiled to other sm_90a SASS.)
template <typename Traits, typename Softmax>
__device__ __forceinline__ void write_warp_partials(float* merge_o, float* merge_max, float* merge_sum, int warp,
                                                    int lane, int row_in_tile,
                                                    const float (&acc_o)[1][Traits::kHeadDim / 8][4],
                                                    Softmax& softmax) {
  constexpr int kD = Traits::kHeadDim;
  constexpr int kBM = Traits::kBlockM;
  constexpr int kOTiles = kD / 8;
  float unused_inv[1][2];
  softmax.finish(unused_inv);  // row sums completed across the quad
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int row = row_in_tile + 8 * half;
    if constexpr (Traits::kFp8) {  // O's columns in the e4m3 GEMM's order (tile_ops_fp8.cuh)
      float* dst = merge_o + (warp * kBM + row) * kD + (lane % 4) * 4;
#pragma unroll
      for (int c = 0; c < kD / 16; ++c) *reinterpret_cast<float4*>(dst + c * 16) = fp8_o_columns(acc_o, c, half);
    } else {
      float* dst = merge_o + (warp * kBM + row) * kD + (lane % 4) * 2;
#pragma unroll
      for (int t = 0; t < kOTiles; ++t)
        *reinterpret_cast<float2*>(dst + t * 8) = make_float2(acc_o[0][t][2 * half], acc_o[0][t][2 * half + 1]);
    }
    if (lane % 4 == 0) {
      merge_max[warp * kBM + row] = softmax.row_max[0][half];
      merge_sum[warp * kBM + row] = softmax.row_sum[0][half];
    }
  }
}

// Each thread finishes 4 consecutive columns of one packed row per pass: the
// output with one split, else this split's fp32 partial (as for split prefill).
template <typename Traits>
__device__ __forceinline__ void store_merged_rows(const FwdParams& p, float* merge_o, float* merge_max, float* merge_sum,
                                                  int b, int h_kv, int split, int r0, int rows, int64_t group_row0,
                                                  int tid, float scale_log2) {
  // e4m3 inputs give bf16 output.
  using Element = std::conditional_t<Traits::kFp8, __nv_bfloat16, typename Traits::Element>;
  constexpr int kD = Traits::kHeadDim;
  constexpr int kBM = Traits::kBlockM;
  constexpr int kNWarps = Traits::kNWarps;
  constexpr int kQuadsPerRow = kD / 4;
  const bool split_out = p.plan.num_splits > 1;
  const int64_t rows_total = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
#pragma unroll
  for (int idx = tid; idx < kBM * kQuadsPerRow; idx += Traits::kNThreads) {
    const int rr = idx / kQuadsPerRow;
    const int c = (idx % kQuadsPerRow) * 4;
    const int r = r0 + rr;
    if (r >= rows) continue;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < kNWarps; ++w) m = fmaxf(m, merge_max[w * kBM + rr]);
    const float m_scaled = m == -INFINITY ? 0.f : m * scale_log2;
    float l = 0.f;
    float4 acc = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int w = 0; w < kNWarps; ++w) {
      // A warp that saw no key has max −inf: factor exp2(−inf) = 0.
      const float f = exp2_approx(merge_max[w * kBM + rr] * scale_log2 - m_scaled);
      l += f * merge_sum[w * kBM + rr];
      const float4 o_w = *reinterpret_cast<const float4*>(merge_o + (w * kBM + rr) * kD + c);
      acc.x += f * o_w.x, acc.y += f * o_w.y, acc.z += f * o_w.z, acc.w += f * o_w.w;
    }
    const float inv = l > 0.f ? 1.f / l : 0.f;
    const float lse = l > 0.f ? m * p.scale + logf(l) : -INFINITY;
    const int64_t row = group_row0 + r;
    if (split_out) {
      const int64_t at = split * rows_total + row;
      *reinterpret_cast<float4*>(p.o_accum + at * kD + c) =
          make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
      if (c == 0) p.lse_accum[at] = lse;
    } else {
      const int head = h_kv * p.group + r / p.seqlen_q;
      Element* o = static_cast<Element*>(p.o) + b * p.o_batch_stride + head * p.o_head_stride +
                   static_cast<int64_t>(r % p.seqlen_q) * kD + c;
      *reinterpret_cast<uint2*>(o) = make_uint2(pack2<Element>(acc.x * inv, acc.y * inv),
                                                pack2<Element>(acc.z * inv, acc.w * inv));
      if (c == 0) p.lse[row] = lse;
    }
  }
}

}  // namespace attnprof::flash::detail
