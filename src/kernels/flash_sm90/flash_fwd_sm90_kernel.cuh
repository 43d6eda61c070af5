// Hopper attention forward, warp-specialised (device code only).
//
// Persistent: gridDim.x blocks (at most one per SM) loop over tiles of
// kBlockM query rows of one (batch, query head), in the order of
// tile_order.h: head by head, or under causal masking longest rows first
// within sections of heads whose K/V fits in L2.
//
// Warpgroup 0, the producer, gives its registers back (setmaxnreg.dec) and
// one of its threads issues every TMA copy: per tile the Q tile (into one of
// kQStages buffers, so the next tile's Q arrives while the consumers finish
// the current one), then K and V tiles from the last visible key block down
// to block 0, into kStages buffers, each waiting for its buffer's "empty"
// barrier and completing on its "full" barrier. It also fetches the next tile
// index (an atomic counter under causal masking) and passes it through shared
// memory with the Q barrier. Without a mask the last, partial round of tiles
// is cut along the keys into pieces for every block (tail_split.h); the
// warps that finish a shared tile last merge its pieces.
//
// Warpgroups 1..kConsumerWarpgroups, the consumers, take the registers
// (setmaxnreg.inc), 64 Q rows each. Per key block j they issue S_j = Q·K_jᵀ and O += P_{j-1}·V_{j-1}
// back to back (wgmma, async), then wait for S_j only and run the softmax of
// S_j while the tensor cores still work on P_{j-1}·V_{j-1}: the exponentials
// of one block overlap the GEMMs of the previous one. Across the consumers,
// named barriers let one issue its GEMMs at a time, in turn, so one
// warpgroup's softmax runs while another's GEMMs occupy the tensor cores
// (ping-pong).
//
// 8-bit inputs (kFp8 configurations): Q·Kᵀ and P·V on e4m3 wgmma, V as Vᵀ
// (flash_sm90_traits.h), P scaled by 2^8 and packed to e4m3 in registers;
// each tile's head folds q's and k's descales into the softmax scale and v's
// into the output's normalisation (HeadScales, epilogue_fwd_sm90.cuh).
// With kTransposeV, V is loaded as it is in memory into staging buffers and
// warps 1 and 2 of the producer warpgroup write the Vᵀ stages (transpose_v).
//
// A packed variable-length batch (kVarlen configurations, cu_seqlens): the
// tensor maps span the packed rows of each head, the producer walks the
// sequences' offsets (varlen_tiles.h) and publishes each tile with its
// sequence's first row and lengths beside the work item, and the consumers
// mask and store with those instead of the launch's lengths.
//
// The parts: tile_scheduler_fwd_sm90.cuh (which work comes next),
// mainloop_fwd_sm90.cuh (the loads, and a consumer's GEMMs and softmax over
// one tile), epilogue_fwd_sm90.cuh (normalise, merge split pieces, store);
// this file wires them into the producer and consumer loops.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/common/sm90_primitives.cuh"
#include "kernels/flash_sm90/epilogue_fwd_sm90.cuh"
#include "kernels/flash_sm90/flash_sm90_traits.h"
#include "kernels/flash_sm90/kernel_args_fwd_sm90.h"
#include "kernels/flash_sm90/mainloop_fwd_sm90.cuh"
#include "kernels/flash_sm90/softmax_sm90.cuh"
#include "kernels/flash_sm90/tile_scheduler_fwd_sm90.cuh"

