// Compile-time shape of the Hopper attention forward, one configuration per
// head dim.
//
// A block is 1 producer warpgroup + kConsumerWarpgroups consumer warpgroups.
// The producer (one thread of it) streams Q, K and V tiles into shared memory
// by TMA; each consumer warpgroup owns 64 query rows of the kBlockM-row Q tile
// and computes S = Q·Kᵀ (wgmma, K from shared memory, Q from shared memory
// or, with kQInRegs, from registers loaded once per tile) and O += P·V
// (wgmma, P from registers, V from shared memory) for kBlockN keys at a time.
// K and V stream through kStages buffers, each guarded by a full and an empty
// mbarrier. Tiles are stored as TMA writes them with 128-byte swizzling:
// column blocks of 64 elements (128 bytes) × rows, 1024-byte aligned.
#pragma once

#include <cstdint>

// Q tiles in shared memory: with 2 the producer loads the next tile's Q while
// the consumers still work on the current one; with 1 it waits until their
// last Q·Kᵀ of the tile (with Q in registers, kQInRegs: until they have
// loaded it, at the tile's start; head_dim 128 then spends the second
// buffer's 32 KB on a third K/V stage, below). H200, bf16,
// scripts/bench_flash_sm90.py (random order, settling calls), two
// repetitions, 2026-12-01, TFLOP/s, Q from shared memory, 2 stages
// against 1: 388/386 against 369/366 at 8x16x1024x64 full, 262/262 against
// 253/253 causal; 456/456 against 430/429 at 8x16x2048x64 full; 538/539
// against 520/517 at 4x16x4096x128 causal; head_dim 128 full within 1%.
#ifndef ATTNPROF_SM90_Q_STAGES
#define ATTNPROF_SM90_Q_STAGES 2
#endif

namespace attnprof::flash_sm90 {

template <int kHeadDim_, int kBlockN_, int kStages_, int kConsumerWarpgroups_, int kPolyExpEvery_,
          int kRescaleSlack_, typename Element_, bool kTailSplit_ = true, bool kQInRegs_ = false,
          int kQStages_ = ATTNPROF_SM90_Q_STAGES, bool kHalfFirstBlock_ = false>
struct FwdTraits {
  using Element = Element_;  // __nv_bfloat16 or __half
  static constexpr int kHeadDim = kHeadDim_;
  static constexpr int kBlockN = kBlockN_;
  static constexpr int kStages = kStages_;
  // Every kPolyExpEvery-th 8-key column tile of S takes its exponentials on the
  // FMA pipes (softmax_sm90.cuh, exp2_poly) instead of the MUFU unit; 0: none.
  static constexpr int kPolyExpEvery = kPolyExpEvery_;
  // Online-softmax rescale policy (softmax_sm90.cuh): a row's running max moves
  // only when a score exceeds it by more than this many powers of two, so P
  // stays <= 2^kRescaleSlack (well inside fp16) and O is rarely rescaled;
  // < 0: the max moves whenever it grows.
  static constexpr int kRescaleSlack = kRescaleSlack_;
  // Whether the kernel carries the tail split's merge (tail_split.h). Its code
  // alone, never run, cost 3% at 8x16x1024x64 causal (ncu 64.4 against 62.4
  // us, the same instructions executed): the configuration that runs only
  // causal launches over several query blocks, which never split, goes without.
  static constexpr bool kTailSplit = kTailSplit_;
  // S = Q·Kᵀ with Q from registers (wgmma A operand, loaded once per tile by
  // ldmatrix) instead of shared memory: a third less shared-memory operand
  // traffic per key block at head_dim 128, for kHeadDim / 4 more registers.
  static constexpr bool kQInRegs = kQInRegs_;
  // A tile's first key block (the last visible one, where the causal
  // diagonal or the keys' end falls) runs half-width Q·Kᵀ, softmax and P·V
  // for a warpgroup whose rows see none of its upper kBlockN / 2 keys
  // (warpgroup 0 on every diagonal tile when seq_q == seq_kv).
  static constexpr bool kHalfFirstBlock = kHalfFirstBlock_;

