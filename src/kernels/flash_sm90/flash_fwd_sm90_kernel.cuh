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
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm80_primitives.cuh"
#include "kernels/common/sm90_primitives.cuh"
#include "kernels/common/sm90_wgmma.cuh"
#include "kernels/flash_sm90/flash_sm90_traits.h"
#include "kernels/flash_sm90/softmax_sm90.cuh"
#include "kernels/flash_sm90/tail_split.h"
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
  float* split_partials;  // tail split: one slot of kSplitSlotFloats per piece (2 per block)
  int* split_counters;    // tail split: one per (split tile, consumer warp), zeroed, left zeroed
  int heads_q;
  int heads_kv;
  int seqlen_q;
  int seqlen_k;
  int causal_offset;   // seqlen_k - seqlen_q: key j visible to query i iff j <= i + offset
  TileOrder order;     // tile index -> (head, query block); holds the query blocks per head
  TailSplit split;     // the last round cut along the keys (no split: split.tiles == 0)
  int num_n_blocks;    // key blocks per head
  int total_tiles;     // query blocks per head · B · Hq
  float scale;
  float scale_log2;
  bool causal;
};

namespace detail {

using namespace kernels;

// A block's work items, passed from the producer to the consumers through
// shared memory: a whole tile (its index in tile_order.h's order, below
// split.first_tile), piece k of this block's range over the split tiles
// (split.first_tile + 2 · blockIdx.x + k), or kNoMoreWork.
constexpr int kNoMoreWork = -1;

struct Tile {
  int bh;          // batch · heads_q + query head
  int m_block;     // query block
  int n_lo, n_hi;  // key blocks n_lo .. n_hi - 1, the last first (n_hi == n_lo: the tile sees no key)
};

// The piece a work item at or past split.first_tile stands for.
__device__ __forceinline__ TailPiece piece_of(const KernelArgs& a, int item) {
  const int p = item - a.split.first_tile;
  return tail_piece(a.split, p / 2, p % 2);
}

template <typename Traits>
__device__ __forceinline__ Tile decode_tile(const KernelArgs& a, int item) {
  Tile t;
  t.n_lo = 0;
  int tile = item;
  if (Traits::kTailSplit && item >= a.split.first_tile) {  // a piece (tiles of one cost only)
    const TailPiece piece = piece_of(a, item);
    tile = a.split.first_tile + piece.split_tile;
    t.n_lo = piece.n_lo;
    t.n_hi = piece.n_hi;
  } else {
    t.n_hi = a.num_n_blocks;
  }
  const TileCoord c = tile_coord(a.order, tile);
  t.bh = c.bh;
  t.m_block = c.m_block;
  if (a.causal) {
    const int last_row = min((t.m_block + 1) * Traits::kBlockM, a.seqlen_q) - 1;
    const int last_key = last_row + a.causal_offset;
    t.n_hi = last_key < 0 ? 0 : min(t.n_hi, last_key / Traits::kBlockN + 1);
  }
  return t;
}

// This block's first work item.
__device__ __forceinline__ int first_work(const KernelArgs& a) {
  const int b = static_cast<int>(blockIdx.x);
  if (b < a.split.first_tile) return b;
  return tail_pieces(a.split, b) > 0 ? a.split.first_tile + 2 * b : kNoMoreWork;
}

// The work item after `item` without the tile counter: the next whole tile of
// the static hand-out (tile t to block t mod gridDim.x), then this block's pieces.
__device__ __forceinline__ int next_static_work(const KernelArgs& a, int item) {
  const int b = static_cast<int>(blockIdx.x);
  if (item < a.split.first_tile) {
    const int next = item + static_cast<int>(gridDim.x);
    if (next < a.split.first_tile) return next;
    return tail_pieces(a.split, b) > 0 ? a.split.first_tile + 2 * b : kNoMoreWork;
  }
  return (item - a.split.first_tile) % 2 == 0 && tail_pieces(a.split, b) == 2 ? item + 1 : kNoMoreWork;
}

// Floats of one tail-split slot: per consumer thread its O accumulator, then
// its two rows' max and (quad-complete) sum, thread-fastest (coalesced).
template <typename Traits>
inline constexpr int kSplitSlotFloats = 128 * Traits::kConsumerWarpgroups * (Traits::kORegs + 4);

// A piece of a split tile: this warp's rows of O (unnormalised), max and sum
// into the piece's slot, then counted on the tile's counter for this warp.
// Returns false unless this warp counted last; then o and st hold every
// piece's rows merged, slot by slot in block order, as one whole tile would.
template <typename Traits>
__device__ __forceinline__ bool merge_tail_piece(const KernelArgs& a, const TailPiece& t, int cwg, int warp, int lane,
                                                 float (&o)[Traits::kORegs], RowState& st) {
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
      w[i] = m == -INFINITY ? 0.f : kernels::exp2_approx((m - mx[i]) * a.scale_log2);
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
template <typename Element, int kD>
__device__ __forceinline__ void store_row(const float (&o)[kD / 2], int r, float inv, Element* dst, int q,
                                          bool store) {
  static_assert(kD % 32 == 0, "whole groups of 4 8-column blocks");
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
  int item = first_work(a);
  for (;;) {
    // The consumers have issued their last read of the Q tile that used this
    // stage (and read its work item long before).
    mbar_wait(sm.q_empty(qpos.stage), qpos.phase ^ 1);
    const uint32_t q_full = sm.q_full(qpos.stage);
    sm.tile_slot[qpos.stage] = item;
    if (item == kNoMoreWork) {
      mbar_arrive(q_full);  // the end marker
      if (a.tile_counter) release_tile_counter(a.tile_counter);
      return;
    }
    const Tile t = decode_tile<Traits>(a, item);
    if (t.n_hi > t.n_lo) {
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
    int next;
    if (a.tile_counter) {
      next = static_cast<int>(gridDim.x) + atomicAdd(a.tile_counter, 1);
      if (next >= a.total_tiles) next = kNoMoreWork;
    } else {
      next = next_static_work(a, item);
    }
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
    for (int n = t.n_hi - 1; n >= t.n_lo; --n) {
      const uint32_t kv_off = pos.stage * Traits::kKVBytes;
      load_kv(&a.tma_k, sm.k + kv_off, sm.k_full(pos.stage), sm.k_empty(pos.stage), n);
      load_kv(&a.tma_v, sm.v + kv_off, sm.v_full(pos.stage), sm.v_empty(pos.stage), n);
      pos.advance();
    }
    item = next;
  }
}

template <typename Traits>
__device__ __forceinline__ void consumer(const KernelArgs& a, const Smem<Traits>& sm, int cwg) {
  using Element = typename Traits::Element;
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
  auto uniform = [](uint32_t x) { return warp_uniform(x); };

  // Issue order among the consumers: a token passed round the ring. Consumer
  // c waits on barrier c (its own 128 threads + the 128 of consumer c - 1
  // arriving), issues its GEMMs, then arrives on barrier c + 1. Consumer 0
  // goes first: the last consumer pre-arrives on barrier 0 once, and every
  // later arrival pairs with one sync (see the end of this function).
  constexpr int kTokenThreads = 2 * 128;
  // Why the token: without it -8 to -11% at head_dim 64 full, +2% at
  // 8x16x1024x64 causal, -4% at 4x16x4096x128 (H200).
  const int my_barrier = Traits::kSchedulerBarrier + cwg;
  const int next_barrier = Traits::kSchedulerBarrier + (cwg + 1) % kNumConsumers;
  if (cwg == kNumConsumers - 1) named_bar_arrive(Traits::kSchedulerBarrier, kTokenThreads);

  RingPos<Traits::kStages> pos;
  RingPos<Traits::kQStages> qpos;
  for (;;) {
    const uint32_t q_stage = qpos.stage;
    mbar_wait(sm.q_full(q_stage), qpos.phase);
    qpos.advance();
    // Shuffled from lane 0 so the compiler knows it is warp-uniform: wgmma
    // under control flow it cannot prove uniform gets serialised (C7520).
    const int item = warp_uniform<int>(sm.tile_slot[q_stage]);
    if (item == kNoMoreWork) break;
    const uint32_t desc_q = desc_q0 + ((q_stage * Traits::kQBytes) >> 4);
    const Tile t = decode_tile<Traits>(a, item);
    const int n_count = t.n_hi - t.n_lo;
    const int wg_row0 = t.m_block * kBM + cwg * 64;  // first query row of this warpgroup
    const int row0 = wg_row0 + row_in_wg;

    float o[Traits::kORegs];
#pragma unroll
    for (int r = 0; r < Traits::kORegs; ++r) o[r] = 0.f;
    RowState st = {{-INFINITY, -INFINITY}, {0.f, 0.f}};

    if (n_count <= 0) {  // no visible key (n_hi < n_lo cannot be planned; the producer loads nothing either way)
      if (warp_leader) mbar_arrive(sm.q_empty(q_stage));
    } else if (wg_row0 >= a.seqlen_q) {
      // Every row of this warpgroup lies past seq_q (the last tile of a head
      // when seq_q is not a multiple of kBlockM; at decode, all but the
      // first): no GEMMs and no softmax. It keeps the barrier protocol only,
      // taking and passing the token and releasing every stage it would have
      // read, so the others get the tensor cores sooner. Why: decode (one
      // query row, 8x32/8 heads x 32768 keys) 597 against 774 us.
      RingPos<Traits::kStages> prev;
      for (int i = 0; i < n_count; ++i) {
        mbar_wait(sm.k_full(pos.stage), pos.phase);
        if (i > 0) mbar_wait(sm.v_full(prev.stage), prev.phase);
        named_bar_sync(my_barrier, kTokenThreads);
        named_bar_arrive(next_barrier, kTokenThreads);
        if (warp_leader) {
          if (i == n_count - 1) mbar_arrive(sm.q_empty(q_stage));
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
      // Q as wgmma A fragments (Traits::kQInRegs): this warp's 16 rows, one
      // ldmatrix.x4 per k16 step. Lanes 0-7 / 8-15 address rows 0-7 / 8-15 of
      // the step's first 8 columns, lanes 16-31 the same rows of the next 8:
      // registers 0..3 then hold a[0..3] of sm90_wgmma.cuh's A layout. The
      // tile is 128-byte swizzled (16-byte chunk c of row r at c ^ (r % 8)).
      uint32_t qf[Traits::kQInRegs ? Traits::kQKSteps : 1][4];
      if constexpr (Traits::kQInRegs) {
        const int r = cwg * 64 + 16 * warp + (lane % 8) + 8 * ((lane / 8) % 2);  // row in the Q tile
        const uint32_t row_base = sm.q_tile(q_stage) + r * 128;
#pragma unroll
        for (int ks = 0; ks < Traits::kQKSteps; ++ks) {
          const int chunk = 2 * ks + lane / 16;  // 16-byte chunk along head_dim
          ldmatrix_x4(qf[ks], row_base + (chunk / 8) * Traits::kQColBytes + (((chunk % 8) ^ (r % 8)) << 4));
        }
        // The warp's reads are done (ldmatrix is warp-collective): the
        // producer may load the tile after next into this buffer.
        if (warp_leader) mbar_arrive(sm.q_empty(q_stage));
      }
      // One key block, i-th from the last visible one. The first is peeled off
      // (kFirst: no P·V yet) so no wgmma or wgmma wait sits under a branch:
      // ptxas then keeps the S and P·V groups apart instead of waiting for both.
      //
      // kHalfS: this block's keys past the first kBN / 2 are masked for every
      // row of this warpgroup (the causal diagonal, or past seqlen_k), and
      // only the first block can be so: Q·Kᵀ, the mask and the softmax run
      // kBN / 2 wide and P's upper half is zero. kHalfPV: the P·V of the
      // previous block, which was such a block, runs its first kPSteps / 2
      // k16 steps only.
      auto step = [&](auto first, auto half_s, auto half_pv, int i) {
        constexpr bool kFirst = decltype(first)::value;
        constexpr bool kHalfS = decltype(half_s)::value;
        constexpr bool kHalfPV = decltype(half_pv)::value;
        static_assert(kFirst || !kHalfS, "only the first block can be half");
        constexpr int kSN = kHalfS ? kBN / 2 : kBN;  // S columns computed
        constexpr int kPVSteps = kHalfPV ? Traits::kPSteps / 2 : Traits::kPSteps;
        using GemmSx = Wgmma<Element, kSN>;
        const int n_block = t.n_hi - 1 - i;
        float s[kSN / 2];

        // The GEMMs' base descriptors before the waits: their shuffles and
        // moves to uniform registers then finish while this warpgroup waits.
        // Left to ptxas, the V one landed between two Q·Kᵀ wgmma in one build
        // (8x16x1024x64 causal: 276 against 286 TFLOP/s).
        const uint32_t dk = uniform(desc_k + stage_off(pos.stage));
        // (Unused with Q in registers; computed anyway, it cost the head_dim 64
        // short-causal kernel 16 instructions, 15 of them UMOV.)
        [[maybe_unused]] const uint32_t dq = Traits::kQInRegs ? 0u : uniform(desc_q);
        const uint32_t dv = kFirst ? 0u : uniform(desc_v + stage_off(prev.stage));
        mbar_wait(sm.k_full(pos.stage), pos.phase);
        if constexpr (!kFirst) mbar_wait(sm.v_full(prev.stage), prev.phase);
        named_bar_sync(my_barrier, kTokenThreads);  // my turn to use the tensor cores
        wgmma_fence();
#pragma unroll
        for (int ks = 0; ks < Traits::kQKSteps; ++ks) {
          if constexpr (Traits::kQInRegs)
            GemmSx::template rs<0>(s, qf[ks], desc(dk + k_step(ks)), ks > 0);
          else
            GemmSx::template ss<0>(s, desc(dq + q_step(ks)), desc(dk + k_step(ks)), ks > 0);
        }
        wgmma_commit();
        if constexpr (!kFirst) {
#pragma unroll
          for (int kk = 0; kk < kPVSteps; ++kk)
            GemmO::template rs<1>(o, p[kk], desc(dv + ((kk * 16 * 128) >> 4)), 1);
          wgmma_commit();
        }
        named_bar_arrive(next_barrier, kTokenThreads);  // the next consumer's turn

        wgmma_wait<kFirst ? 0 : 1>();  // S done; P·V may still run
        pin_registers(s);
        if (warp_leader) {
          if (!Traits::kQInRegs && i == n_count - 1) mbar_arrive(sm.q_empty(q_stage));  // last read of this Q tile
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
          mask_columns<kSN>(s, lane, limit);
        }

        float alpha[2];
        const bool moved =
            online_softmax<kSN, Traits::kPolyExpEvery, Traits::kRescaleSlack>(s, st, a.scale_log2, alpha);

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
        if constexpr (kHalfS) {
          uint32_t lower[Traits::kPSteps / 2][4];  // P of the computed keys; the rest is zero
          pack_a_fragments<Element>(s, lower);
#pragma unroll
          for (int kk = 0; kk < Traits::kPSteps; ++kk)
#pragma unroll
            for (int r = 0; r < 4; ++r) p[kk][r] = kk < Traits::kPSteps / 2 ? lower[kk][r] : 0u;
        } else {
          pack_a_fragments<Element>(s, p);
        }
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
        const int last_row = min(wg_row0 + 63, a.seqlen_q - 1);
        if (half_n0 >= a.seqlen_k || (a.causal && last_row + a.causal_offset < half_n0)) {
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

    // Epilogue: normalise and store straight from registers (16-byte stores
    // after a transpose within each quad, store_row below; rows past
    // seqlen_q are skipped), then the log-sum-exp. A row that saw no
    // key has sum 0: it gets zeros and -inf. A piece of a split tile stores
    // only once merged, by the warps that count last (decoded again here, not
    // kept in registers through the key loop).
    finish_row_sums(st);
    if constexpr (Traits::kTailSplit) {
      if (item >= a.split.first_tile) {
        const TailPiece piece = piece_of(a, item);
        if (piece.count > 1 &&
            (wg_row0 >= a.seqlen_q || !merge_tail_piece<Traits>(a, piece, cwg, warp, lane, o, st)))
          continue;
      }
    }
    Element* out = static_cast<Element*>(a.o) + static_cast<int64_t>(t.bh) * a.seqlen_q * kD;
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      const int row = row0 + 8 * r;
      const float inv = st.sum[r] > 0.f ? 1.f / st.sum[r] : 0.f;
      store_row<Element, kD>(o, r, inv, out + static_cast<int64_t>(row) * kD, lane % 4, row < a.seqlen_q);
      if (row < a.seqlen_q && lane % 4 == 0)
        a.lse[static_cast<int64_t>(t.bh) * a.seqlen_q + row] =
            st.sum[r] > 0.f ? st.max[r] * a.scale + logf(st.sum[r]) : -INFINITY;
    }
  }
  // The last consumer's last arrival on barrier 0 is still pending: take it, so
  // every barrier phase completes before the block exits.
  if (cwg == 0) named_bar_sync(Traits::kSchedulerBarrier, kTokenThreads);
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