namespace attnprof::flash_sm90 {

namespace detail {

using namespace kernels;

// Per work item: publish it with the Q tile, load Q, fetch the next item,
// then stream the tile's K and V. The end marker is an item too.
template <typename Traits>
__device__ __forceinline__ void producer(const KernelArgs& a, const Smem<Traits>& sm) {
  prefetch_tensor_map(&a.tma_q);
  prefetch_tensor_map(&a.tma_k);
  prefetch_tensor_map(&a.tma_v);
  const int group = a.heads_q / a.heads_kv;
  RingPos<Traits::kStages> pos;
  RingPos<Traits::kVsStages> spos;  // (kTransposeV)
  RingPos<Traits::kQStages> qpos;
  [[maybe_unused]] VarlenCursor<Traits::kBlockM, Traits::kBlockN> cursor;
  int item = first_work(a);
  for (;;) {
    // The consumers have issued their last read of the Q tile that used this
    // stage (and read its work item long before).
    mbar_wait(sm.q_empty(qpos.stage), qpos.phase ^ 1);
    const uint32_t q_full = sm.q_full(qpos.stage);
    // A packed batch's tile is decoded here only (the walk over its
    // sequences is the producer's) and published with the item.
    Tile t;
    if constexpr (Traits::kVarlen) {
      if (item != kNoMoreWork && !cursor.seek(a.packed, item)) item = kNoMoreWork;
      if (item != kNoMoreWork) {
        t = cursor.tile(a.packed, item);
        publish_tile<Traits>(sm, qpos.stage, t);
      }
    }
    sm.tile_slot[qpos.stage * Traits::kSlotInts] = item;
    if (item == kNoMoreWork) {
      mbar_arrive(q_full);  // the end marker
      if (a.tile_counter) release_tile_counter(a.tile_counter);
      return;
    }
    if constexpr (!Traits::kVarlen) t = decode_tile<Traits>(a, item);
    load_q_tile<Traits>(a, sm, t, qpos.stage, q_full);
    qpos.advance();
    const int next = next_work(a, item);  // fetched now, needed after the K/V loop: the atomic's latency hides
    load_kv_tiles<Traits>(a, sm, t, group, pos, spos);
    item = next;
  }
}

// Per work item, taken from shared memory with its Q tile: one of three
// paths, then the epilogue.
// - No visible key: Q released; the epilogue writes zeros and -inf.
// - Every row of this warpgroup past seq_q (a head's last tile when seq_q is
//   not a multiple of kBlockM; at decode, all but the first): no GEMMs and no
//   softmax, only the barrier protocol (the token taken and passed, every
//   stage it would have read released), so the others get the tensor cores
//   sooner. Why: decode (one query row, 8x32/8 heads x 32768 keys) 597
//   against 774 us.
// - The key blocks, the last visible one first, one `step` each. The first is
//   peeled off (kFirst: no P·V yet) so no wgmma or wgmma wait sits under a
//   branch: ptxas then keeps the S and P·V groups apart instead of waiting
//   for both. kHalfS: the first block's keys past kBN / 2 are masked for
//   every row of this warpgroup (the causal diagonal, or past seqlen_k):
//   Q·Kᵀ, the mask and the softmax run kBN / 2 wide and P's upper half is
//   zero; kHalfPV: the next block's P·V then runs its first kPSteps / 2 k16
//   steps only.
// The skip loop, `step` and the tail-split test stay in this function, with
// o, st and the ring position: cut out as functions of their own, each
// compiled to other SASS (phis and compares in another order).
template <typename Traits>
__device__ __forceinline__ void consumer(const KernelArgs& a, const Smem<Traits>& sm, int cwg) {
  using Mainloop = FwdConsumerMainloop<Traits>;
  constexpr int kBN = Traits::kBlockN;
  constexpr int kD = Traits::kHeadDim;
  Mainloop mainloop(a, sm, cwg);
  RingPos<Traits::kStages>& pos = mainloop.pos;
  RingPos<Traits::kQStages> qpos;
  for (;;) {
    const uint32_t q_stage = qpos.stage;
    mbar_wait(sm.q_full(q_stage), qpos.phase);
    qpos.advance();
    // Shuffled from lane 0 so the compiler knows it is warp-uniform: wgmma
    // under control flow it cannot prove uniform gets serialised (C7520).
    const int item = warp_uniform<int>(sm.tile_slot[q_stage * Traits::kSlotInts]);
    if (item == kNoMoreWork) break;
    const uint32_t desc_q = mainloop.desc_q0 + ((q_stage * Traits::kQBytes) >> 4);
    const Tile t = [&] {
      if constexpr (Traits::kVarlen) return published_tile<Traits>(sm, q_stage);
      else return decode_tile<Traits>(a, item);
    }();
    const int n_count = t.n_hi - t.n_lo;
    const int wg_row0 = t.m_block * Traits::kBlockM + cwg * 64;  // first query row of this warpgroup
    const int row0 = wg_row0 + mainloop.row_in_wg;
    const int seqlen_q = seqlen_q_of<Traits>(a, t);
    const ConsumerTile w{t, n_count, q_stage, desc_q, wg_row0, row0};
    const HeadScales hs = head_scales<Traits>(a, t);

    float o[Traits::kORegs];
#pragma unroll
    for (int r = 0; r < Traits::kORegs; ++r) o[r] = 0.f;
    RowState st = {{-INFINITY, -INFINITY}, {0.f, 0.f}};

    if (n_count <= 0) {  // no visible key (n_hi < n_lo cannot be planned; the producer loads nothing either way)
      if (mainloop.warp_leader) mbar_arrive(sm.q_empty(q_stage));
    } else if (wg_row0 >= seqlen_q) {  // no row in the sequence: the barrier protocol only
      RingPos<Traits::kStages> prev;
      for (int i = 0; i < n_count; ++i) {
        mbar_wait(sm.k_full(pos.stage), pos.phase);
        if (i > 0) mbar_wait(sm.v_full(prev.stage), prev.phase);
        mainloop.take_turn();
        mainloop.pass_turn();
        if (mainloop.warp_leader) {
          if (i == n_count - 1) mbar_arrive(sm.q_empty(q_stage));
          mbar_arrive(sm.k_empty(pos.stage));
          if (i > 0) mbar_arrive(sm.v_empty(prev.stage));
        }
        prev = pos;
        pos.advance();
      }
      mbar_wait(sm.v_full(prev.stage), prev.phase);
      if (mainloop.warp_leader) mbar_arrive(sm.v_empty(prev.stage));
    } else {
      typename Mainloop::PFragments p;  // P of the previous key block, packed as wgmma A fragments
      RingPos<Traits::kStages> prev;
      typename Mainloop::QFragments qf;
      if constexpr (Traits::kQInRegs) mainloop.load_q_fragments(w, qf);
      // Keys of the first block (the last visible one) inside the sequence: a
      // packed batch zeroes the rest of its V before their P·V (issue_gemms).
      const int tail_rows = Traits::kVarlen ? min(kBN, seqlen_k_of<Traits>(a, t) - (t.n_hi - 1) * kBN) : kBN;
      // One key block, i-th from the last visible one (kFirst, kHalfS, kHalfPV: above).
      auto step = [&](auto first, auto half_s, auto half_pv, int i) {
        constexpr bool kFirst = decltype(first)::value;
        constexpr bool kHalfS = decltype(half_s)::value;
        static_assert(kFirst || !kHalfS, "only the first block can be half");
        constexpr int kSN = kHalfS ? kBN / 2 : kBN;  // S columns computed
        const int n_block = t.n_hi - 1 - i;
        float s[kSN / 2];
        mainloop.template issue_gemms<kFirst, decltype(half_pv)::value, kSN>(w, s, qf, p, prev, o,
                                                                             i == 1 ? tail_rows : kBN);
        wgmma_wait<kFirst ? 0 : 1>();  // S done; P·V may still run
        pin_registers(s);
        mainloop.release_k(w, i);
        mask_scores<Traits, kSN>(a, t, n_block, wg_row0, row0, mainloop.lane, s);
        float alpha[2];
        // (16-bit: the launch's scale itself; read through hs, the short-causal
        // kernel compiled to other SASS.)
        const bool moved = online_softmax<kSN, Traits::kPolyExpEvery, Traits::kRescaleSlack, Traits::kExpOffset,
                                          !Traits::kSumByGemm, Traits::kIntMax, Traits::kPBits>(
            s, st, Traits::kFp8 ? hs.scale_log2 : a.scale_log2, alpha);
        if constexpr (!kFirst) {
          finish_pv<Traits>(o, p, mainloop.warp_leader, sm.v_empty(prev.stage));  // P_{j-1}·V_{j-1}
          // With the rescale slack a row max rarely moves past the first key
          // blocks: the kD/2 multiplies (and the two exponentials for alpha)
          // are skipped when no row of the warp moved (warp-uniform).
          if constexpr (Traits::kSumByGemm) add_gemm_sums<Traits>(o, st);  // P_{j-1}'s, against the same max as O
          if (moved) {
            rescale_rows<kD>(o, alpha);
            if constexpr (Traits::kSumByGemm) {
              st.sum[0] *= alpha[0];
              st.sum[1] *= alpha[1];
            }
          }
        }
        pack_p<Traits, kHalfS, kSN>(s, p);
        prev = pos;
        pos.advance();
      };
      using Yes = std::true_type;
      using No = std::false_type;
      // Whether the first block is half for this warpgroup: its keys from kBN / 2 on
      // lie past seqlen_k, or past the causal limit of the warpgroup's last row that
      // is stored (warpgroup-uniform, as wgmma needs). The two paths join after the
      // second block, with no wgmma in flight.
      if constexpr (Traits::kHalfFirstBlock) {
        const int half_n0 = (t.n_hi - 1) * kBN + kBN / 2;  // the first key of the upper half
        const int last_row = min(wg_row0 + 63, seqlen_q - 1);
        if (half_n0 >= seqlen_k_of<Traits>(a, t) || (a.causal && last_row + causal_offset_of<Traits>(a, t) < half_n0)) {
          step(Yes{}, Yes{}, No{}, 0);
          if (n_count > 1) step(No{}, No{}, Yes{}, 1);
        } else {
          step(Yes{}, No{}, No{}, 0);
          if (n_count > 1) step(No{}, No{}, No{}, 1);
        }
        for (int i = 2; i < n_count; ++i) step(No{}, No{}, No{}, i);
      } else {
        step(Yes{}, No{}, No{}, 0);
        for (int i = 1; i < n_count; ++i) step(No{}, No{}, No{}, i);
      }
      mainloop.last_pv(o, p, prev, n_count == 1 ? tail_rows : kBN);  // O += P·V of the last key block
      if constexpr (Traits::kSumByGemm) add_gemm_sums<Traits>(o, st);
    }

    if constexpr (!Traits::kSumByGemm) finish_row_sums(st);  // (a GEMM's sums are whole rows already)
    // A piece of a split tile stores only once merged, by the warps that count
    // last (decoded again here, not kept in registers through the key loop).
    if constexpr (Traits::kTailSplit) {
      if (item >= a.split.first_tile) {
        const TailPiece piece = piece_of(a, item);
        if (piece.count > 1 &&
            (wg_row0 >= seqlen_q || !merge_tail_piece<Traits>(a, piece, cwg, mainloop.warp, mainloop.lane,
                                                              Traits::kFp8 ? hs.scale_log2 : a.scale_log2, o, st)))
          continue;
      }
    }
    store_tile<Traits>(a, t, row0, mainloop.lane, o, st, hs);
  }
  mainloop.drain();
}

}  // namespace detail

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    flash_fwd_sm90_kernel(const __grid_constant__ KernelArgs args) {
  using namespace detail;
  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // TMA's 128-byte swizzle and the wgmma descriptors assume 1024-byte aligned
  // tiles; the dynamic base is not guaranteed to be, so round it up (the
  // launch asks for 1024 spare bytes).
  const uint32_t raw = static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw));
  const uint32_t base = (raw + 1023) & ~1023u;
  Smem<Traits> sm;
  sm.q = base + Traits::kOffQ;
  sm.k = base + Traits::kOffK;
  sm.v = base + Traits::kOffV;
  sm.vs = base + Traits::kOffVs;
  sm.bar = base + Traits::kOffBarriers;
  sm.tile_slot = reinterpret_cast<volatile int*>(smem_raw + (base - raw) + Traits::kOffTileSlot);

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < Traits::kQStages; ++s) {
      mbar_init(sm.q_full(s), 1);
      // (kTransposeV: the transposing warps read the work item with the Q tile too.)
      mbar_init(sm.q_empty(s), Traits::kConsumerWarps + (Traits::kTransposeV ? Traits::kTransposeWarps : 0));
    }
