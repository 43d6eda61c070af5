// Tile operations shared by the forward kernels (flash_fwd_kernel.cuh,
// flash_fwd_splitkv_kernel.cuh): cp.async copies of [rows][head_dim] tiles
// into swizzled shared memory, the ldmatrix lane addressing, and the two
// warp-level GEMMs S = Q·Kᵀ and O += P·V on mma.sync m16n8k16. Templated on
// the kernel traits (Element, kHeadDim, kMTiles, kQInRegs, byte constants).
#pragma once

#include <cstdint>

#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm80_primitives.cuh"
#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

namespace detail {

using namespace kernels;  // cp.async, ldmatrix, mma.sync, exp2, pack2

// The block's shared memory: the Q tile, the K ring, the V ring. The ldmatrix
// addressing XORs swizzle bits into full shared addresses, which needs every
// tile to start on a row boundary: the base is rounded up (the launch asks for
// kRowBytes spare bytes) instead of trusting where it lands.
template <typename Traits>
struct SmemTiles {
  unsigned char* q_ptr;  // the Q tile, generic address
  uint32_t q, k, v;      // shared addresses of the Q tile and the K and V rings

  __device__ __forceinline__ explicit SmemTiles(unsigned char* raw) {
    constexpr uint32_t kRowBytes = Traits::kRowBytes;
    const uint32_t raw_addr = smem_addr(raw);
    q = (raw_addr + kRowBytes - 1) & ~(kRowBytes - 1);
    q_ptr = raw + (q - raw_addr);
    k = q + Traits::kSmemQBytes;
    v = k + Traits::kStages * Traits::kSmemKVTileBytes;
  }
};

// The compile-time row stride of a contiguous [seq][kHeadDim] matrix.
template <typename Traits>
struct HeadDimStride {
  __device__ __forceinline__ constexpr operator int64_t() const { return Traits::kHeadDim; }
};

// Copies rows [row0, row0 + kRows) of a [seq][kHeadDim] row-major matrix into a
// swizzled shared tile; rows at or past `seq` become zeros. The row stride is
// the compile-time head dim (the boundary requires contiguous tensors), so
// every copy of a thread is one base pointer plus an immediate offset; a
// packed variable-length batch passes its runtime stride (heads · head_dim).
template <typename Traits, int kRows, int kNThreads = Traits::kNThreads, typename RowStride = HeadDimStride<Traits>>
__device__ __forceinline__ void load_tile(uint32_t smem_tile, const typename Traits::Element* g,
                                          int row0, int seq, int tid, RowStride row_stride = {}) {
  constexpr int kCh = Traits::kChunksPerRow;
  constexpr int kRowsPerPass = kNThreads / kCh;
  static_assert(kNThreads % kCh == 0 && kRowsPerPass % 8 == 0,
                "a thread's rows must share one swizzle key (a function of row & 7)");
  static_assert(kRows % kRowsPerPass == 0, "whole passes per tile");
  const int r = tid / kCh;
  const int c = tid % kCh;
  const auto* src = g + static_cast<int64_t>(row0 + r) * row_stride + c * Traits::kChunkElems;
  const uint32_t dst = smem_tile + Traits::smem_offset(r, c) * Traits::kElemBytes;
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    const bool valid = row0 + r + i * kRowsPerPass < seq;
    cp_async_16(dst + i * kRowsPerPass * Traits::kRowBytes,
                valid ? src + i * kRowsPerPass * row_stride : g, valid);
  }
}

// Where the kernels read K and V of batch b, KV head h_kv: a pointer to row 0
// of each (contiguous), or, for a paged cache (FwdParams::block_table), the
// indices alone: the table, pools and strides are read from the kernel's
// parameters (constant bank) at each load, so the d128 prefill kernel, at
// 251-255 registers, keeps the paged view in two (holding the pointers and
// strides spilled 8-36 bytes there). Key j is row j & (page_size - 1) of page
// table[j >> page_shift], each page [heads_kv][page_size][head_dim]; K and V
// share the table, so one lookup serves both.
template <typename Element, bool kPaged>
struct KVSource {
  const Element* k;
  const Element* v;
};
template <typename Element>
struct KVSource<Element, true> {
  const FwdParams& p;
  int b, h_kv;
};

