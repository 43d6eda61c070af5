// Compile-time shape of the Hopper attention forward, from a named
// configuration (below).
//
// A block is 1 producer warpgroup + kConsumerWarpgroups consumer warpgroups.
// The producer (one thread of it) streams Q, K and V tiles into shared memory
// by TMA (with kTransposeV two of its warps write Vᵀ from V); each consumer warpgroup owns 64 query rows of the kBlockM-row Q tile
// and computes S = Q·Kᵀ (wgmma, K from shared memory, Q from shared memory
// or, with kQInRegs, from registers loaded once per tile) and O += P·V
// (wgmma, P from registers, V from shared memory) for kBlockN keys at a time.
// K and V stream through kStages buffers, each guarded by a full and an empty
// mbarrier. Tiles are stored as TMA writes them with 128-byte swizzling:
// column blocks of 128 bytes (64 16-bit or 128 8-bit elements) × rows,
// 1024-byte aligned; 8-bit rows of 64 bytes (head_dim 64, or Vᵀ's 64-key
// blocks) with the 64-byte swizzle.
//
// With 8-bit (e4m3) inputs both GEMMs are k32 wgmma, which read B K-major
// only: V comes as Vᵀ [head_dim rows][keys], its keys permuted within each
// 32 (fp8_layout.h) so that P's accumulator registers are already its A
// fragment; the output is bf16 (docs/notes/flash_sm90_fp8.md).
#pragma once

#include <cstdint>

#include "kernels/common/config_list.h"

namespace attnprof::flash_sm90 {

// Everything a kernel derives from one named configuration (below), whose
// values it inherits, and the element type.
template <typename Config, typename Element_>
struct FwdTraits : Config {
  using Element = Element_;  // of q, k, v: __nv_bfloat16, __half, or __nv_fp8_e4m3 (8-bit)
  static constexpr bool kFp8 = sizeof(Element) == 1;
  using Config::kBlockN, Config::kConsumerWarpgroups, Config::kHeadDim, Config::kQStages, Config::kStages;
  static constexpr int kBlockM = 64 * kConsumerWarpgroups;  // wgmma tiles are 64 rows
  static constexpr int kThreads = 128 * (1 + kConsumerWarpgroups);
  static constexpr int kConsumerWarps = 4 * kConsumerWarpgroups;

  // Register split by setmaxnreg. __launch_bounds__(kThreads, 1) lets ptxas give
  // every thread 65536 / kThreads rounded down to 8 at launch (168 with 2
  // consumers); the producer hands back down to 24 and the consumers share the
  // rest (240 each with 2 consumers, 160 with 3), which must fit in what the
  // block holds or setmaxnreg.inc waits forever.
  static constexpr int kLaunchRegs = (65536 / kThreads) / 8 * 8;
  using Config::kProducerRegs;
  static constexpr int kConsumerRegs_ =
      (kLaunchRegs * kThreads - 128 * kProducerRegs) / (128 * kConsumerWarpgroups) / 8 * 8;
  static constexpr int kConsumerRegs = kConsumerRegs_ < 240 ? kConsumerRegs_ : 240;
  static_assert(128 * kProducerRegs + 128 * kConsumerWarpgroups * kConsumerRegs <= kThreads * kLaunchRegs,
                "setmaxnreg: consumers would ask for more registers than the producer gave back");
  static_assert(kConsumerWarpgroups >= 2 && kConsumerWarpgroups <= 3,
                "2 or 3 consumer warpgroups (the GEMM-issue token ring needs a neighbour)");

