// Compile-time shape of the Hopper attention backward, one configuration per
// head dim.
//
// A block owns kBlockN = 128 keys of one (batch, KV head) and is two
// warpgroups of 64 keys each. K and V stay in shared memory; Q, dO and their
// per-row statistics (lse·log2 e and D = rowsum(dO∘O)) stream through
// kStages buffers of kBlockM query rows, loaded by TMA. Per query block each
// warpgroup computes Sᵀ = K·Qᵀ and dPᵀ = V·dOᵀ (wgmma from shared memory),
// Pᵀ and dSᵀ in registers, dV += Pᵀ·dO and dK += dSᵀ·Q (wgmma with Pᵀ and dSᵀ
// as register operands), and writes dSᵀ transposed to shared memory, where
// both warpgroups read it for dQ = dS·K, which goes through shared memory to
// the fp32 workspace by TMA reductions. Tiles use TMA's 128-byte swizzle:
// column blocks of 64 elements (128 bytes) × rows, 1024-byte aligned.
#pragma once

#include <cstdint>

#include "kernels/common/config_list.h"
#include "kernels/common/host_device.h"

namespace attnprof::flash_sm90 {

// How the two warpgroups share dQ = dS·K of one query block (kBlockM × D):
//  - kRows: warpgroup w computes query rows 64w..64w+63 (kBlockM = 128);
//  - kCols: head-dim columns 64w..64w+63 (kBlockM = 64, head_dim 128);
//  - kKeys: each warpgroup all of dQ over its own 64 keys, and both add to the
//    workspace (kBlockM = 64, head_dim 64; twice the reductions).
enum class DqSplit { kRows, kCols, kKeys };

// Q/dO stages: 3 ran 1-3% slower than 2 at every benchmark shape (H200, bf16;
// a refill is issued a whole step ahead already).
constexpr int kBwdStages = 2;

// Everything the kernel derives from one named configuration (below), whose
// values it inherits, and the element type.
template <typename Config, typename Element_>
struct BwdTraits : Config {
  using Element = Element_;  // __nv_bfloat16 or __half
  using Config::kBlockM, Config::kHeadDim;  // query rows per step; head_dim
  static constexpr int kBlockN = 128;       // keys per block: 64 per warpgroup
  static constexpr int kWarpgroups = 2;      // the MMA warpgroups
  static constexpr int kMmaThreads = 128 * kWarpgroups;
  // kProducerWarpgroup: one more warpgroup, first, at kProducerRegs registers: its thread 0 issues every TMA
  // load (no MMA warp waits for a stage to refill) and, with kDqWriter, warps 1 and 2 issue the MMA warpgroups'
  // dQ reductions; the MMA warpgroups get kMmaRegs (setmaxnreg).
  static constexpr bool kProducerWarpgroup = Config::kProducerWarpgroup;
  static constexpr bool kDqWriter = Config::kDqWriter;
  // kPersistent: without a causal mask one block per SM walks the tiles (tile_scheduler_bwd_sm90.cuh);
  // the producer loads a tile's K and V once the MMA warps have released the last one's (kv_empty).
  static constexpr bool kPersistent = Config::kPersistent;
  // kTmaEpilogue: a warpgroup's dV and dK go through shared memory (its rows of V and K) to global memory by
  // TMA stores, instead of from registers by 4-byte stores (epilogue_bwd_sm90.cuh).
  static constexpr bool kTmaEpilogue = Config::kTmaEpilogue;
  static constexpr int kThreads = kMmaThreads + (kProducerWarpgroup ? 128 : 0);
  static constexpr int kProducerRegs = 24, kMmaRegs = 240;
  static constexpr int kWarps = 4 * kWarpgroups;  // MMA warps: each releases a Q/dO stage
  static constexpr int kStages = kBwdStages;  // Q / dO buffers

