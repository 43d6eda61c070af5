// The Hopper backward's main loop (device code): the shared-memory layout, the
// TMA loads of K, V and each step's Q, dO, lse·log2 e and D, and the pieces of
// one step of a warpgroup (GEMMs, Pᵀ and dSᵀ, dQ through shared memory to the
// workspace); flash_bwd_sm90_kernel.cuh walks the steps with them.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm80_primitives.cuh"  // exp2_approx, ld_shared_f32x2
#include "kernels/common/sm90_primitives.cuh"
#include "kernels/common/sm90_wgmma.cuh"
#include "kernels/flash_sm90/flash_bwd_sm90_traits.h"
#include "kernels/flash_sm90/kernel_args_bwd_sm90.h"
#include "kernels/flash_sm90/tile_scheduler_bwd_sm90.cuh"

namespace attnprof::flash_sm90::bwd_detail {

using namespace kernels;

template <typename Traits>
struct Smem {
  uint32_t k, v, q, dout, ds, dq, lse, dsum, bar;
  // The tiles and barriers from the 1024-byte aligned base of the dynamic
  // shared memory.
  static __device__ __forceinline__ Smem at(uint32_t base) {
    Smem sm;
    sm.k = base + Traits::kOffK;
    sm.v = base + Traits::kOffV;
    sm.q = base + Traits::kOffQ;
    sm.dout = base + Traits::kOffDO;
    sm.ds = base + Traits::kOffDS;
    sm.dq = base + Traits::kOffDQ;
    sm.lse = base + Traits::kOffLse;
    sm.dsum = base + Traits::kOffDsum;
    sm.bar = base + Traits::kOffBarriers;
    return sm;
  }
  __device__ uint32_t kv_full() const { return bar; }
  __device__ uint32_t q_full(int s) const { return bar + 8 * (1 + s); }
  __device__ uint32_t do_full(int s) const { return bar + 8 * (1 + Traits::kStages + s); }
  __device__ uint32_t empty(int s) const { return bar + 8 * (1 + 2 * Traits::kStages + s); }
  __device__ uint32_t kv_empty() const { return bar + 8 * (1 + 3 * Traits::kStages); }
};

// Step `it` of a block's walk: query heads of the group outer, query blocks
// (from the first that sees one of the block's keys) inner.
struct Step {
  int q_slab;   // batch · heads_q + query head
  int m_block;  // query block
};

__device__ __forceinline__ Step step_of(const BwdKernelArgs& a, int b, int hkv, int m_begin, int m_count,
                                        int it) {
  const int group = a.heads_q / a.heads_kv;
  return {b * a.heads_q + hkv * group + it / m_count, m_begin + it % m_count};
}

// Q and lse·log2 e complete on q_full, dO and D on do_full. The two halves stay
// written out: one helper for both changed the SASS of all four kernels.
template <typename Traits>
__device__ __forceinline__ void load_step(const BwdKernelArgs& a, const Smem<Traits>& sm, Step st, int s) {
  const int row0 = st.m_block * Traits::kBlockM;
  const int64_t stat_row = static_cast<int64_t>(st.q_slab) * a.seqlen_q_pad + row0;
  const uint32_t q_full = sm.q_full(s), do_full = sm.do_full(s);
  const uint32_t tile_off = s * Traits::kQBytes, stat_off = s * Traits::kRowStatBytes;
  mbar_arrive_expect_tx(q_full, Traits::kQBytes + Traits::kRowStatBytes);
#pragma unroll
  for (int cb = 0; cb < Traits::kColBlocks; ++cb)
    tma_load_3d(sm.q + tile_off + cb * Traits::kQColBytes, &a.tma_q, q_full, cb * Traits::kColElems, row0,
                st.q_slab);
  bulk_load_1d(sm.lse + stat_off, a.lse_log2 + stat_row, Traits::kRowStatBytes, q_full);
  mbar_arrive_expect_tx(do_full, Traits::kQBytes + Traits::kRowStatBytes);
#pragma unroll
  for (int cb = 0; cb < Traits::kColBlocks; ++cb)
    tma_load_3d(sm.dout + tile_off + cb * Traits::kQColBytes, &a.tma_do, do_full, cb * Traits::kColElems, row0,
                st.q_slab);
  bulk_load_1d(sm.dsum + stat_off, a.d_sum + stat_row, Traits::kRowStatBytes, do_full);
}

// Calls f(e, stat[query]) for every element e of this thread's part of a
// 64 × kN accumulator, whose columns are query rows: element 4t + 2i + j sits
// in column 8t + c2 + j (sm90_wgmma.cuh); `stats` holds one fp32 per column
// in shared memory, read two at a time.
template <int kN, typename F>
__device__ __forceinline__ void for_each_column(uint32_t stats, int c2, F&& f) {
#pragma unroll
  for (int t = 0; t < kN / 8; ++t) {
    const float2 v = ld_shared_f32x2(stats + (8 * t + c2) * 4);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      f(4 * t + 2 * i, v.x);
      f(4 * t + 2 * i + 1, v.y);
    }
  }
}

