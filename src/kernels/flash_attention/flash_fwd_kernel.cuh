// Fused attention forward, FlashAttention-2 style: device code only.
//
// One block computes kBlockM query rows of one (batch, head), each warp
// kMTiles m16 tiles of them. Its Q tile is copied to shared memory once and,
// where registers allow (kQInRegs), held in registers as MMA A-fragments;
// K/V tiles of kBlockN keys stream through a kStages-deep cp.async ring.
// Per K/V tile each warp computes S = Q·Kᵀ (mma.sync m16n8k16, fp32
// accumulate), masks it (masking.cuh), updates the online softmax
// (online_softmax.cuh) and accumulates O += P·V with P taken straight from
// the S registers. O is normalised and written once; the log-sum-exp is kept.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm80_primitives.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"
#include "kernels/flash_attention/masking.cuh"
#include "kernels/flash_attention/online_softmax.cuh"

namespace attnprof::flash {

namespace detail {

using namespace kernels;  // cp.async, ldmatrix, mma.sync, exp2, pack2

// Copies rows [row0, row0 + kRows) of a [seq][kHeadDim] row-major matrix into a
// swizzled shared tile; rows at or past `seq` become zeros. The row stride is
// the compile-time head dim (the boundary requires contiguous tensors), so
// every copy of a thread is one base pointer plus an immediate offset.
template <typename Traits, int kRows, int kNThreads = Traits::kNThreads>
__device__ __forceinline__ void load_tile(uint32_t smem_tile, const typename Traits::Element* g,
                                          int row0, int seq, int tid) {
  constexpr int kCh = Traits::kChunksPerRow;
  constexpr int kRowsPerPass = kNThreads / kCh;
  static_assert(kNThreads % kCh == 0 && kRowsPerPass % 8 == 0,
                "a thread's rows must share one swizzle key (row & 7)");
  static_assert(kRows % kRowsPerPass == 0, "whole passes per tile");
  const int r = tid / kCh;
  const int c = tid % kCh;
  const auto* src = g + static_cast<int64_t>(row0 + r) * Traits::kHeadDim + c * Traits::kChunkElems;
  const uint32_t dst = smem_tile + Traits::smem_offset(r, c) * Traits::kElemBytes;
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    const bool valid = row0 + r + i * kRowsPerPass < seq;
    cp_async_16(dst + i * kRowsPerPass * Traits::kRowBytes,
                valid ? src + i * kRowsPerPass * Traits::kHeadDim : g, valid);
  }
}

// ldmatrix lane addressing. In all three tiles a lane's row is ≡ lane (mod 8),
// so its swizzle key is lane & 7, and the swizzled chunk of an even chunk pair
// c0 + hi is (c0 + hi) ^ key = c0 ^ (hi ^ key): a per-lane byte offset (row
// and 16·(hi ^ key)) XORed with the compile-time 16·c0. The XOR only touches
// bits below the row size, so whole rows (stages, m tiles, n tiles) can be
// added before or after it: the tile steps become ldmatrix immediates.
template <typename Traits>
struct LaneOffsets {
  static constexpr int kCE = Traits::kChunkElems;
  static constexpr int kEB = Traits::kElemBytes;
  static constexpr int kD = Traits::kHeadDim;
  // Q (A operand, x4 = rows 0-7/8-15 × k 0-7/8-15): row lane&15, chunk +lane/16.
  __device__ __forceinline__ static uint32_t q(int lane, int first_row) {
    const int swz = lane & 7;
    return ((first_row + (lane & 15)) * kD + (((lane >> 4) ^ swz) * kCE)) * kEB;
  }
  // K (B operand, non-transposed): key (lane&7) + 8·(lane/16), chunk +(lane/8)&1.
  __device__ __forceinline__ static uint32_t k(int lane) {
    const int swz = lane & 7;
    return (((lane & 7) + ((lane >> 4) << 3)) * kD + ((((lane >> 3) & 1) ^ swz) * kCE)) * kEB;
  }
  // V (B operand, transposed): key lane&15, chunk +lane/16.
  __device__ __forceinline__ static uint32_t v(int lane) {
    const int swz = lane & 7;
    return ((lane & 15) * kD + (((lane >> 4) ^ swz) * kCE)) * kEB;
  }
};

// Shared address of the Q A-fragment of row tile mt at k-step ks, from this
// lane's offset q_off (LaneOffsets::q).
template <typename Traits>
__device__ __forceinline__ uint32_t q_frag_addr(uint32_t q_off, int mt, int ks) {
  return (q_off ^ (ks * Traits::kKStepBytes)) + mt * 16 * Traits::kRowBytes;
}

// acc_s = Q·Kᵀ for kMTiles row tiles × kSTiles n8 key tiles; each K fragment
// feeds every row tile. Q's A fragments come from q_regs where the traits hold
// them in registers (kQInRegs), else from shared memory at q_off; k_off is
// this lane's K address.
template <typename Traits, int kSTiles, typename QRegs>
__device__ __forceinline__ void gemm_qk(float (&acc_s)[Traits::kMTiles][kSTiles][4],
                                        const QRegs& q_regs, uint32_t q_off, uint32_t k_off) {
  using Element = typename Traits::Element;
  constexpr int kMT = Traits::kMTiles;
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int t = 0; t < kSTiles; ++t)
      acc_s[mt][t][0] = acc_s[mt][t][1] = acc_s[mt][t][2] = acc_s[mt][t][3] = 0.f;
#pragma unroll
  for (int ks = 0; ks < Traits::kHeadDim / 16; ++ks) {
    uint32_t qa_smem[Traits::kQInRegs ? 1 : kMT][4];
    if constexpr (!Traits::kQInRegs) {
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) ldmatrix_x4(qa_smem[mt], q_frag_addr<Traits>(q_off, mt, ks));
    }
#pragma unroll
    for (int t = 0; t < kSTiles; t += 2) {
      uint32_t kb[4];
      ldmatrix_x4(kb, (k_off ^ (ks * Traits::kKStepBytes)) + t * 8 * Traits::kRowBytes);
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        if constexpr (Traits::kQInRegs) {
          mma_16816<Element>(acc_s[mt][t], q_regs[mt][ks], kb[0], kb[1]);
          mma_16816<Element>(acc_s[mt][t + 1], q_regs[mt][ks], kb[2], kb[3]);
        } else {
          mma_16816<Element>(acc_s[mt][t], qa_smem[mt], kb[0], kb[1]);
          mma_16816<Element>(acc_s[mt][t + 1], qa_smem[mt], kb[2], kb[3]);
        }
      }
    }
  }
}

