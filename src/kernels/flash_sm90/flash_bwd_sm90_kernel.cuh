// Hopper attention backward, FlashAttention-2's algorithm on wgmma and TMA
// (device code only).
//
// A tile per (kBlockN = 128 keys, batch, KV head), two MMA warpgroups of 64
// keys each, in the order of bwd_block (tile_order.h): the tiles running at
// once read a few heads' Q and dO and keep them in L2. A block runs one tile,
// or (kPersistent, without a causal mask) one block per SM walks the tiles
// (tile_scheduler_bwd_sm90.cuh). K and V are loaded once per tile. A tile
// walks over every query block that sees one of its keys, for every query
// head of its KV head's group; one thread issues the TMA copies of
// Q, dO, lse·log2 e and D into kStages buffers, refilling one once all eight
// MMA warps have released it: thread 0 of a producer warpgroup
// (kProducerWarpgroup, whose warps 1 and 2 also issue the dQ reductions with
// kDqWriter), or thread 0 of the block a step ahead. Per query block, each MMA warpgroup:
//   Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ          wgmma, both operands from shared memory
//   Pᵀ = exp2(Sᵀ·scale·log2 e − lse·log2 e), masked; dSᵀ = Pᵀ ∘ (dPᵀ − D)
//   dV += Pᵀ·dO, dK += dSᵀ·Q          wgmma, Pᵀ and dSᵀ as register operands
//   dSᵀ → shared memory as dS (stmatrix .trans); once the other warpgroup's
//   is there too, its share of dQ = dS·K (DqSplit): right after a barrier
//   between them, or (kDeferDq) a step later, each having signalled its dS
//   and waiting only for the other's of the step before. dQ goes through
//   shared memory to the fp32 workspace by TMA reduction (cp.reduce.async.bulk).
// At a tile's end dK (times the softmax scale) and dV are stored: over the
// warpgroup's rows of K and V in shared memory and from there by TMA
// (kTmaEpilogue, both head dims), or from registers (alternatives).
// The preprocessing (D, lse·log2 e, zeroed workspace) and the dQ conversion
// are the portable kernels of flash_attention/flash_bwd_launch.cu.
//
// Registers (ptxas, sm_90a): with a producer warpgroup 168 at launch, the
// MMA warpgroups raised to 240 and the producer lowered to 24 (setmaxnreg),
// head_dim 128 (dV and dK 64 each, Sᵀ and dPᵀ 32 each, the packed Pᵀ/dSᵀ, dQ
// 32); without one (255 at most with 256 threads) 244 at head_dim 128 and 250
// at head_dim 64 with 128-row query blocks (dV, dK 32 each, Sᵀ, dPᵀ 64 each);
// no spills. Design and measurements: docs/notes/flash_sm90_backward.md.
//
// The parts: mainloop_bwd_sm90.cuh (shared memory, loads, the pieces of one
// step), epilogue_bwd_sm90.cuh (dK and dV stores), tile_scheduler_bwd_sm90.cuh
// (a block's tiles); this file walks the tiles and their steps.
#pragma once

#include <cstdint>

#include "kernels/common/sm90_primitives.cuh"
#include "kernels/common/sm90_wgmma.cuh"
#include "kernels/flash_sm90/epilogue_bwd_sm90.cuh"
#include "kernels/flash_sm90/flash_bwd_sm90_traits.h"
#include "kernels/flash_sm90/kernel_args_bwd_sm90.h"
#include "kernels/flash_sm90/mainloop_bwd_sm90.cuh"

