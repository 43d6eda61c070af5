// Hopper attention backward, FlashAttention-2's algorithm on wgmma and TMA
// (device code only).
//
// One block per (kBlockN = 128 keys, batch, KV head), two warpgroups of 64
// keys each; the key block is the fast index of the 1-D grid, so the blocks
// resident at once read the same heads' Q and dO and keep them in L2. K and V are loaded
// once. The block walks over every query block that sees one of its keys, for
// every query head of its KV head's group; thread 0 issues the TMA copies of
// Q, dO, lse·log2 e and D into kStages buffers (refilling one a step ahead,
// once all eight warps have released it). Per query block, each warpgroup:
//   Sᵀ = K·Qᵀ, dPᵀ = V·dOᵀ          wgmma, both operands from shared memory
//   Pᵀ = exp2(Sᵀ·scale·log2 e − lse·log2 e), masked; dSᵀ = Pᵀ ∘ (dPᵀ − D)
//   dV += Pᵀ·dO, dK += dSᵀ·Q          wgmma, Pᵀ and dSᵀ as register operands
//   dSᵀ → shared memory as dS (stmatrix .trans), a barrier with the other
//   warpgroup, then its share of dQ = dS·K (DqSplit), which goes through
//   shared memory to the fp32 workspace by TMA reduction (cp.reduce.async.bulk).
// dK (times the softmax scale) and dV are stored from registers at the end.
// The preprocessing (D, lse·log2 e, zeroed workspace) and the dQ conversion
// are the portable kernels of flash_attention/flash_bwd_launch.cu.
//
// Registers (ptxas, sm_90a, 255 at most with 256 threads): 240 at head_dim
// 128 (dV and dK 64 each, Sᵀ and dPᵀ 32 each, the packed Pᵀ/dSᵀ, dQ 32), 252
// at head_dim 64 with 128-row query blocks (dV, dK 32 each, Sᵀ, dPᵀ 64 each);
// no spills. Design and measurements: docs/notes/flash_bwd_sm90.md.
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm80_primitives.cuh"  // exp2_approx, ld_shared_f32x2
#include "kernels/common/sm90_primitives.cuh"
#include "kernels/common/sm90_wgmma.cuh"
#include "kernels/flash_sm90/flash_bwd_sm90_traits.h"

