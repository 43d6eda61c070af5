// Shared-memory tiles of 16-bit elements for the mma.sync path: rows of
// kRowElems elements stored kRowBytes + 16 bytes apart. The 16-byte pad puts
// the 8 row addresses of one ldmatrix 8x8 matrix (same column, consecutive
// rows) in 8 different 16-byte bank groups, where unpadded 128/256-byte rows
// would be an 8-way conflict. Unlike an XOR swizzle, every address is a
// per-lane base plus a compile-time offset (k16 steps, m16/n8 tiles, stages),
// so the unrolled loops need one address register per operand, not one per step.
#pragma once

#include <cstdint>

#include "kernels/common/sm80_primitives.cuh"

namespace attnprof::kernels {

template <int kRowElems>
struct PaddedRows {
  static constexpr int kRowBytes = kRowElems * 2;
  static constexpr int kStride = kRowBytes + 16;  // bytes from one row to the next
  static constexpr int kChunks = kRowElems / 8;   // 16-byte chunks per row
  static_assert(kRowBytes % 128 == 0, "the pad shifts rows by one bank group: rows of whole 128 B");

  __host__ __device__ static constexpr int tile_bytes(int rows) { return rows * kStride; }
  __host__ __device__ static constexpr uint32_t offset(int row, int chunk) {
    return static_cast<uint32_t>(row * kStride + chunk * 16);
  }
  // ldmatrix lane offsets within a 16-row block, at chunk pair 0:
  // "rows16": lane -> row lane & 15, chunk lane >> 4. Serves an A operand
  //   stored [m][k] and, with .trans, a B operand stored [k][n] (registers 0-1:
  //   n8 tile 0, 2-3: tile 1).
  __device__ static uint32_t lane_rows16(int lane) { return offset(lane & 15, lane >> 4); }
  // "pairs8": lane -> row (lane & 7) + 8·(lane >> 4), chunk (lane >> 3) & 1.
  //   Serves a B operand stored [n][k] (registers 0-1: n8 tile 0, 2-3: tile 1)
  //   and, with .trans, an A operand stored [k][m].
  __device__ static uint32_t lane_pairs8(int lane) {
    return offset((lane & 7) + ((lane >> 4) << 3), (lane >> 3) & 1);
  }
};

// cp.async copy of rows [row0, row0 + kRows) of a row-major [seq][kRowElems]
// matrix into a padded tile at shared address `tile`; rows at or past `seq`
// become zeros. The row stride is the compile-time kRowElems, so every copy of
// a thread is one base pointer plus an immediate offset.
template <int kRowElems, int kRows, int kThreads, typename T>
__device__ __forceinline__ void cp_async_rows(uint32_t tile, const T* g, int row0, int seq, int tid) {
  using Tile = PaddedRows<kRowElems>;
  constexpr int kCh = Tile::kChunks;
  constexpr int kRowsPerPass = kThreads / kCh;
  static_assert(kThreads % kCh == 0 && kRows % kRowsPerPass == 0, "whole rows per pass, whole passes per tile");
  const int r = tid / kCh;
  const int c = tid % kCh;
  const T* src = g + static_cast<int64_t>(row0 + r) * kRowElems + c * 8;
  const uint32_t dst = tile + Tile::offset(r, c);
#pragma unroll
  for (int i = 0; i < kRows / kRowsPerPass; ++i) {
    const bool valid = row0 + r + i * kRowsPerPass < seq;
    cp_async_16(dst + i * kRowsPerPass * Tile::kStride, valid ? src + i * kRowsPerPass * kRowElems : g, valid);
  }
}

}  // namespace attnprof::kernels