// K and V of one sequence of a packed variable-length batch, one KV head: the
// offset of its row 0 (K and V share shape and strides), the pointers and the
// row stride (heads_kv · head_dim) read from the parameters at each load.
template <typename Element>
struct PackedKVSource {
  const FwdParams& p;
  int64_t off;  // of row 0 of the sequence, head h_kv, in K and in V
};

template <typename Element, bool kPaged>
__device__ __forceinline__ KVSource<Element, kPaged> kv_source(const FwdParams& p, int b, int h_kv) {
  if constexpr (kPaged) {
    return {p, b, h_kv};
  } else {
    return {static_cast<const Element*>(p.k) + b * p.k_batch_stride + h_kv * p.k_head_stride,
            static_cast<const Element*>(p.v) + b * p.v_batch_stride + h_kv * p.v_head_stride};
  }
}

// Key tile n (keys [n·kBlockN, (n+1)·kBlockN)) of K and V into ring stage
// n % kStages; keys at or past seqlen_k become zeros.
template <typename Traits>
__device__ __forceinline__ void load_kv_tile(const SmemTiles<Traits>& smem,
                                             const KVSource<typename Traits::Element, false>& kv, int n,
                                             int seqlen_k, int tid) {
  constexpr int kBN = Traits::kBlockN;
  const uint32_t stage_off = (n % Traits::kStages) * Traits::kSmemKVTileBytes;
  load_tile<Traits, kBN>(smem.k + stage_off, kv.k, n * kBN, seqlen_k, tid);
  load_tile<Traits, kBN>(smem.v + stage_off, kv.v, n * kBN, seqlen_k, tid);
}

// The same from a packed variable-length batch.
template <typename Traits>
__device__ __forceinline__ void load_kv_tile(const SmemTiles<Traits>& smem,
                                             const PackedKVSource<typename Traits::Element>& kv, int n,
                                             int seqlen_k, int tid) {
  using Element = typename Traits::Element;
  constexpr int kBN = Traits::kBlockN;
  const FwdParams& p = kv.p;
  const uint32_t stage_off = (n % Traits::kStages) * Traits::kSmemKVTileBytes;
  load_tile<Traits, kBN>(smem.k + stage_off, static_cast<const Element*>(p.k) + kv.off, n * kBN, seqlen_k, tid,
                         p.k_row_stride);
  load_tile<Traits, kBN>(smem.v + stage_off, static_cast<const Element*>(p.v) + kv.off, n * kBN, seqlen_k, tid,
                         p.k_row_stride);
}