namespace attnprof::flash_sm90 {

// What the kernel reads: the tensor maps (kernel parameters, read in place by
// TMA: __grid_constant__) and the sizes the launch layer derived.
struct BwdKernelArgs {
  CUtensorMap tma_q;   // [B·Hq][Sq][D], box kBlockM rows × 64 columns
  CUtensorMap tma_do;  // as tma_q
  CUtensorMap tma_k;   // [B·Hkv][Sk][D], box kBlockN rows × 64 columns
  CUtensorMap tma_v;
  CUtensorMap tma_dq;     // dq_accum as [B·Hq][Sq_pad][D] float32, box 64 rows × 32 columns
  const float* lse_log2;  // [B·Hq][Sq_pad]: +inf where a row sees no key or is padding
  const float* d_sum;     // [B·Hq][Sq_pad]
  float* dq_accum;        // [B·Hq][Sq_pad][D], zeroed
  void* dk;
  void* dv;
  int64_t dk_batch_stride, dk_head_stride, dk_row_stride;
  int64_t dv_batch_stride, dv_head_stride, dv_row_stride;
  int heads_q;
  int heads_kv;
  int seqlen_q;
  int seqlen_k;
  int seqlen_q_pad;
  int causal_offset;  // seqlen_k - seqlen_q: key j visible to query i iff j <= i + offset
  int num_m_blocks;   // query blocks per head
  int num_n_blocks;   // key blocks per KV head: blockIdx.x = slab · num_n_blocks + key block
  float scale;
  float scale_log2;
  bool causal;
};

namespace bwd_detail {

using namespace kernels;

template <typename Traits>
struct Smem {
  uint32_t k, v, q, dout, ds, dq, lse, dsum, bar;
  __device__ uint32_t kv_full() const { return bar; }
  __device__ uint32_t q_full(int s) const { return bar + 8 * (1 + s); }
  __device__ uint32_t do_full(int s) const { return bar + 8 * (1 + Traits::kStages + s); }
  __device__ uint32_t empty(int s) const { return bar + 8 * (1 + 2 * Traits::kStages + s); }
};

// Step `it` of a block's walk: query heads of the group outer, query blocks
// (from the first that sees one of the block's keys) inner.
struct Step {
  int q_slab;   // batch · heads_q + query head
  int m_block;  // query block
};

__device__ __forceinline__ Step step_of(const BwdKernelArgs& a, int b, int hkv, int m_begin, int m_count,
                                        int it) {
  const int group = a.heads_q / a.heads_kv;
  return {b * a.heads_q + hkv * group + it / m_count, m_begin + it % m_count};
}

// Q and lse·log2 e complete on q_full, dO and D on do_full.
template <typename Traits>
__device__ __forceinline__ void load_step(const BwdKernelArgs& a, const Smem<Traits>& sm, Step st, int s) {
  const int row0 = st.m_block * Traits::kBlockM;
  const int64_t stat_row = static_cast<int64_t>(st.q_slab) * a.seqlen_q_pad + row0;
  const uint32_t q_full = sm.q_full(s), do_full = sm.do_full(s);
  const uint32_t tile_off = s * Traits::kQBytes, stat_off = s * Traits::kRowStatBytes;
  mbar_arrive_expect_tx(q_full, Traits::kQBytes + Traits::kRowStatBytes);
#pragma unroll
  for (int cb = 0; cb < Traits::kColBlocks; ++cb)
    tma_load_3d(sm.q + tile_off + cb * Traits::kQColBytes, &a.tma_q, q_full, cb * Traits::kColElems, row0,
                st.q_slab);
  bulk_load_1d(sm.lse + stat_off, a.lse_log2 + stat_row, Traits::kRowStatBytes, q_full);
  mbar_arrive_expect_tx(do_full, Traits::kQBytes + Traits::kRowStatBytes);
#pragma unroll
  for (int cb = 0; cb < Traits::kColBlocks; ++cb)
    tma_load_3d(sm.dout + tile_off + cb * Traits::kQColBytes, &a.tma_do, do_full, cb * Traits::kColElems, row0,
                st.q_slab);
  bulk_load_1d(sm.dsum + stat_off, a.d_sum + stat_row, Traits::kRowStatBytes, do_full);
}

// Calls f(e, stat[query]) for every element e of this thread's part of a
// 64 × kN accumulator, whose columns are query rows: element 4t + 2i + j sits
// in column 8t + c2 + j (sm90_wgmma.cuh); `stats` holds one fp32 per column
// in shared memory, read two at a time.
template <int kN, typename F>
__device__ __forceinline__ void for_each_column(uint32_t stats, int c2, F&& f) {
#pragma unroll
  for (int t = 0; t < kN / 8; ++t) {
    const float2 v = ld_shared_f32x2(stats + (8 * t + c2) * 4);
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      f(4 * t + 2 * i, v.x);
      f(4 * t + 2 * i + 1, v.y);
    }
  }
}

// Stores a 64-key × head_dim accumulator (this thread's keys key_row0 and
// key_row0 + 8) times `scale`, rows past seqlen_k skipped.
template <typename Traits, int N>
__device__ __forceinline__ void store_rows(void* base, int64_t row_stride, const float (&acc)[N], float scale,
                                           int key_row0, int seqlen_k, int lane) {
  using Element = typename Traits::Element;
  Element* out = static_cast<Element*>(base);
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int key = key_row0 + 8 * i;
    if (key >= seqlen_k) continue;
    uint32_t* dst = reinterpret_cast<uint32_t*>(out + key * row_stride + 2 * (lane % 4));
#pragma unroll
    for (int t = 0; t < N / 4; ++t) dst[4 * t] = pack2<Element>(acc[4 * t + 2 * i] * scale, acc[4 * t + 2 * i + 1] * scale);
  }
}

}  // namespace bwd_detail