  static constexpr DqSplit kDqSplit = Config::kDqByKeys   ? DqSplit::kKeys
                                      : kBlockM == 128   ? DqSplit::kRows
                                      : kHeadDim == 128  ? DqSplit::kCols
                                                         : DqSplit::kKeys;
  static constexpr int kDqN = kDqSplit == DqSplit::kCols ? 64 : kHeadDim;  // wgmma n of dQ
  // 64-row wgmma tiles of dQ per warpgroup: all kBlockM rows when split by keys.
  static constexpr int kDqMTiles = kDqSplit == DqSplit::kKeys ? kBlockM / 64 : 1;

  static constexpr int kColElems = 64;  // 128 bytes of 16-bit elements
  static constexpr int kColBlocks = kHeadDim / kColElems;
  static constexpr int kQColBytes = kBlockM * 128;  // Q, dO: one column block
  static constexpr int kQBytes = kQColBytes * kColBlocks;
  static constexpr int kKVColBytes = kBlockN * 128;
  static constexpr int kKVBytes = kKVColBytes * kColBlocks;
  // dS as dQ's A operand: [kBlockN / 64 key blocks][kBlockM rows][64 keys].
  static constexpr int kDSColBytes = kBlockM * 128;
  static constexpr int kDSBytes = kDSColBytes * (kBlockN / 64);
  static constexpr int kRowStatBytes = kBlockM * 4;  // fp32 per query row

  static constexpr int kOffK = 0;
  static constexpr int kOffV = kOffK + kKVBytes;
  static constexpr int kOffQ = kOffV + kKVBytes;
  static constexpr int kOffDO = kOffQ + kStages * kQBytes;
  // Two dS buffers: one warpgroup may write the next query block's dS while
  // the other still reads this one's (the barrier between them is per step).
  static constexpr int kOffDS = kOffDO + kStages * kQBytes;
  // Each warpgroup's share of dQ in fp32 on its way to the workspace by TMA
  // reduction: [kDqMTiles][kDqN / 32 column blocks][64 rows][32 floats (128 bytes)].
  static constexpr int kDqColBytes = 64 * 128;
  static constexpr int kDqBytes = kDqColBytes * (kDqN / 32) * kDqMTiles;  // per warpgroup
  static constexpr int kOffDQ = kOffDS + 2 * kDSBytes;
  static constexpr int kOffLse = kOffDQ + kWarpgroups * kDqBytes;
  static constexpr int kOffDsum = kOffLse + kStages * kRowStatBytes;
  static constexpr int kOffBarriers = kOffDsum + kStages * kRowStatBytes;
  // kv_full, then q_full, do_full, empty per stage, then kv_empty: every MMA warp's last read of K and V,
  // or (kTmaEpilogue) each warpgroup's TMA stores of dV and dK from them.
  static constexpr int kKvReleases = kTmaEpilogue ? kWarpgroups : kWarps;
  static constexpr int kNumBarriers = 2 + 3 * kStages;
  // + 1024: the dynamic shared-memory base is rounded up to the swizzle atom.
  static constexpr int kSmemBytes = kOffBarriers + 8 * kNumBarriers + 1024;

  static constexpr int kSRegs = kBlockM / 2;    // Sᵀ, dPᵀ: 64 keys × kBlockM queries
  static constexpr int kAccRegs = kHeadDim / 2;  // dV, dK: 64 keys × head_dim
  static constexpr int kMSteps = kBlockM / 16;   // k16 steps of dV += Pᵀ·dO, dK += dSᵀ·Q
  static constexpr int kDSteps = kHeadDim / 16;  // k16 steps of Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ

