// Splitting the last round of a persistent launch along the keys, shared by
// the host, which plans it, and the kernel, which walks it.
//
// Without a mask every tile costs the same and block b takes tiles b, b + G,
// b + 2G, ... (G blocks). With T tiles the last round holds only T mod G of
// them, and the other SMs idle through it: at 4×16×4096×128 (2048 tiles of
// 128 rows on the H200's 132 SMs) 68 tiles make a 16th round, so the launch
// lasts 16 tiles where 15.5 of work would do (3% idle); at 4×16×8192×128 4
// tiles make a 32nd; and a decode-like launch with fewer tiles than SMs
// leaves most SMs idle throughout. Here the R = floor(T / G) full rounds stay
// whole tiles; the key blocks of the last L = T mod G tiles, laid end to end
// (tile after tile, W = L · N blocks), are cut into ranges of `chunk`
// consecutive blocks, one range per block of the grid. A range falls within
// at most two tiles (chunk <= N), so a block runs at most two pieces.
//
// A piece of a tile that several blocks share ends with its unnormalised O,
// its row max and row sum in a workspace slot, and counts itself on a
// per-warp counter of that tile; the warp that counts last merges every
// piece's slot in a fixed order (so the result does not depend on which
// piece finished last) and stores O and the log-sum-exp as a whole tile
// would. A tile within one range runs as a whole tile.
//
// The plan compares modelled makespans in key blocks (plan_tail_split): a
// tile costs N + kTileCost blocks (prologue, the unoverlapped first Q·Kᵀ and
// last P·V, the epilogue), a piece its blocks + kPieceCost (the same, plus its
// slot written), and the merge kPieceMergeCost per slot it reads.
#pragma once

#include <algorithm>
#include <cstdint>

#include "kernels/common/host_device.h"

namespace attnprof::flash_sm90 {

struct TailSplit {
  int grid = 1;        // blocks of the launch
  int first_tile = 0;  // tiles [first_tile, first_tile + tiles) are split: the last L in tile order
  int tiles = 0;       // L; 0: no split
  int n_blocks = 1;    // key blocks per tile (N)
  int chunk = 1;       // key blocks per range
};

// One block's share of the split tiles: a piece is the part of its range that
// falls within one tile.
struct TailPiece {
  int split_tile;   // 0 .. tiles - 1 (the tile is first_tile + split_tile)
  int n_lo, n_hi;   // key blocks [n_lo, n_hi) of that tile
  int slot;         // its workspace slot: 2 · block + (0 or 1)
  int first_block;  // the blocks first_block .. first_block + count - 1 hold the tile's pieces
  int count;        // 1: the whole tile is this piece (no merge)
};

// Pieces of block b: 0, 1 or 2. 32-bit arithmetic (a 64-bit division is a
// subroutine call on the GPU): the plan keeps tiles · n_blocks below 2^31.
ATTNPROF_HOST_DEVICE inline int tail_pieces(const TailSplit& s, int b) {
  const int work = s.tiles * s.n_blocks;
  const int start = b * s.chunk;
  if (s.tiles == 0 || start >= work) return 0;
  const int end = start + s.chunk < work ? start + s.chunk : work;
  return (end - 1) / s.n_blocks - start / s.n_blocks + 1;
}

// The workspace slot of split tile `split_tile`'s piece held by block b (one
// of first_block .. first_block + count - 1).
ATTNPROF_HOST_DEVICE inline int tail_slot(const TailSplit& s, int b, int split_tile) {
  return 2 * b + (split_tile - b * s.chunk / s.n_blocks);
}

// Piece k (< tail_pieces(s, b)) of block b.
ATTNPROF_HOST_DEVICE inline TailPiece tail_piece(const TailSplit& s, int b, int k) {
  const int n = s.n_blocks;
  const int work = s.tiles * n;
  const int start = b * s.chunk;
  const int end = start + s.chunk < work ? start + s.chunk : work;
  TailPiece p;
  p.split_tile = start / n + k;
  const int tile_lo = p.split_tile * n, tile_hi = tile_lo + n;
  p.n_lo = (start > tile_lo ? start : tile_lo) - tile_lo;
  p.n_hi = (end < tile_hi ? end : tile_hi) - tile_lo;
  p.slot = 2 * b + k;
  p.first_block = tile_lo / s.chunk;
  p.count = (tile_hi - 1) / s.chunk - p.first_block + 1;
  return p;
}

// Modelled costs in key blocks (see the top of this file).
inline constexpr double kTileCost = 1.0;
inline constexpr double kPieceCost = 1.25;
inline constexpr double kPieceMergeCost = 0.25;
// A split must save at least this fraction of the modelled makespan.
inline constexpr double kMinSplitGain = 0.01;

// The plan for total_tiles tiles of n_blocks key blocks each on num_sms SMs.
// `allowed`: the tiles cost the same (no mask, no short tiles) and the
// kernel hands them out statically; otherwise, and when the model finds no
// gain, tiles = 0 and the grid is min(total_tiles, num_sms).
inline TailSplit plan_tail_split(int total_tiles, int n_blocks, int num_sms, bool allowed) {
  TailSplit s;
  const int sms = std::max(num_sms, 1);
  s.grid = std::max(std::min(total_tiles, sms), 1);
  s.first_tile = total_tiles;
  s.n_blocks = std::max(n_blocks, 1);
  s.chunk = s.n_blocks;
  const int rounds = total_tiles / sms, left = total_tiles % sms;
  const int64_t n = n_blocks;
  const int64_t work = static_cast<int64_t>(left) * n;
  // The kernel walks the ranges in 32-bit ints (only keys near the int32
  // limit and a last round of over 100 tiles come close): no split past it.
  if (!allowed || left == 0 || n_blocks < 2 || work + 2 * n >= (int64_t{1} << 31)) return s;
  const double whole = n + kTileCost;
  double best = whole;  // the last round as whole tiles
  int64_t best_chunk = 0;
  // From the shortest range that needs no more blocks than SMs; past 64 blocks
  // longer, the merge the longer range saves (at most kPieceMergeCost per SM)
  // cannot pay for it.
  const int64_t shortest = std::max<int64_t>((work + sms - 1) / sms, 1);
  for (int64_t c = shortest; c < n && c <= shortest + 64; ++c) {
    const bool aligned = n % c == 0;
    const int64_t pieces_per_tile = aligned ? n / c : (n - 1) / c + 2;
    const double cost = static_cast<double>(c) + (aligned ? 1 : 2) * kPieceCost +
                        static_cast<double>(pieces_per_tile) * kPieceMergeCost;
    if (cost < best) {
      best = cost;
      best_chunk = c;
    }
  }
  const double makespan = rounds * whole + whole;
  if (best_chunk == 0 || makespan - (rounds * whole + best) < kMinSplitGain * makespan) return s;
  s.chunk = static_cast<int>(best_chunk);
  s.tiles = left;
  s.first_tile = total_tiles - left;
  // Every block runs the full rounds; with none, only the blocks with a range.
  s.grid = rounds > 0 ? sms : static_cast<int>((work + best_chunk - 1) / best_chunk);
  return s;
}

}  // namespace attnprof::flash_sm90