template <typename Traits>
__global__ void __launch_bounds__(Traits::kThreads, 1)
    flash_bwd_sm90_kernel(const __grid_constant__ BwdKernelArgs a) {
  using namespace bwd_detail;
  using Element = typename Traits::Element;
  using GemmS = Wgmma<Element, Traits::kBlockM>;     // Sᵀ, dPᵀ: 64 keys × kBlockM queries
  using GemmAcc = Wgmma<Element, Traits::kHeadDim>;  // dV, dK: 64 keys × head_dim
  using GemmDq = Wgmma<Element, Traits::kDqN>;
  constexpr int kBM = Traits::kBlockM;
  constexpr int kBN = Traits::kBlockN;
  constexpr int kD = Traits::kHeadDim;
  constexpr DqSplit kSplit = Traits::kDqSplit;

  extern __shared__ __align__(1024) unsigned char smem_raw[];
  // The swizzle atoms need 1024-byte aligned tiles; the launch asks for 1024
  // spare bytes to round the dynamic base up.
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem_raw)) + 1023) & ~1023u;
  Smem<Traits> sm;
  sm.k = base + Traits::kOffK;
  sm.v = base + Traits::kOffV;
  sm.q = base + Traits::kOffQ;
  sm.dout = base + Traits::kOffDO;
  sm.ds = base + Traits::kOffDS;
  sm.dq = base + Traits::kOffDQ;
  sm.lse = base + Traits::kOffLse;
  sm.dsum = base + Traits::kOffDsum;
  sm.bar = base + Traits::kOffBarriers;

  // The key block is the fast index, so the blocks resident at once share
  // their heads' Q and dO in L2.
  const int n_block = static_cast<int>(blockIdx.x % a.num_n_blocks);
  const int bkv = static_cast<int>(blockIdx.x / a.num_n_blocks);  // batch · heads_kv + KV head
  const int b = bkv / a.heads_kv, hkv = bkv % a.heads_kv;
  const int n0 = n_block * kBN;
  // The first query block with a row that sees key n0.
  const int m_begin = a.causal ? max(0, n0 - a.causal_offset) / kBM : 0;
  const int m_count = max(0, a.num_m_blocks - m_begin);
  const int iters = (a.heads_q / a.heads_kv) * m_count;

  if (threadIdx.x == 0) {
    mbar_init(sm.kv_full(), 1);
#pragma unroll
    for (int s = 0; s < Traits::kStages; ++s) {
      mbar_init(sm.q_full(s), 1);
      mbar_init(sm.do_full(s), 1);
      mbar_init(sm.empty(s), Traits::kWarps);
    }
    fence_barrier_init();
  }
  __syncthreads();

  // Warp-uniform; the shuffle tells the compiler so (wgmma under control flow
  // it cannot prove uniform gets serialised, C7520).
  const int wg = warp_uniform(static_cast<int>(threadIdx.x / 128));
  const int tid = threadIdx.x % 128;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int key_row0 = n0 + 64 * wg + 16 * warp + lane / 4;  // this thread's keys: + 0 and + 8

  if (threadIdx.x == 0 && iters > 0) {
    prefetch_tensor_map(&a.tma_q);
    prefetch_tensor_map(&a.tma_do);
    prefetch_tensor_map(&a.tma_k);
    prefetch_tensor_map(&a.tma_v);
    mbar_arrive_expect_tx(sm.kv_full(), 2 * Traits::kKVBytes);
#pragma unroll
    for (int cb = 0; cb < Traits::kColBlocks; ++cb) {
      tma_load_3d(sm.k + cb * Traits::kKVColBytes, &a.tma_k, sm.kv_full(), cb * Traits::kColElems, n0, bkv);
      tma_load_3d(sm.v + cb * Traits::kKVColBytes, &a.tma_v, sm.kv_full(), cb * Traits::kColElems, n0, bkv);
    }
    for (int s = 0; s < Traits::kStages && s < iters; ++s)
      load_step<Traits>(a, sm, step_of(a, b, hkv, m_begin, m_count, s), s);
  }

  // Descriptors (sm90_primitives.cuh). K-major: this warpgroup's K and V rows
  // (A of Sᵀ and dPᵀ), Q and dO (B of Sᵀ and dPᵀ, N = query rows), dS (A of
  // dQ). MN-major: Q and dO as B of dK and dV (N = head_dim), K as B of dQ.
  const uint64_t desc_k = smem_desc_sw128(sm.k + wg * 64 * 128, 16, 1024);
  const uint64_t desc_v = smem_desc_sw128(sm.v + wg * 64 * 128, 16, 1024);
  const uint64_t desc_q = smem_desc_sw128(sm.q, 16, 1024);
  const uint64_t desc_do = smem_desc_sw128(sm.dout, 16, 1024);
  const uint64_t desc_q_mn = smem_desc_sw128(sm.q, Traits::kQColBytes, 1024);
  const uint64_t desc_do_mn = smem_desc_sw128(sm.dout, Traits::kQColBytes, 1024);
  // This warpgroup's share of dQ = dS·K: rows of dS, columns of K, or keys.
  const int dq_row_off = kSplit == DqSplit::kRows ? 64 * wg : 0;
  const int dq_col_off = kSplit == DqSplit::kCols ? 64 * wg : 0;
  constexpr int kDqKSteps = kSplit == DqSplit::kKeys ? 4 : kBN / 16;
  constexpr int kDqMTiles = Traits::kDqMTiles;
  const int dq_key_off = kSplit == DqSplit::kKeys ? 64 * wg : 0;
  const uint64_t desc_ds =
      smem_desc_sw128(sm.ds + dq_row_off * 128 + (dq_key_off / 64) * Traits::kDSColBytes, 16, 1024);
  const uint64_t desc_k_mn =
      smem_desc_sw128(sm.k + (dq_col_off / 64) * Traits::kKVColBytes + dq_key_off * 128, Traits::kKVColBytes, 1024);
  // k16 steps: along a K-major row (32 bytes, then the next column block), or
  // 16 rows down an MN-major operand.
  auto kv_step = [](int ks) { return static_cast<uint64_t>(((ks / 4) * Traits::kKVColBytes + (ks % 4) * 32) >> 4); };
  auto q_step = [](int ks) { return static_cast<uint64_t>(((ks / 4) * Traits::kQColBytes + (ks % 4) * 32) >> 4); };
  auto ds_step = [](int ks) { return static_cast<uint64_t>(((ks / 4) * Traits::kDSColBytes + (ks % 4) * 32) >> 4); };
  auto rows16 = [](int kk) { return static_cast<uint64_t>((kk * 16 * 128) >> 4); };

  // stmatrix .trans writes dSᵀ's 8×8 fragments as rows of dS (query row, 8
  // keys = one 16-byte chunk of the 128-byte swizzled row). Lane l addresses
  // matrix l / 8: query columns 8(l / 16) + l % 8 of a k16 step, keys
  // 64 wg + 16 warp + 8((l / 8) % 2).
  const int mi = lane / 8, r8 = lane % 8;
  const uint32_t ds_lane = wg * Traits::kDSColBytes + (8 * (mi / 2) + r8) * 128 + (((2 * warp + mi % 2) ^ r8) * 16);

  float dv[Traits::kAccRegs], dk[Traits::kAccRegs];