// acc_o += P·V over kSTiles/2 k16 steps of keys; P comes from the S
// accumulators, whose layout is the A-fragment layout (no shared memory).
template <typename Traits, int kSTiles, int kOTiles>
__device__ __forceinline__ void gemm_pv(float (&acc_o)[Traits::kMTiles][kOTiles][4],
                                        const float (&p)[Traits::kMTiles][kSTiles][4],
                                        uint32_t v_off) {
  using Element = typename Traits::Element;
  constexpr int kMT = Traits::kMTiles;
#pragma unroll
  for (int kk = 0; kk < kSTiles / 2; ++kk) {
    uint32_t pa[kMT][4];
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt) {
      pa[mt][0] = pack2<Element>(p[mt][2 * kk][0], p[mt][2 * kk][1]);
      pa[mt][1] = pack2<Element>(p[mt][2 * kk][2], p[mt][2 * kk][3]);
      pa[mt][2] = pack2<Element>(p[mt][2 * kk + 1][0], p[mt][2 * kk + 1][1]);
      pa[mt][3] = pack2<Element>(p[mt][2 * kk + 1][2], p[mt][2 * kk + 1][3]);
    }
#pragma unroll
    for (int t = 0; t < kOTiles; t += 2) {
      uint32_t vb[4];
      // An n8 tile of O is 8 columns of V: one chunk.
      ldmatrix_x4_trans(vb, (v_off ^ (t * Traits::kChunkBytes)) + kk * 16 * Traits::kRowBytes);
#pragma unroll
      for (int mt = 0; mt < kMT; ++mt) {
        mma_16816<Element>(acc_o[mt][t], pa[mt], vb[0], vb[1]);
        mma_16816<Element>(acc_o[mt][t + 1], pa[mt], vb[2], vb[3]);
      }
    }
  }
}

}  // namespace detail

