// What the Hopper forward kernel (flash_fwd_sm90_kernel.cuh) reads, as the
// launch layer (flash_fwd_sm90_launch.cuh) fills it.
#pragma once

#include <cuda.h>

#include "kernels/flash_sm90/tail_split.h"
#include "kernels/flash_sm90/tile_order.h"
#include "kernels/flash_sm90/varlen_tiles.h"

namespace attnprof::flash_sm90 {

// What the kernel reads: the tensor maps (kernel parameters, so TMA can read
// them in place: __grid_constant__) and the sizes the launch layer derived.
// A packed variable-length batch (cu_seqlens_q set; FwdTraits::kVarlen): q
// and o [total_q][Hq][D], k and v [total_k][Hkv][D], lse [Hq][total_q]; the
// tensor maps are then [Hq][total_q][D] and [Hkv][total_k][D] (slab = head,
// row = packed row), seqlen_q and seqlen_k the longest sequence's (as
// packed.max_seqlen_q and _k), and num_n_blocks and total_tiles bounds.
struct KernelArgs {
  CUtensorMap tma_q;  // [B·Hq][Sq][D], box kBlockM rows × 64 columns
  CUtensorMap tma_k;  // [B·Hkv][Skv][D], box kBlockN rows × 64 columns
  CUtensorMap tma_v;   // 8-bit inputs: Vᵀ [B·Hkv][D][keys, padded], box 128 keys × D rows
  void* o;             // [B·Hq][Sq][D]
  float* lse;          // [B·Hq][Sq]
  PackedBatchArgs packed;  // a packed batch only (else its offsets are null)
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
  // 8-bit inputs: x = value · descale, q's per (batch, query head) [B·Hq],
  // k's and v's per (batch, KV head) [B·Hkv] (else null).
  const float* q_descale;
  const float* k_descale;
  const float* v_descale;
  float scale;
  float scale_log2;
  bool causal;
};

// The K/V head (the slab of tma_k and tma_v; the index of k_descale and
// v_descale) that (batch, query head) slab bh of a dense launch reads: query
// head h reads K/V head h / group.
__device__ __forceinline__ int dense_kv_head(const KernelArgs& a, int bh, int group) {
  return (bh / a.heads_q) * a.heads_kv + (bh % a.heads_q) / group;
}

}  // namespace attnprof::flash_sm90
