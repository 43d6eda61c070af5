// Compile-time shape of the fused-attention forward kernel, one specialisation
// per head dim. Each warp owns kMTiles m16 MMA tiles of query rows, so
// kBlockM = 16 · kMTiles · kNWarps; every K/V fragment a warp loads from shared
// memory feeds kMTiles MMAs (2 halves the shared-memory traffic per MMA).
// K/V tiles of kBlockN keys stream through kStages buffers filled by cp.async.
#pragma once

#include <cstdint>

namespace attnprof::flash {

template <int kHeadDim_, int kBlockN_, int kNWarps_, int kMTiles_, int kStages_,
          int kMinBlocksPerSm_, int kRescaleSlack_, typename Element_>
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
  // Online-softmax rescale policy: < 0 rescales O whenever a row max grows;
  // >= 0 keeps a stale max until the new one exceeds it by more than this many
  // powers of two (exp2 values stay <= 2^slack; see the kernel).
  static constexpr bool kLazyRescale = kRescaleSlack_ >= 0;
  static constexpr float kRescaleSlack = static_cast<float>(kRescaleSlack_);
  static constexpr int kMinBlocksPerSm = kMinBlocksPerSm_;

  // Shared memory rows are head_dim elements; a 16-byte chunk is 8 elements.
  static constexpr int kChunkElems = 16 / sizeof(Element);
  static constexpr int kChunksPerRow = kHeadDim / kChunkElems;

  static constexpr int kSmemQElems = kBlockM * kHeadDim;
  static constexpr int kSmemKVElems = kBlockN * kHeadDim;  // one K or one V tile
  static constexpr int kRowBytes = kHeadDim * static_cast<int>(sizeof(Element));
  // Tiles start on row boundaries so swizzled addresses can be formed by XOR on
  // the full shared address; the kRowBytes spare bytes allow rounding the base up.
  static constexpr int kSmemBytes =
      (kSmemQElems + 2 * kStages * kSmemKVElems) * static_cast<int>(sizeof(Element)) + kRowBytes;

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
// warp, stages, min blocks per SM, rescale slack>. The ATTNPROF_FLASH_D*_ macros
// exist only so scripts/kernel_dev.py can time alternatives without editing this
// file. Measured on the H200, bf16 (scripts/kernel_dev.py, 2026-11-30):
// d=64: 4 warps x 2 row tiles (BLOCK_M 128), BLOCK_N 64, 3 stages, 2 blocks/SM
//   (~240 regs): 74 us causal / 117 us full at 8x16x1024x64; 1 row tile per warp
//   (BLOCK_M 64) took 78 / 134 us; 8 warps x 1 tile took 100 / 160 us. A rescale
//   slack of 8 made it 3-6% slower (16 key blocks: the max still moves often).
// d=128: 4 warps x 2 row tiles (BLOCK_M 128), BLOCK_N 48, 2 stages (80 KB smem,
//   2 blocks/SM, 253-255 regs, no spills), slack 8: 336-338 causal / 340-353 full
//   TFLOP/s at 4x16x4096x128 and 362-367 / 362-365 at 1x16x16384x128.
//   Against it: BLOCK_N 32, 3 stages, eager rescale (the first version) 311-321
//   full; BLOCK_N 64 needs 2 stages to keep 2 blocks/SM (3 stages = 128 KB) and
//   then matches BLOCK_N 48 full (351-354) but spills 8 B causal; the slack alone
//   is worth 4-6% full at BLOCK_N 48 (slack 0: rescale on every max increase, 2-3%).
//   Larger key tiles cut the Q re-reads from shared memory (Q takes 64 registers
//   at d128 x 2 tiles, so it is not held) and the barriers per FLOP.
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
#define ATTNPROF_FLASH_D128_BLOCK_N 48
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
#ifndef ATTNPROF_FLASH_D64_RESCALE_SLACK
#define ATTNPROF_FLASH_D64_RESCALE_SLACK -1
#endif
#ifndef ATTNPROF_FLASH_D128_RESCALE_SLACK
#define ATTNPROF_FLASH_D128_RESCALE_SLACK 8
#endif
#ifndef ATTNPROF_FLASH_D128_STAGES
#define ATTNPROF_FLASH_D128_STAGES 2
#endif
#ifndef ATTNPROF_FLASH_D64_STAGES
#define ATTNPROF_FLASH_D64_STAGES 3
#endif

template <int kHeadDim, typename Element>
struct FwdConfig;

template <typename Element>
struct FwdConfig<64, Element> {
  using Traits = FwdKernelTraits<64, ATTNPROF_FLASH_D64_BLOCK_N, ATTNPROF_FLASH_D64_WARPS,
                                 ATTNPROF_FLASH_D64_MTILES, ATTNPROF_FLASH_D64_STAGES,
                                 ATTNPROF_FLASH_D64_MIN_BLOCKS, ATTNPROF_FLASH_D64_RESCALE_SLACK,
                                 Element>;
};

template <typename Element>
struct FwdConfig<128, Element> {
  using Traits = FwdKernelTraits<128, ATTNPROF_FLASH_D128_BLOCK_N, ATTNPROF_FLASH_D128_WARPS,
                                 ATTNPROF_FLASH_D128_MTILES, ATTNPROF_FLASH_D128_STAGES,
                                 ATTNPROF_FLASH_D128_MIN_BLOCKS, ATTNPROF_FLASH_D128_RESCALE_SLACK,
                                 Element>;
};

}  // namespace attnprof::flash