  static constexpr int kConsumerWarpgroups = kConsumerWarpgroups_;
  static constexpr int kBlockM = 64 * kConsumerWarpgroups;  // wgmma tiles are 64 rows
  static constexpr int kThreads = 128 * (1 + kConsumerWarpgroups);
  static constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;

  // Register split by setmaxnreg. __launch_bounds__(kThreads, 1) lets ptxas give
  // every thread 65536 / kThreads rounded down to 8 at launch (168 with 2
  // consumers); the producer hands back down to 24 and the consumers share the
  // rest (240 each with 2 consumers, 160 with 3), which must fit in what the
  // block holds or setmaxnreg.inc waits forever.
  static constexpr int kLaunchRegs = (65536 / kThreads) / 8 * 8;
  static constexpr int kProducerRegs = 24;
  static constexpr int kConsumerRegs_ =
      (kLaunchRegs * kThreads - 128 * kProducerRegs) / (128 * kConsumerWarpgroups) / 8 * 8;
  static constexpr int kConsumerRegs = kConsumerRegs_ < 240 ? kConsumerRegs_ : 240;
  static_assert(128 * kProducerRegs + 128 * kConsumerWarpgroups * kConsumerRegs <= kThreads * kLaunchRegs,
                "setmaxnreg: consumers would ask for more registers than the producer gave back");
  static_assert(kConsumerWarpgroups >= 2 && kConsumerWarpgroups <= 3,
                "2 or 3 consumer warpgroups (the GEMM-issue token ring needs a neighbour)");

  // Shared-memory tiles: [kHeadDim / 64 column blocks][rows][64 elements].
  static constexpr int kColElems = 128 / static_cast<int>(sizeof(Element));
  static constexpr int kColBlocks = kHeadDim / kColElems;
  static constexpr int kQColBytes = kBlockM * 128;
  static constexpr int kKVColBytes = kBlockN * 128;
  static constexpr int kQBytes = kQColBytes * kColBlocks;
  static constexpr int kKVBytes = kKVColBytes * kColBlocks;  // one K or one V stage

  static constexpr int kQStages = kQStages_;
  static constexpr int kOffQ = 0;
  static constexpr int kOffK = kOffQ + kQStages * kQBytes;
  static constexpr int kOffV = kOffK + kStages * kKVBytes;
  static constexpr int kOffBarriers = kOffV + kStages * kKVBytes;
  // q_full, q_empty per Q stage, then k_full, k_empty, v_full, v_empty per
  // K/V stage; then one tile slot per Q stage.
  static constexpr int kNumBarriers = 2 * kQStages + 4 * kStages;
  static constexpr int kOffTileSlot = kOffBarriers + 8 * kNumBarriers;
  // + 1024: the dynamic shared-memory base is rounded up to the swizzle atom.
  static constexpr int kSmemBytes = kOffTileSlot + 4 * kQStages + 16 + 1024;

  // Registers per consumer thread: S (and P as fp32), O, and P packed for wgmma.
  static constexpr int kSRegs = kBlockN / 2;
  static constexpr int kORegs = kHeadDim / 2;
  static constexpr int kPSteps = kBlockN / 16;  // k16 steps of O += P·V
  static constexpr int kQKSteps = kHeadDim / 16;  // k16 steps of S = Q·Kᵀ

  // Named barriers 1..kConsumerWarpgroups pass the GEMM-issue token between
  // the consumers (ping-pong); 0 is __syncthreads.
  static constexpr int kSchedulerBarrier = 1;