// K and V of a tile, completing on kv_full.
template <typename Traits>
__device__ __forceinline__ void load_kv(const BwdKernelArgs& a, const Smem<Traits>& sm, const BwdTileWork& w) {
  mbar_arrive_expect_tx(sm.kv_full(), 2 * Traits::kKVBytes);
#pragma unroll
  for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
    tma_load_3d(sm.k + cb * Traits::kKVColBytes, &a.tma_k, sm.kv_full(), cb * Traits::kColElems, w.n0, w.bkv);
    tma_load_3d(sm.v + cb * Traits::kKVColBytes, &a.tma_v, sm.kv_full(), cb * Traits::kColElems, w.n0, w.bkv);
  }
}

__device__ __forceinline__ void prefetch_bwd_tensor_maps(const BwdKernelArgs& a) {
  prefetch_tensor_map(&a.tma_q);
  prefetch_tensor_map(&a.tma_do);
  prefetch_tensor_map(&a.tma_k);
  prefetch_tensor_map(&a.tma_v);
}

// K and V of the block's tile (loaded once) and the first kStages steps; thread 0.
template <typename Traits>
__device__ __forceinline__ void load_prologue(const BwdKernelArgs& a, const Smem<Traits>& sm, const BwdTileWork& w) {
  prefetch_bwd_tensor_maps(a);
  load_kv<Traits>(a, sm, w);
  for (int s = 0; s < Traits::kStages && s < w.iters; ++s)
    load_step<Traits>(a, sm, step_of(a, w.b, w.hkv, w.m_begin, w.m_count, s), s);
}

// A warpgroup's operand descriptors (sm90_primitives.cuh). K-major: this
// warpgroup's K and V rows (A of Sᵀ and dPᵀ), Q and dO (B of Sᵀ and dPᵀ,
// N = query rows), dS (A of dQ). MN-major: Q and dO as B of dK and dV
// (N = head_dim), K as B of dQ.
template <typename Traits>
struct BwdOperands {
  static constexpr DqSplit kSplit = Traits::kDqSplit;
  static constexpr int kDqKSteps = kSplit == DqSplit::kKeys ? 4 : Traits::kBlockN / 16;

  uint64_t desc_k, desc_v, desc_q, desc_do, desc_q_mn, desc_do_mn;
  // This warpgroup's share of dQ = dS·K: rows of dS, columns of K, or keys.
  int dq_row_off, dq_col_off, dq_key_off;
  uint64_t desc_ds, desc_k_mn;
  // stmatrix .trans writes dSᵀ's 8×8 fragments as rows of dS (query row, 8
  // keys = one 16-byte chunk of the 128-byte swizzled row). Lane l addresses
  // matrix l / 8: query columns 8(l / 16) + l % 8 of a k16 step, keys
  // 64 wg + 16 warp + 8((l / 8) % 2).
  uint32_t ds_lane;

  __device__ __forceinline__ BwdOperands(const Smem<Traits>& sm, int wg, int warp, int lane) {
    desc_k = smem_desc_sw128(sm.k + wg * 64 * 128, 16, 1024);
    desc_v = smem_desc_sw128(sm.v + wg * 64 * 128, 16, 1024);
    desc_q = smem_desc_sw128(sm.q, 16, 1024);
    desc_do = smem_desc_sw128(sm.dout, 16, 1024);
    desc_q_mn = smem_desc_sw128(sm.q, Traits::kQColBytes, 1024);
    desc_do_mn = smem_desc_sw128(sm.dout, Traits::kQColBytes, 1024);
    dq_row_off = kSplit == DqSplit::kRows ? 64 * wg : 0;
    dq_col_off = kSplit == DqSplit::kCols ? 64 * wg : 0;
    dq_key_off = kSplit == DqSplit::kKeys ? 64 * wg : 0;
    desc_ds = smem_desc_sw128(sm.ds + dq_row_off * 128 + (dq_key_off / 64) * Traits::kDSColBytes, 16, 1024);
    desc_k_mn =
        smem_desc_sw128(sm.k + (dq_col_off / 64) * Traits::kKVColBytes + dq_key_off * 128, Traits::kKVColBytes, 1024);
    const int mi = lane / 8, r8 = lane % 8;
    ds_lane = wg * Traits::kDSColBytes + (8 * (mi / 2) + r8) * 128 + (((2 * warp + mi % 2) ^ r8) * 16);
  }

