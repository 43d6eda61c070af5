// Which scores of an S tile a query may see: keys past the end of the
// sequence (the tail tile) are masked, and under causal masking keys after
// the query's diagonal, bottom-right aligned: key j is visible to query i iff
// j <= i + (seqlen_k − seqlen_q), and under a sliding window (p.window > 0)
// also j > i + (seqlen_k − seqlen_q) − window. Masked scores become −inf, so
// the online softmax gives them 0; a row with no visible key keeps max −inf
// and sum 0.
#pragma once

#include <cmath>

#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

// The lengths of the sequence a block works on: the kernel's (the constant
// bank, no registers) for a batch of one length; sequence b's of a
// variable-length batch, read from its offsets (FwdParams::cu_seqlens_q/k)
// once and held.
template <bool kVarlen>
struct SeqLens {
  __device__ __forceinline__ int q(const FwdParams& p) const { return p.seqlen_q; }
  __device__ __forceinline__ int k(const FwdParams& p) const { return p.seqlen_k; }
};
template <>
struct SeqLens<true> {
  int len_q, len_k;
  __device__ __forceinline__ int q(const FwdParams&) const { return len_q; }
  __device__ __forceinline__ int k(const FwdParams&) const { return len_k; }
};

// Reads the sizes from the kernel's parameters (constant bank), so the mask
// holds no registers of its own (a variable-length batch's: its sequence's two lengths).
template <bool kCausal, bool kVarlen = false>
struct KeyMask {
  const FwdParams& p;
  SeqLens<kVarlen> len{};

  __device__ __forceinline__ int seqlen_q() const { return len.q(p); }
  __device__ __forceinline__ int seqlen_k() const { return len.k(p); }
  // Key j is visible to query i iff j <= i + diagonal().
  __device__ __forceinline__ int diagonal() const { return seqlen_k() - seqlen_q(); }

  // The first key tile (of block_n keys) a query row from `first_row` on can
  // see: 0, or under a window the tile of first_row's oldest visible key.
  __device__ __forceinline__ int first_tile(int first_row, int block_n) const {
    if (!kCausal || p.window == 0) return 0;
    return max(0, first_row + diagonal() - p.window + 1) / block_n;
  }

  // Whether any score of the tile of keys [n0, n0 + block_n) for query rows
  // first_row .. last_row is masked; the other tiles skip the per-element test.
  __device__ __forceinline__ bool tile_needs_mask(int n0, int block_n, int first_row, int last_row) const {
    const bool tail = n0 + block_n > seqlen_k();
    const bool diag = kCausal && n0 + block_n - 1 > first_row + diagonal();
    const bool window = kCausal && p.window > 0 && n0 <= last_row + diagonal() - p.window;
    return tail || diag || window;
  }

  // Sets the masked scores of this thread's m16n8 accumulators to −inf. In that
  // layout a thread holds columns 2·(lane % 4) + {0, 1} of each n8 tile, rows
  // g (elements 0, 1) and g + 8 (elements 2, 3); row_of(mt, half) is the query
  // index of row g + 8·half of m16 tile mt.
  // Two copies of the per-score test, chosen once per tile: the one without
  // a window is the plain causal test (one compare more per score cost 3.4%
  // at 8x16x1024x64 causal, where an eighth of the tiles are masked; H200).
  template <int kMTiles, int kSTiles, typename RowOf>
  __device__ __forceinline__ void apply(float (&s)[kMTiles][kSTiles][4], int n0, int lane,
                                        RowOf row_of) const {
    if (kCausal && p.window > 0) apply_to<true>(s, n0, lane, row_of);
    else apply_to<false>(s, n0, lane, row_of);
  }

 private:
  template <bool kWindow, int kMTiles, int kSTiles, typename RowOf>
  __device__ __forceinline__ void apply_to(float (&s)[kMTiles][kSTiles][4], int n0, int lane,
                                           RowOf row_of) const {
#pragma unroll
    for (int mt = 0; mt < kMTiles; ++mt)
#pragma unroll
      for (int t = 0; t < kSTiles; ++t)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int col = n0 + t * 8 + (lane % 4) * 2 + (e & 1);
          const int row = row_of(mt, e >= 2 ? 1 : 0);
          if (col >= seqlen_k() || (kCausal && col > row + diagonal()) ||
              (kWindow && col <= row + diagonal() - p.window))
            s[mt][t][e] = -INFINITY;
        }
  }
};

}  // namespace attnprof::flash