#pragma unroll
  for (int r = 0; r < Traits::kAccRegs; ++r) dv[r] = dk[r] = 0.f;

  const int c2 = 2 * (lane % 4);
  if (iters > 0) mbar_wait(sm.kv_full(), 0);
  for (int it = 0; it < iters; ++it) {
    const int stage = it % Traits::kStages;
    const uint32_t phase = (it / Traits::kStages) & 1;
    const Step st = step_of(a, b, hkv, m_begin, m_count, it);
    const int q0 = st.m_block * kBM;
    const uint64_t q_off = (stage * Traits::kQBytes) >> 4;
    float s[Traits::kSRegs], dp[Traits::kSRegs];

    // Both waits before the fence: a wait between the two GEMMs makes ptxas
    // insert a warpgroup.arrive of its own (C7519).
    mbar_wait(sm.q_full(stage), phase);
    mbar_wait(sm.do_full(stage), phase);
    wgmma_fence();
#pragma unroll
    for (int ks = 0; ks < Traits::kDSteps; ++ks)
      GemmS::template ss<0>(s, desc_k + kv_step(ks), desc_q + q_off + q_step(ks), ks > 0);
    wgmma_commit();
#pragma unroll
    for (int ks = 0; ks < Traits::kDSteps; ++ks)
      GemmS::template ss<0>(dp, desc_v + kv_step(ks), desc_do + q_off + q_step(ks), ks > 0);
    wgmma_commit();
    // Refill the stage the previous step used (with step it - 1 + kStages),
    // once all eight warps have released it. Placed here, behind this step's
    // first GEMMs, the wait rarely blocks: the other warpgroup has long
    // finished that step.
    {
      const int prev = it - 1;
      if (threadIdx.x == 0 && prev >= 0 && prev + Traits::kStages < iters) {
        mbar_wait(sm.empty(prev % Traits::kStages), (prev / Traits::kStages) & 1);
        load_step<Traits>(a, sm, step_of(a, b, hkv, m_begin, m_count, prev + Traits::kStages),
                          prev % Traits::kStages);
      }
      __syncwarp();  // warp 0 whole again before the next wgmma instructions
    }
    wgmma_wait<1>();  // Sᵀ done; dPᵀ may still run
    pin_registers(s);

    // Pᵀ. Padding rows and rows that see no key have lse·log2 e = +inf: 0.
    for_each_column<kBM>(sm.lse + stage * Traits::kRowStatBytes, c2, [&](int e, float lse_log2) {
      s[e] = exp2_approx(fmaf(s[e], a.scale_log2, -lse_log2));
    });
    // Keys past the end (zeros from TMA, but exp2(0 − lse) is not 0) and,
    // under causal masking, keys after the query: only on blocks that reach
    // past the first query row's limit.
    const bool tail = n0 + kBN > a.seqlen_k;
    const bool diagonal = a.causal && n0 + kBN - 1 > q0 + a.causal_offset;
    if (tail || diagonal) {
#pragma unroll
      for (int t = 0; t < kBM / 8; ++t)
#pragma unroll
        for (int i = 0; i < 2; ++i)
#pragma unroll
          for (int j = 0; j < 2; ++j) {
            const int key = key_row0 + 8 * i;
            const int query = q0 + 8 * t + c2 + j;
            if (key >= a.seqlen_k || (a.causal && key > query + a.causal_offset)) s[4 * t + 2 * i + j] = 0.f;
          }
    }

    // dV += Pᵀ·dO (Pᵀ packed as wgmma A fragments: k16 step kk covers query
    // columns 16kk..16kk+15).
    uint32_t pp[Traits::kMSteps][4];
    pack_a_fragments<Element>(s, pp);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Traits::kMSteps; ++kk)
      GemmAcc::template rs<1>(dv, pp[kk], desc_do_mn + q_off + rows16(kk), 1);
    wgmma_commit();
    wgmma_wait<1>();  // dPᵀ done; dV may still run
    pin_registers(dp);

    // dSᵀ = Pᵀ ∘ (dPᵀ − D), into dp.
    for_each_column<kBM>(sm.dsum + stage * Traits::kRowStatBytes, c2,
                         [&](int e, float d_row) { dp[e] = s[e] * (dp[e] - d_row); });
    uint32_t pds[Traits::kMSteps][4];
    pack_a_fragments<Element>(dp, pds);
    // dK += dSᵀ·Q.
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < Traits::kMSteps; ++kk)
      GemmAcc::template rs<1>(dk, pds[kk], desc_q_mn + q_off + rows16(kk), 1);
    wgmma_commit();

    // dS to shared memory: pds[kk] holds the fragments of query columns
    // 16kk..16kk+15 in the order stmatrix .x4 takes them.
    const uint32_t ds_buf = sm.ds + (it % 2) * Traits::kDSBytes;