  // k16 steps: along a K-major row (32 bytes, then the next column block), or
  // 16 rows down an MN-major operand.
  static __device__ __forceinline__ uint64_t kv_step(int ks) {
    return static_cast<uint64_t>(((ks / 4) * Traits::kKVColBytes + (ks % 4) * 32) >> 4);
  }
  static __device__ __forceinline__ uint64_t q_step(int ks) {
    return static_cast<uint64_t>(((ks / 4) * Traits::kQColBytes + (ks % 4) * 32) >> 4);
  }
  static __device__ __forceinline__ uint64_t ds_step(int ks) {
    return static_cast<uint64_t>(((ks / 4) * Traits::kDSColBytes + (ks % 4) * 32) >> 4);
  }
  static __device__ __forceinline__ uint64_t rows16(int kk) { return static_cast<uint64_t>((kk * 16 * 128) >> 4); }
};

// Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ, two wgmma groups, both operands from shared memory.
template <typename Traits>
__device__ __forceinline__ void issue_s_dp(const BwdOperands<Traits>& d, uint64_t q_off, float (&s)[Traits::kSRegs],
                                           float (&dp)[Traits::kSRegs]) {
  using GemmS = Wgmma<typename Traits::Element, Traits::kBlockM>;  // Sᵀ, dPᵀ: 64 keys × kBlockM queries
  using Op = BwdOperands<Traits>;
  wgmma_fence();
#pragma unroll
  for (int ks = 0; ks < Traits::kDSteps; ++ks)
    GemmS::template ss<0>(s, d.desc_k + Op::kv_step(ks), d.desc_q + q_off + Op::q_step(ks), ks > 0);
  wgmma_commit();
#pragma unroll
  for (int ks = 0; ks < Traits::kDSteps; ++ks)
    GemmS::template ss<0>(dp, d.desc_v + Op::kv_step(ks), d.desc_do + q_off + Op::q_step(ks), ks > 0);
  wgmma_commit();
}

// A tile's steps in step_of's order, one at a time (without step_of's
// divisions, whose registers the producer warpgroup's 24 do not have).
struct StepCursor {
  Step st;
  int m_begin, m_end;
  __device__ __forceinline__ StepCursor(const BwdKernelArgs& a, const BwdTileWork& w)
      : st{w.b * a.heads_q + w.hkv * (a.heads_q / a.heads_kv), w.m_begin},
        m_begin(w.m_begin),
        m_end(w.m_begin + w.m_count) {}
  __device__ __forceinline__ void advance() {
    if (++st.m_block == m_end) {
      st.m_block = m_begin;
      ++st.q_slab;
    }
  }
};

// Step st into its stage once both MMA warpgroups have released that stage's step kStages before; g: the
// step's number over the block's tiles (its stage and the stage's phase).
template <typename Traits>
__device__ __forceinline__ void load_step_when_free(const BwdKernelArgs& a, const Smem<Traits>& sm, Step st, int g) {
  const int s = g % Traits::kStages;
  if (g >= Traits::kStages) mbar_wait(sm.empty(s), (g / Traits::kStages - 1) & 1);
  load_step<Traits>(a, sm, st, s);
}