namespace attnprof::flash_sm90 {

// kDeferDq: the dQ of the step before, whose dS both warpgroups wrote into buffer `buf`: once the other
// warpgroup's half is there, dQ = dS·K, then `after_gemm(dq)` (pins and releases: in the loop they also hold
// this step's registers and free its stage and buffer), then the reduction to the workspace.
template <typename Traits, typename AfterGemm>
__device__ __forceinline__ void previous_step_dq(const BwdKernelArgs& a, const bwd_detail::Smem<Traits>& sm,
                                                 const bwd_detail::BwdOperands<Traits>& d, int wg, int tid, int warp,
                                                 int lane, int c2, int buf, int q0, int q_slab, AfterGemm&& after_gemm) {
  using namespace bwd_detail;
  float dq[Traits::kDqMTiles][Wgmma<typename Traits::Element, Traits::kDqN>::kAccRegs];
  named_bar_sync(Traits::ds_full_barrier(1 - wg, buf), Traits::kMmaThreads);
  issue_dq<Traits>(d, (buf * Traits::kDSBytes) >> 4, dq);
  wgmma_wait<0>();
  after_gemm(dq);
  reduce_dq<Traits>(a, sm, d, wg, tid, warp, lane, c2, q0, q_slab, dq);
}

// The steps of one tile (w.iters > 0) of an MMA warpgroup: every query block of every query head of the
// group that sees one of the tile's keys, dV and dK summed in registers. steps_before and kv_round: the
// block's steps and K/V loads in earlier tiles (stages, phases, the K/V barrier's phase).
template <typename Traits>
__device__ __forceinline__ void tile_steps(const BwdKernelArgs& a, const bwd_detail::Smem<Traits>& sm,
                                           const bwd_detail::BwdOperands<Traits>& d, const bwd_detail::BwdTileWork& w,
                                           int wg, int tid, int warp, int lane, int c2, int key_row0, int steps_before,
                                           int kv_round, float (&dv)[Traits::kAccRegs], float (&dk)[Traits::kAccRegs]) {
  using namespace bwd_detail;
  using Element = typename Traits::Element;
  using GemmDq = Wgmma<Element, Traits::kDqN>;
  constexpr int kBM = Traits::kBlockM;
  constexpr int kBN = Traits::kBlockN;
  constexpr int kDqMTiles = Traits::kDqMTiles;
  const int iters = w.iters, n0 = w.n0;

  int prev_q0 = 0, prev_q_slab = 0;  // kDeferDq: the step whose dQ is computed next
  mbar_wait(sm.kv_full(), kv_round & 1);
  if constexpr (Traits::kPingPong) {  // warpgroup 0 issues first
    if (wg == 1) named_bar_arrive(Traits::issue_barrier(0), Traits::kMmaThreads);
  }
  StepCursor cursor(a, w);
  for (int it = 0; it < iters; ++it, cursor.advance()) {
    const int g = steps_before + it;  // the step's number over the block's tiles
    const int stage = g % Traits::kStages;
    const uint32_t phase = (g / Traits::kStages) & 1;
    const Step st = cursor.st;
    const int q0 = st.m_block * kBM;
    const uint64_t q_off = (stage * Traits::kQBytes) >> 4;
    float s[Traits::kSRegs], dp[Traits::kSRegs];

    // Both waits before the fence: a wait between the two GEMMs makes ptxas
    // insert a warpgroup.arrive of its own (C7519).
    mbar_wait(sm.q_full(stage), phase);
    mbar_wait(sm.do_full(stage), phase);
    if constexpr (Traits::kPingPong) named_bar_sync(Traits::issue_barrier(wg), Traits::kMmaThreads);
    issue_s_dp<Traits>(d, q_off, s, dp);
    if constexpr (Traits::kPingPong) {  // the other's turn (warpgroup 1's last turn is nobody's)
      if (wg == 0 || it + 1 < iters) named_bar_arrive(Traits::issue_barrier(1 - wg), Traits::kMmaThreads);
    }
    if constexpr (!Traits::kProducerWarpgroup) refill_previous_stage<Traits>(a, sm, it, w);
    wgmma_wait<1>();  // Sᵀ done; dPᵀ may still run
    pin_registers(s);
    exponentiate<Traits>(a, sm.lse + stage * Traits::kRowStatBytes, c2, s);  // Pᵀ, unmasked
    // Keys past the end (zeros from TMA, but exp2(0 − lse) is not 0) and,
    // under causal masking, keys after the query: only on blocks that reach
    // past the first query row's limit. (As a function of its own this mask
    // compiled to other SASS.)
    const bool tail = n0 + kBN > a.seqlen_k;
    const bool diagonal = a.causal && n0 + kBN - 1 > q0 + a.causal_offset;
    if (tail || diagonal) {
#pragma unroll
      for (int t = 0; t < kBM / 8; ++t)
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int key = key_row0 + 8 * i;
            const int query = q0 + 8 * t + c2 + j;
            if (key >= a.seqlen_k || (a.causal && key > query + a.causal_offset)) s[4 * t + 2 * i + j] = 0.f;
          }
    }

    uint32_t pp[Traits::kMSteps][4];  // Pᵀ as wgmma A fragments
    pack_a_fragments<Element>(s, pp);
    issue_acc<Traits>(dv, pp, d.desc_do_mn + q_off);  // dV += Pᵀ·dO
    wgmma_wait<1>();  // dPᵀ done; dV may still run
    pin_registers(dp);

    // dSᵀ = Pᵀ ∘ (dPᵀ − D), into dp.
    for_each_column<kBM>(sm.dsum + stage * Traits::kRowStatBytes, c2,
                         [&](int e, float d_row) { dp[e] = s[e] * (dp[e] - d_row); });
    uint32_t pds[Traits::kMSteps][4];
    pack_a_fragments<Element>(dp, pds);
    issue_acc<Traits>(dk, pds, d.desc_q_mn + q_off);  // dK += dSᵀ·Q
    if constexpr (Traits::kDeferDq) {
      // dS of this step into buffer it % 2 once the other warpgroup's dQ of step it - 2 has read it;
      // then the dQ of step it - 1, whose dS both warpgroups wrote a step ago.
      // (kPersistent: a tile after the first writes both buffers once both warpgroups are done with the
      // last tile's: here, or in the TMA epilogue.)
      const int buf = it % 2;
      if (it >= 2) named_bar_sync(Traits::ds_empty_barrier(1 - wg, buf), Traits::kMmaThreads);
      if (Traits::kPersistent && !Traits::kTmaEpilogue && it == 0 && kv_round > 0)
        named_bar_sync(Traits::kTileBarrier, Traits::kMmaThreads);
      write_ds<Traits>(sm.ds + buf * Traits::kDSBytes, d.ds_lane, pds);
      named_bar_arrive(Traits::ds_full_barrier(wg, buf), Traits::kMmaThreads);
      if (it >= 1) {
        previous_step_dq<Traits>(a, sm, d, wg, tid, warp, lane, c2, 1 - buf, prev_q0, prev_q_slab, [&](auto& dq) {
          pin_step_registers<Traits>(dq, dv, dk, pp, pds);
          if (lane == 0) mbar_arrive(sm.empty(stage));  // this warp's last read of Q and dO of this stage
          // The other warpgroup waits for this before writing step it + 1's dS over the buffer.
          if (it + 1 < iters) named_bar_arrive(Traits::ds_empty_barrier(wg, 1 - buf), Traits::kMmaThreads);
        });
      } else {
        wgmma_wait<0>();
        pin_dv_dk<Traits>(dv, dk, pp, pds);
        if (lane == 0) mbar_arrive(sm.empty(stage));
      }
      prev_q0 = q0;
      prev_q_slab = st.q_slab;
    } else {
      store_ds<Traits>(sm.ds + (it % 2) * Traits::kDSBytes, d.ds_lane, wg, pds);

      float dq[kDqMTiles][GemmDq::kAccRegs];
      issue_dq<Traits>(d, ((it % 2) * Traits::kDSBytes) >> 4, dq);
      wgmma_wait<0>();
      pin_step_registers<Traits>(dq, dv, dk, pp, pds);
      if (lane == 0) mbar_arrive(sm.empty(stage));  // this warp's last read of Q and dO of this stage
      reduce_dq<Traits>(a, sm, d, wg, tid, warp, lane, c2, q0, st.q_slab, dq);
    }
  }
  if constexpr (Traits::kDeferDq) {
    // The last step's dQ, this warp's last read of K and V in the tile (the producer loads the next tile's
    // once all eight warps have released them; kTmaEpilogue: once the epilogue's stores have read them).
    previous_step_dq<Traits>(a, sm, d, wg, tid, warp, lane, c2, (iters - 1) % 2, prev_q0, prev_q_slab, [&](auto& dq) {
#pragma unroll
      for (int mt = 0; mt < kDqMTiles; ++mt) pin_registers(dq[mt]);
      if (!Traits::kTmaEpilogue && lane == 0) mbar_arrive(sm.kv_empty());
    });
  }
}

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    flash_bwd_sm90_kernel(const __grid_constant__ BwdKernelArgs a) {
  using namespace bwd_detail;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The swizzle atoms need 1024-byte aligned tiles; the launch asks for 1024
  // spare bytes to round the dynamic base up.
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023) & ~1023u;
  const Smem<Traits> sm = Smem<Traits>::at(base);

  if (threadIdx.x == 0) {
    mbar_init(sm.kv_full(), 1);
    mbar_init(sm.kv_empty(), Traits::kKvReleases);
#pragma unroll
    for (int s = 0; s < Traits::kStages; ++s) {
      mbar_init(sm.q_full(s), 1);
      mbar_init(sm.do_full(s), 1);
      mbar_init(sm.empty(s), Traits::kWarps);
    }
    fence_barrier_init();
  }
  __syncthreads();

  // Warp-uniform; the shuffle tells the compiler so (wgmma under control flow
  // it cannot prove uniform gets serialised, C7520).
  const int warpgroup = warp_uniform(static_cast<int>(threadIdx.x / 128));
  const int tid = threadIdx.x % 128;
  const int warp = tid / 32;
  const int lane = tid % 32;
  if constexpr (Traits::kProducerWarpgroup) {
    if (warpgroup == 0) {
      setmaxnreg_dec<Traits::kProducerRegs>();
      if (tid == 0) produce<Traits>(a, sm);
      if constexpr (Traits::kDqWriter) {
        if (warp == 1 || warp == 2) write_dq_reductions<Traits>(a, sm, warp - 1, lane);
      }
      return;
    }
    setmaxnreg_inc<Traits::kMmaRegs>();
  }
  const int wg = Traits::kProducerWarpgroup ? warpgroup - 1 : warpgroup;  // MMA warpgroup
  const BwdOperands<Traits> d(sm, wg, warp, lane);
  const int c2 = 2 * (lane % 4);

  // The block's tiles (tile_scheduler_bwd_sm90.cuh): which (slab, key block)
  // each is, in the launch's order (tile_order.h): causal key blocks longest
  // first within sections of slabs; without a mask slab by slab, so the blocks
  // resident at once share a few heads' Q and dO in L2.
  int steps_before = 0, kv_round = 0;  // the block's steps and K/V loads in earlier tiles
  for (int tile = first_bwd_tile(); tile < a.tiles; tile = next_bwd_tile<Traits>(a, tile)) {
    const BwdTileWork w = bwd_tile_work<Traits>(a, tile);
    if constexpr (!Traits::kProducerWarpgroup) {
      if (threadIdx.x == 0 && w.iters > 0) load_prologue<Traits>(a, sm, w);
    }
    const int key_row0 = w.n0 + 64 * wg + 16 * warp + lane / 4;  // this thread's keys: + 0 and + 8
    float dv[Traits::kAccRegs], dk[Traits::kAccRegs];
#pragma unroll
    for (int r = 0; r < Traits::kAccRegs; ++r) dv[r] = dk[r] = 0.f;
    if (w.iters > 0) {
      tile_steps<Traits>(a, sm, d, w, wg, tid, warp, lane, c2, key_row0, steps_before, kv_round, dv, dk);
      steps_before += w.iters;
      ++kv_round;
    }
    if (Traits::kTmaEpilogue && w.iters > 0) {
      store_dk_dv_tma<Traits>(a, sm, w, wg, tid, warp, lane, dv, dk);
    } else {
      store_dk_dv<Traits>(a, w.b, w.hkv, key_row0, lane, dv, dk);  // (a tile without steps: zeros)
    }
  }

  // The dQ reductions must have read shared memory before the block exits
  // (kDqWriter: the writer warps wait for theirs), and the epilogue's TMA
  // stores must be done.
  if constexpr (Traits::kDqWriter) {
    if (steps_before > 0) finish_dq_hand_over<Traits>(wg);
  }
  if (tid == 0) bulk_wait_group<0>();
}

}  // namespace attnprof::flash_sm90