// The same from a paged cache: each of a thread's rows looks its page up once
// for K and V. Keys at or past seqlen_k, and a page index outside the pool
// (the operator checks the table, so only a table changed behind its back),
// become zeros: the kernel never reads outside the pools. Cost on the H200:
// decode (8 x 32q/8kv x 1 x 32768 x 128) 0.97-0.99x its contiguous time at
// pages of 16-256; the d128 prefill kernel 0.88x at 1 x 32q/8kv x 512 x
// 32768. Looking the pages up one tile ahead, before the wait, measured the
// same (0.86-0.89x): the table's latency is not what that costs.
template <typename Traits>
__device__ __forceinline__ void load_kv_tile(const SmemTiles<Traits>& smem,
                                             const KVSource<typename Traits::Element, true>& kv, int n,
                                             int seqlen_k, int tid) {
  constexpr int kBN = Traits::kBlockN;
  constexpr int kCh = Traits::kChunksPerRow;
  constexpr int kRowsPerPass = Traits::kNThreads / kCh;
  static_assert(Traits::kNThreads % kCh == 0 && kRowsPerPass % 8 == 0,
                "a thread's rows must share one swizzle key (a function of row & 7)");
  static_assert(kBN % kRowsPerPass == 0, "whole passes per tile");
  using Element = typename Traits::Element;
  const FwdParams& p = kv.p;
  const uint32_t stage_off = (n % Traits::kStages) * Traits::kSmemKVTileBytes;
  const int r = tid / kCh;
  const int c = tid % kCh;
  const uint32_t dst = Traits::smem_offset(r, c) * Traits::kElemBytes + stage_off;
  const int* table = p.block_table + kv.b * p.table_batch_stride;
  // Row 0 of head h_kv of page 0, this thread's chunk (the pools have one shape).
  const int64_t head = kv.h_kv * p.k_head_stride + c * Traits::kChunkElems;
  const auto* k = static_cast<const Element*>(p.k);
  const auto* v = static_cast<const Element*>(p.v);
#pragma unroll
  for (int i = 0; i < kBN / kRowsPerPass; ++i) {
    const int key = n * kBN + r + i * kRowsPerPass;
    const int page = key < seqlen_k ? __ldg(table + (key >> p.page_shift)) : -1;
    const bool valid = static_cast<unsigned>(page) < static_cast<unsigned>(p.num_pages);
    const int64_t row = head + static_cast<int64_t>(key & ((1 << p.page_shift) - 1)) * Traits::kHeadDim;
    const uint32_t off = dst + i * kRowsPerPass * Traits::kRowBytes;
    cp_async_16(smem.k + off, valid ? k + page * p.k_page_stride + row : k, valid);
    cp_async_16(smem.v + off, valid ? v + page * p.v_page_stride + row : v, valid);
  }
}

// Key tile n into its ring stage if n < n_end, then one cp.async commit
// group either way: with empty groups counted too, wait_group<kStages - 2>
// always means "the tile for this iteration has landed".
template <typename Traits, typename KV>
__device__ __forceinline__ void load_kv_tile_or_none(const SmemTiles<Traits>& smem, const KV& kv, int n, int n_end,
                                                     int seqlen_k, int tid) {
  if (n < n_end) {
    load_kv_tile(smem, kv, n, seqlen_k, tid);
  }
  cp_async_commit();
}

// ldmatrix lane addressing. In all three tiles a lane's row is ≡ lane (mod 8),
// so its swizzle key is swizzle_key(lane) (lane & 7 for rows of 8 chunks or
// more), and the swizzled chunk of an even chunk pair c0 + hi is
// (c0 + hi) ^ key = c0 ^ (hi ^ key): a per-lane byte offset (row and
// 16·(hi ^ key)) XORed with the compile-time 16·c0. The XOR only touches
// bits below the row size, so whole rows (stages, m tiles, n tiles) can be
// added before or after it: the tile steps become ldmatrix immediates.
template <typename Traits>
struct LaneOffsets {
  static constexpr int kCE = Traits::kChunkElems;
  static constexpr int kEB = Traits::kElemBytes;
  static constexpr int kD = Traits::kHeadDim;
  // Q (A operand, x4 = rows 0-7/8-15 × k 0-7/8-15): row lane&15, chunk +lane/16.
  __device__ __forceinline__ static uint32_t q(int lane, int first_row) {
    const int swz = Traits::swizzle_key(lane);
    return ((first_row + (lane & 15)) * kD + (((lane >> 4) ^ swz) * kCE)) * kEB;
  }
  // K (B operand, non-transposed): key (lane&7) + 8·(lane/16), chunk +(lane/8)&1.
  __device__ __forceinline__ static uint32_t k(int lane) {
    const int swz = Traits::swizzle_key(lane);
    return (((lane & 7) + ((lane >> 4) << 3)) * kD + ((((lane >> 3) & 1) ^ swz) * kCE)) * kEB;
  }
  // V (B operand, transposed): key lane&15, chunk +lane/16.
  __device__ __forceinline__ static uint32_t v(int lane) {
    const int swz = Traits::swizzle_key(lane);
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

}  // namespace attnprof::flash