// kProducerWarpgroup: the producer's thread 0 walks the block's tiles, loading each one's K and V and
// every step's Q, dO and statistics as soon as its stage is free. A tile after the first loads its first
// stages before its K and V: those free as the last tile's final steps end, K and V (kv_empty) only once
// its last dQ has read K.
template <typename Traits>
__device__ __forceinline__ void produce(const BwdKernelArgs& a, const Smem<Traits>& sm) {
  prefetch_bwd_tensor_maps(a);
  int steps_before = 0, kv_round = 0;
  for (int tile = first_bwd_tile(); tile < a.tiles; tile = next_bwd_tile<Traits>(a, tile)) {
    const BwdTileWork w = bwd_tile_work<Traits>(a, tile);
    if (w.iters == 0) continue;
    const int first = min(Traits::kStages, w.iters);
    StepCursor c(a, w);
    if (kv_round == 0) load_kv<Traits>(a, sm, w);
    for (int it = 0; it < first; ++it, c.advance()) load_step_when_free<Traits>(a, sm, c.st, steps_before + it);
    if (kv_round > 0) {
      mbar_wait(sm.kv_empty(), (kv_round - 1) & 1);
      load_kv<Traits>(a, sm, w);
    }
    for (int it = first; it < w.iters; ++it, c.advance()) load_step_when_free<Traits>(a, sm, c.st, steps_before + it);
    steps_before += w.iters;
    ++kv_round;
  }
}

// Refill the stage the previous step used (with step it - 1 + kStages),
// once all eight warps have released it. Placed behind this step's first
// GEMMs, the wait rarely blocks: the other warpgroup has long finished that
// step.
template <typename Traits>
__device__ __forceinline__ void refill_previous_stage(const BwdKernelArgs& a, const Smem<Traits>& sm, int it,
                                                      const BwdTileWork& w) {
  const int prev = it - 1;
  if (threadIdx.x == 0 && prev >= 0 && prev + Traits::kStages < w.iters) {
    mbar_wait(sm.empty(prev % Traits::kStages), (prev / Traits::kStages) & 1);
    load_step<Traits>(a, sm, step_of(a, w.b, w.hkv, w.m_begin, w.m_count, prev + Traits::kStages),
                      prev % Traits::kStages);
  }
  __syncwarp();  // warp 0 whole again before the next wgmma instructions
}

// Pᵀ = exp2(Sᵀ·scale·log2 e − lse·log2 e) in place of Sᵀ. Padding rows and
// rows that see no key have lse·log2 e = +inf: 0.
template <typename Traits>
__device__ __forceinline__ void exponentiate(const BwdKernelArgs& a, uint32_t lse, int c2, float (&s)[Traits::kSRegs]) {
  for_each_column<Traits::kBlockM>(lse, c2,
                                   [&](int e, float lse_log2) { s[e] = exp2_approx(fmaf(s[e], a.scale_log2, -lse_log2)); });
}

// acc += A·B with A packed in registers (k16 step kk covers query columns
// 16kk..16kk+15) and B the MN-major Q or dO tile at desc_b: dV += Pᵀ·dO,
// dK += dSᵀ·Q.
template <typename Traits>
__device__ __forceinline__ void issue_acc(float (&acc)[Traits::kAccRegs], const uint32_t (&a)[Traits::kMSteps][4],
                                          uint64_t desc_b) {
  using GemmAcc = Wgmma<typename Traits::Element, Traits::kHeadDim>;  // dV, dK: 64 keys × head_dim
  wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < Traits::kMSteps; ++kk)
    GemmAcc::template rs<1>(acc, a[kk], desc_b + BwdOperands<Traits>::rows16(kk), 1);
  wgmma_commit();
}

// dS to shared memory (pds[kk] holds the fragments of query columns
// 16kk..16kk+15 in the order stmatrix .x4 takes them), then the barrier
// after which dQ's A operand is complete.
template <typename Traits>
__device__ __forceinline__ void write_ds(uint32_t ds_buf, uint32_t ds_lane, const uint32_t (&pds)[Traits::kMSteps][4]) {
#pragma unroll
  for (int kk = 0; kk < Traits::kMSteps; ++kk) stmatrix_x4_trans(ds_buf + ds_lane + kk * 16 * 128, pds[kk]);
  fence_proxy_async_shared();  // the generic-proxy writes before wgmma (async proxy) reads them
}

template <typename Traits>
__device__ __forceinline__ void store_ds(uint32_t ds_buf, uint32_t ds_lane, int wg,
                                         const uint32_t (&pds)[Traits::kMSteps][4]) {
  write_ds<Traits>(ds_buf, ds_lane, pds);
  if constexpr (Traits::kDqSplit == DqSplit::kKeys) {
    named_bar_sync(Traits::kDsBarrier + wg, 128);  // this warpgroup's dS is written
  } else {
    named_bar_sync(Traits::kDsBarrier, Traits::kMmaThreads);  // both warpgroups' dS are written
  }
}

