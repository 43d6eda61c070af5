// Compile-time shape of the fused-attention forward kernel.
//
// A tile configuration is a plain struct of numbers (FwdTileD64, FwdTileD128,
// DecodeTileD64, DecodeTileD128); FwdKernelTraits and DecodeKernelTraits
// derive everything else from it and the element type. Each warp owns kMTiles m16
// MMA tiles of query rows, so kBlockM = 16 · kMTiles · kNWarps; every K/V
// fragment a warp loads from shared memory feeds kMTiles MMAs (2 halves the
// shared-memory traffic per MMA). K/V tiles of kBlockN keys stream through
// kStages buffers filled by cp.async.
//
// Host code (the planner, describe_fwd) reads the tile structs too, so this
// header needs no CUDA header.
#pragma once

#include <cstdint>

#include "kernels/common/config_list.h"
#include "kernels/common/host_device.h"

namespace attnprof::flash {

// Named tile configurations: what each one changes from the defaults, with
// the measured reason (H200, bf16, op time).
struct TileDefaults {
  // Keys per K/V tile, warps, K/V tiles in flight; resident blocks per SM
  // for __launch_bounds__ and for the split planner.
  static constexpr int kBlockN = 64, kNWarps = 4, kStages = 3, kMinBlocksPerSm = 2, kBlocksPerSm = 2;
  // Online-softmax rescale policy: < 0 rescales O whenever a row max grows;
  // >= 0 keeps a stale max until the new one exceeds it by more than this many
  // powers of two (online_softmax.cuh).
  static constexpr int kRescaleSlack = -1;
};

// Prefill (flash_fwd_kernel). d64: 4 warps x 2 row tiles (BLOCK_M 128),
// BLOCK_N 64, 3 stages, 2 blocks/SM (~240 regs): 74 us causal / 117 us full at
// 8x16x1024x64; 1 row tile per warp (BLOCK_M 64) took 78 / 134 us; 8 warps x 1
// tile took 100 / 160 us. A rescale slack of 8 made it 3-6% slower (16 key
// blocks: the max still moves often).
struct FwdTileD64 : TileDefaults {
  static constexpr const char* kName = "d64";
  static constexpr int kHeadDim = 64, kMTiles = 2;
};

// d128: BLOCK_N 48, 2 stages (80 KB smem, 2 blocks/SM, 253-255 regs, no
// spills), slack 8: 336-338 causal / 340-353 full TFLOP/s at 4x16x4096x128 and
// 362-367 / 362-365 at 1x16x16384x128. Against it: BLOCK_N 32, 3 stages, eager
// rescale (the first version) 311-321 full; BLOCK_N 64 needs 2 stages to keep
// 2 blocks/SM (3 stages = 128 KB) and then matches BLOCK_N 48 full (351-354)
// but spills 8 B causal; the slack alone is worth 4-6% full at BLOCK_N 48
// (slack 0: rescale on every max increase, 2-3%). Larger key tiles cut the Q
// re-reads from shared memory (Q takes 64 registers at d128 x 2 tiles, so it
// is not held) and the barriers per FLOP. kMinBlocksPerSm 1 or 2 give ptxas
// the same cap (65536 registers / 256 threads > 255), and 2 blocks fit in
// shared memory (80 KB each).
struct FwdTileD128 : TileDefaults {
  static constexpr const char* kName = "d128";
  static constexpr int kHeadDim = 128, kBlockN = 48, kMTiles = 2, kStages = 2, kMinBlocksPerSm = 1;
  static constexpr int kRescaleSlack = 8;
};

// d128 on a packed variable-length batch (kVarlen): the rows of K and V are
// heads · head_dim apart, a runtime stride, and their addresses take the
// registers the d128 tile has not got: BLOCK_N 48 spills 128 B causal on
// sm_90a (255 registers); BLOCK_N 32 holds them at 239-244, no spills. H200,
// --seqlens mix:16x128-8192, 32q/8kv, causal: 0.99-1.00x sdpa-flash's varlen
// call (the kernels' profiled times equal); a third stage 0.98x.
struct FwdTileD128Varlen : FwdTileD128 {
  static constexpr const char* kName = "d128_varlen";
  static constexpr int kBlockN = 32;
};
// Split-KV decode (flash_fwd_splitkv_kernel): one m16 tile of packed query
// rows (the heads of a KV group × their queries) per block; each of kNWarps
// warps takes kBlockN / kNWarps keys of every K/V tile, runs its own online
// softmax, and the warps merge through shared memory at the end. The work is
// reading K and V: per tile, 2 · kBlockN · head_dim · 2 bytes against 16 rows
// of MMAs, so the ring is sized for bytes in flight rather than for reuse:
// (kStages − 1) tiles per block, 2 blocks per SM (d128: 3 × 32 KB + 4 KB of
// shared memory per block).
struct DecodeTileD64 : TileDefaults {
  static constexpr const char* kName = "decode_d64";
  static constexpr int kHeadDim = 64, kStages = 4;
};
struct DecodeTileD128 : TileDefaults {
  static constexpr const char* kName = "decode_d128";
  static constexpr int kHeadDim = 128;
};

// Split-KV decode on e4m3 K and V (the Hopper fp8 operator's decode route,
// flash_sm90/decode_route.h): a K/V tile is half the bytes, so twice the
// stages keep the 16-bit tile's bytes in flight per block (d128: 6 x 16 KB +
// 2 KB of shared memory, still 2 blocks per SM), and the split planner's
// geometry (BLOCK_N, blocks per SM) stays the 16-bit tile's.
struct DecodeTileD64Fp8 : DecodeTileD64 {
  static constexpr const char* kName = "decode_d64_e4m3";
  static constexpr int kStages = 8;
};
struct DecodeTileD128Fp8 : DecodeTileD128 {
  static constexpr const char* kName = "decode_d128_e4m3";
  static constexpr int kStages = 6;
};

// The tiles the operator is built with, one per head dim and path.
using FwdTiles = kernels::ConfigList<FwdTileD64, FwdTileD128>;
using VarlenTiles = kernels::ConfigList<FwdTileD64, FwdTileD128Varlen>;
using DecodeTiles = kernels::ConfigList<DecodeTileD64, DecodeTileD128>;
using DecodeFp8Tiles = kernels::ConfigList<DecodeTileD64Fp8, DecodeTileD128Fp8>;

// An e4m3 element as the kernels store and move it (one byte); the
// fragments widen it to fp16 (tile_ops_fp8.cuh). A tag rather than CUDA's
// __nv_fp8_e4m3 so that host code (the planner, describe_fwd) can name it.
struct E4m3 {
  unsigned char bits;
};

// Shared-memory geometry of the kernels: rows of head_dim 16-bit elements
// moved and swizzled in 16-byte chunks.
template <int kHeadDim_, int kElemBytes_>
struct SmemRowGeometry {
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kElemBytes = kElemBytes_;
  static constexpr int kChunkBytes = 16;  // one cp.async / one ldmatrix row
  static constexpr int kChunkElems = kChunkBytes / kElemBytes;
  static constexpr int kChunksPerRow = kHeadDim / kChunkElems;
  static constexpr int kRowBytes = kHeadDim * kElemBytes;
  // One k16 step of an MMA along head_dim: 16 elements, two chunks.
  static constexpr int kKStepBytes = 16 * kElemBytes;

