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
#include <type_traits>

namespace attnprof::flash_sm90 {

template <int kHeadDim_, int kBlockN_, int kStages_, int kConsumerWarpgroups_, int kPolyExpEvery_,
          int kRescaleSlack_, typename Element_, bool kTailSplit_ = true, bool kQInRegs_ = false,
          int kQStages_ = 2, bool kHalfFirstBlock_ = false>
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

// Named configurations, one per (head dim, launch kind); the element type
// (bf16 or fp16) only sets the element size. Measured on the H200, bf16,
// TFLOP/s or ncu durations (docs/notes/flash_sm90_progress.md). Not measured
// to differ: exp2 on the FMA pipes (kPolyExpEvery) cost 1-9% even for 1/8
// (d64) or 1/16 (d128) of P, 5-20% for 1/4 or 1/2: 0 everywhere; a rescale
// slack of 8 beat moving the max on every increase by 1-5% at d128.

// Head dim 64, everything but short causal launches.
struct Sm90FwdHdim64 {
  static constexpr const char* kName = "sm90_fwd_hdim64";
  static constexpr int kHeadDim = 64;
  static constexpr int kBlockN = 128;
  static constexpr int kStages = 3;
  // 3 against 2: 364/367 against 335/336 full at 8x16x1024x64, causal
  // 369/371 against 344/345 at 8x16x2048x64 (but 241 against 262 at 1024 rows:
  // Sm90FwdHdim64ShortCausal).
  static constexpr int kConsumerWarpgroups = 3;
  static constexpr int kPolyExpEvery = 0;
  static constexpr int kRescaleSlack = 8;
  static constexpr bool kTailSplit = true;
  // Off: with 3 consumers (160 registers) ptxas spills 96 B and serialises the wgmma (C7512).
  static constexpr bool kQInRegs = false;
  // 2 Q buffers against 1: 388/386 against 369/366 at 8x16x1024x64 full, 456 against 430 at 8x16x2048x64.
  static constexpr int kQStages = 2;
  static constexpr bool kHalfFirstBlock = false;
};

// Head dim 64, causal over more than one tile but fewer than kShortCausalRows
// query rows: 128-row tiles (192 waste an eighth of the last tile at 1024
// rows and leave fewer, longer tiles to balance the causal tail).
struct Sm90FwdHdim64ShortCausal {
  static constexpr const char* kName = "sm90_fwd_hdim64_short_causal";
  static constexpr int kHeadDim = 64;
  static constexpr int kBlockN = 128;
  static constexpr int kStages = 3;
  // 2 against 3: 262/261 against 241/241 causal at 8x16x1024x64.
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kPolyExpEvery = 0;
  static constexpr int kRescaleSlack = 8;
  // Off: only causal launches over several query blocks run it, which never
  // split; the merge's code alone, never run, cost 3% (ncu 64.4 against 62.4 us).
  static constexpr bool kTailSplit = false;
  // On (240 registers): 8x16x1024x64 causal ncu 60.8 against 62.1 us, 294 against 290 TFLOP/s.
  static constexpr bool kQInRegs = true;
  static constexpr int kQStages = 2;
  static constexpr bool kHalfFirstBlock = true;
};

// Head dim 128, every launch.
struct Sm90FwdHdim128 {
  static constexpr const char* kName = "sm90_fwd_hdim128";
  static constexpr int kHeadDim = 128;
  // 176 keys won at some shapes and lost at others by a few per cent, within the run-to-run spread.
  static constexpr int kBlockN = 128;
  // 3 stages and 1 Q buffer against 2 and 2: ncu 790.3 against 799.8 us at
  // 4x16x4096x128 full, 437.6 against 443.1 causal.
  static constexpr int kStages = 3;
  static constexpr int kConsumerWarpgroups = 2;
  static constexpr int kPolyExpEvery = 0;
  static constexpr int kRescaleSlack = 8;
  static constexpr bool kTailSplit = true;
  // Q in registers against shared memory: ncu 806.4 against 818.9 us at 4x16x4096x128 full, 446.9 against 453.0 causal.
  static constexpr bool kQInRegs = true;
  static constexpr int kQStages = 1;  // Q in registers: loaded once at the tile's start
  static constexpr bool kHalfFirstBlock = false;
};

// Causal attention over fewer query rows than this, but more than one tile
// of the short-causal configuration, runs that configuration (see d64 above);
// everything else the default one (one query block per head: its tiles are
// of one cost, and may be split, tail_split.h).
constexpr int kShortCausalRows = 2048;

// The traits a named configuration builds, for one element type.
template <typename Config, typename Element>
using FwdTraitsOf = FwdTraits<Config::kHeadDim, Config::kBlockN, Config::kStages, Config::kConsumerWarpgroups,
                              Config::kPolyExpEvery, Config::kRescaleSlack, Element, Config::kTailSplit,
                              Config::kQInRegs, Config::kQStages, Config::kHalfFirstBlock>;

// The configuration of one (head dim, short causal or not); at head_dim 128
// both are the same.
template <int kHeadDim, typename Element, bool kShortCausal>
struct FwdConfig;

template <typename Element, bool kShortCausal>
struct FwdConfig<64, Element, kShortCausal> {
  using Config = std::conditional_t<kShortCausal, Sm90FwdHdim64ShortCausal, Sm90FwdHdim64>;
  using Traits = FwdTraitsOf<Config, Element>;
};

template <typename Element, bool kShortCausal>
struct FwdConfig<128, Element, kShortCausal> {
  using Config = Sm90FwdHdim128;
  using Traits = FwdTraitsOf<Config, Element>;
};

}  // namespace attnprof::flash_sm90
