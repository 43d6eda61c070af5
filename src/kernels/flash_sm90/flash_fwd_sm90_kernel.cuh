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
// memory with the Q barrier.
//
// Warpgroups 1..kConsumerWarpgroups, the consumers, take the registers
// (setmaxnreg.inc), 64 Q rows each. Per key block j they issue S_j = Q·K_jᵀ and O += P_{j-1}·V_{j-1}
// back to back (wgmma, async), then wait for S_j only and run the softmax of
// S_j while the tensor cores still work on P_{j-1}·V_{j-1}: the exponentials
// of one block overlap the GEMMs of the previous one. Across the consumers,
// named barriers let one issue its GEMMs at a time, in turn, so one
// warpgroup's softmax runs while another's GEMMs occupy the tensor cores
// (ping-pong).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm90_primitives.cuh"
#include "kernels/common/sm90_wgmma.cuh"
#include "kernels/flash_sm90/flash_sm90_traits.h"
#include "kernels/flash_sm90/softmax_sm90.cuh"
#include "kernels/flash_sm90/tile_order.h"

namespace attnprof::flash_sm90 {

// What the kernel reads: the tensor maps (kernel parameters, so TMA can read
// them in place: __grid_constant__) and the sizes the launch layer derived.
struct KernelArgs {
  CUtensorMap tma_q;  // [B·Hq][Sq][D], box kBlockM rows × 64 columns
  CUtensorMap tma_k;  // [B·Hkv][Skv][D], box kBlockN rows × 64 columns
  CUtensorMap tma_v;
  void* o;             // [B·Hq][Sq][D]
  float* lse;          // [B·Hq][Sq]
  int* tile_counter;   // see FwdParams
  int heads_q;
  int heads_kv;
  int seqlen_q;
  int seqlen_k;
  int causal_offset;   // seqlen_k - seqlen_q: key j visible to query i iff j <= i + offset
  TileOrder order;     // tile index -> (head, query block); holds the query blocks per head
  int num_n_blocks;    // key blocks per head
  int total_tiles;     // query blocks per head · B · Hq
  float scale;
  float scale_log2;
  bool causal;
};

namespace detail {

using namespace kernels;

struct Tile {
  int bh;        // batch · heads_q + query head
  int m_block;   // query block
  int n_blocks;  // key blocks 0..n_blocks-1 hold a visible key (0: the tile sees none)
};

template <typename Traits>
__device__ __forceinline__ Tile decode_tile(const KernelArgs& a, int tile) {
  const TileCoord c = tile_coord(a.order, tile);
  Tile t;
  t.bh = c.bh;
  t.m_block = c.m_block;
  t.n_blocks = a.num_n_blocks;
  if (a.causal) {
    const int last_row = min((t.m_block + 1) * Traits::kBlockM, a.seqlen_q) - 1;
    const int last_key = last_row + a.causal_offset;
    t.n_blocks = last_key < 0 ? 0 : min(t.n_blocks, last_key / Traits::kBlockN + 1);
  }
  return t;
}

// Shared-memory addresses (shared window, 1024-byte aligned tiles).
template <typename Traits>
struct Smem {
  uint32_t q, k, v, bar;
  volatile int* tile_slot;

