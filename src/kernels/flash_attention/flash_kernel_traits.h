// Compile-time shape of the fused-attention forward kernel, one specialisation
// per head dim. Each warp owns kMTiles m16 MMA tiles of query rows, so
// kBlockM = 16 · kMTiles · kNWarps; every K/V fragment a warp loads from shared
// memory feeds kMTiles MMAs (2 halves the shared-memory traffic per MMA).
// K/V tiles of kBlockN keys stream through kStages buffers filled by cp.async.
#pragma once

#include <cstdint>

namespace attnprof::flash {

template <int kHeadDim_, int kBlockN_, int kNWarps_, int kMTiles_, int kStages_,
          int kMinBlocksPerSm_, typename Element_>
struct FwdKernelTraits {
  using Element = Element_;  // __nv_bfloat16 or __half
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kNWarps = kNWarps_;
  static constexpr int kNThreads = kNWarps * 32;
  static constexpr int kMTiles = kMTiles_;
  static constexpr int kWarpRows = 16 * kMTiles;
  static constexpr int kBlockM = kWarpRows * kNWarps;
  // Q fragments stay in registers when they take <= 32 of them; otherwise (d128
  // with 2 row tiles: 64 registers) they are re-read from shared memory per k-step.
  static constexpr bool kQInRegs = kMTiles * kHeadDim <= 128;
  static constexpr int kStages = kStages_;
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;

  // Shared memory rows are head_dim elements; a 16-byte chunk is 8 elements.
  static constexpr int kChunkElems = 16 / sizeof(Element);
  static constexpr int kChunksPerRow = kHeadDim / kChunkElems;

  static constexpr int kSmemQElems = kBlockM * kHeadDim;
  static constexpr int kSmemKVElems = kBlockN * kHeadDim;  // one K or one V tile
  static constexpr int kSmemBytes =
      (kSmemQElems + 2 * kStages * kSmemKVElems) * static_cast<int>(sizeof(Element));

  static_assert(sizeof(Element) == 2, "mma.sync m16n8k16 path: bf16/fp16 inputs only");
  static_assert(kHeadDim % 64 == 0,
                "the XOR swizzle permutes 8 chunks of 16 B: a row must hold >= 8 of them");
  static_assert(kBlockN % 16 == 0, "P·V consumes keys in k16 steps");
  static_assert(kMTiles == 1 || kMTiles == 2, "1 or 2 m16 row tiles per warp");
  static_assert(kStages >= 2, "cp.async needs at least double buffering");
  static_assert((kBlockM * kChunksPerRow) % kNThreads == 0, "Q tile copy: whole chunks per thread");
  static_assert((kBlockN * kChunksPerRow) % kNThreads == 0, "K/V tile copy: whole chunks per thread");
  static_assert(kSmemBytes <= 227 * 1024, "over the per-block shared memory limit of sm_80/sm_90");

  // Element offset of chunk `chunk` of row `row` in a [rows][kHeadDim] tile.
  // Chunks are XOR-swizzled with (row & 7): the 8 row addresses of one ldmatrix
  // 8x8 matrix then fall in 8 different 16-byte bank groups (no conflicts),
  // where a plain layout with 128/256-byte rows would be an 8-way conflict.
  __host__ __device__ static constexpr int smem_offset(int row, int chunk) {
    return row * kHeadDim + ((chunk ^ (row & 7)) * kChunkElems);
  }
};

// Per-head-dim configurations: FwdKernelTraits<d, BLOCK_N, warps, m16 tiles per
// warp, stages, min blocks per SM>. The ATTNPROF_FLASH_D*_ macros exist only so
// scripts/kernel_dev.py can time alternatives without editing this file.
// Measured on the H200, bf16 (scripts/kernel_dev.py, 2026-11-30):
// d=64: 4 warps x 2 row tiles (BLOCK_M 128), BLOCK_N 64, 3 stages, 2 blocks/SM
//   (~240 regs): 76 us causal / 121 us full at 8x16x1024x64; 1 row tile per warp
//   (BLOCK_M 64) took 78 / 134 us; 8 warps x 1 tile took 100 / 160 us
//   (measured before rows were addressed with the static head dim).
// d=128: 4 warps x 2 row tiles (BLOCK_M 128), BLOCK_N 32, 3 stages (80 KB smem,
//   ~250 regs, 2 blocks/SM): 875 us causal at 4x16x4096x128 (314 TFLOP/s).
//   8 warps x 1 tile x BLOCK_N 64 took 947 us; 2 tiles x BLOCK_N 64 spills
//   (255 regs) and took 1060 us; 8 warps x 2 tiles x BLOCK_N 32 (BLOCK_M 256)
//   was 4% slower causal but 3% faster full; 4 stages: no gain.
#ifndef ATTNPROF_FLASH_D64_BLOCK_N
#define ATTNPROF_FLASH_D64_BLOCK_N 64
#endif
#ifndef ATTNPROF_FLASH_D64_WARPS
#define ATTNPROF_FLASH_D64_WARPS 4
#endif
#ifndef ATTNPROF_FLASH_D64_MTILES
#define ATTNPROF_FLASH_D64_MTILES 2
#endif
#ifndef ATTNPROF_FLASH_D64_MIN_BLOCKS
#define ATTNPROF_FLASH_D64_MIN_BLOCKS 2
#endif
#ifndef ATTNPROF_FLASH_D128_BLOCK_N
#define ATTNPROF_FLASH_D128_BLOCK_N 32
#endif
#ifndef ATTNPROF_FLASH_D128_WARPS
#define ATTNPROF_FLASH_D128_WARPS 4
#endif
#ifndef ATTNPROF_FLASH_D128_MTILES
#define ATTNPROF_FLASH_D128_MTILES 2
#endif
#ifndef ATTNPROF_FLASH_D128_MIN_BLOCKS
#define ATTNPROF_FLASH_D128_MIN_BLOCKS 1
#endif
#ifndef ATTNPROF_FLASH_STAGES
#define ATTNPROF_FLASH_STAGES 3
#endif

template <int kHeadDim, typename Element>
struct FwdConfig;

template <typename Element>
struct FwdConfig<64, Element> {
  using Traits = FwdKernelTraits<64, ATTNPROF_FLASH_D64_BLOCK_N, ATTNPROF_FLASH_D64_WARPS,
                                 ATTNPROF_FLASH_D64_MTILES, ATTNPROF_FLASH_STAGES,
                                 ATTNPROF_FLASH_D64_MIN_BLOCKS, Element>;
};

template <typename Element>
struct FwdConfig<128, Element> {
  using Traits = FwdKernelTraits<128, ATTNPROF_FLASH_D128_BLOCK_N, ATTNPROF_FLASH_D128_WARPS,
                                 ATTNPROF_FLASH_D128_MTILES, ATTNPROF_FLASH_STAGES,
                                 ATTNPROF_FLASH_D128_MIN_BLOCKS, Element>;
};

}  // namespace attnprof::flash