  // Named barriers: dS is in shared memory (both warpgroups', id 1; split by
  // keys, each warpgroup its own, 1 + warpgroup); a warpgroup's dQ buffer
  // (3 + warpgroup).
  static constexpr int kDsBarrier = 1;
  static constexpr int kDqBarrier = 3;
  // kDeferDq: warpgroup w's half of dS in buffer b is written (ds_full) and, by the other warpgroup's dQ,
  // read (ds_empty); each one warpgroup arrives at and the other waits on (5-8, 9-12 of the 16 ids).
  static ATTNPROF_HOST_DEVICE constexpr int ds_full_barrier(int w, int b) { return 5 + 2 * w + b; }
  static ATTNPROF_HOST_DEVICE constexpr int ds_empty_barrier(int w, int b) { return 9 + 2 * w + b; }
  // kPingPong: warpgroup w may issue its Sᵀ and dPᵀ GEMMs (13, 14).
  static ATTNPROF_HOST_DEVICE constexpr int issue_barrier(int w) { return 13 + w; }
  // kTmaEpilogue: warpgroup w's dV and dK are in shared memory (the ids of issue_barrier).
  static ATTNPROF_HOST_DEVICE constexpr int epilogue_barrier(int w) { return 13 + w; }
  // Both MMA warpgroups are done with a tile's K (kTmaEpilogue: before either writes dK over it) and dS
  // (kPersistent: before either writes the next tile's) (15).
  static constexpr int kTileBarrier = 15;
  // kDqWriter: warpgroup w's dQ is in its buffer (dq_full, the ids of kDqBarrier) and the writer warp's
  // reduction has read it (dq_empty, the ids of kDsBarrier, which a deferred dQ does not use); each over
  // the warpgroup and its writer warp.
  static ATTNPROF_HOST_DEVICE constexpr int dq_full_barrier(int w) { return kDqBarrier + w; }
  static ATTNPROF_HOST_DEVICE constexpr int dq_empty_barrier(int w) { return kDsBarrier + w; }
  static constexpr int kDqWriterThreads = 128 + 32;