  // Shared-memory tiles: [kHeadDim / kColElems column blocks][rows][kColElems elements],
  // kSwizzleBytes per row of a block: 128 (the 128-byte swizzle), or with
  // 8-bit inputs at head_dim 64 the whole 64-byte row (the 64-byte swizzle).
  static constexpr int kRowBytes = kHeadDim * static_cast<int>(sizeof(Element));
  static constexpr int kSwizzleBytes = kRowBytes < 128 ? kRowBytes : 128;
  static constexpr int kColElems = kSwizzleBytes / static_cast<int>(sizeof(Element));
  static constexpr int kColBlocks = kHeadDim / kColElems;
  static constexpr int kQColBytes = kBlockM * kSwizzleBytes;
  static constexpr int kKVColBytes = kBlockN * kSwizzleBytes;
  static constexpr int kQBytes = kQColBytes * kColBlocks;
  static constexpr int kKVBytes = kKVColBytes * kColBlocks;  // one K or one V stage
  // V's stage: as K's (MN-major B of P·V), or with 8-bit inputs Vᵀ
  // [kBlockN / kVColKeys column blocks][kHeadDim rows][kVColKeys keys]
  // (K-major B): blocks of 128 keys (128-byte swizzle), or of 64 (64-byte
  // swizzle) when kBlockN is not a multiple of 128.
  static constexpr int kVColKeys = !kFp8 ? 0 : kBlockN % 128 == 0 ? 128 : 64;
  static constexpr int kVColBlocks = kFp8 ? kBlockN / kVColKeys : kColBlocks;
  // kSumByGemm: each Vᵀ column block has 8 more rows, of e4m3 ones (written
  // once, never loaded), the B of a P·1 GEMM (m64n8k32) beside P·V whose 4
  // accumulators per thread follow O's; the block is padded to whole
  // 1024-byte swizzle atoms.
  static constexpr bool kSumByGemm = Config::kSumByGemm;
  static constexpr int kSumCols = kSumByGemm ? 8 : 0;
  static constexpr int kVColRowAlign = kFp8 ? 1024 / kVColKeys : 1;
  static constexpr int kVColRows = (kHeadDim + kSumCols + kVColRowAlign - 1) / kVColRowAlign * kVColRowAlign;
  static constexpr int kVColBytes = kFp8 ? kVColRows * kVColKeys : kKVColBytes;
  static constexpr int kVStageBytes = kVColBlocks * kVColBytes;  // in shared memory (TMA writes kKVBytes of it)
  static_assert(kVColBlocks * (kFp8 ? kHeadDim * kVColKeys : kKVColBytes) == kKVBytes,
                "a V stage loads as many bytes as a K stage (one expect_tx size)");
  static_assert(!kSumByGemm || kFp8, "the row sums' ones are rows of Vᵀ (8-bit inputs)");
  static constexpr bool kPBits = Config::kPBits;
  static_assert(!kPBits || (kFp8 && kSumByGemm), "P's e4m3 bytes from the scores: 8-bit P, summed by a GEMM");
  // kTransposeV (8-bit only): V comes as it is in memory, kVColKeys keys at a
  // time, by TMA into a ring of kVStaging staging buffers (rows of head_dim
  // bytes, laid out as K's), and kTransposeWarps warps of the producer
  // warpgroup write it into the Vᵀ stages (mainloop_fwd_sm90.cuh,
  // transpose_v): no Vᵀ copy in global memory, no pass of its own.
  static constexpr bool kTransposeV = Config::kTransposeV;
  static constexpr int kTransposeWarps = 2;  // warps 1, 2: warp 0's thread 0 issues the copies
  static constexpr int kVsStages = kTransposeV ? Config::kVStaging : 1;
  static constexpr int kVsColBytes = (kFp8 ? kVColKeys : 0) * kSwizzleBytes;  // one column block of a staging buffer
  static constexpr int kVsBytes = kVsColBytes * kColBlocks;                    // kVColKeys keys × head_dim bytes
  static_assert(!kTransposeV || (kFp8 && kVsBytes % 1024 == 0),
                "V is transposed in the kernel for 8-bit inputs only (wgmma reads their B K-major)");

  static constexpr int kOffQ = 0;
  static constexpr int kOffK = kOffQ + kQStages * kQBytes;
  static constexpr int kOffV = kOffK + kStages * kKVBytes;
  static constexpr int kOffVs = kOffV + kStages * kVStageBytes;
  static constexpr int kOffBarriers = kOffVs + (kTransposeV ? kVsStages * kVsBytes : 0);
  // q_full, q_empty per Q stage, then k_full, k_empty, v_full, v_empty per
  // K/V stage, then (kTransposeV) vs_full, vs_empty per staging buffer; then
  // one tile slot per Q stage.
  static constexpr int kNumBarriers = 2 * kQStages + 4 * kStages + (kTransposeV ? 2 * kVsStages : 0);
  static constexpr int kOffTileSlot = kOffBarriers + 8 * kNumBarriers;
  // A tile slot: the work item, and for a packed batch the tile the producer
  // decoded (tile_scheduler_fwd_sm90.cuh).
  static constexpr int kSlotInts = Config::kVarlen ? 8 : 1;
  // + 1024: the dynamic shared-memory base is rounded up to the swizzle atom.
  static constexpr int kSmemBytes = kOffTileSlot + 4 * kSlotInts * kQStages + 16 + 1024;

