// Which work a block of the Hopper forward takes next (device code): the
// static hand-out of whole tiles, the tile counter under causal masking, and
// the pieces of the tail split. The tile order is tile_order.h's, the split's
// plan tail_split.h's; the producer fetches and the consumers read each item
// through shared memory (flash_fwd_sm90_kernel.cuh).
#pragma once

#include "kernels/flash_sm90/kernel_args_fwd_sm90.h"
#include "kernels/flash_sm90/tail_split.h"
#include "kernels/flash_sm90/tile_order.h"
#include "kernels/flash_sm90/varlen_tiles.h"

namespace attnprof::flash_sm90::detail {

// A block's work items, passed from the producer to the consumers through
// shared memory: a whole tile (its index in tile_order.h's order, below
// split.first_tile; a packed batch's in varlen_tiles.h's), piece k of this
// block's range over the split tiles (split.first_tile + 2 · blockIdx.x + k),
// or kNoMoreWork.
constexpr int kNoMoreWork = -1;

// A tile's sequence lengths and causal offset: the launch's, or for a packed
// batch its own sequence's.
template <typename Traits>
__device__ __forceinline__ int seqlen_q_of(const KernelArgs& a, const Tile& t) {
  if constexpr (Traits::kVarlen) return t.len_q;
  else return a.seqlen_q;
}
template <typename Traits>
__device__ __forceinline__ int seqlen_k_of(const KernelArgs& a, const Tile& t) {
  if constexpr (Traits::kVarlen) return t.len_k;
  else return a.seqlen_k;
}
template <typename Traits>
__device__ __forceinline__ int causal_offset_of(const KernelArgs& a, const Tile& t) {
  if constexpr (Traits::kVarlen) return t.len_k - t.len_q;
  else return a.causal_offset;
}

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
  if (a.causal)
    t.n_hi = causal_n_hi<Traits::kBlockM, Traits::kBlockN>(t.n_hi, t.m_block, a.seqlen_q, a.causal_offset);
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

// The work item after `item`, fetched by the producer when it starts the
// item's K/V loads so that the atomic's latency hides behind them.
__device__ __forceinline__ int next_work(const KernelArgs& a, int item) {
  int next;
  if (a.tile_counter) {
    next = static_cast<int>(gridDim.x) + atomicAdd(a.tile_counter, 1);
    if (next >= a.total_tiles) next = kNoMoreWork;
  } else {
    next = next_static_work(a, item);
  }
  return next;
}

// Called once per block, after the block's last take from the counter (the
// one past the last tile). The last block to get here has seen every other
// block's last take, so no take follows: it puts the counter pair back to
// zero for the next launch on the stream (api.cpp keeps one pair per
// stream instead of zeroing one before every call).
__device__ __forceinline__ void release_tile_counter(int* counter) {
  __threadfence();  // this block's last take, before its count below
  if (atomicAdd(counter + 1, 1) == static_cast<int>(gridDim.x) - 1) {
    __threadfence();
    atomicExch(counter, 0);
    atomicExch(counter + 1, 0);
  }
}

}  // namespace attnprof::flash_sm90::detail
