// Fused attention forward, FlashAttention-2 style: device code only.
//
// One block computes kBlockM query rows of one (batch, query head) against
// the keys of its split (all keys unless the plan splits them), each warp
// kMTiles m16 tiles of the rows. Grouped-query attention reads K/V head
// h / group in place; kPaged reads K/V from a paged cache through its block
// table (tile_ops.cuh, KVSource), the rest of the kernel unchanged; kVarlen
// works on one sequence of a packed variable-length batch, its rows and
// lengths from cu_seqlens (a block past its sequence's queries exits). Its Q
// tile is copied to shared memory once and, where registers allow
// (kQInRegs), held in registers as MMA A-fragments;
// K/V tiles of kBlockN keys stream through a kStages-deep cp.async ring.
// Per K/V tile each warp computes S = Q·Kᵀ (mma.sync m16n8k16, fp32
// accumulate), masks it (masking.cuh), updates the online softmax
// (online_softmax.cuh) and accumulates O += P·V with P taken straight from
// the S registers. O is normalised and written once, to the output or (split
// keys) to the fp32 partials that flash_combine_kernel merges; the log-sum-exp
// is kept.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm80_primitives.cuh"
#include "kernels/flash_attention/epilogue_fwd.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"
#include "kernels/flash_attention/masking.cuh"
#include "kernels/flash_attention/online_softmax.cuh"
#include "kernels/flash_attention/tile_ops.cuh"

namespace attnprof::flash {

// Whether sequence b's offsets stay inside the packed tensors (and its
// lengths within the longest the grid was sized for). The operator checks
// them, so only offsets changed behind its back fail: the block then exits,
// reading nothing outside the tensors.
__device__ __forceinline__ bool packed_seq_ok(const FwdParams& p, int b) {
  const int q0 = __ldg(p.cu_seqlens_q + b), q1 = __ldg(p.cu_seqlens_q + b + 1);
  const int k0 = __ldg(p.cu_seqlens_k + b), k1 = __ldg(p.cu_seqlens_k + b + 1);
  return 0 <= q0 && q0 <= q1 && q1 <= p.total_q && q1 - q0 <= p.seqlen_q && 0 <= k0 && k0 <= k1 &&
         k1 <= p.total_k && k1 - k0 <= p.seqlen_k;
}

template <typename Traits, bool kCausal, bool kPaged, bool kVarlen = false>
__global__ void __launch_bounds__(Traits::kNThreads, Traits::kMinBlocksPerSm)
    flash_fwd_kernel(const __grid_constant__ FwdParams p) {
  static_assert(!(kPaged && kVarlen), "a packed batch reads contiguous K/V");
  using namespace detail;
  using Element = typename Traits::Element;
  constexpr int kD = Traits::kHeadDim;
  constexpr int kBM = Traits::kBlockM;
  constexpr int kBN = Traits::kBlockN;
  constexpr int kMT = Traits::kMTiles;  // m16 tiles of query rows per warp
  constexpr int kWarpRows = Traits::kWarpRows;
  constexpr int kStages = Traits::kStages;
  constexpr bool kQInRegs = Traits::kQInRegs;
  constexpr int kDSteps = kD / 16;  // k16 steps of Q·Kᵀ
  constexpr int kSTiles = kBN / 8;  // n8 tiles of S
  constexpr int kOTiles = kD / 8;   // n8 tiles of O
  constexpr int kTileBytes = Traits::kSmemKVTileBytes;

  extern __shared__ __align__(128) unsigned char smem_raw[];
  const SmemTiles<Traits> smem(smem_raw);
  Element* sQ = reinterpret_cast<Element*>(smem.q_ptr);
  const uint32_t sQ_addr = smem.q, sK_addr = smem.k, sV_addr = smem.v;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int bh = blockIdx.x;
  const int b = bh / p.heads_q;
  const int h = bh % p.heads_q;
  const int h_kv = h / p.group;
  // Blocks launch in blockIdx order; under causal masking the last query block
  // has the most key blocks, so it goes first and the short ones fill the tail.
  const int m_block = gridDim.y - 1 - blockIdx.y;
  const int m0 = m_block * kBM;
  const int warp_row0 = warp * kWarpRows;  // first row of this warp inside the block

  // A packed sequence's lengths and K/V offset are read from cu_seqlens once
  // and held: re-read at each use they cost the d128_varlen tile more
  // registers, not fewer, and time (0.94x sdpa-flash's varlen call on the H200
  // against 0.99-1.00x held).
  const Element* q = [&] {
    const auto* base = static_cast<const Element*>(p.q);
    if constexpr (kVarlen) return base + int64_t{__ldg(p.cu_seqlens_q + b)} * p.q_row_stride + h * p.q_head_stride;
    else return base + b * p.q_batch_stride + h * p.q_head_stride;
  }();
  const auto kv = [&] {
    // K and V share their shape and strides (checked on the host): one offset serves both.
    if constexpr (kVarlen)
      return PackedKVSource<Element>{p, __ldg(p.cu_seqlens_k + b) * p.k_row_stride + h_kv * p.k_head_stride};
    else return kv_source<Element, kPaged>(p, b, h_kv);
  }();
  const auto mask = [&] {
    if constexpr (kVarlen)
      return KeyMask<kCausal, true>{p, {__ldg(p.cu_seqlens_q + b + 1) - __ldg(p.cu_seqlens_q + b),
                                        __ldg(p.cu_seqlens_k + b + 1) - __ldg(p.cu_seqlens_k + b)}};
    else return KeyMask<kCausal>{p};
  }();
  if constexpr (kVarlen) {
    if (!packed_seq_ok(p, b) || m0 >= mask.seqlen_q()) return;  // past this sequence's queries
  }

  // Key tiles [n_begin, n_end): this block's split, and under causal masking
  // none past the diagonal of its last row (possibly none at all: rows that
  // see no key when seqlen_q > seqlen_k), under a window none before its
  // first row's oldest key (a split there may keep none).
  // keys_per_split is a multiple of kBN (the planner's tile), except for a
  // development tile with another BLOCK_N (unsplit): round up to cover every key.
  const int tiles_per_split = (p.plan.keys_per_split + kBN - 1) / kBN;
  const int n_split = blockIdx.z * tiles_per_split;
  const int n_begin = max(n_split, mask.first_tile(m0, kBN));
  int n_end = min((mask.seqlen_k() + kBN - 1) / kBN, n_split + tiles_per_split);
  if constexpr (kCausal) n_end = min(n_end, max(0, m0 + kBM + mask.diagonal() + kBN - 1) / kBN);

  // Key tile n lives in ring stage n % kStages. Prologue: the first tile (with
  // Q) and the next kStages-2 in flight. One commit group per tile, empty
  // groups included, so wait_group<kStages-2> always means "the tile for this
  // iteration has landed".
  if constexpr (kVarlen) load_tile<Traits, kBM>(sQ_addr, q, m0, mask.seqlen_q(), tid, p.q_row_stride);
  else load_tile<Traits, kBM>(sQ_addr, q, m0, p.seqlen_q, tid);
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) load_kv_tile_or_none(smem, kv, n_begin + s, n_end, mask.seqlen_k(), tid);