// This warpgroup's share of dQ = dS·K, in 64-row tiles.
template <typename Traits>
__device__ __forceinline__ void issue_dq(const BwdOperands<Traits>& d, uint64_t ds_off,
                                         float (&dq)[Traits::kDqMTiles][Wgmma<typename Traits::Element, Traits::kDqN>::kAccRegs]) {
  using GemmDq = Wgmma<typename Traits::Element, Traits::kDqN>;
  using Op = BwdOperands<Traits>;
  wgmma_fence();
#pragma unroll
  for (int mt = 0; mt < Traits::kDqMTiles; ++mt)
#pragma unroll
    for (int ks = 0; ks < Op::kDqKSteps; ++ks)
      GemmDq::template ss<1>(dq[mt], d.desc_ds + ds_off + ((mt * 64 * 128) >> 4) + Op::ds_step(ks),
                             d.desc_k_mn + Op::rows16(ks), ks > 0);
  wgmma_commit();
}

// dV and dK done: their accumulators and A operands (Pᵀ, dSᵀ) pinned.
template <typename Traits>
__device__ __forceinline__ void pin_dv_dk(float (&dv)[Traits::kAccRegs], float (&dk)[Traits::kAccRegs],
                                          uint32_t (&pp)[Traits::kMSteps][4], uint32_t (&pds)[Traits::kMSteps][4]) {
  pin_registers(dv);
  pin_registers(dk);
#pragma unroll
  for (int kk = 0; kk < Traits::kMSteps; ++kk) {
    pin_registers(pp[kk]);
    pin_registers(pds[kk]);
  }
}

// Every wgmma of the step done: its accumulators and A operands pinned.
template <typename Traits>
__device__ __forceinline__ void pin_step_registers(
    float (&dq)[Traits::kDqMTiles][Wgmma<typename Traits::Element, Traits::kDqN>::kAccRegs],
    float (&dv)[Traits::kAccRegs], float (&dk)[Traits::kAccRegs], uint32_t (&pp)[Traits::kMSteps][4],
    uint32_t (&pds)[Traits::kMSteps][4]) {
#pragma unroll
  for (int mt = 0; mt < Traits::kDqMTiles; ++mt) pin_registers(dq[mt]);
  pin_dv_dk<Traits>(dv, dk, pp, pds);
}

// This warpgroup's dQ into its shared-memory buffer, in the layout of the
// workspace's tensor map (row r, float column n at 16-byte chunk
// (n % 32) / 4 ^ r % 8).
template <typename Traits>
__device__ __forceinline__ void write_dq(uint32_t dq_buf, int warp, int lane, int c2,
                                         const float (&dq)[Traits::kDqMTiles]
                                                          [Wgmma<typename Traits::Element, Traits::kDqN>::kAccRegs]) {
  constexpr int kTileBytes = Traits::kDqBytes / Traits::kDqMTiles;
#pragma unroll
  for (int mt = 0; mt < Traits::kDqMTiles; ++mt)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int row = 16 * warp + lane / 4 + 8 * i;
#pragma unroll
      for (int t = 0; t < Traits::kDqN / 8; ++t) {
        const int n = 8 * t + c2;
        const uint32_t addr = dq_buf + mt * kTileBytes + (n / 32) * Traits::kDqColBytes + row * 128 +
                              ((((n % 32) / 4) ^ (row % 8)) * 16) + (n % 4) * 4;
        st_shared_f32x2(addr, dq[mt][4 * t + 2 * i], dq[mt][4 * t + 2 * i + 1]);
      }
    }
  fence_proxy_async_shared();  // the generic-proxy writes before the TMA (async proxy) reads them
}

// One TMA reduction per 32-column block of a warpgroup's dQ buffer into the
// fp32 workspace (one thread).
template <typename Traits>
__device__ __forceinline__ void issue_dq_reduction(const BwdKernelArgs& a, uint32_t dq_buf, int dq_row_off,
                                                   int dq_col_off, int q0, int q_slab) {
  constexpr int kTileBytes = Traits::kDqBytes / Traits::kDqMTiles;
#pragma unroll
  for (int mt = 0; mt < Traits::kDqMTiles; ++mt)
#pragma unroll
    for (int cb = 0; cb < Traits::kDqN / 32; ++cb)
      tma_reduce_add_3d(&a.tma_dq, dq_buf + mt * kTileBytes + cb * Traits::kDqColBytes, dq_col_off + 32 * cb,
                        q0 + dq_row_off + 64 * mt, q_slab);
  bulk_commit_group();
}