  static constexpr uint32_t kKV = 16 * Traits::kQStages;  // the K/V barriers follow the Q ones
  __device__ uint32_t q_tile(uint32_t s) const { return q + s * Traits::kQBytes; }
  __device__ uint32_t q_full(uint32_t s) const { return bar + 8 * s; }
  __device__ uint32_t q_empty(uint32_t s) const { return bar + 8 * (Traits::kQStages + s); }
  __device__ uint32_t k_full(uint32_t s) const { return bar + kKV + 8 * s; }
  __device__ uint32_t k_empty(uint32_t s) const { return bar + kKV + 8 * (Traits::kStages + s); }
  __device__ uint32_t v_full(uint32_t s) const { return bar + kKV + 8 * (2 * Traits::kStages + s); }
  __device__ uint32_t v_empty(uint32_t s) const { return bar + kKV + 8 * (3 * Traits::kStages + s); }
};

// Position in the K/V ring: stage and the parity of its current phase.
template <int kStages>
struct RingPos {
  uint32_t stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// Called once per block, after the block's last take from the counter (the
// one past the last tile). The last block to get here has seen every other
// block's last take, so no take follows: it puts the counter pair back to
// zero for the next launch on the stream (ops_sm90.cpp keeps one pair per
// stream instead of zeroing one before every call).
__device__ __forceinline__ void release_tile_counter(int* counter) {
  __threadfence();  // this block's last take, before its count below
  if (atomicAdd(counter + 1, 1) == static_cast<int>(gridDim.x) - 1) {
    __threadfence();
    atomicExch(counter, 0);
    atomicExch(counter + 1, 0);
  }
}

template <typename Traits>
__device__ __forceinline__ void producer(const KernelArgs& a, const Smem<Traits>& sm) {
  prefetch_tensor_map(&a.tma_q);
  prefetch_tensor_map(&a.tma_k);
  prefetch_tensor_map(&a.tma_v);
  const int group = a.heads_q / a.heads_kv;
  RingPos<Traits::kStages> pos;
  RingPos<Traits::kQStages> qpos;
  int tile = blockIdx.x;
  for (;;) {
    // The consumers have issued their last read of the Q tile that used this
    // stage (and read its tile index long before).
    mbar_wait(sm.q_empty(qpos.stage), qpos.phase ^ 1);
    const uint32_t q_full = sm.q_full(qpos.stage);
    sm.tile_slot[qpos.stage] = tile;
    if (tile >= a.total_tiles) {
      mbar_arrive(q_full);  // the end marker: no more tiles
      if (a.tile_counter) release_tile_counter(a.tile_counter);
      return;
    }
    const Tile t = decode_tile<Traits>(a, tile);
    if (t.n_blocks > 0) {
      mbar_arrive_expect_tx(q_full, Traits::kQBytes);
#pragma unroll
      for (int cb = 0; cb < Traits::kColBlocks; ++cb)
        tma_load_3d(sm.q_tile(qpos.stage) + cb * Traits::kQColBytes, &a.tma_q, q_full, cb * Traits::kColElems,
                    t.m_block * Traits::kBlockM, t.bh);
    } else {
      mbar_arrive(q_full);  // nothing visible: the consumers write zeros
    }
    qpos.advance();
    // Fetched now, needed after the K/V loop: the atomic's latency hides.
    const int next = a.tile_counter ? static_cast<int>(gridDim.x) + atomicAdd(a.tile_counter, 1)
                                    : tile + static_cast<int>(gridDim.x);
    const int kv_slab = (t.bh / a.heads_q) * a.heads_kv + (t.bh % a.heads_q) / group;
    // K and V of one key block into the current stage, each once its buffer is free.
    auto load_kv = [&](const CUtensorMap* map, uint32_t dst, uint32_t full, uint32_t empty, int n) {
      mbar_wait(empty, pos.phase ^ 1);
      mbar_arrive_expect_tx(full, Traits::kKVBytes);
#pragma unroll
      for (int cb = 0; cb < Traits::kColBlocks; ++cb)
        tma_load_3d(dst + cb * Traits::kKVColBytes, map, full, cb * Traits::kColElems, n * Traits::kBlockN,
                    kv_slab);
    };
    for (int n = t.n_blocks - 1; n >= 0; --n) {
      const uint32_t kv_off = pos.stage * Traits::kKVBytes;
      load_kv(&a.tma_k, sm.k + kv_off, sm.k_full(pos.stage), sm.k_empty(pos.stage), n);
      load_kv(&a.tma_v, sm.v + kv_off, sm.v_full(pos.stage), sm.v_empty(pos.stage), n);
      pos.advance();
    }
    tile = next;
  }
}

template <typename Traits>
__device__ __forceinline__ void consumer(const KernelArgs& a, const Smem<Traits>& sm, int cwg) {
  using Element = typename Traits::Element;
  using GemmS = Wgmma<Element, Traits::kBlockN>;
  using GemmO = Wgmma<Element, Traits::kHeadDim>;
  constexpr int kBM = Traits::kBlockM;
  constexpr int kBN = Traits::kBlockN;
  constexpr int kD = Traits::kHeadDim;
  constexpr int kNumConsumers = Traits::kConsumerWarpgroups;

  const int tid = threadIdx.x % 128;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const bool warp_leader = lane == 0;
  const int row_in_wg = 16 * warp + lane / 4;  // this thread's rows: + 0 and + 8

  // Descriptors (sm90_primitives.cuh): Q rows of this warpgroup and K are
  // K-major (head_dim contiguous); V is the MN-major B of P·V (head_dim, its N,
  // contiguous), column blocks kKVColBytes apart. Only their low words move:
  // the k16 steps and ring stages add byte offsets / 16 to the address field.
  const uint32_t desc_q0 = smem_desc_sw128_lo(sm.q + cwg * 64 * 128, 16);  // Q stage 0
  const uint32_t desc_k = smem_desc_sw128_lo(sm.k, 16);
  const uint32_t desc_v = smem_desc_sw128_lo(sm.v, Traits::kKVColBytes);
  auto q_step = [](int ks) { return static_cast<uint32_t>(((ks / 4) * Traits::kQColBytes + (ks % 4) * 32) >> 4); };
  auto k_step = [](int ks) { return static_cast<uint32_t>(((ks / 4) * Traits::kKVColBytes + (ks % 4) * 32) >> 4); };
  auto stage_off = [](uint32_t s) { return static_cast<uint32_t>((s * Traits::kKVBytes) >> 4); };
  auto desc = [](uint32_t lo) { return smem_desc_sw128_join(lo, 1024); };
  // A GEMM's base descriptor, shuffled from lane 0 so that ptxas knows it is
  // warp-uniform: it then builds the per-k16-step descriptors in uniform
  // registers (UIADD3, UMOV) instead of general ones each moved over by R2UR
  // before its wgmma (d128 bf16: 130 -> 36 R2UR, 2584 -> 2472 instructions).
#ifdef ATTNPROF_SM90_DESC_IN_GENERAL_REGS  // tuning builds (scripts/build_sm90_alt.py): left to ptxas
  auto uniform = [](uint32_t x) { return x; };
#else
  auto uniform = [](uint32_t x) { return warp_uniform(x); };
#endif

  // Issue order among the consumers: a token passed round the ring. Consumer
  // c waits on barrier c (its own 128 threads + the 128 of consumer c - 1
  // arriving), issues its GEMMs, then arrives on barrier c + 1. Consumer 0
  // goes first: the last consumer pre-arrives on barrier 0 once, and every
  // later arrival pairs with one sync (see the end of this function).
  constexpr int kTokenThreads = 2 * 128;
  // Without the token (consumers issue when ready): -8 to -11% at head_dim 64
  // full, +2% at 8x16x1024x64 causal, -4% at 4x16x4096x128 (H200, 2026-12-01).
#ifdef ATTNPROF_SM90_NO_PINGPONG  // tuning builds (scripts/build_sm90_alt.py): consumers issue when ready
  constexpr bool kPingPong = false;
#else
  constexpr bool kPingPong = true;
#endif
  // Skipping warpgroups whose rows all lie past seq_q: decode (one query row,
  // 8x32/8 heads x 32768 keys) 597 against 774 us; elsewhere within noise.
#ifdef ATTNPROF_SM90_NO_IDLE_SKIP  // tuning builds: warpgroups past seq_q compute as the others
  constexpr bool kSkipIdle = false;
#else
  constexpr bool kSkipIdle = true;
#endif
  const int my_barrier = Traits::kSchedulerBarrier + cwg;
  const int next_barrier = Traits::kSchedulerBarrier + (cwg + 1) % kNumConsumers;
  if (kPingPong && cwg == kNumConsumers - 1) named_bar_arrive(Traits::kSchedulerBarrier, kTokenThreads);

  RingPos<Traits::kStages> pos;
  RingPos<Traits::kQStages> qpos;
  for (;;) {
    const uint32_t q_stage = qpos.stage;
    mbar_wait(sm.q_full(q_stage), qpos.phase);
    qpos.advance();
    // Shuffled from lane 0 so the compiler knows it is warp-uniform: wgmma
    // under control flow it cannot prove uniform gets serialised (C7520).
    const int tile = warp_uniform<int>(sm.tile_slot[q_stage]);
    if (tile >= a.total_tiles) break;
    const uint32_t desc_q = desc_q0 + ((q_stage * Traits::kQBytes) >> 4);
    const Tile t = decode_tile<Traits>(a, tile);
    const int wg_row0 = t.m_block * kBM + cwg * 64;  // first query row of this warpgroup
    const int row0 = wg_row0 + row_in_wg;

    float o[Traits::kORegs];
#pragma unroll
    for (int r = 0; r < Traits::kORegs; ++r) o[r] = 0.f;
    RowState st = {{-INFINITY, -INFINITY}, {0.f, 0.f}};

    if (t.n_blocks == 0) {
      if (warp_leader) mbar_arrive(sm.q_empty(q_stage));
    } else if (kSkipIdle && wg_row0 >= a.seqlen_q) {
      // Every row of this warpgroup lies past seq_q (the last tile of a head
      // when seq_q is not a multiple of kBlockM; at decode, all but the
      // first): no GEMMs and no softmax. It keeps the barrier protocol only,
      // taking and passing the token and releasing every stage it would have
      // read, so the others get the tensor cores sooner.
      RingPos<Traits::kStages> prev;
      for (int i = 0; i < t.n_blocks; ++i) {
        mbar_wait(sm.k_full(pos.stage), pos.phase);
        if (i > 0) mbar_wait(sm.v_full(prev.stage), prev.phase);
        if constexpr (kPingPong) {
          named_bar_sync(my_barrier, kTokenThreads);
          named_bar_arrive(next_barrier, kTokenThreads);
        }
        if (warp_leader) {
          if (i == t.n_blocks - 1) mbar_arrive(sm.q_empty(q_stage));
          mbar_arrive(sm.k_empty(pos.stage));
          if (i > 0) mbar_arrive(sm.v_empty(prev.stage));
        }
        prev = pos;
        pos.advance();
      }
      mbar_wait(sm.v_full(prev.stage), prev.phase);
      if (warp_leader) mbar_arrive(sm.v_empty(prev.stage));
    } else {
      uint32_t p[Traits::kPSteps][4];  // P of the previous key block, packed as wgmma A fragments
      RingPos<Traits::kStages> prev;
      // One key block, i-th from the last visible one. The first is peeled off
      // (kFirst: no P·V yet) so no wgmma or wgmma wait sits under a branch:
      // ptxas then keeps the S and P·V groups apart instead of waiting for both.
      auto step = [&](auto first, int i) {
        constexpr bool kFirst = decltype(first)::value;
        const int n_block = t.n_blocks - 1 - i;
        float s[Traits::kSRegs];

        mbar_wait(sm.k_full(pos.stage), pos.phase);
        if constexpr (!kFirst) mbar_wait(sm.v_full(prev.stage), prev.phase);
        if constexpr (kPingPong) named_bar_sync(my_barrier, kTokenThreads);  // my turn to use the tensor cores
        const uint32_t dk = uniform(desc_k + stage_off(pos.stage));
        const uint32_t dq = uniform(desc_q);
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < Traits::kQKSteps; ++ks)
          GemmS::template ss<0>(s, desc(dq + q_step(ks)), desc(dk + k_step(ks)), ks > 0);
        wgmma_commit();
        if constexpr (!kFirst) {
          const uint32_t dv = uniform(desc_v + stage_off(prev.stage));
#pragma unroll
          for (int kk = 0; kk < Traits::kPSteps; ++kk)
            GemmO::template rs<1>(o, p[kk], desc(dv + ((kk * 16 * 128) >> 4)), 1);
          wgmma_commit();
        }
        if constexpr (kPingPong) named_bar_arrive(next_barrier, kTokenThreads);  // the next consumer's turn

        wgmma_wait<kFirst ? 0 : 1>();  // S done; P·V may still run
        pin_registers(s);
        if (warp_leader) {
          if (i == t.n_blocks - 1) mbar_arrive(sm.q_empty(q_stage));  // last read of this Q tile
          mbar_arrive(sm.k_empty(pos.stage));
        }

        // Masks: keys past the end, and under causal masking keys after the
        // query (only blocks that reach past this warpgroup's first row's limit).
        const int n0 = n_block * kBN;
        const bool tail = n0 + kBN > a.seqlen_k;
        const bool diagonal = a.causal && n0 + kBN - 1 > wg_row0 + a.causal_offset;
        if (tail || diagonal) {
          int limit[2];
#pragma unroll
          for (int r = 0; r < 2; ++r) {
            limit[r] = a.seqlen_k - 1 - n0;
            if (a.causal) limit[r] = min(limit[r], row0 + 8 * r + a.causal_offset - n0);
          }
          mask_columns<kBN>(s, lane, limit);
        }

        float alpha[2];
        const bool moved =
            online_softmax<kBN, Traits::kPolyExpEvery, Traits::kRescaleSlack>(s, st, a.scale_log2, alpha);

        if constexpr (!kFirst) {
          wgmma_wait<0>();  // P_{j-1}·V_{j-1} done: O and the P registers are free
          pin_registers(o);
#pragma unroll
          for (int kk = 0; kk < Traits::kPSteps; ++kk) pin_registers(p[kk]);
          if (warp_leader) mbar_arrive(sm.v_empty(prev.stage));
          // With the rescale slack a row max rarely moves past the first key
          // blocks: the kD/2 multiplies (and the two exponentials for alpha)
          // are skipped when no row of the warp moved (warp-uniform).
          if (moved) rescale_rows<kD>(o, alpha);
        }
        pack_a_fragments<Element>(s, p);
        prev = pos;
        pos.advance();
      };
      step(std::true_type{}, 0);
      for (int i = 1; i < t.n_blocks; ++i) step(std::false_type{}, i);
      // O += P·V of the last key block.
      mbar_wait(sm.v_full(prev.stage), prev.phase);
      const uint32_t dv = uniform(desc_v + stage_off(prev.stage));
      wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < Traits::kPSteps; ++kk)
        GemmO::template rs<1>(o, p[kk], desc(dv + ((kk * 16 * 128) >> 4)), 1);
      wgmma_commit();
      wgmma_wait<0>();
      pin_registers(o);
#pragma unroll
      for (int kk = 0; kk < Traits::kPSteps; ++kk) pin_registers(p[kk]);
      if (warp_leader) mbar_arrive(sm.v_empty(prev.stage));
    }