  // Registers per consumer thread: S (and P as fp32), O, and P packed for wgmma.
  // A wgmma k step is 32 bytes of a row: k16 for 16-bit inputs, k32 for 8-bit.
  static constexpr int kKStep = 32 / static_cast<int>(sizeof(Element));
  static constexpr int kSRegs = kBlockN / 2;
  static constexpr int kORegs = (kHeadDim + kSumCols) / 2;  // O (and kSumByGemm's block row sums)
  static constexpr int kPSteps = kBlockN / kKStep;  // k steps of O += P·V
  static constexpr int kQKSteps = kHeadDim / kKStep;  // k steps of S = Q·Kᵀ
  // P is exp2(x + kExpOffset) against the running max: with 8-bit inputs P is
  // scaled by 2^8 before its rounding to e4m3 (kFp8ProbabilityScale,
  // variants/fp8.h), so probabilities down to 2^-17 of the row's largest keep
  // a value; the row sum carries the same factor and divides it out.
  static constexpr int kExpOffset = kFp8 ? 8 : 0;

  // Named barriers 1..kConsumerWarpgroups pass the GEMM-issue token between
  // the consumers (ping-pong); 0 is __syncthreads.
  static constexpr int kSchedulerBarrier = 1;
  // Then one per consumer: a packed batch's warpgroup has zeroed V rows past
  // its sequence (mainloop_fwd_sm90.cuh, zero_v_rows).
  static constexpr int kZeroVBarrier = kSchedulerBarrier + kConsumerWarpgroups;
  static_assert(kZeroVBarrier + kConsumerWarpgroups <= 16, "16 named barriers");

