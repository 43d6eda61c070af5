// The order in which the persistent Hopper kernel visits its tiles (128 query
// rows of one (batch, query head)), shared by the host, which plans it, and
// the kernel, which decodes a tile index with it.
//
// Under causal masking a tile's cost grows with its query block, and a tile
// started late keeps its SM busy after the others have run dry. Handing the
// tiles out head by head (each head's longest first) left the last head's
// longest tiles for the end: modelled on 132 SMs, the busiest SM then ran
// 6% past the average at 4×16×4096×128 and 12% at 8×16×1024×64. Handing them
// out longest first over *all* heads fixes the tail but spreads the working
// set over every head's K/V (128 MB at 4×16×4096×128, past the 50 MB L2).
// So the heads are cut into sections whose K/V fits in about 5/8 of L2 (FA3
// uses 32 MB on the 50 MB H100), and the tiles of one section go longest
// first, head fastest. The last section must still have enough work to hide
// its own longest tile: a section holds at least 2·SMs / m_blocks heads.
// Sections differ in size by at most one head, the larger ones first.
// Without causal masking the tiles cost the same, but for the last query block
// of each head when seq_q is not a multiple of the tile's rows and some
// warpgroups have no rows there (they skip their GEMMs): a section is one head
// (head by head, a head's K/V in L2 while its tiles run), and those short
// tiles go after all the others. Left in place, they fell to the same SMs
// on every pass of the static hand-out (tile t to SM t mod SMs): at
// 8×16×1024×64 (192-row tiles, 6 per head, 22·6 = 132 SMs) 22 SMs got only
// short tiles and the busiest ran 6 full tiles against an average of 5.2;
// moved to the end, 413 against 387 TFLOP/s there (H200, op level, one run).
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/common/host_device.h"