  static_assert(sizeof(Element) == 2, "wgmma with 16-bit inputs: bf16 or fp16");
  static_assert(kHeadDim % kColElems == 0, "head_dim: whole 128-byte column blocks");
  static_assert(kBlockN % 16 == 0 && kBlockN >= 64 && kBlockN <= 256,
                "kBlockN: wgmma n (multiple of 16 here for the P·V k16 steps), a TMA box of <= 256 rows");
  static_assert(kBlockM <= 256, "a TMA box has at most 256 rows");
  static_assert(kStages >= 2, "TMA needs at least double buffering to overlap");
  static_assert(kQStages == 1 || kQStages == 2, "one or two Q tiles");
  static_assert(kQColBytes % 1024 == 0 && kKVColBytes % 1024 == 0,
                "every tile and column block must start on a 1024-byte swizzle atom");
  static_assert(kSmemBytes <= 227 * 1024, "over the per-block shared memory limit of sm_90");
};

// Per-head-dim configurations (ATTNPROF_SM90_* defaults). Measured on the
// H200, bf16 (docs/notes/flash_sm90_progress.md):
// - d128: key tiles of 176 (208 KB) and 3 stages (230 KB) won at some shapes
//   and lost at others by a few per cent, within the run-to-run spread
//   (with two Q buffers, Q from shared memory); 128 keys stay. With Q in
//   registers one Q buffer suffices, and 3 K/V stages (230 KB) against 2
//   with two Q buffers, same process (2026-12-01): ncu 790.3 against
//   799.8 us at 4x16x4096x128 full (1.71/1.72 GHz), 437.6 against 443.1
//   causal; op level 615/575 against 611/575 (full/causal) at
//   4x16x4096x128, 623/588 against 618/586 at 4x16x8192x128, 642/619
//   against 622/615 at 1x16x16384x128.
// - d64: 3 consumers (192-row tiles, 160 registers each) against 2, same
//   process, 2026-12-01, two repetitions, TFLOP/s: full 364/367 against
//   335/336 at 8x16x1024x64 (rotating order with the 2-consumer kernel
//   timed first, a bias in its favour: docs/notes/flash_sm90_progress.md);
//   causal, random order with settling calls: 241/241 against 262/261 at
//   8x16x1024x64 but 369/371 against 344/345 at 8x16x2048x64. At 1024 rows
//   the 192-row tiles waste an eighth of the last tile and leave fewer,
//   longer tiles to balance the causal tail. So d64 runs 3 consumers, except
//   causal with fewer than kShortCausalRows query rows: 2.
// - exp2 on the FMA pipes for 1/4 or 1/2 of P cost 5-20% everywhere, and
//   for 1/8 (d64) or 1/16 (d128) 1-9% (2026-12-01): off.
// - a rescale slack of 8 beat moving the max on every increase by 1-5% at
//   d128 (the per-warp vote of the latter still fired on most key blocks).
// - Q in registers for S = Q·Kᵀ (kQInRegs), d128, against Q from shared
//   memory, same process (2026-12-01): ncu, one launch at 1.71 GHz,
//   4x16x4096x128 full 806.4 against 818.9 us, causal 446.9 against 453.0
//   (L1/shared throughput 43% against 52%, tensor pipe 73.9% against 72.4%);
//   op level +2% at 4x16x4096x128 and 4x16x8192x128 full, +4% at
//   1x16x16384x128 full, causal within -2..+1%. At d64 with 3 consumers
//   (160 registers) ptxas spills 96 B and serialises the wgmma (C7512): off;
//   the d64 short-causal configuration (2 consumers, 240 registers) takes it:
//   8x16x1024x64 causal ncu 60.8 against 62.1 us (1.79 GHz both), op level
//   294 against 290 TFLOP/s.
#ifndef ATTNPROF_SM90_D64_BLOCK_N
#define ATTNPROF_SM90_D64_BLOCK_N 128
#endif
#ifndef ATTNPROF_SM90_D64_STAGES
#define ATTNPROF_SM90_D64_STAGES 3
#endif
#ifndef ATTNPROF_SM90_D128_BLOCK_N
#define ATTNPROF_SM90_D128_BLOCK_N 128
#endif
#ifndef ATTNPROF_SM90_D128_STAGES
#define ATTNPROF_SM90_D128_STAGES 3
#endif
#ifndef ATTNPROF_SM90_D64_POLY_EXP_EVERY
#define ATTNPROF_SM90_D64_POLY_EXP_EVERY 0
#endif
#ifndef ATTNPROF_SM90_D128_POLY_EXP_EVERY
#define ATTNPROF_SM90_D128_POLY_EXP_EVERY 0
#endif
#ifndef ATTNPROF_SM90_D64_RESCALE_SLACK
#define ATTNPROF_SM90_D64_RESCALE_SLACK 8
#endif
#ifndef ATTNPROF_SM90_D128_RESCALE_SLACK
#define ATTNPROF_SM90_D128_RESCALE_SLACK 8
#endif
#ifndef ATTNPROF_SM90_D64_CONSUMERS
#define ATTNPROF_SM90_D64_CONSUMERS 3
#endif
#ifndef ATTNPROF_SM90_D64_SHORT_CAUSAL_CONSUMERS
#define ATTNPROF_SM90_D64_SHORT_CAUSAL_CONSUMERS 2
#endif
#ifndef ATTNPROF_SM90_SHORT_CAUSAL_ROWS
#define ATTNPROF_SM90_SHORT_CAUSAL_ROWS 2048
#endif
#ifndef ATTNPROF_SM90_D64_Q_IN_REGS
#define ATTNPROF_SM90_D64_Q_IN_REGS 0
#endif
#ifndef ATTNPROF_SM90_D64_SHORT_CAUSAL_Q_IN_REGS
#define ATTNPROF_SM90_D64_SHORT_CAUSAL_Q_IN_REGS 1
#endif
#ifndef ATTNPROF_SM90_D64_SHORT_CAUSAL_HALF_FIRST
#define ATTNPROF_SM90_D64_SHORT_CAUSAL_HALF_FIRST 1
#endif
#ifndef ATTNPROF_SM90_D128_Q_STAGES
#define ATTNPROF_SM90_D128_Q_STAGES 1
#endif
#ifndef ATTNPROF_SM90_D128_Q_IN_REGS
#define ATTNPROF_SM90_D128_Q_IN_REGS 1
#endif
#ifndef ATTNPROF_SM90_D128_CONSUMERS
#define ATTNPROF_SM90_D128_CONSUMERS 2
#endif

// Causal attention over fewer query rows than this, but more than one tile
// of the kShortCausal configuration, runs that configuration (see d64 above);
// everything else the default one (one query block per head: its tiles are
// of one cost, and may be split, tail_split.h).
constexpr int kShortCausalRows = ATTNPROF_SM90_SHORT_CAUSAL_ROWS;

// One configuration per (head dim, short causal or not); at head_dim 128 both
// are the same.
template <int kHeadDim, typename Element, bool kShortCausal>
struct FwdConfig;

template <typename Element, bool kShortCausal>
struct FwdConfig<64, Element, kShortCausal> {
  using Traits = FwdTraits<64, ATTNPROF_SM90_D64_BLOCK_N, ATTNPROF_SM90_D64_STAGES,
                           kShortCausal ? ATTNPROF_SM90_D64_SHORT_CAUSAL_CONSUMERS : ATTNPROF_SM90_D64_CONSUMERS,
                           ATTNPROF_SM90_D64_POLY_EXP_EVERY, ATTNPROF_SM90_D64_RESCALE_SLACK, Element,
                           /*kTailSplit=*/!kShortCausal,
                           (kShortCausal ? ATTNPROF_SM90_D64_SHORT_CAUSAL_Q_IN_REGS : ATTNPROF_SM90_D64_Q_IN_REGS) != 0,
                           ATTNPROF_SM90_Q_STAGES,
                           kShortCausal && ATTNPROF_SM90_D64_SHORT_CAUSAL_HALF_FIRST != 0>;
};

template <typename Element, bool kShortCausal>
struct FwdConfig<128, Element, kShortCausal> {
  using Traits = FwdTraits<128, ATTNPROF_SM90_D128_BLOCK_N, ATTNPROF_SM90_D128_STAGES,
                           ATTNPROF_SM90_D128_CONSUMERS, ATTNPROF_SM90_D128_POLY_EXP_EVERY,
                           ATTNPROF_SM90_D128_RESCALE_SLACK, Element, /*kTailSplit=*/true,
                           ATTNPROF_SM90_D128_Q_IN_REGS != 0, ATTNPROF_SM90_D128_Q_STAGES>;
};

}  // namespace attnprof::flash_sm90
