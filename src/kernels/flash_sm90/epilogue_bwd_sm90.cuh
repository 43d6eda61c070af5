// The Hopper backward's epilogue (device code): dK (times the softmax scale)
// and dV of a warpgroup's 64 keys, stored from the wgmma accumulators, or
// (kTmaEpilogue) through shared memory by TMA.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm90_primitives.cuh"
#include "kernels/flash_sm90/kernel_args_bwd_sm90.h"
#include "kernels/flash_sm90/mainloop_bwd_sm90.cuh"
#include "kernels/flash_sm90/tile_scheduler_bwd_sm90.cuh"

namespace attnprof::flash_sm90::bwd_detail {

using namespace kernels;

// Stores a 64-key × head_dim accumulator (this thread's keys key_row0 and
// key_row0 + 8) times `scale`, rows past seqlen_k skipped.
template <typename Traits, int N>
__device__ __forceinline__ void store_rows(void* base, int64_t row_stride, const float (&acc)[N], float scale,
                                           int key_row0, int seqlen_k, int lane) {
  using Element = typename Traits::Element;
  Element* out = static_cast<Element*>(base);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int key = key_row0 + 8 * i;
    if (key >= seqlen_k) continue;
    uint32_t* dst = reinterpret_cast<uint32_t*>(out + key * row_stride + 2 * (lane % 4));
#pragma unroll
    for (int t = 0; t < N / 4; ++t) dst[4 * t] = pack2<Element>(acc[4 * t + 2 * i] * scale, acc[4 * t + 2 * i + 1] * scale);
  }
}

// dV and dK of this thread's keys; a block whose keys no query sees stores zeros.
template <typename Traits>
__device__ __forceinline__ void store_dk_dv(const BwdKernelArgs& a, int b, int hkv, int key_row0, int lane,
                                            const float (&dv)[Traits::kAccRegs], const float (&dk)[Traits::kAccRegs]) {
  using Element = typename Traits::Element;
  store_rows<Traits>(static_cast<Element*>(a.dv) + b * a.dv_batch_stride + hkv * a.dv_head_stride, a.dv_row_stride,
                     dv, 1.f, key_row0, a.seqlen_k, lane);
  store_rows<Traits>(static_cast<Element*>(a.dk) + b * a.dk_batch_stride + hkv * a.dk_head_stride, a.dk_row_stride,
                     dk, a.scale, key_row0, a.seqlen_k, lane);
}

// A 64-key × head_dim accumulator (this thread: rows 16 warp + lane / 4 and
// + 8, columns 8t + 2(lane % 4) and + 1) times `scale`, packed to 16 bits,
// into shared memory at `rows` in the 128-byte swizzled box layout of the K
// and V tiles (column blocks of 64 elements kKVColBytes apart): stmatrix, two
// 8-column groups of both row halves an instruction.
template <typename Traits, int N>
__device__ __forceinline__ void write_acc_rows(uint32_t rows, int warp, int lane, const float (&acc)[N], float scale) {
  using Element = typename Traits::Element;
  const int mi = lane / 8;  // the matrix whose row this lane addresses: column group t + mi / 2, rows 8(mi % 2)..
  const int row = 16 * warp + 8 * (mi % 2) + lane % 8;
#pragma unroll
  for (int t = 0; t < N / 4; t += 2) {
    uint32_t r[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int e = 4 * (t + i / 2) + 2 * (i % 2);
      r[i] = pack2<Element>(acc[e] * scale, acc[e + 1] * scale);
    }
    const int col = 8 * (t + mi / 2);
    stmatrix_x4(rows + (col / 64) * Traits::kKVColBytes + row * 128 + ((((col % 64) / 8) ^ (row % 8)) * 16), r);
  }
}

// kTmaEpilogue: warpgroup wg's dV and dK over its own rows of V and K in
// shared memory, then to global memory by TMA (rows past seqlen_k are not
// written: the maps' bounds). dV first: only this warpgroup's GEMMs read its
// rows of V; the other's dQ GEMMs read all of K, so dK waits for both
// warpgroups (the tile barrier). With a producer warpgroup, thread 0 releases
// K and V (kv_empty) once the stores have read them (a persistent block's
// producer loads the next tile's there).
template <typename Traits>
__device__ __forceinline__ void store_dk_dv_tma(const BwdKernelArgs& a, const Smem<Traits>& sm, const BwdTileWork& w,
                                                int wg, int tid, int warp, int lane,
                                                const float (&dv)[Traits::kAccRegs], const float (&dk)[Traits::kAccRegs]) {
  const uint32_t v_rows = sm.v + wg * 64 * 128, k_rows = sm.k + wg * 64 * 128;
  write_acc_rows<Traits>(v_rows, warp, lane, dv, 1.f);
  named_bar_sync(Traits::kTileBarrier, Traits::kMmaThreads);
  write_acc_rows<Traits>(k_rows, warp, lane, dk, a.scale);
  fence_proxy_async_shared();  // the generic-proxy writes before the TMA (async proxy) reads them
  named_bar_sync(Traits::epilogue_barrier(wg), 128);
  if (tid == 0) {
#pragma unroll
    for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
      tma_store_3d(&a.tma_dv, v_rows + cb * Traits::kKVColBytes, cb * Traits::kColElems, w.n0 + 64 * wg, w.bkv);
      tma_store_3d(&a.tma_dk, k_rows + cb * Traits::kKVColBytes, cb * Traits::kColElems, w.n0 + 64 * wg, w.bkv);
    }
    bulk_commit_group();
    if constexpr (Traits::kProducerWarpgroup) {
      bulk_wait_group_read<0>();
      mbar_arrive(sm.kv_empty());
    }
  }
}

}  // namespace attnprof::flash_sm90::bwd_detail