  static_assert(sizeof(Element) == 2, "wgmma with 16-bit inputs: bf16 or fp16");
  static_assert(kHeadDim == 64 || kHeadDim == 128, "head_dim 64 or 128");
  static_assert(kBlockM == 64 || kBlockM == 128, "kBlockM: wgmma n of Sᵀ, a divisor of the workspace padding");
  static_assert(kDqSplit != DqSplit::kRows || kBlockM == 64 * kWarpgroups, "row split: 64 rows per warpgroup");
  static_assert(!Config::kDeferDq || kDqSplit != DqSplit::kKeys, "a deferred dQ reads both warpgroups' dS");
  static_assert(!Config::kPingPong || Config::kDeferDq, "ping-pong needs the warpgroups free to drift (kDeferDq)");
  static_assert(!kDqWriter || (kProducerWarpgroup && Config::kDeferDq),
                "the dQ writer warps are in the producer warpgroup and use the barrier ids a deferred dQ frees");
  static_assert(!kPersistent || kDqWriter, "a persistent block's roles: the producer and the dQ writer warps");
  static_assert(!kPersistent || 2 * kSmemBytes > 228 * 1024, "a persistent grid has one block per SM");
  static_assert(!kTmaEpilogue || !Config::kPingPong, "the TMA epilogue's barrier ids are the ping-pong's");
  static_assert(!kProducerWarpgroup || 128 * kProducerRegs + kMmaThreads * kMmaRegs <= 65536,
                "the register file: producer and MMA warpgroups");
  static_assert(kQColBytes % 1024 == 0 && kKVColBytes % 1024 == 0 && kDSColBytes % 1024 == 0,
                "every tile and column block must start on a 1024-byte swizzle atom");
  static_assert(kSmemBytes <= 227 * 1024, "over the per-block shared memory limit of sm_90");
};

// Named configurations, one per head dim (registers: see
// flash_bwd_sm90_kernel.cuh); the element type only sets the element size.
// Measured on the H200, bf16.

// kBlockM: query rows per step; kDqByKeys: each warpgroup computes dQ over
// its own keys (DqSplit::kKeys) whatever the shape.
struct Sm90BwdHdim64 {
  static constexpr const char* kName = "sm90_bwd_hdim64";
  // 128 rows against 64 (dQ split by keys, 174 registers): 64 ran 1.32x
  // causal, 1.44x full slower at 8x16x1024x64 (half the work per step for the
  // same latencies, and twice the dQ reductions). Split by keys, 128-row query
  // blocks would need two 32 KB dQ buffers, 56 bytes more shared memory than a
  // block of sm_90 gets: rows there.
  static constexpr int kHeadDim = 64, kBlockM = 128;
  static constexpr bool kDqByKeys = false;
  static constexpr bool kDeferDq = false;
  static constexpr bool kPingPong = false;
  static constexpr bool kProducerWarpgroup = false, kDqWriter = false;
  static constexpr bool kPersistent = false;
  static constexpr bool kTmaEpilogue = true;  // see Sm90BwdHdim64RegisterEpilogue
};

// dQ of a step computed a step later: a warpgroup writes its dS, signals it (named barrier arrive, no
// wait) and goes on to the previous step's dQ, whose dS both warpgroups wrote a step ago; the two may
// then drift up to a step apart instead of meeting every step (ncu at 4x16x4096x128 full: 0.26
// eligible warps per scheduler, tensor pipe 54%, the per-step barrier keeping them in lockstep).
// Against meeting every step (Sm90BwdHdim128StepBarrier), H100, three runs: 0.99-1.09x at
// 4x16x4096x128, 1x16x16384x128 and 4x32/8x4096x128, causal and full (16 of 18 faster, the
// third run 1.00-1.03x).
// A producer warpgroup issues the TMA loads (no MMA warp waits to refill a stage) and its warps 1
// and 2 the dQ reductions (a warpgroup hands its dQ over with a barrier arrive instead of meeting
// itself at a second barrier before one thread issues them). Against the same kernel without
// (Sm90BwdHdim128NoProducer), H100, four runs at those six points (8eece55, 55bd2cf, 234e98c):
// 0.97-1.09x, 19 of 24 at or above 1.00, mean 1.02x; the producer alone ran 0.95-1.00x. ncu of it (4x16x4096x128
// full): 0.33 eligible warps per scheduler, the MMA warps' largest stalls the waits for their own GEMMs.
struct Sm90BwdHdim128 {
  static constexpr const char* kName = "sm90_bwd_hdim128";
  static constexpr int kHeadDim = 128, kBlockM = 64;
  static constexpr bool kDqByKeys = false;  // see Sm90BwdHdim128DqByKeys
  static constexpr bool kDeferDq = true;
  static constexpr bool kPingPong = false;  // see Sm90BwdHdim128PingPong
  static constexpr bool kProducerWarpgroup = true, kDqWriter = true;  // see Sm90BwdHdim128NoProducer
  static constexpr bool kPersistent = false;  // see Sm90BwdHdim128Persistent
  static constexpr bool kTmaEpilogue = true;   // see Sm90BwdHdim128RegisterEpilogue
};

// The configurations the operator is built with, one per head dim. CMake
// reads this line (cmake/KernelFamily.cmake).
using Sm90BwdConfigs = kernels::ConfigList<Sm90BwdHdim64, Sm90BwdHdim128>;

// Alternatives worth timing against the above, built on request
// (-DATTNPROF_KERNEL_CONFIGS), run by name through
// attnprof::flash_attention_backward_sm90_config.
// The MMA warpgroups issue their own loads (thread 0, a stage refilled once both released it, behind
// its first GEMMs) and dQ reductions.
struct Sm90BwdHdim128NoProducer : Sm90BwdHdim128 {
  static constexpr const char* kName = "sm90_bwd_hdim128_no_producer";
  static constexpr bool kProducerWarpgroup = false, kDqWriter = false;
  static constexpr bool kPersistent = false, kTmaEpilogue = false;
};
// Without a mask one block per SM walking the tiles (the static hand-out), the next tile's first Q/dO
// stages loaded as the last one ends: against a block per tile, H100, three runs at 4x16x4096x128,
// 1x16x16384x128, 2x16x8192x128, 16x16x1024x128, 8x16x2048x128 and 4x32/8x4096x128 (full): 0.979-1.025x,
// mean 1.004x (1x16x16384x128 0.979-1.008x).
struct Sm90BwdHdim128Persistent : Sm90BwdHdim128 {
  static constexpr const char* kName = "sm90_bwd_hdim128_persistent";
  static constexpr bool kPersistent = true;
};
// dV and dK stored from the accumulators, two 16-bit elements per thread and instruction (2048 4-byte
// stores a warp, 8 rows apiece). The TMA epilogue against it, H100, one run, both persistent (d609fa7):
// 1.056x / 1.131x at 16x16x1024x128 full / causal, 1.028x at 8x16x2048x128 full, 0.997x / 1.020x at
// 4x16x4096x128, 0.985x / 0.981x at 4x32/8x4096x128, 1.011x / 0.999x at 1x16x16384x128, 1.014x at
// 2x16x8192x128 full: the shorter the tile, the more its stores weigh.
struct Sm90BwdHdim128RegisterEpilogue : Sm90BwdHdim128 {
  static constexpr const char* kName = "sm90_bwd_hdim128_register_epilogue";
  static constexpr bool kTmaEpilogue = false;
};
// Head_dim 64's dV and dK stored from the accumulators. The TMA epilogue (no producer warpgroup: nothing
// reloads K and V after it) against it, H100, two runs in one process, tree built there (80d4313):
// 1.089-1.091x / 1.049x at 8x16x1024x64 causal / full, 1.097-1.099x / 1.046-1.048x at 16x16x1024x64,
// 1.021-1.059x / 1.006-1.008x at 4x16x4096x64, 0.995-0.997x / 0.998-1.009x at 8x32/8x2048x64 (full: 8
// steps a tile at 1024 keys, 32 at 4096, 64 with a group of 4 query heads at 2048; the fewer, the more
// the tile's end weighs).
struct Sm90BwdHdim64RegisterEpilogue : Sm90BwdHdim64 {
  static constexpr const char* kName = "sm90_bwd_hdim64_register_epilogue";
  static constexpr bool kTmaEpilogue = false;
};
// Every warpgroup computing dQ over its own keys only (no barrier between them, twice the dQ
// reductions) ran 1.00x/1.01x at 4x16x4096x128 causal/full, 1.06x/1.06x slower at 1x16x16384x128
// (against the step barrier).
struct Sm90BwdHdim128DqByKeys : Sm90BwdHdim128NoProducer {
  static constexpr const char* kName = "sm90_bwd_hdim128_dq_by_keys";
  static constexpr bool kDqByKeys = true, kDeferDq = false;
};
// Both warpgroups' dS written, then both compute this step's dQ: a barrier between them every step.
struct Sm90BwdHdim128StepBarrier : Sm90BwdHdim128NoProducer {
  static constexpr const char* kName = "sm90_bwd_hdim128_step_barrier";
  static constexpr bool kDeferDq = false;
};
// On top of the deferred dQ, the warpgroups take turns issuing their first GEMMs of a step (Sᵀ, dPᵀ),
// as the forward's two consumers do, so one's exponentials might run under the other's GEMMs:
// 0.86-0.93x the deferred dQ alone (H100, one run, the three head_dim-128 shapes above).
struct Sm90BwdHdim128PingPong : Sm90BwdHdim128NoProducer {
  static constexpr const char* kName = "sm90_bwd_hdim128_ping_pong";
  static constexpr bool kPingPong = true;
};
using Sm90BwdAlternatives = kernels::ConfigList<Sm90BwdHdim128Persistent, Sm90BwdHdim128RegisterEpilogue, Sm90BwdHdim64RegisterEpilogue, Sm90BwdHdim128NoProducer, Sm90BwdHdim128DqByKeys, Sm90BwdHdim128StepBarrier, Sm90BwdHdim128PingPong>;

}  // namespace attnprof::flash_sm90