#pragma unroll
    for (int s = 0; s < Traits::kStages; ++s) {
      mbar_init(sm.k_full(s), 1);
      mbar_init(sm.k_empty(s), Traits::kConsumerWarps);
      mbar_init(sm.v_full(s), Traits::kTransposeV ? Traits::kTransposeWarps : 1);
      mbar_init(sm.v_empty(s), Traits::kConsumerWarps);
    }
    if constexpr (Traits::kTransposeV) {
#pragma unroll
      for (int s = 0; s < Traits::kVsStages; ++s) {
        mbar_init(sm.vs_full(s), 1);
        mbar_init(sm.vs_empty(s), Traits::kTransposeWarps);
      }
    }
    fence_barrier_init();
  }
  if constexpr (Traits::kSumByGemm) {
    // Vᵀ's rows of ones (e4m3 1.0 is 0x38) after each column block's kHeadDim
    // rows, in every stage: written once here, never loaded by TMA; the fence
    // orders them before wgmma (the async proxy) reads them.
    constexpr int kWords = 8 * Traits::kVColKeys / 4;  // one column block's 8 rows
    uint32_t* v = reinterpret_cast<uint32_t*>(smem_raw + (base - raw) + Traits::kOffV);
    for (int i = threadIdx.x; i < Traits::kStages * Traits::kVColBlocks * kWords; i += Traits::kThreads)
      v[(i / kWords) * (Traits::kVColBytes / 4) + Traits::kHeadDim * Traits::kVColKeys / 4 + i % kWords] = 0x38383838u;
    fence_proxy_async_shared();
  }
  __syncthreads();
  // Launched with programmatic stream serialization (flash_fwd_sm90_launch.cuh),
  // this block may have started in the previous kernel's tail, as SMs freed
  // up: everything above overlapped it. Every global access (inputs, the
  // tile counter the previous launch resets, O and lse) comes after the wait.
  // Every block is resident by now (one per SM), so the next kernel may be
  // scheduled: its blocks take SMs only as this kernel's blocks exit.
  grid_launch_dependents();
  grid_dependency_wait();

  // Warp-uniform by construction; the shuffle tells the compiler so (else the
  // consumer branch counts as divergent and its wgmma get serialised, C7520).
  const int warpgroup = warp_uniform(static_cast<int>(threadIdx.x / 128));
  if (warpgroup == 0) {
    setmaxnreg_dec<Traits::kProducerRegs>();
    if (threadIdx.x == 0) {
      producer<Traits>(args, sm);
    } else if constexpr (Traits::kTransposeV) {  // warps 1..kTransposeWarps (warp 0's other lanes are idle)
      const int warp = static_cast<int>(threadIdx.x / 32);
      if (warp >= 1 && warp <= Traits::kTransposeWarps) transpose_v<Traits>(args, sm, warp - 1, threadIdx.x % 32);
    }
  } else {
    setmaxnreg_inc<Traits::kConsumerRegs>();
    consumer<Traits>(args, sm, warpgroup - 1);
  }
}

}  // namespace attnprof::flash_sm90
