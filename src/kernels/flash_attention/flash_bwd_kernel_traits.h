// Compile-time shape of the fused-attention backward kernel, one
// specialisation per head dim.
//
// One block owns kBlockN keys of one KV head and walks over the query blocks
// (kBlockM rows) of every query head of its group. Its warps form a
// kWarpsN x kWarpsM grid over the transposed score tile Sᵀ (keys x queries):
// warp (wn, wm) holds kKeyTiles m16 tiles of keys and kWarpQ queries, so Sᵀ,
// dPᵀ, Pᵀ and dSᵀ stay in its registers in the MMA accumulator layout, and the
// same registers are the A operands of dV += Pᵀ·dO and dK += dSᵀ·Q (no shared
// memory round trip for P). Each warp accumulates dK and dV for its keys and
// all head_dim columns, summed over its kWarpQ queries; with kWarpsM > 1 the
// kWarpsM partial sums are added once at the end. dQ = dS·K needs every key of
// the block, so dSᵀ goes to shared memory and a second warp grid
// (kDqWarpsM x kNWarps/kDqWarpsM over queries x head_dim) forms dQ and adds it
// to the fp32 workspace with atomics.
#pragma once

#include <cstdint>

#include "kernels/common/config_list.h"
#include "kernels/flash_attention/flash_bwd_params.h"

namespace attnprof::flash {

// Everything the kernel derives from one named configuration (below), whose
// values it inherits, and the element type.
template <typename Config, typename Element_>
struct BwdKernelTraits : Config {
  using Element = Element_;  // __nv_bfloat16 or __half
  // Query rows per step, keys per block, the warp grid over Sᵀ (keys x queries).
  using Config::kBlockM, Config::kBlockN, Config::kDqWarpsM, Config::kHeadDim, Config::kParts, Config::kWarpsM,
      Config::kWarpsN;
  static constexpr int kNWarps = kWarpsN * kWarpsM;
  static constexpr int kNThreads = kNWarps * 32;

  static constexpr int kWarpKeys = kBlockN / kWarpsN;  // Sᵀ rows of one warp
  static constexpr int kKeyTiles = kWarpKeys / 16;
  static constexpr int kWarpQ = kBlockM / kWarpsM;  // Sᵀ columns of one warp
  static constexpr int kQTiles = kWarpQ / 8;         // n8 tiles of Sᵀ

  static constexpr int kDqWarpsD = kNWarps / kDqWarpsM;
  static constexpr int kDqRows = kBlockM / kDqWarpsM;  // dQ tile of one warp
  static constexpr int kDqCols = kHeadDim / kDqWarpsD;

  static constexpr int kStages = 2;  // Q / dO / lse / D tiles: double buffered
  static constexpr int kChunksPerRow = kHeadDim / 8;  // 16-byte chunks
  // Shared tiles are padded rows (kernels/common/padded_tile.cuh): 16 bytes
  // after each row of Q, K, V, dO ([row][head_dim]) and of dSᵀ ([key][query]).
  static constexpr int kRowStride = kHeadDim * 2 + 16;
  static constexpr int kDsRowStride = kBlockM * 2 + 16;

  static constexpr int kKTileBytes = kBlockN * kRowStride;  // one K or V tile
  static constexpr int kQTileBytes = kBlockM * kRowStride;  // one Q or dO stage
  static constexpr int kDsTileBytes = kBlockN * kDsRowStride;
  static constexpr int kRowVecBytes = kBlockM * 4;  // one lse or D stage (fp32)

  // Byte offsets in dynamic shared memory; all multiples of 16.
  static constexpr int kSmemK = 0;
  static constexpr int kSmemV = kSmemK + kKTileBytes;
  static constexpr int kSmemQ = kSmemV + kKTileBytes;
  static constexpr int kSmemDo = kSmemQ + kStages * kQTileBytes;
  static constexpr int kSmemDs = kSmemDo + kStages * kQTileBytes;
  static constexpr int kSmemLse = kSmemDs + kStages * kDsTileBytes;  // dSᵀ double-buffered too
  static constexpr int kSmemDsum = kSmemLse + kStages * kRowVecBytes;
  static constexpr int kSmemBytes = kSmemDsum + kStages * kRowVecBytes;
  // kWarpsM > 1: the partial dK/dV sums of warps wm >= 1 are added through the
  // Q and dO stages (fp32, one of dK/dV at a time) after the main loop.
  static constexpr int kReduceBytes = kBlockN * kHeadDim * 4;

