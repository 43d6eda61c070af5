// Which key blocks a block of the Hopper backward runs (device code). A tile
// is one key block of one slab (batch, KV head), numbered in the launch's
// order (bwd_block, tile_order.h). One tile per block, or (kPersistent,
// without a causal mask) one block per SM walking tiles blockIdx.x,
// blockIdx.x + gridDim.x, ...: the tiles then cost the same, so the static
// hand-out balances as the hardware's would, and a block loads the next
// tile's K, V and first Q/dO stages while it finishes the last one.
// Every role of a block (producer thread, dQ writer warps, MMA warpgroups)
// walks the same tiles with these functions; nothing passes between them.
#pragma once

#include "kernels/flash_sm90/kernel_args_bwd_sm90.h"
#include "kernels/flash_sm90/tile_order.h"

namespace attnprof::flash_sm90::bwd_detail {

// One tile's key block and the query steps that see it.
struct BwdTileWork {
  int bkv;      // slab: batch · heads_kv + KV head
  int b, hkv;
  int n0;       // first key
  int m_begin;  // first query block with a row that sees key n0
  int m_count;  // query blocks from m_begin on
  int iters;    // steps: the group's query heads × m_count
};

template <typename Traits>
__device__ __forceinline__ BwdTileWork bwd_tile_work(const BwdKernelArgs& a, int tile) {
  const BwdBlock blk = bwd_block(a.order, tile);
  BwdTileWork w;
  w.bkv = blk.slab;
  w.b = blk.slab / a.heads_kv;
  w.hkv = blk.slab % a.heads_kv;
  w.n0 = blk.n_block * Traits::kBlockN;
  w.m_begin = a.causal ? max(0, w.n0 - a.causal_offset) / Traits::kBlockM : 0;
  w.m_count = max(0, a.num_m_blocks - w.m_begin);
  w.iters = (a.heads_q / a.heads_kv) * w.m_count;
  return w;
}

// This block's tiles: blockIdx.x, then (kPersistent) every gridDim.x-th.
// With a block per tile the walk ends after the first at compile time, so
// the counts carried across tiles (steps, K/V loads) fold to constants.
__device__ __forceinline__ int first_bwd_tile() { return static_cast<int>(blockIdx.x); }
template <typename Traits>
__device__ __forceinline__ int next_bwd_tile(const BwdKernelArgs& a, int tile) {
  return Traits::kPersistent ? tile + static_cast<int>(gridDim.x) : a.tiles;
}

// Whether any of this block's tiles has a step (every key block has one when
// seqlen_q > 0, but the pipelines' hand-overs must not count on it).
template <typename Traits>
__device__ __forceinline__ bool bwd_block_has_steps(const BwdKernelArgs& a) {
  for (int tile = first_bwd_tile(); tile < a.tiles; tile = next_bwd_tile<Traits>(a, tile))
    if (bwd_tile_work<Traits>(a, tile).iters > 0) return true;
  return false;
}

}  // namespace attnprof::flash_sm90::bwd_detail