#pragma unroll
    for (int kk = 0; kk < Traits::kMSteps; ++kk) stmatrix_x4_trans(ds_buf + ds_lane + kk * 16 * 128, pds[kk]);
    fence_proxy_async_shared();
    if constexpr (kSplit == DqSplit::kKeys) {
      named_bar_sync(Traits::kDsBarrier + wg, 128);  // this warpgroup's dS is written
    } else {
      named_bar_sync(Traits::kDsBarrier, Traits::kThreads);  // both warpgroups' dS are written
    }

    // dQ (this warpgroup's share) = dS·K, in 64-row tiles.
    float dq[kDqMTiles][GemmDq::kAccRegs];
    const uint64_t ds_off = ((it % 2) * Traits::kDSBytes) >> 4;
    wgmma_fence();
#pragma unroll
    for (int mt = 0; mt < kDqMTiles; ++mt)
#pragma unroll
      for (int ks = 0; ks < kDqKSteps; ++ks)
        GemmDq::template ss<1>(dq[mt], desc_ds + ds_off + ((mt * 64 * 128) >> 4) + ds_step(ks),
                               desc_k_mn + rows16(ks), ks > 0);
    wgmma_commit();
    wgmma_wait<0>();
#pragma unroll
    for (int mt = 0; mt < kDqMTiles; ++mt) pin_registers(dq[mt]);
    pin_registers(dv);
    pin_registers(dk);