    // Epilogue: normalise and store straight from registers (4-byte stores;
    // rows past seqlen_q are skipped), then the log-sum-exp. A row that saw no
    // key has sum 0: it gets zeros and -inf.
    finish_row_sums(st);
    Element* out = static_cast<Element*>(a.o) + static_cast<int64_t>(t.bh) * a.seqlen_q * kD;
    const int col = 2 * (lane % 4);
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + 8 * r;
      if (row < a.seqlen_q) {
        const float inv = st.sum[r] > 0.f ? 1.f / st.sum[r] : 0.f;
        uint32_t* dst = reinterpret_cast<uint32_t*>(out + static_cast<int64_t>(row) * kD + col);
#pragma unroll
        for (int c = 0; c < kD / 8; ++c)
          dst[c * 4] = pack2<Element>(o[4 * c + 2 * r] * inv, o[4 * c + 2 * r + 1] * inv);
        if (lane % 4 == 0)
          a.lse[static_cast<int64_t>(t.bh) * a.seqlen_q + row] =
              st.sum[r] > 0.f ? st.max[r] * a.scale + logf(st.sum[r]) : -INFINITY;
      }
    }
  }
  // The last consumer's last arrival on barrier 0 is still pending: take it, so
  // every barrier phase completes before the block exits.
  if (kPingPong && cwg == 0) named_bar_sync(Traits::kSchedulerBarrier, kTokenThreads);
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
  sm.bar = base + Traits::kOffBarriers;
  sm.tile_slot = reinterpret_cast<volatile int*>(smem_raw + (base - raw) + Traits::kOffTileSlot);

  if (threadIdx.x == 0) {
#pragma unroll
    for (int s = 0; s < Traits::kQStages; ++s) {
      mbar_init(sm.q_full(s), 1);
      mbar_init(sm.q_empty(s), Traits::kConsumerWarps);
    }
#pragma unroll
    for (int s = 0; s < Traits::kStages; ++s) {
      mbar_init(sm.k_full(s), 1);
      mbar_init(sm.k_empty(s), Traits::kConsumerWarps);
      mbar_init(sm.v_full(s), 1);
      mbar_init(sm.v_empty(s), Traits::kConsumerWarps);
    }
    fence_barrier_init();
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
    if (threadIdx.x == 0) producer<Traits>(args, sm);
  } else {
    setmaxnreg_inc<Traits::kConsumerRegs>();
    consumer<Traits>(args, sm, warpgroup - 1);
  }
}

}  // namespace attnprof::flash_sm90