  static_assert(kChunksPerRow % 8 == 0 || kChunksPerRow == 4,
                "the XOR swizzle permutes 8 chunks of 16 B, or 4 in a 64-byte row");

  // The chunk index of row `row` is XORed with this key. Rows of 8 chunks or
  // more: row & 7, so the 8 row addresses of one ldmatrix 8x8 matrix fall in
  // 8 different 16-byte bank groups (no conflicts), where a plain layout with
  // 128/256-byte rows would be an 8-way conflict. 64-byte rows (e4m3 at
  // head_dim 64): two rows share a 128-byte bank line, so (row >> 1) & 3 puts
  // rows 2i and 2i + 1 in its two halves and the four pairs on different
  // chunks. Either key depends on row & 7 alone.
  ATTNPROF_HOST_DEVICE static constexpr int swizzle_key(int row) {
    return kChunksPerRow == 4 ? (row >> 1) & 3 : row & 7;
  }

  // Element offset of chunk `chunk` of row `row` in a [rows][kHeadDim] tile.
  ATTNPROF_HOST_DEVICE static constexpr int smem_offset(int row, int chunk) {
    return row * kHeadDim + ((chunk ^ swizzle_key(row)) * kChunkElems);
  }
};

// What both kernels derive from a tile: threads, the block's Q tile of
// kBlockM_ rows and the K/V ring of kStages tiles of kBlockN keys, in bytes.
template <typename Tile_, typename Element_, int kBlockM_>
struct KernelTraitsBase : SmemRowGeometry<Tile_::kHeadDim, static_cast<int>(sizeof(Element_))> {
  using Tile = Tile_;
  using Element = Element_;  // __nv_bfloat16, __half or (decode only) E4m3
  static constexpr bool kFp8 = sizeof(Element_) == 1;
  using Geometry = SmemRowGeometry<Tile::kHeadDim, static_cast<int>(sizeof(Element))>;
  using Geometry::kElemBytes;
  using Geometry::kRowBytes;
  static constexpr int kBlockM = kBlockM_;
  static constexpr int kBlockN = Tile::kBlockN;
  static constexpr int kNWarps = Tile::kNWarps;
  static constexpr int kNThreads = kNWarps * 32;
  static constexpr int kStages = Tile::kStages;
  static constexpr int kRescaleSlack = Tile::kRescaleSlack;
  static constexpr int kMinBlocksPerSm = Tile::kMinBlocksPerSm;