  static_assert(sizeof(Element) == 2, "mma.sync m16n8k16 path: bf16/fp16 inputs only");
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head dims 64 and 128");
  static_assert(kBlockM % 64 == 0, "dSᵀ rows of whole 128 B (the padding shifts them by one bank group)");
  static_assert(kBwdSeqQPad % kBlockM == 0, "workspace padding must be whole query blocks");
  static_assert(kBlockN % (16 * kWarpsN) == 0, "whole m16 key tiles per warp");
  static_assert(kWarpQ % 16 == 0, "Pᵀ·dO consumes a warp's queries in k16 steps");
  static_assert(kQTiles % (2 * kParts) == 0, "query slices of whole k16 steps");
  static_assert(kDqRows % 16 == 0 && kDqCols % 16 == 0 && kNWarps % kDqWarpsM == 0,
                "dQ warp tiles: whole m16 rows and n8 pairs");
  static_assert(kBlockM % (kNThreads / kChunksPerRow) == 0 &&
                    kBlockN % (kNThreads / kChunksPerRow) == 0,
                "tile copy: whole passes per tile");
  static_assert(kBlockM / 4 <= kNThreads, "lse/D tile copy: one 16-byte chunk per thread at most");
  static_assert(kWarpsM == 1 || kReduceBytes <= 2 * kStages * kQTileBytes,
                "dK/dV partial sums must fit in the Q and dO stages");
  static_assert(kSmemBytes <= 227 * 1024, "over the per-block shared memory limit of sm_80/sm_90");
};

// Named configurations: what each one changes from the defaults; the
// element type only sets the element size. Measured on the H200, bf16, op
// time (CUDA-event medians, two runs):
// d64: BLOCK_M 64, BLOCK_N 128, 4x2 warps (32 keys x 32 queries each), 2
//   query slices, 8 warps per SM at 251-253 registers: 268-270 us causal /
//   430-432 full at 8x16x1024x64. 8x1 warps (16 keys each): 279 / 458.
//   BLOCK_N 64 with 4 warps and 3 blocks per SM (168 registers): 254-258 /
//   440-447, but its fp16 kernels spill 4-16 bytes at that register cap.
// d128: BLOCK_M 64, BLOCK_N 128, 8x1 warps (16 keys each; dK and dV alone take
//   128 registers), 1 query slice, 8 warps per SM at 254 registers: 2756 us
//   causal / 5290 full at 4x16x4096x128. 2 slices: 4% slower (5731 vs 5513
//   full in the same run) and fp16 spilled. BLOCK_N 64 with 4 warps spilled
//   64-68 bytes (its 64x128 dQ tile takes 64 registers per thread); BLOCK_M
//   128 is over the shared-memory limit. ncu at 4x16x4096x128 full: shared
//   memory (L1) pipe 77-80% busy, tensor pipe 41%, 9.2 cycles per issued
//   instruction with 2 warps per scheduler: bound by shared-memory traffic,
//   every warp reads whole Q and dO tiles as B operands. Counted from the
//   code (not measured): per 64-query step a warp reads its 16 keys of K and
//   V (4 KB each), Q and dO (16 KB each) twice, as B of Sᵀ/dPᵀ and
//   transposed for dK/dV, and 16 KB of dSᵀ and K for dQ: 88 KB, 704 KB per
//   block. FA2's layouts for this shape (2x4 warps for S/dP, 4x2 for dK/dV,
//   2x4 for dQ; P and dS through shared memory) read about 576 KB and write
//   32 KB, 22% less, in line with our 0.89x of sdpa-flash at 4x16x4096x128
//   full. Holding a warp's Q/dO slice in registers for both uses (movmatrix
//   for the transpose) saves little: K and V must then be re-read per slice,
//   since dK and dV alone take 128 of the 255 registers.
// kWarpsN x kWarpsM warps over Sᵀ; Sᵀ and dPᵀ formed in kParts slices of a
// warp's queries (fewer fp32 registers live at once, for K/V fragments loaded
// once per slice); dQ by kDqWarpsM x (warps / kDqWarpsM) warps.
struct FlashBwdDefaults {
  // Query rows per step (d128: 128 is over the shared-memory limit), keys per
  // block (d128: 64 with 4 warps spilled 64-68 bytes, its 64x128 dQ tile
  // taking 64 registers per thread).
  static constexpr int kBlockM = 64, kBlockN = 128;
  static constexpr int kMinBlocksPerSm = 1, kDqWarpsM = 2;
};

struct FlashBwdHdim64 : FlashBwdDefaults {
  static constexpr const char* kName = "flash_bwd_hdim64";
  static constexpr int kHeadDim = 64;
  // 4x2 warps against 8x1: 268-270 / 430-432 us against 279 / 458 (causal / full, 8x16x1024x64).
  static constexpr int kWarpsN = 4, kWarpsM = 2, kParts = 2;
};

struct FlashBwdHdim128 : FlashBwdDefaults {
  static constexpr const char* kName = "flash_bwd_hdim128";
  static constexpr int kHeadDim = 128;
  // 2 slices: 4% slower (5731 vs 5513 us full), and fp16 spilled.
  static constexpr int kWarpsN = 8, kWarpsM = 1, kParts = 1;
};

// The configurations the operator is built with, one per head dim.
using BwdConfigs = kernels::ConfigList<FlashBwdHdim64, FlashBwdHdim128>;

}  // namespace attnprof::flash