  // Row state: for each of its m16 tiles a thread holds rows g and g+8 (g = lane/4).
  const int row_in_tile = lane / 4;
  const int row0 = m0 + warp_row0 + row_in_tile;  // + 16·mt + 8·half
  auto query_row = [&](int mt, int half) { return row0 + mt * 16 + 8 * half; };
  OnlineSoftmax<kMT, Traits::kRescaleSlack> softmax;
  float acc_o[kMT][kOTiles][4];
  softmax.init(acc_o);

  const uint32_t q_off = sQ_addr + LaneOffsets<Traits>::q(lane, warp_row0);
  const uint32_t k_lane_off = LaneOffsets<Traits>::k(lane);
  const uint32_t v_lane_off = LaneOffsets<Traits>::v(lane);
  // Q's A fragments, loaded once where kQInRegs (after the first tile lands).
  uint32_t q_regs[kQInRegs ? kMT : 1][kQInRegs ? kDSteps : 1][4];

  const float scale_log2 = p.scale_log2;

  for (int n = n_begin; n < n_end; ++n) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // tile n visible to all; every warp is done with tile n-1

    // Refill the stage that held tile n-1 with tile n + kStages - 1.
    load_kv_tile_or_none(smem, kv, n + kStages - 1, n_end, mask.seqlen_k(), tid);

    if constexpr (kQInRegs) {
      if (n == n_begin) {
#pragma unroll
        for (int mt = 0; mt < kMT; ++mt)
#pragma unroll
          for (int ks = 0; ks < kDSteps; ++ks)
            ldmatrix_x4(q_regs[mt][ks], q_frag_addr<Traits>(q_off, mt, ks));
      }
    }

    const int stage = n % kStages;
    const uint32_t k_off = sK_addr + stage * kTileBytes + k_lane_off;
    const uint32_t v_off = sV_addr + stage * kTileBytes + v_lane_off;
    const int n0 = n * kBN;
    float acc_s[kMT][kSTiles][4];
    gemm_qk<Traits>(acc_s, q_regs, q_off, k_off);
    if (mask.tile_needs_mask(n0, kBN, m0, m0 + kBM - 1)) mask.apply(acc_s, n0, lane, query_row);
    softmax.update(acc_s, acc_o, scale_log2);
    gemm_pv<Traits>(acc_o, acc_s, v_off);
  }
  cp_async_wait<0>();
  // With no key tile (rows that see no key: a sequence without keys, or causal
  // with len_q - len_k past the block) no barrier followed the Q copy, and
  // another warp's copy of a row could land after the epilogue staged this
  // warp's zeros there. (Block-uniform: n_begin and n_end are the block's.)
  // Only the causal kernels meet it (the full ones always have a key tile:
  // the operators return before a launch without keys); the barrier leaves
  // their registers as they were on sm_90a (sm_80 paged d128: 247 -> 251).
  if constexpr (kVarlen || kCausal) {
    if (n_begin >= n_end) __syncthreads();
  }

  float inv_sum[kMT][2];
  softmax.finish(inv_sum);
  if (p.plan.num_splits > 1) {
    store_split_partials<Traits>(p, bh, lane, acc_o, inv_sum, softmax, query_row);
    return;
  }
  if constexpr (kVarlen) {
    // Packed: row r of the sequence is row q_row0 + r of out, lse [heads_q][total_q].
    const int q_row0 = __ldg(p.cu_seqlens_q + b);
    Element* o = static_cast<Element*>(p.o) + int64_t{q_row0} * p.o_row_stride + h * p.o_head_stride;
    float* lse = p.lse + static_cast<int64_t>(h) * p.total_q + q_row0;
    store_output_rows<Traits>(p, sQ, o, p.o_row_stride, lse, mask.seqlen_q(), m0, warp_row0, row_in_tile, lane,
                              acc_o, inv_sum, softmax, query_row);
  } else {
    store_output<Traits>(p, sQ, b, h, bh, m0, warp_row0, row_in_tile, lane, acc_o, inv_sum, softmax, query_row);
  }
}

}  // namespace attnprof::flash