namespace attnprof::flash_sm90 {

struct TileOrder {
  int num_m_blocks = 1;   // query blocks per head
  int section_heads = 1;  // heads in a section (the first big_sections hold one more)
  int big_sections = 0;
  int short_last_heads = 0;  // > 0: the last query block of each of these heads comes after all other tiles
};

struct TileCoord {
  int bh;       // batch · heads_q + query head
  int m_block;  // query block
};

// One work item of the kernel as it runs it: query block m_block of query
// head bh against key blocks n_lo .. n_hi - 1, the last first (n_hi == n_lo:
// the tile sees no key).
struct Tile {
  int bh;  // batch · heads_q + query head (a packed batch: the query head)
  int m_block;
  int n_lo, n_hi;
  // A packed batch's tile (varlen_tiles.h; else unused): its sequence's first
  // query and key rows in the packed tensors, and its lengths.
  int q0, k0, len_q, len_k;
};

// Key blocks up to n_hi of query block m_block (kBlockM rows, seqlen_q in
// all) under a causal mask with key j visible to query i iff j <= i +
// causal_offset: none past the diagonal of the block's last row, none at all
// when that row sees no key.
template <int kBlockM, int kBlockN>
ATTNPROF_HOST_DEVICE inline int causal_n_hi(int n_hi, int m_block, int seqlen_q, int causal_offset) {
  const int last_row = std::min((m_block + 1) * kBlockM, seqlen_q) - 1;
  const int last_key = last_row + causal_offset;
  return last_key < 0 ? 0 : std::min(n_hi, last_key / kBlockN + 1);
}

// Tile index (0 .. batch_heads · num_m_blocks - 1) → (head, query block).
ATTNPROF_HOST_DEVICE inline TileCoord tile_coord(const TileOrder& o, int tile) {
  if (o.short_last_heads > 0) {  // one head per section, num_m_blocks >= 2
    const int per_head = o.num_m_blocks - 1;
    const int long_tiles = o.short_last_heads * per_head;
    if (tile >= long_tiles) return {tile - long_tiles, per_head};
    const int bh = tile / per_head;
    return {bh, per_head - 1 - (tile - bh * per_head)};
  }
  // The big sections come first; past them, count from the first small one.
  const int big_tiles = o.big_sections * (o.section_heads + 1) * o.num_m_blocks;
  const bool big = tile < big_tiles;
  const int heads = o.section_heads + (big ? 1 : 0);
  const int rest = big ? tile : tile - big_tiles;
  const int sec = rest / (heads * o.num_m_blocks);
  const int in = rest - sec * heads * o.num_m_blocks;
  const int first_bh = (big ? 0 : o.big_sections * (o.section_heads + 1)) + sec * heads;
  const int rank = in / heads;  // 0: the longest query block
  return {first_bh + (in - rank * heads), o.num_m_blocks - 1 - rank};
}

// The order for batch_heads query heads (groups of `group` sharing one K/V
// head) of num_m_blocks query blocks each, on a GPU with num_sms SMs and
// l2_bytes of L2; kv_bytes: K plus V of one K/V head. short_last_block: the
// last query block of a head costs less than the others (warpgroups idle).
inline TileOrder plan_tile_order(int batch_heads, int group, int num_m_blocks, int64_t kv_bytes,
                                 int64_t l2_bytes, int num_sms, bool causal, bool short_last_block) {
  TileOrder o;
  o.num_m_blocks = std::max(num_m_blocks, 1);
  const int heads = std::max(batch_heads, 1);
  int sections = heads;
  if (causal) {
    const int64_t budget = std::max<int64_t>(l2_bytes / 8 * 5, 1);
    const int64_t kv_heads = (heads + std::max(group, 1) - 1) / std::max(group, 1);
    const int64_t by_l2 = (kv_heads * std::max<int64_t>(kv_bytes, 0) + budget - 1) / budget;
    const int64_t min_heads = (2 * static_cast<int64_t>(std::max(num_sms, 1)) + o.num_m_blocks - 1) /
                              o.num_m_blocks;
    const int64_t by_tail = std::max<int64_t>(heads / min_heads, 1);
    sections = static_cast<int>(std::clamp<int64_t>(std::min(by_l2, by_tail), 1, heads));
  }
  o.section_heads = heads / sections;
  o.big_sections = heads % sections;
  if (!causal && short_last_block && o.num_m_blocks > 1) o.short_last_heads = heads;
  return o;
}

// The Hopper backward's blocks (flash_bwd_sm90_kernel.cuh): one per key
// block of a slab (batch · KV head), num_n_blocks per slab, each walking the
// query blocks that see its keys. Under causal masking key block n sees the
// query blocks from about n on, so its work falls with n: the same order as
// the forward's tiles with slabs for heads and key block r for rank r (the
// costliest first), sections sized by what a slab's blocks share in L2: Q and
// dO (16-bit) and the fp32 dQ sums of the group's query heads, 8 bytes per
// query row and head_dim column. Without a mask a section is one slab, its key
// blocks in order.
inline TileOrder plan_bwd_block_order(int slabs, int group, int num_n_blocks, int seqlen_q, int head_dim,
                                      int64_t l2_bytes, int num_sms, bool causal) {
  const int64_t slab_bytes = int64_t{8} * std::max(group, 1) * std::max(seqlen_q, 0) * std::max(head_dim, 0);
  return plan_tile_order(slabs, 1, num_n_blocks, slab_bytes, l2_bytes, num_sms, causal, false);
}

struct BwdBlock {
  int slab;     // batch · heads_kv + KV head
  int n_block;  // key block
};

// Block index (0 .. slabs · num_n_blocks - 1) → (slab, key block).
ATTNPROF_HOST_DEVICE inline BwdBlock bwd_block(const TileOrder& o, int block) {
  const TileCoord c = tile_coord(o, block);
  return {c.bh, o.num_m_blocks - 1 - c.m_block};
}

}  // namespace attnprof::flash_sm90