template <typename Traits, bool kCausal>
__global__ void __launch_bounds__(Traits::kNThreads, Traits::kMinBlocksPerSm)
    flash_fwd_kernel(const __grid_constant__ FwdParams p) {
  using namespace detail;
  using Element = typename Traits::Element;
  constexpr int kD = Traits::kHeadDim;
  constexpr int kBM = Traits::kBlockM;
  constexpr int kBN = Traits::kBlockN;
  constexpr int kMT = Traits::kMTiles;  // m16 tiles of query rows per warp
  constexpr int kWarpRows = Traits::kWarpRows;
  constexpr int kStages = Traits::kStages;
  constexpr bool kQInRegs = Traits::kQInRegs;
  constexpr int kDSteps = kD / 16;  // k16 steps of Q·Kᵀ
  constexpr int kSTiles = kBN / 8;  // n8 tiles of S
  constexpr int kOTiles = kD / 8;   // n8 tiles of O
  constexpr int kTileBytes = Traits::kSmemKVTileBytes;
  constexpr uint32_t kRowBytes = Traits::kRowBytes;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  // The ldmatrix addressing XORs swizzle bits into full shared addresses, which
  // needs every tile to start on a row boundary: round the base up (the launch
  // asks for kRowBytes spare bytes) instead of trusting where it lands.
  const uint32_t raw_addr = smem_addr(smem_raw);
  const uint32_t sQ_addr = (raw_addr + kRowBytes - 1) & ~uint32_t(kRowBytes - 1);
  Element* sQ = reinterpret_cast<Element*>(smem_raw + (sQ_addr - raw_addr));
  const uint32_t sK_addr = sQ_addr + Traits::kSmemQBytes;
  const uint32_t sV_addr = sK_addr + kStages * kTileBytes;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int bh = blockIdx.x;
  const int b = bh / p.heads;
  const int h = bh % p.heads;
  // Blocks launch in blockIdx order; under causal masking the last query block
  // has the most key blocks, so it goes first and the short ones fill the tail.
  const int m_block = gridDim.y - 1 - blockIdx.y;
  const int m0 = m_block * kBM;
  const int warp_row0 = warp * kWarpRows;  // first row of this warp inside the block

  const Element* q = static_cast<const Element*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const Element* k = static_cast<const Element*>(p.k) + b * p.k_batch_stride + h * p.k_head_stride;
  const Element* v = static_cast<const Element*>(p.v) + b * p.v_batch_stride + h * p.v_head_stride;

  int n_blocks = (p.seqlen_k + kBN - 1) / kBN;
  if constexpr (kCausal) n_blocks = min(n_blocks, (m0 + kBM + kBN - 1) / kBN);

  // Prologue: stage 0 (with Q) and stages 1..kStages-2 in flight. One commit
  // group per stage, empty groups included, so wait_group<kStages-2> always
  // means "the tile for this iteration has landed".
  load_tile<Traits, kBM>(sQ_addr, q, m0, p.seqlen_q, tid);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) {
    if (s < n_blocks) {
      load_tile<Traits, kBN>(sK_addr + s * kTileBytes, k, s * kBN, p.seqlen_k, tid);
      load_tile<Traits, kBN>(sV_addr + s * kTileBytes, v, s * kBN, p.seqlen_k, tid);
    }
    cp_async_commit();
  }

  // Row state: for each of its m16 tiles a thread holds rows g and g+8 (g = lane/4).
  const int row_in_tile = lane / 4;
  const int row0 = m0 + warp_row0 + row_in_tile;  // + 16·mt + 8·half
  auto query_row = [&](int mt, int half) { return row0 + mt * 16 + 8 * half; };
  OnlineSoftmax<kMT, Traits::kRescaleSlack> softmax;
  float acc_o[kMT][kOTiles][4];
  softmax.init(acc_o);
  const KeyMask<kCausal> mask{p};

  const uint32_t q_off = sQ_addr + LaneOffsets<Traits>::q(lane, warp_row0);
  const uint32_t k_lane_off = LaneOffsets<Traits>::k(lane);
  const uint32_t v_lane_off = LaneOffsets<Traits>::v(lane);
  // Q's A fragments, loaded once where kQInRegs (after the first tile lands).
  uint32_t q_regs[kQInRegs ? kMT : 1][kQInRegs ? kDSteps : 1][4];

  const float scale_log2 = p.scale_log2;

  for (int j = 0; j < n_blocks; ++j) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile j visible to all; every warp is done with tile j-1

    // Refill the stage that held tile j-1 with tile j + kStages - 1.
    {
      const int jn = j + kStages - 1;
      if (jn < n_blocks) {
        const int st = jn % kStages;
        load_tile<Traits, kBN>(sK_addr + st * kTileBytes, k, jn * kBN, p.seqlen_k, tid);
        load_tile<Traits, kBN>(sV_addr + st * kTileBytes, v, jn * kBN, p.seqlen_k, tid);
      }
      cp_async_commit();
    }

    if constexpr (kQInRegs) {
      if (j == 0) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int ks = 0; ks < kDSteps; ++ks)
            ldmatrix_x4(q_regs[mt][ks], q_frag_addr<Traits>(q_off, mt, ks));
      }
    }

    const int stage = j % kStages;
    const uint32_t k_off = sK_addr + stage * kTileBytes + k_lane_off;
    const uint32_t v_off = sV_addr + stage * kTileBytes + v_lane_off;
    const int n0 = j * kBN;
    float acc_s[kMT][kSTiles][4];
    gemm_qk<Traits>(acc_s, q_regs, q_off, k_off);
    if (mask.tile_needs_mask(n0, kBN, m0)) mask.apply(acc_s, n0, lane, query_row);
    softmax.update(acc_s, acc_o, scale_log2);
    gemm_pv<Traits>(acc_o, acc_s, v_off);
  }
  cp_async_wait<0>();

  // Epilogue: normalise, stage the warp's rows through its own rows of the Q
  // tile (only this warp ever read them), then write them with 16-byte stores.
  float inv_sum[kMT][2];
  softmax.finish(inv_sum);
  __syncwarp();  // Q fragments read from smem by every lane before the overwrite
  uint32_t* sQ32 = reinterpret_cast<uint32_t*>(sQ);