#pragma unroll
    for (int kk = 0; kk < Traits::kMSteps; ++kk) {
      pin_registers(pp[kk]);
      pin_registers(pds[kk]);
    }
    if (lane == 0) mbar_arrive(sm.empty(stage));  // this warp's last read of Q and dO of this stage

    {
      // Through shared memory (the map's 128-byte swizzled box layout: row r,
      // float column n at 16-byte chunk (n % 32) / 4 ^ r % 8), then one TMA
      // reduction per 32-column block, issued by the warpgroup's first thread.
      const uint32_t dq_buf = sm.dq + wg * Traits::kDqBytes;
      constexpr int kTileBytes = Traits::kDqBytes / kDqMTiles;
      if (tid == 0) bulk_wait_group_read<0>();  // the previous step's reduction has read the buffer
      named_bar_sync(Traits::kDqBarrier + wg, 128);
#pragma unroll
      for (int mt = 0; mt < kDqMTiles; ++mt)
#pragma unroll
        for (int i = 0; i < 2; ++i) {
          const int row = 16 * warp + lane / 4 + 8 * i;
#pragma unroll
          for (int t = 0; t < Traits::kDqN / 8; ++t) {
            const int n = 8 * t + c2;
            const uint32_t addr = dq_buf + mt * kTileBytes + (n / 32) * Traits::kDqColBytes + row * 128 +
                                  ((((n % 32) / 4) ^ (row % 8)) * 16) + (n % 4) * 4;
            st_shared_f32x2(addr, dq[mt][4 * t + 2 * i], dq[mt][4 * t + 2 * i + 1]);
          }
        }
      fence_proxy_async_shared();
      named_bar_sync(Traits::kDqBarrier + wg, 128);
      if (tid == 0) {
#pragma unroll
        for (int mt = 0; mt < kDqMTiles; ++mt)
#pragma unroll
          for (int cb = 0; cb < Traits::kDqN / 32; ++cb)
            tma_reduce_add_3d(&a.tma_dq, dq_buf + mt * kTileBytes + cb * Traits::kDqColBytes, dq_col_off + 32 * cb,
                              q0 + dq_row_off + 64 * mt, st.q_slab);
        bulk_commit_group();
      }
    }
  }

  // The dQ reductions must have read shared memory before the block exits.
  if (tid == 0) bulk_wait_group<0>();

  // A block whose keys no query sees (iters == 0) stores zeros.
  store_rows<Traits>(static_cast<Element*>(a.dv) + b * a.dv_batch_stride + hkv * a.dv_head_stride, a.dv_row_stride,
                     dv, 1.f, key_row0, a.seqlen_k, lane);
  store_rows<Traits>(static_cast<Element*>(a.dk) + b * a.dk_batch_stride + hkv * a.dk_head_stride, a.dk_row_stride,
                     dk, a.scale, key_row0, a.seqlen_k, lane);
}

}  // namespace attnprof::flash_sm90