  static constexpr int kSmemQBytes = kBlockM * kRowBytes;
  static constexpr int kSmemKVTileBytes = kBlockN * kRowBytes;  // one K or one V tile
  static constexpr int kSmemRingBytes = 2 * kStages * kSmemKVTileBytes;
  // Tiles start on row boundaries so swizzled addresses can be formed by XOR on
  // the full shared address; the kRowBytes spare bytes allow rounding the base up.
  static constexpr int kSmemBytes = kSmemQBytes + kSmemRingBytes + kRowBytes;

  static_assert(kElemBytes == 2 || kFp8, "mma.sync m16n8k16 path: bf16/fp16 inputs, or e4m3 widened to fp16");
  static_assert(kBlockN % 16 == 0, "P·V consumes keys in k16 steps");
  static_assert(kStages >= 2, "cp.async needs at least double buffering");
  static_assert((kBlockN * Geometry::kChunksPerRow) % kNThreads == 0,
                "K/V tile copy: whole chunks per thread");
  static_assert(kSmemBytes * Tile::kBlocksPerSm <= 227 * 1024,
                "over the shared memory of the resident blocks (227 KB per SM on sm_80/sm_90)");
};

template <typename Tile_, typename Element_>
struct FwdKernelTraits
    : KernelTraitsBase<Tile_, Element_, 16 * Tile_::kMTiles * Tile_::kNWarps> {
  using Base = KernelTraitsBase<Tile_, Element_, 16 * Tile_::kMTiles * Tile_::kNWarps>;
  using Base::kHeadDim;
  static constexpr int kMTiles = Base::Tile::kMTiles;
  static constexpr int kWarpRows = 16 * kMTiles;
  // Q fragments stay in registers when they take <= 32 of them; otherwise (d128
  // with 2 row tiles: 64 registers) they are re-read from shared memory per k-step.
  static constexpr bool kQInRegs = kMTiles * kHeadDim <= 128;

  static_assert(kMTiles == 1 || kMTiles == 2, "1 or 2 m16 row tiles per warp");
  static_assert((Base::kBlockM * Base::kChunksPerRow) % Base::kNThreads == 0,
                "Q tile copy (load_tile): whole chunks per thread");
};

template <typename Tile_, typename Element_>
struct DecodeKernelTraits : KernelTraitsBase<Tile_, Element_, 16> {
  using Base = KernelTraitsBase<Tile_, Element_, 16>;
  using Base::kHeadDim;
  static constexpr int kMTiles = 1;  // one m16 tile of packed query rows
  static constexpr int kWarpKeys = Base::kBlockN / Base::kNWarps;  // keys of each K/V tile per warp
  static constexpr bool kQInRegs = true;  // 16 rows: head_dim / 4 registers per thread
  // After the last tile the ring holds the warps' partial O (fp32) and their
  // row max and sum for the merge.
  static constexpr int kSmemMergeBytes =
      (Base::kNWarps * Base::kBlockM * kHeadDim + 2 * Base::kNWarps * Base::kBlockM) * 4;

  static_assert(kWarpKeys == 16, "each warp's P·V is one k16 step");
  static_assert(kSmemMergeBytes <= Base::kSmemRingBytes, "the merge reuses the K/V ring");
};

}  // namespace attnprof::flash