  static_assert(sizeof(Element) == 2 || sizeof(Element) == 1, "wgmma with 16-bit (bf16, fp16) or 8-bit (e4m3) inputs");
  static_assert(kHeadDim % kColElems == 0, "head_dim: whole swizzled column blocks");
  static_assert(kSwizzleBytes == 128 || (kFp8 && kSwizzleBytes == 64),
                "Q and K rows of 128-byte column blocks, or 64 bytes (8-bit inputs, head_dim 64)");
  static_assert(kBlockN % kKStep == 0 && kBlockN % 16 == 0 && kBlockN >= 64 && kBlockN <= 256,
                "kBlockN: wgmma n (a whole number of P·V k steps), a TMA box of <= 256 rows");
  // 8-bit: Vᵀ's stage in whole 64- or 128-key column blocks (fp8_layout.h permutes
  // keys within groups of 32); the max moves on every increase so P <= 2^8
  // before e4m3's 448 (with kRescaleSlack 8 it would reach 2^16 and
  // saturate); dense batches of one length, no half first block.
  static_assert(!kFp8 || (kBlockN % 64 == 0 && kHeadDim <= 256 && Config::kRescaleSlack < 0 && !Config::kVarlen &&
                          !Config::kHalfFirstBlock),
                "8-bit configuration: 64- or 128-key column blocks, kRescaleSlack < 0, no varlen or half block");
  static_assert(kBlockM <= 256, "a TMA box has at most 256 rows");
  static_assert(kStages >= 2, "TMA needs at least double buffering to overlap");
  static_assert(kQStages == 1 || kQStages == 2, "one or two Q tiles");
  static_assert(kQColBytes % 1024 == 0 && kKVColBytes % 1024 == 0 && kVColBytes % 1024 == 0,
                "every tile and column block must start on a 1024-byte swizzle atom");
  static_assert(kSmemBytes <= 227 * 1024, "over the per-block shared memory limit of sm_90");
};

// Named configurations: what each one changes from the defaults, with the
// measured reason (H200, bf16, TFLOP/s or ncu durations). A configuration runs
// every launch of its head dim or, with kShortCausal, only causal launches
// over more than one of its tiles but fewer than kShortCausalRows query rows.
struct Sm90FwdDefaults {
  // Keys per K/V tile, K/V tiles in flight, consumer warpgroups of 64 query
  // rows each (kBlockM = 64 · kConsumerWarpgroups), Q tiles in flight (2
  // against 1: 388/386 against 369/366 TFLOP/s at 8x16x1024x64 full, 456
  // against 430 at 8x16x2048x64).
  static constexpr int kBlockN = 128, kStages = 3, kConsumerWarpgroups = 2, kQStages = 2;
  // Every kPolyExpEvery-th 8-key column tile of S takes its exponentials on the
  // FMA pipes (softmax_sm90.cuh, exp2_poly) instead of the MUFU unit; 0: none.
  // Measured: 1-9% slower even for 1/8 (d64) or 1/16 (d128) of P, 5-20% for 1/4 or 1/2.
  // Online-softmax rescale policy (softmax_sm90.cuh): a row's running max moves
  // only when a score exceeds it by more than kRescaleSlack powers of two, so P
  // stays <= 2^kRescaleSlack (well inside fp16) and O is rarely rescaled;
  // < 0: the max moves whenever it grows. 8 beat moving it on every increase by 1-5% at d128.
  static constexpr int kPolyExpEvery = 0, kRescaleSlack = 8;
  // kTailSplit: the kernel carries the tail split's merge (tail_split.h); its
  // code alone, never run, cost 3% at 8x16x1024x64 causal (ncu 64.4 against
  // 62.4 us, the same instructions executed).
  // kQInRegs: S = Q·Kᵀ with Q from registers (wgmma A operand, loaded once per
  // tile by ldmatrix) instead of shared memory: a third less shared-memory
  // operand traffic per key block at head_dim 128, for kHeadDim / 4 more registers.
  // kHalfFirstBlock: a tile's first key block (the last visible one, where the
  // causal diagonal or the keys' end falls) runs half-width Q·Kᵀ, softmax and
  // P·V for a warpgroup whose rows see none of its upper kBlockN / 2 keys
  // (warpgroup 0 on every diagonal tile when seq_q == seq_kv).
  // kShortCausal: the configuration runs only causal launches over more than
  // one of its tiles but fewer than kShortCausalRows query rows (see below).
  static constexpr bool kTailSplit = true, kQInRegs = false, kHalfFirstBlock = false, kShortCausal = false;
  // kVarlen: the configuration runs only packed variable-length launches
  // (FwdParams::cu_seqlens_q; attnprof::flash_attention_sm90_varlen), every
  // other one only launches of one length.
  static constexpr bool kVarlen = false;
  // Registers a producer thread keeps (setmaxnreg.dec); the consumers share the rest.
  static constexpr int kProducerRegs = 24;
  // kSumByGemm (8-bit only): each key block's row sums of P by a GEMM over 8
  // rows of ones appended to Vᵀ, instead of kBlockN / 2 FADD per thread.
  static constexpr bool kSumByGemm = false;
  // kTransposeV (8-bit only): Vᵀ written by the producer warpgroup from V as
  // TMA loads it into kVStaging buffers of kVColKeys keys, instead of read
  // from a Vᵀ copy that a pass of its own writes before the launch.
  static constexpr bool kTransposeV = false;
  static constexpr int kVStaging = 4;
  // kIntMax: each key block's row max on the scores' bits as integers, by
  // 3-input VIMNMX3 (softmax_sm90.cuh), instead of a tree of FMNMX.
  static constexpr bool kIntMax = false;
  // kPBits (8-bit, with kSumByGemm): P's e4m3 bytes straight from the scores,
  // linear in the exponent (softmax_sm90.cuh, p_bits_e4m3), by FFMA and PRMT
  // instead of an exponential (MUFU) and a conversion (F2FP) per score.
  static constexpr bool kPBits = false;
};

// 128-row tiles for short causal launches (192 rows waste an eighth of the
// last tile at 1024 rows and leave fewer, longer tiles to balance the tail).
// No tail split: only causal launches over several query blocks run it, which
// never split, and the merge's code alone cost 3% (ncu 64.4 against 62.4 us).
// Q in registers (240 of them): 8x16x1024x64 causal ncu 60.8 against 62.1 us,
// 294 against 290 TFLOP/s.
struct Sm90FwdHdim64ShortCausal : Sm90FwdDefaults {
  static constexpr const char* kName = "sm90_fwd_hdim64_short_causal";
  static constexpr int kHeadDim = 64;
  static constexpr bool kShortCausal = true, kTailSplit = false, kQInRegs = true, kHalfFirstBlock = true;
};

// 3 consumers against 2: 364/367 against 335/336 TFLOP/s full at
// 8x16x1024x64, causal 369/371 against 344/345 at 8x16x2048x64 (but 241
// against 262 at 1024 rows: the short causal configuration). Q stays in
// shared memory: with 3 consumers (160 registers) ptxas spills 96 B and
// serialises the wgmma (C7512).
struct Sm90FwdHdim64 : Sm90FwdDefaults {
  static constexpr const char* kName = "sm90_fwd_hdim64";
  static constexpr int kHeadDim = 64, kConsumerWarpgroups = 3;
};

// 3 stages and 1 Q buffer against 2 and 2: ncu 790.3 against 799.8 us at
// 4x16x4096x128 full, 437.6 against 443.1 causal. Q in registers (loaded once
// at the tile's start) against shared memory: ncu 806.4 against 818.9 us
// full, 446.9 against 453.0 causal.
struct Sm90FwdHdim128 : Sm90FwdDefaults {
  static constexpr const char* kName = "sm90_fwd_hdim128";
  static constexpr int kHeadDim = 128, kQStages = 1;
  static constexpr bool kQInRegs = true;
};

// A packed variable-length batch (cu_seqlens): the general configurations'
// tiles, the tiles of every sequence handed out from the counter, sequence by
// sequence (tile_scheduler_fwd_sm90.cuh). No tail split: tiles differ in cost
// with their sequence's length.
// The producer also walks the sequences' offsets: with 24 registers ptxas
// spilled 32 B (head_dim 128) and 48 B (64) of its state. Head_dim 64 runs
// 2 consumers (128-row tiles, less of a short sequence's last tile wasted):
// with 3 (160 registers each) the consumer spilled 4 B.
struct Sm90FwdHdim64Varlen : Sm90FwdDefaults {
  static constexpr const char* kName = "sm90_fwd_hdim64_varlen";
  static constexpr int kHeadDim = 64;
  static constexpr bool kVarlen = true, kTailSplit = false;
  static constexpr int kProducerRegs = 32;
};
struct Sm90FwdHdim128Varlen : Sm90FwdHdim128 {
  static constexpr const char* kName = "sm90_fwd_hdim128_varlen";
  static constexpr bool kVarlen = true, kTailSplit = false;
  static constexpr int kProducerRegs = 32;
};

// The configurations the operator is built with; a launch runs the first one
// of its head dim that takes it (runs_launch). CMake reads this line
// (cmake/KernelFamily.cmake).
using Sm90FwdConfigs = kernels::ConfigList<Sm90FwdHdim64ShortCausal, Sm90FwdHdim64, Sm90FwdHdim128, Sm90FwdHdim64Varlen, Sm90FwdHdim128Varlen>;

// e4m3 inputs at head_dim 128 with 128-key tiles (the general bf16
// configuration's tiles, 4 K/V stages and 2 Q buffers: an 8-bit stage is
// half the bytes and its GEMMs take half the time, so more of them are in
// flight in 160 KiB). Its row max moves on every increase: a slack of 2 ran
// 0.98-1.08x (H100, one run) with 2.8x the plain FP8 error on outlier inputs;
// exp2_poly for 1/8 to 1/2 of P ran 0.84-0.97x: the MUFU is not what limits
// it (docs/notes/flash_sm90_fp8.md). The base of the others below; by name
// an alternative since 192-key tiles ran faster.
struct Sm90FwdHdim128Fp8 : Sm90FwdDefaults {
  static constexpr const char* kName = "sm90_fwd_hdim128_fp8";
  static constexpr int kHeadDim = 128, kStages = 4, kQStages = 2, kRescaleSlack = -1;
  static constexpr bool kQInRegs = true, kTailSplit = false;
};

// e4m3 at head_dim 64: Q and K rows of 64 bytes, so their tiles and
// descriptors use the 64-byte swizzle (Vᵀ's rows stay 128-key blocks); the
// head_dim 128 configuration's choices otherwise. On the H100 it ran at
// 0.73-0.79x our bf16 kernel (two runs) at 8x16x1024x64 and 4x16x4096x64 (the softmax,
// not the GEMMs, bounds the step, and at head_dim 64 the GEMMs are half of
// it already).
struct Sm90FwdHdim64Fp8 : Sm90FwdHdim128Fp8 {
  static constexpr const char* kName = "sm90_fwd_hdim64_fp8";
  static constexpr int kHeadDim = 64;
};

// Head_dim 64 as the bf16 kernel runs it: 3 consumers (192-row tiles), Q in
// shared memory, one Q buffer. 1.05-1.23x Sm90FwdHdim64Fp8 at 8x16x1024x64
// and 4x16x4096x64, causal and full (H100, one run, interleaved), 0.82-0.95x
// our bf16 kernel there; 192-key tiles on 2 consumers ran 0.93-1.06x (on 3
// consumers ptxas spills 240 B).
struct Sm90FwdHdim64Fp8C3 : Sm90FwdHdim64Fp8 {
  static constexpr const char* kName = "sm90_fwd_hdim64_fp8_c3";
  static constexpr int kConsumerWarpgroups = 3, kQStages = 1;
  static constexpr bool kQInRegs = false;
};
struct Sm90FwdHdim64Fp8N192 : Sm90FwdHdim64Fp8 {
  static constexpr const char* kName = "sm90_fwd_hdim64_fp8_n192";
  static constexpr int kBlockN = 192, kStages = 3;
};

// 192-key tiles (FlashAttention-3 runs 224 for e4m3 at head_dim 128): the
// waits, the issue token and the row max's shuffles of a key block spread
// over 1.5x the keys (in ncu they are a third of the consumers' samples at
// 128); Vᵀ in 64-key column blocks (64-byte swizzle), 3 stages (176 KiB).
// 1.00-1.08x the 128-key tiles at the three head_dim-128 benchmark shapes,
// causal and full (H100, two runs, interleaved).
struct Sm90FwdHdim128Fp8N192 : Sm90FwdHdim128Fp8 {
  static constexpr const char* kName = "sm90_fwd_hdim128_fp8_n192";
  static constexpr int kBlockN = 192, kStages = 3;
};

// The 192-key tiles with 4 K/V stages (225 KiB of shared memory with the 2 Q
// buffers): ncu put 15% of the 128-key kernel's samples in the waits before
// the GEMMs (K and V barriers, the issue token). Against the operator's 3
// stages (H100, three runs, 879c6a4 and 0f1fdf8), causal / full:
// 1.00-1.01x / 1.03-1.06x at 4x16x4096x128, 1.00-1.05x / 0.98-1.00x at
// 4x16x8192x128, 1.02-1.03x / 0.98-1.00x at 1x16x16384x128: by name only.
struct Sm90FwdHdim128Fp8N192S4 : Sm90FwdHdim128Fp8N192 {
  static constexpr const char* kName = "sm90_fwd_hdim128_fp8_n192_s4";
  static constexpr int kStages = 4;
};

// e4m3 at head_dim 256: two 128-byte column blocks per Q and K row, O of
// 128 registers a thread, so Q stays in shared memory; 2 K/V stages and one
// Q buffer (160 KiB). 879-895 / 1024-1037 TFLOP/s at 4x16x4096x256 causal /
// full (H100, two runs; cuDNN bf16 569-580 / 651-669 in the same runs).
struct Sm90FwdHdim256Fp8 : Sm90FwdHdim128Fp8 {
  static constexpr const char* kName = "sm90_fwd_hdim256_fp8";
  static constexpr int kHeadDim = 256, kStages = 2, kQStages = 1;
  static constexpr bool kQInRegs = false;
};

// The row sums of P by a GEMM (kSumByGemm) on the operator's head_dim-64 and
// -128 kernels: ncu of the 192-key kernel at 4x16x8192x128 full (879c6a4)
// counted as many FADD (the sums) as MUFU, 14% of its instructions, and the
// issue slots bound a warpgroup's softmax (exponentials moved to the FMA pipes
// made it slower). Against the same kernels summing by FADD (H100, by name in
// one process, two runs, 946af06): 1.03-1.11x at 4x16x{4096,8192}x128 and
// 1x16x16384x128 (ncu 2.68 against 3.00 ms at 8192 full), 1.03-1.23x at
// 8x16x1024x64 and 4x16x4096x64, causal and full. They normalise by the sum
// of the e4m3 P that P·V multiplies (O within the same bound; the log-sum-exp
// within e4m3's rounding, 2^-4 relative, of the exact one: 0.03 measured).
// At head_dim 256 (P·V twice as long) the sums by GEMM ran 0.96-0.98x the
// FADD ones at 4x16x4096x256 and 1x16x8192x256 (H100, two runs, 402d31f).
struct Sm90FwdHdim128Fp8N192Sum : Sm90FwdHdim128Fp8N192 {
  static constexpr const char* kName = "sm90_fwd_hdim128_fp8_n192_sum";
  static constexpr bool kSumByGemm = true;
};
// The same with Q in shared memory (16 registers a thread fewer; an 8-bit
// Q·Kᵀ from shared memory reads half the bytes a 16-bit one does, where Q in
// registers won 1-2%): the base of the operator's (below). Against Q in
// registers by name, three H100 runs (9e68510, c45595c): 0.99-1.06x at
// 4x16x{4096,8192}x128 and 1x16x16384x128, causal and full; 1.01-1.03x at 16384.
struct Sm90FwdHdim128Fp8N192SumQSmem : Sm90FwdHdim128Fp8N192Sum {
  static constexpr const char* kName = "sm90_fwd_hdim128_fp8_n192_sum_qsmem";
  static constexpr bool kQInRegs = false;
};
// The last round of a launch without a mask cut along the keys (kTailSplit,
// tail_split.h; the merge weighs the pieces with the head's descaled scale).
// Against Sm90FwdHdim128Fp8N192SumQSmem by name (H100, two runs, 0ce8315):
// 0.97-1.01x at 4x16x{4096,8192}x128 and 1x16x16384x128, causal and full;
// in one run 2.97x at 1x32q/8kv x4x131072x128 causal and 4.36x at
// 1x8x64x65536x128 (32 and 8 tiles: one key range per SM instead of one tile
// each), 1.01-1.02x at 8x32q/8kv x1x{4096,32768,131072}x128.
struct Sm90FwdHdim128Fp8N192SumQSmemSplit : Sm90FwdHdim128Fp8N192SumQSmem {
  static constexpr const char* kName = "sm90_fwd_hdim128_fp8_n192_sum_qsmem_split";
  static constexpr bool kTailSplit = true;
};
// The operator's at head_dim 128 until kPBits: the split, and the row max by VIMNMX3 on the
// scores' bits (kIntMax; its FMNMX were 15.6% of the kernel's instructions).
// Against Sm90FwdHdim128Fp8N192SumQSmem by name (H100, two runs, 0ce8315):
// 0.99-1.06x at the three shapes above, causal and full (mean 1.02x), and
// 0.98-1.07x the split alone (above 1 at 11 of 12 points). The integer max
// without the split ran 0.93-1.00x: the two do not add up as measured parts,
// the pair's SASS is scheduled otherwise.
struct Sm90FwdHdim128Fp8N192SumQSmemSplitImax : Sm90FwdHdim128Fp8N192SumQSmemSplit {
  static constexpr const char* kName = "sm90_fwd_hdim128_fp8_n192_sum_qsmem_split_imax";
  static constexpr bool kIntMax = true;
};
// P's bytes from the scores (kPBits): the exponentials (MUFU: 8 cycles a warp
// instruction, 21% of the 192-key kernel's samples) and the conversions leave
// the softmax. The operator's at head_dim 128 and 64 (there with the integer
// max, below): against the kernels it ran before by name in one process, H100,
// two runs (6f63ae9):
// 1.13-1.18x at 4x16x4096x128, 1.10-1.14x at 4x16x8192x128 and 1x16x16384x128,
// causal and full; 1.16x / 1.19x at 8x16x1024x64 causal / full, 1.14-1.17x at
// 4x16x4096x64; O's error 1.1-1.2x the other kernels' (within the plain FP8 rule).
struct Sm90FwdHdim128Fp8N192SumQSmemSplitImaxPBits : Sm90FwdHdim128Fp8N192SumQSmemSplitImax {
  static constexpr const char* kName = "sm90_fwd_hdim128_fp8_pbits";
  static constexpr bool kPBits = true;
};
// The split at head_dim 256: 0.99x / 1.01x at 4x16x4096x256 causal / full
// (H100, one run, 0ce8315); by name.
struct Sm90FwdHdim256Fp8Split : Sm90FwdHdim256Fp8 {
  static constexpr const char* kName = "sm90_fwd_hdim256_fp8_split";
  static constexpr bool kTailSplit = true;
};
struct Sm90FwdHdim64Fp8C3Sum : Sm90FwdHdim64Fp8C3 {
  static constexpr const char* kName = "sm90_fwd_hdim64_fp8_c3_sum";
  static constexpr bool kSumByGemm = true;
};

// Vᵀ written in the kernel (kTransposeV) instead of by a pass before it
// (fp8_vt_kernel.cu: ncu 25.7 us at 4x16x4096x128 on the H100, 4% / 6% of the
// forward through the CLI, full / causal; and B·Hkv·S·D bytes of memory): two
// warps of the producer warpgroup, per 32 keys × 16 head-dim bytes one
// ldmatrix.trans, 4 byte permutes and one stmatrix. The operator's at head_dim
// 64 (with kPBits since 6f63ae9's measurement, below): against the same tiles reading the pass's Vᵀ, by name in one process
// (H100, 2294faf): 1.13x / 1.08x at 8x16x1024x64 causal / full, 1.03x / 1.00x
// at 4x16x4096x64 (a first version on three warps, e983828: 1.10x / 1.05x,
// 0.99x / 0.97x). At head_dim 128 by name only: 0.94-1.03x in two runs
// (2294faf; ncu at 4x16x8192x128 full 2.56 against 2.41 ms for the kernel alone,
// L1/TEX 45% against 32% busy: the staging's TMA writes, the ldmatrix reads and
// the stmatrix writes on top of wgmma's operand reads cost the kernel more
// than the pass it saves, 2-4% there); the same register split without the
// transpose (40 / 232) ran 0.96-1.07x, so the split is not the cause.
struct Sm90FwdHdim64Fp8C3SumTransV : Sm90FwdHdim64Fp8C3Sum {
  static constexpr const char* kName = "sm90_fwd_hdim64_fp8_c3_sum_transv";
  static constexpr bool kTransposeV = true;
  static constexpr int kProducerRegs = 32;  // 24 spill; the consumers keep 160
};
struct Sm90FwdHdim64Fp8C3SumTransVPBits : Sm90FwdHdim64Fp8C3SumTransV {
  static constexpr const char* kName = "sm90_fwd_hdim64_fp8_pbits";
  static constexpr bool kPBits = true, kIntMax = true;  // (kPBits finds NaN scores by the integer max)
};
struct Sm90FwdHdim128Fp8N192SumQSmemTransV : Sm90FwdHdim128Fp8N192SumQSmem {
  static constexpr const char* kName = "sm90_fwd_hdim128_fp8_n192_sum_qsmem_transv";
  static constexpr bool kTransposeV = true;
  static constexpr int kProducerRegs = 40;  // 24 spill; the consumers keep 232 (their code peaks at 228)
};

// The fp8 configurations, built for __nv_fp8_e4m3 only; a launch of fp8
// inputs runs the first one of its head dim (CMake reads this line too).
using Sm90FwdFp8Configs = kernels::ConfigList<Sm90FwdHdim64Fp8C3SumTransVPBits, Sm90FwdHdim128Fp8N192SumQSmemSplitImaxPBits, Sm90FwdHdim256Fp8>;

// fp8 alternatives to time or check by name
// (attnprof::flash_attention_sm90_fp8_config, built with
// -DATTNPROF_KERNEL_CONFIGS; CMake reads this line too): the same tiles
// summing P by FADD, or reading the Vᵀ pass's copy, among them.
using Sm90FwdFp8Alternatives = kernels::ConfigList<Sm90FwdHdim128Fp8, Sm90FwdHdim64Fp8, Sm90FwdHdim64Fp8N192, Sm90FwdHdim64Fp8C3, Sm90FwdHdim128Fp8N192, Sm90FwdHdim128Fp8N192S4, Sm90FwdHdim128Fp8N192Sum, Sm90FwdHdim64Fp8C3Sum, Sm90FwdHdim128Fp8N192SumQSmem, Sm90FwdHdim128Fp8N192SumQSmemTransV, Sm90FwdHdim128Fp8N192SumQSmemSplit, Sm90FwdHdim256Fp8Split, Sm90FwdHdim128Fp8N192SumQSmemSplitImax, Sm90FwdHdim64Fp8C3SumTransV>;

// Alternatives to time against the above, built on request
// (-DATTNPROF_KERNEL_CONFIGS) and run by name through
// attnprof::flash_attention_sm90_config; CI builds them, and the by-name
// operator's tests run them. 176-key tiles (208 KB of shared memory with 2
// stages, Q in shared memory: in registers ptxas spills 128 B) run 1.01-1.11x
// slower than Sm90FwdHdim128 (scripts/ab_ops.py, 4 rounds: 1.11x at
// 8x16x1024x128 causal, 1.03x/1.04x at 4x16x4096x128, 1.01x at 1x16x16384x128).
struct Sm90FwdHdim128N176 : Sm90FwdHdim128 {
  static constexpr const char* kName = "sm90_fwd_hdim128_n176";
  static constexpr int kBlockN = 176, kStages = 2;
  static constexpr bool kQInRegs = false;
};
using Sm90FwdAlternatives = kernels::ConfigList<Sm90FwdHdim128N176>;

// Causal attention over fewer query rows than this, but more than one tile
// of a short-causal configuration, runs that configuration; everything else
// the general one (one query block per head: its tiles are of one cost, and
// may be split, tail_split.h).
constexpr int kShortCausalRows = 2048;

// Whether `Config` runs a launch of its head dim with this mask and seq_q
// (the longest sequence's, for a packed batch: varlen).
template <typename Config>
constexpr bool runs_launch(bool causal, int seqlen_q, bool varlen) {
  if (Config::kVarlen != varlen) return false;
  if constexpr (!Config::kShortCausal) return true;
  return causal && seqlen_q > 64 * Config::kConsumerWarpgroups && seqlen_q < kShortCausalRows;
}

}  // namespace attnprof::flash_sm90