#pragma unroll
  for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
    for (int t = 0; t < kOTiles; ++t)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int r = warp_row0 + mt * 16 + row_in_tile + 8 * i;
        const int off = Traits::smem_offset(r, t) + (lane % 4) * 2;  // element pair of the n8 tile
        sQ32[off / 2] = pack2<Element>(acc_o[mt][t][2 * i] * inv_sum[mt][i],
                                       acc_o[mt][t][2 * i + 1] * inv_sum[mt][i]);
      }
  __syncwarp();

  Element* o = static_cast<Element*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride;
  constexpr int kCh = Traits::kChunksPerRow;
#pragma unroll
  for (int i = 0; i < kWarpRows * kCh / 32; ++i) {
    const int idx = i * 32 + lane;
    const int r = warp_row0 + idx / kCh;
    const int c = idx % kCh;
    const int grow = m0 + r;
    if (grow < p.seqlen_q) {
      const uint4 val = *reinterpret_cast<const uint4*>(sQ + Traits::smem_offset(r, c));
      *reinterpret_cast<uint4*>(o + static_cast<int64_t>(grow) * kD + c * Traits::kChunkElems) = val;
    }
  }

  // lse per row; a row that saw no key (impossible with seqlen_k >= 1 and
  // top-left causal masking) gets −inf.
  if (lane % 4 == 0) {
#pragma unroll
    for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const int grow = query_row(mt, i);
        if (grow < p.seqlen_q) p.lse[static_cast<int64_t>(bh) * p.seqlen_q + grow] = softmax.lse(mt, i, p.scale);
      }
  }
}

}  // namespace attnprof::flash
