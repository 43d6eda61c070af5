// The tiles of a packed variable-length batch (cu_seqlens) as the Hopper
// forward numbers them, shared by the kernel's producer, which walks them
// (tile_scheduler_fwd_sm90.cuh), and the host tests, which check the walk.
//
// Tiles are numbered sequence by sequence in batch order; within a
// sequence, its query blocks from the last (the longest under causal
// masking) down, query heads fastest. The launch bounds the count by
// batch · heads_q · ⌈max_seqlen_q / kBlockM⌉ (every sequence at most
// max_seqlen_q long); items past the last sequence's tiles are no work.
#pragma once

#include "kernels/common/host_device.h"
#include "kernels/flash_sm90/tile_order.h"

namespace attnprof::flash_sm90 {

// What the walk reads of a launch.
struct PackedBatchArgs {
  const int* cu_seqlens_q = nullptr;  // [batch + 1]
  const int* cu_seqlens_k = nullptr;
  int batch = 0;
  int heads_q = 1;
  int total_q = 0, total_k = 0;            // packed rows of q and of k, v
  int max_seqlen_q = 0, max_seqlen_k = 0;  // no sequence of the launch is longer
  bool causal = false;
};

ATTNPROF_HOST_DEVICE inline int load_offset(const int* p) {
#if defined(__CUDA_ARCH__)
  return __ldg(p);
#else
  return *p;
#endif
}

// A walk over the tiles for items taken in increasing order (a block's: its
// blockIdx, then from the counter), so it only moves forward and reads each
// offset once. A sequence whose offsets lie outside the tensors (edited after
// the boundary checked them, or never checked during graph capture) has no
// tiles: nothing of it is read or written.
template <int kBlockM, int kBlockN>
struct VarlenCursor {
  int b = -1;     // the sequence reached
  int first = 0;  // its first tile
  int tiles = 0;  // its tiles: query blocks · heads_q
  int q0 = 0, k0 = 0, len_q = 0, len_k = 0;

  // To the sequence holding `item` (not below the last item sought); false
  // past the last sequence.
  ATTNPROF_HOST_DEVICE bool seek(const PackedBatchArgs& a, int item) {
    while (item - first >= tiles) {
      first += tiles;
      if (++b >= a.batch) return false;
      const int q1 = load_offset(a.cu_seqlens_q + b + 1), k1 = load_offset(a.cu_seqlens_k + b + 1);
      q0 = load_offset(a.cu_seqlens_q + b);
      k0 = load_offset(a.cu_seqlens_k + b);
      const bool inside = 0 <= q0 && q0 <= q1 && q1 <= a.total_q && q1 - q0 <= a.max_seqlen_q && 0 <= k0 &&
                          k0 <= k1 && k1 <= a.total_k && k1 - k0 <= a.max_seqlen_k;
      len_q = inside ? q1 - q0 : 0;
      len_k = inside ? k1 - k0 : 0;
      tiles = (len_q + kBlockM - 1) / kBlockM * a.heads_q;
    }
    return true;
  }

  // The tile of `item` (bh: the query head), once seek(item) said it is
  // there; under causal masking bottom-right per sequence.
  ATTNPROF_HOST_DEVICE Tile tile(const PackedBatchArgs& a, int item) const {
    const int r = item - first;
    const int rank = r / a.heads_q;  // 0: the sequence's last query block
    Tile t;
    t.bh = r - rank * a.heads_q;
    t.m_block = tiles / a.heads_q - 1 - rank;
    t.n_lo = 0;
    t.n_hi = (len_k + kBlockN - 1) / kBlockN;
    t.q0 = q0;
    t.k0 = k0;
    t.len_q = len_q;
    t.len_k = len_k;
    if (a.causal) t.n_hi = causal_n_hi<kBlockM, kBlockN>(t.n_hi, t.m_block, len_q, len_k - len_q);
    return t;
  }
};

}  // namespace attnprof::flash_sm90