// kDqWriter: an MMA warpgroup hands its dQ to its writer warp: once the
// writer's last reduction has read the buffer, write it and arrive (no wait).
template <typename Traits>
__device__ __forceinline__ void hand_dq_to_writer(const Smem<Traits>& sm, int wg, int warp, int lane, int c2,
                                                  const float (&dq)[Traits::kDqMTiles]
                                                                   [Wgmma<typename Traits::Element, Traits::kDqN>::kAccRegs]) {
  named_bar_sync(Traits::dq_empty_barrier(wg), Traits::kDqWriterThreads);
  write_dq<Traits>(sm.dq + wg * Traits::kDqBytes, warp, lane, c2, dq);
  named_bar_arrive(Traits::dq_full_barrier(wg), Traits::kDqWriterThreads);
}

// kDqWriter: the producer's warp 1 + w issues MMA warpgroup w's dQ reductions,
// one a step in step order over the block's tiles, and frees the buffer once
// the reduction has read it: before the first, after every one (the
// warpgroup takes the last freeing at its end, finish_dq_hand_over).
template <typename Traits>
__device__ __forceinline__ void write_dq_reductions(const BwdKernelArgs& a, const Smem<Traits>& sm, int w, int lane) {
  constexpr DqSplit kSplit = Traits::kDqSplit;
  const int dq_row_off = kSplit == DqSplit::kRows ? 64 * w : 0;
  const int dq_col_off = kSplit == DqSplit::kCols ? 64 * w : 0;
  const uint32_t dq_buf = sm.dq + w * Traits::kDqBytes;
  if (!bwd_block_has_steps<Traits>(a)) return;  // no step: no hand-over
  named_bar_arrive(Traits::dq_empty_barrier(w), Traits::kDqWriterThreads);
  for (int tile = first_bwd_tile(); tile < a.tiles; tile = next_bwd_tile<Traits>(a, tile)) {
    const BwdTileWork t = bwd_tile_work<Traits>(a, tile);
    StepCursor c(a, t);
    for (int it = 0; it < t.iters; ++it, c.advance()) {
      named_bar_sync(Traits::dq_full_barrier(w), Traits::kDqWriterThreads);
      if (lane == 0) {
        issue_dq_reduction<Traits>(a, dq_buf, dq_row_off, dq_col_off, c.st.m_block * Traits::kBlockM, c.st.q_slab);
        bulk_wait_group_read<0>();
      }
      __syncwarp();
      named_bar_arrive(Traits::dq_empty_barrier(w), Traits::kDqWriterThreads);
    }
  }
  if (lane == 0) bulk_wait_group<0>();  // the reductions done before the block exits
}

// kDqWriter: an MMA warpgroup that handed its writer warp any dQ takes the
// writer's last freeing of the buffer (no arrival is left pending at exit).
template <typename Traits>
__device__ __forceinline__ void finish_dq_hand_over(int wg) {
  named_bar_sync(Traits::dq_empty_barrier(wg), Traits::kDqWriterThreads);
}

// dQ through shared memory to the fp32 workspace: the warpgroup writes its
// buffer (once the last reduction has read it), then its first thread issues
// the reductions; or (kDqWriter) the writer warp does.
template <typename Traits>
__device__ __forceinline__ void reduce_dq(const BwdKernelArgs& a, const Smem<Traits>& sm, const BwdOperands<Traits>& d,
                                          int wg, int tid, int warp, int lane, int c2, int q0, int q_slab,
                                          const float (&dq)[Traits::kDqMTiles]
                                                           [Wgmma<typename Traits::Element, Traits::kDqN>::kAccRegs]) {
  if constexpr (Traits::kDqWriter) {
    hand_dq_to_writer<Traits>(sm, wg, warp, lane, c2, dq);
  } else {
    const uint32_t dq_buf = sm.dq + wg * Traits::kDqBytes;
    if (tid == 0) bulk_wait_group_read<0>();  // the previous step's reduction has read the buffer
    named_bar_sync(Traits::kDqBarrier + wg, 128);
    write_dq<Traits>(dq_buf, warp, lane, c2, dq);
    named_bar_sync(Traits::kDqBarrier + wg, 128);
    if (tid == 0) issue_dq_reduction<Traits>(a, dq_buf, d.dq_row_off, d.dq_col_off, q0, q_slab);
  }
}

}  // namespace attnprof::flash_sm90::bwd_detail
