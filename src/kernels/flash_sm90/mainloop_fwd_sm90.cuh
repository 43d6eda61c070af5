// The Hopper forward's main loop (device code): the producer's TMA loads of
// Q, K and V into their rings of shared-memory stages, and a consumer
// warpgroup's GEMMs and softmax over the key blocks of one tile
// (flash_fwd_sm90_kernel.cuh wires them to the tile scheduler and the
// epilogue).
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>

#include "kernels/common/sm80_primitives.cuh"  // ldmatrix_x4
#include "kernels/common/sm90_primitives.cuh"
#include "kernels/common/sm90_wgmma.cuh"
#include "kernels/flash_sm90/fp8_layout.h"
#include "kernels/flash_sm90/kernel_args_fwd_sm90.h"
#include "kernels/flash_sm90/softmax_sm90.cuh"
#include "kernels/flash_sm90/tile_scheduler_fwd_sm90.cuh"

namespace attnprof::flash_sm90::detail {

using namespace kernels;

// Shared-memory addresses (shared window, 1024-byte aligned tiles).
template <typename Traits>
struct Smem {
  uint32_t q, k, v, vs, bar;  // vs: the V staging buffers (kTransposeV)
  volatile int* tile_slot;

  static constexpr uint32_t kKV = 16 * Traits::kQStages;  // the K/V barriers follow the Q ones
  __device__ uint32_t q_tile(uint32_t s) const { return q + s * Traits::kQBytes; }
  __device__ uint32_t q_full(uint32_t s) const { return bar + 8 * s; }
  __device__ uint32_t q_empty(uint32_t s) const { return bar + 8 * (Traits::kQStages + s); }
  __device__ uint32_t k_full(uint32_t s) const { return bar + kKV + 8 * s; }
  __device__ uint32_t k_empty(uint32_t s) const { return bar + kKV + 8 * (Traits::kStages + s); }
  __device__ uint32_t v_full(uint32_t s) const { return bar + kKV + 8 * (2 * Traits::kStages + s); }
  __device__ uint32_t v_empty(uint32_t s) const { return bar + kKV + 8 * (3 * Traits::kStages + s); }
  __device__ uint32_t vs_tile(uint32_t s) const { return vs + s * Traits::kVsBytes; }
  __device__ uint32_t vs_full(uint32_t s) const { return bar + kKV + 8 * (4 * Traits::kStages + s); }
  __device__ uint32_t vs_empty(uint32_t s) const {
    return bar + kKV + 8 * (4 * Traits::kStages + Traits::kVsStages + s);
  }
};

// A packed batch's tile, decoded by the producer, beside its work item in the
// Q stage's tile slot (ints 1..6; the item is int 0; k0 stays with the producer). Written before the Q
// stage's full barrier completes, read after it (flash_fwd_sm90_kernel.cuh).
template <typename Traits>
__device__ __forceinline__ void publish_tile(const Smem<Traits>& sm, uint32_t stage, const Tile& t) {
  volatile int* slot = sm.tile_slot + stage * Traits::kSlotInts;
  slot[1] = t.bh;
  slot[2] = t.m_block;
  slot[3] = t.n_hi;
  slot[4] = t.q0;
  slot[5] = t.len_q;
  slot[6] = t.len_k;
}
template <typename Traits>
__device__ __forceinline__ Tile published_tile(const Smem<Traits>& sm, uint32_t stage) {
  const volatile int* slot = sm.tile_slot + stage * Traits::kSlotInts;
  Tile t;
  // Shuffled from lane 0, as the item: warp-uniform for the wgmma under the branches they steer.
  t.bh = warp_uniform<int>(slot[1]);
  t.m_block = warp_uniform<int>(slot[2]);
  t.n_lo = 0;
  t.n_hi = warp_uniform<int>(slot[3]);
  t.q0 = warp_uniform<int>(slot[4]);
  t.k0 = 0;  // the producer's only
  t.len_q = warp_uniform<int>(slot[5]);
  t.len_k = warp_uniform<int>(slot[6]);
  return t;
}

// Position in the K/V ring: stage and the parity of its current phase.
template <int kStages>
struct RingPos {
  uint32_t stage = 0;
  uint32_t phase = 0;
  __device__ void advance() {
    if (++stage == kStages) {
      stage = 0;
      phase ^= 1;
    }
  }
};

// The Q tile of t into Q stage `stage`, completing on its full barrier.
template <typename Traits>
__device__ __forceinline__ void load_q_tile(const KernelArgs& a, const Smem<Traits>& sm, const Tile& t, uint32_t stage,
                                            uint32_t q_full) {
  if (t.n_hi > t.n_lo) {
    mbar_arrive_expect_tx(q_full, Traits::kQBytes);
#pragma unroll
    for (int cb = 0; cb < Traits::kColBlocks; ++cb)
      if constexpr (Traits::kVarlen)  // rows past the sequence are the next one's (computed, never stored) or zeros
        tma_load_3d(sm.q_tile(stage) + cb * Traits::kQColBytes, &a.tma_q, q_full, cb * Traits::kColElems,
                    t.q0 + t.m_block * Traits::kBlockM, t.bh);
      else
        tma_load_3d(sm.q_tile(stage) + cb * Traits::kQColBytes, &a.tma_q, q_full, cb * Traits::kColElems,
                    t.m_block * Traits::kBlockM, t.bh);
  } else {
    mbar_arrive(q_full);  // nothing visible: the consumers write zeros
  }
}

// K and V of t's key blocks, the last visible one first, into the K/V ring
// (kTransposeV: V into the staging ring, `spos`).
template <typename Traits>
__device__ __forceinline__ void load_kv_tiles(const KernelArgs& a, const Smem<Traits>& sm, const Tile& t, int group,
                                              RingPos<Traits::kStages>& pos, RingPos<Traits::kVsStages>& spos) {
  // A packed batch: the slab is the K/V head, its rows from the sequence's
  // first (keys past the sequence, the next one's or zeros, are masked).
  const int kv_slab = Traits::kVarlen ? t.bh / group : dense_kv_head(a, t.bh, group);
  const int row0 = Traits::kVarlen ? t.k0 : 0;
  // K and V of one key block into the current stage, each once its buffer is free.
  auto load_kv = [&](const CUtensorMap* map, uint32_t dst, uint32_t full, uint32_t empty, int n) {
    mbar_wait(empty, pos.phase ^ 1);
    mbar_arrive_expect_tx(full, Traits::kKVBytes);
#pragma unroll
    for (int cb = 0; cb < Traits::kColBlocks; ++cb)
      tma_load_3d(dst + cb * Traits::kKVColBytes, map, full, cb * Traits::kColElems, row0 + n * Traits::kBlockN,
                  kv_slab);
  };
  // 8-bit: Vᵀ's key block n, [head_dim rows][kBlockN keys] in kVColKeys-key
  // column blocks (keys past the padded end read as zeros, under masked P).
  auto load_vt = [&](uint32_t dst, uint32_t full, uint32_t empty, int n) {
    mbar_wait(empty, pos.phase ^ 1);
    mbar_arrive_expect_tx(full, Traits::kKVBytes);
#pragma unroll
    for (int cb = 0; cb < Traits::kVColBlocks; ++cb)
      tma_load_3d(dst + cb * Traits::kVColBytes, &a.tma_v, full, n * Traits::kBlockN + cb * Traits::kVColKeys, 0,
                  kv_slab);
  };
  // kTransposeV: V's key block n as it is in memory, kVColKeys keys (one Vᵀ
  // column block) per staging buffer; the transposing warps free each.
  auto load_v_staged = [&](int n) {
#pragma unroll 1
    for (int vb = 0; vb < Traits::kVColBlocks; ++vb) {
      mbar_wait(sm.vs_empty(spos.stage), spos.phase ^ 1);
      mbar_arrive_expect_tx(sm.vs_full(spos.stage), Traits::kVsBytes);
#pragma unroll
      for (int cb = 0; cb < Traits::kColBlocks; ++cb)
        tma_load_3d(sm.vs_tile(spos.stage) + cb * Traits::kVsColBytes, &a.tma_v, sm.vs_full(spos.stage),
                    cb * Traits::kColElems, row0 + n * Traits::kBlockN + vb * Traits::kVColKeys, kv_slab);
      spos.advance();
    }
  };
  for (int n = t.n_hi - 1; n >= t.n_lo; --n) {
    load_kv(&a.tma_k, sm.k + pos.stage * Traits::kKVBytes, sm.k_full(pos.stage), sm.k_empty(pos.stage), n);
    const uint32_t v_dst = sm.v + pos.stage * Traits::kVStageBytes;
    if constexpr (Traits::kTransposeV)
      load_v_staged(n);
    else if constexpr (Traits::kFp8)
      load_vt(v_dst, sm.v_full(pos.stage), sm.v_empty(pos.stage), n);
    else
      load_kv(&a.tma_v, v_dst, sm.v_full(pos.stage), sm.v_empty(pos.stage), n);
    pos.advance();
  }
}

// kTransposeV: warp `tw` of the kTransposeWarps transposing warps of the
// producer warpgroup. It follows the producer's work items (read with the Q
// tile, like the consumers, whose release of the Q stage it joins) and per
// key block writes its groups of 32 keys (fp8_layout.h) of each Vᵀ column
// block from a staging buffer, once the consumers have released the stage;
// the fence orders its stores before wgmma reads them. Per 32 keys × 16
// head-dim bytes: one ldmatrix.x4.trans of the keys' rows (matrix i: keys
// 8i..8i+7; lane l gets 2 bytes of keys 2(l % 4) and +1 at head-dim bytes
// 2(l / 4) and +1), 4 byte permutes into Vᵀ words (keys 16h + 2c, +1, +8, +9:
// the order fp8_vt_key gives positions 16h + 4c..+3), one stmatrix.x4 of
// 16-byte pieces of 8 Vᵀ rows. Lane group g stores rows 2g + e with e
// alternating between its two registers by g >= 4, so the 8 rows of each
// stored matrix differ mod 8 and fall in distinct banks under either swizzle.
// Both swizzles permute 16-byte chunks within a row by the row alone, so a
// lane's addresses are one base per group plus a constant (an XOR of the
// chunk for the loads) per 16 head-dim bytes.
template <typename Traits>
__device__ __forceinline__ void transpose_v(const KernelArgs& a, const Smem<Traits>& sm, int tw, int lane) {
  constexpr int kDChunks = Traits::kHeadDim / 16;  // 16-byte pieces of a key's row
  constexpr int kGroups = Traits::kVColKeys / kFp8KeyGroup;
  static_assert(kGroups % Traits::kTransposeWarps == 0, "whole groups of 32 keys per transposing warp");
  constexpr int kChunksPerCol = Traits::kSwizzleBytes / 16;
  const int m = lane / 8, r = lane % 8;  // the matrix and row this lane addresses
  const int st_row = 2 * r + ((r >> 2) ^ (m & 1));  // of each 16 Vᵀ rows; matrix m: (h, e) = (m / 2, m % 2)
  const int st_half = m >> 1;
  const int mine = (lane / 4) >> 2;  // whose row this lane's register e holds: 2(lane / 4) + (mine ^ e)
  const uint32_t sel0 = mine ? 0x7531u : 0x6420u, sel1 = mine ? 0x6420u : 0x7531u;
  RingPos<Traits::kStages> pos;
  RingPos<Traits::kVsStages> spos;
  RingPos<Traits::kQStages> qpos;
  for (;;) {
    mbar_wait(sm.q_full(qpos.stage), qpos.phase);
    const int item = warp_uniform<int>(sm.tile_slot[qpos.stage * Traits::kSlotInts]);
    __syncwarp();
    if (lane == 0) mbar_arrive(sm.q_empty(qpos.stage));
    qpos.advance();
    if (item == kNoMoreWork) return;
    const Tile t = decode_tile<Traits>(a, item);
    for (int n = t.n_hi - 1; n >= t.n_lo; --n) {
      mbar_wait(sm.v_empty(pos.stage), pos.phase ^ 1);
      const uint32_t vt = sm.v + pos.stage * Traits::kVStageBytes;
#pragma unroll 1
      for (int vb = 0; vb < Traits::kVColBlocks; ++vb) {
        mbar_wait(sm.vs_full(spos.stage), spos.phase);
#pragma unroll 1
        for (int i = 0; i < kGroups / Traits::kTransposeWarps; ++i) {
          const int group = tw + Traits::kTransposeWarps * i;
          const uint32_t ld = sm.vs_tile(spos.stage) +
                              swizzled_chunk<Traits::kSwizzleBytes>(kFp8KeyGroup * group + 8 * m + r, 0);
          const uint32_t st = vt + vb * Traits::kVColBytes +
                              swizzled_chunk<Traits::kVColKeys>(st_row, 2 * group + st_half);
#pragma unroll
          for (int dc = 0; dc < kDChunks; ++dc) {
            uint32_t x[4];
            ldmatrix_x4_trans(x, (ld ^ ((dc % kChunksPerCol) << 4)) + (dc / kChunksPerCol) * Traits::kVsColBytes);
            const uint32_t y[4] = {__byte_perm(x[0], x[1], sel0), __byte_perm(x[0], x[1], sel1),
                                   __byte_perm(x[2], x[3], sel0), __byte_perm(x[2], x[3], sel1)};
            stmatrix_x4(st + dc * 16 * Traits::kVColKeys, y);
          }
        }
        __syncwarp();  // the warp's reads of the buffer are done
        if (lane == 0) mbar_arrive(sm.vs_empty(spos.stage));
        spos.advance();
      }
      fence_proxy_async_shared();
      __syncwarp();
      if (lane == 0) mbar_arrive(sm.v_full(pos.stage));
      pos.advance();
    }
  }
}

// Low words of the operand descriptors: the k steps along a K-major row
// (32 bytes, then the next swizzled column block) and the K/V ring stages add
// byte offsets / 16 to the address field.
template <typename Traits>
struct DescSteps {
  static constexpr int kStepsPerCol = Traits::kSwizzleBytes / 32;  // k steps along one swizzled Q/K row
  static constexpr int kStepsPerVCol = Traits::kFp8 ? Traits::kVColKeys / 32 : 0;  // along a Vᵀ row
  static __device__ __forceinline__ uint32_t q_step(int ks) {
    return static_cast<uint32_t>(((ks / kStepsPerCol) * Traits::kQColBytes + (ks % kStepsPerCol) * 32) >> 4);
  }
  static __device__ __forceinline__ uint32_t k_step(int ks) {
    return static_cast<uint32_t>(((ks / kStepsPerCol) * Traits::kKVColBytes + (ks % kStepsPerCol) * 32) >> 4);
  }
  // P·V's k step kk in V's stage: 16 rows down MN-major V (16-bit), or 32
  // bytes along Vᵀ's K-major rows, then its next column block (8-bit).
  static __device__ __forceinline__ uint32_t v_step(int kk) {
    if constexpr (Traits::kFp8)
      return static_cast<uint32_t>(((kk / kStepsPerVCol) * Traits::kVColBytes + (kk % kStepsPerVCol) * 32) >> 4);
    else
      return static_cast<uint32_t>((kk * 16 * 128) >> 4);
  }
  static __device__ __forceinline__ uint32_t stage_off(uint32_t s) {
    return static_cast<uint32_t>((s * Traits::kKVBytes) >> 4);
  }
  static __device__ __forceinline__ uint32_t v_stage_off(uint32_t s) {
    return static_cast<uint32_t>((s * Traits::kVStageBytes) >> 4);
  }
  // Q and K: kSwizzleBytes-swizzled rows, 8-row groups 8 rows of kSwizzleBytes apart; V
  // the 128-byte swizzle, 8-bit Vᵀ that of its kVColKeys-byte rows. (The low words come from
  // smem_desc_sw128_lo whatever the mode: address and leading offset only.)
  static __device__ __forceinline__ uint64_t desc_qk(uint32_t lo) {
    if constexpr (Traits::kSwizzleBytes == 128)
      return smem_desc_sw128_join(lo, 1024);
    else
      return smem_desc_sw64_join(lo, 512);
  }
  static __device__ __forceinline__ uint64_t desc_v(uint32_t lo) {
    if constexpr (Traits::kFp8 && Traits::kVColKeys == 64)
      return smem_desc_sw64_join(lo, 512);
    else
      return smem_desc_sw128_join(lo, 1024);
  }
};

// S = Q·Kᵀ over head_dim, Q from registers (qf) or shared memory (dq).
template <typename Traits, int kSN, typename QFragments>
__device__ __forceinline__ void qk_gemm(float (&s)[kSN / 2], const QFragments& qf, uint32_t dq, uint32_t dk) {
  using GemmSx = Wgmma<typename Traits::Element, kSN>;
  using D = DescSteps<Traits>;
#pragma unroll
  for (int ks = 0; ks < Traits::kQKSteps; ++ks) {
    if constexpr (Traits::kQInRegs)
      GemmSx::template rs<0>(s, qf[ks], D::desc_qk(dk + D::k_step(ks)), ks > 0);
    else
      GemmSx::template ss<0>(s, D::desc_qk(dq + D::q_step(ks)), D::desc_qk(dk + D::k_step(ks)), ks > 0);
  }
}

// O += P·V over the first kSteps k steps of P (V MN-major; 8-bit: Vᵀ K-major).
// kSumByGemm: then this block's row sums of P, over Vᵀ's rows of ones, into
// O's last 4 registers, from zero: an FP8 wgmma keeps about 13 bits of its
// accumulator, so a sum carried over every key block lost the small P (the
// log-sum-exp 2-5% low at 3000 keys, H100); the kernel adds them in fp32.
template <typename Traits, int kSteps>
__device__ __forceinline__ void pv_gemm(float (&o)[Traits::kORegs], const uint32_t (&p)[Traits::kPSteps][4],
                                        uint32_t dv) {
  using GemmO = Wgmma<typename Traits::Element, Traits::kHeadDim>;
  using D = DescSteps<Traits>;
  constexpr int kTransV = Traits::kFp8 ? 0 : 1;
  auto& acc = reinterpret_cast<float (&)[Traits::kHeadDim / 2]>(o);
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) GemmO::template rs<kTransV>(acc, p[kk], D::desc_v(dv + D::v_step(kk)), 1);
  if constexpr (Traits::kSumByGemm) {
    auto& sums = reinterpret_cast<float (&)[4]>(o[Traits::kHeadDim / 2]);
    constexpr uint32_t kOnesRows = (Traits::kHeadDim * Traits::kVColKeys) >> 4;  // row kHeadDim of a column block
#pragma unroll
    for (int kk = 0; kk < kSteps; ++kk)
      Wgmma<typename Traits::Element, 8>::template rs<0>(sums, p[kk], D::desc_v(dv + D::v_step(kk) + kOnesRows), kk > 0);
  }
}

// kSumByGemm: the row sums of the block P·V just finished (O's last 4
// registers: columns 0, 1 of row g, then of row g + 8, all equal) into the
// running sums.
template <typename Traits>
__device__ __forceinline__ void add_gemm_sums(const float (&o)[Traits::kORegs], RowState& st) {
  st.sum[0] += o[Traits::kHeadDim / 2];
  st.sum[1] += o[Traits::kHeadDim / 2 + 2];
}

// P·V done: O and the P registers are free, and the V stage goes back.
template <typename Traits>
__device__ __forceinline__ void finish_pv(float (&o)[Traits::kORegs], uint32_t (&p)[Traits::kPSteps][4],
                                          bool warp_leader, uint32_t v_empty) {
  wgmma_wait<0>();
  pin_registers(o);
#pragma unroll
  for (int kk = 0; kk < Traits::kPSteps; ++kk) pin_registers(p[kk]);
  if (warp_leader) mbar_arrive(v_empty);
}

// Masks: keys past the end, and under causal masking keys after the query
// (only blocks that reach past this warpgroup's first row's limit).
template <typename Traits, int kSN>
__device__ __forceinline__ void mask_scores(const KernelArgs& a, const Tile& t, int n_block, int wg_row0, int row0,
                                            int lane, float (&s)[kSN / 2]) {
  constexpr int kBN = Traits::kBlockN;
  const int n0 = n_block * kBN;
  const int seqlen_k = seqlen_k_of<Traits>(a, t), causal_offset = causal_offset_of<Traits>(a, t);
  const bool tail = n0 + kBN > seqlen_k;
  const bool diagonal = a.causal && n0 + kBN - 1 > wg_row0 + causal_offset;
  if (tail || diagonal) {
    int limit[2];
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      limit[r] = seqlen_k - 1 - n0;
      if (a.causal) limit[r] = min(limit[r], row0 + 8 * r + causal_offset - n0);
    }
    mask_columns<kSN>(s, lane, limit);
  }
}

// P (at most 2^8 here) as e4m3 k32 A fragments, four keys per register,
// straight from the accumulator (fp8_layout.h: Vᵀ's key order matches): by
// default rounded to nearest and saturated at 448 by cvt (two values per
// instruction); kBytes: s holds p_bits_e4m3's floats (softmax_sm90.cuh), whose
// byte 1 is P's byte, gathered by three PRMT per register.
template <int kSteps, bool kBytes = false>
__device__ __forceinline__ void pack_p_e4m3(const float (&s)[16 * kSteps], uint32_t (&p)[kSteps][4]) {
#pragma unroll
  for (int q = 0; q < kSteps; ++q)
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const float v0 = s[fp8_p_source(q, r, 0)], v1 = s[fp8_p_source(q, r, 1)];
      const float v2 = s[fp8_p_source(q, r, 2)], v3 = s[fp8_p_source(q, r, 3)];
      if constexpr (kBytes) {
        const uint32_t lo = __byte_perm(__float_as_uint(v0), __float_as_uint(v1), 0x0051u);
        const uint32_t hi = __byte_perm(__float_as_uint(v2), __float_as_uint(v3), 0x0051u);
        p[q][r] = __byte_perm(lo, hi, 0x5410u);
      } else {
        const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(v0, v1), __NV_SATFINITE, __NV_E4M3);
        const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(v2, v3), __NV_SATFINITE, __NV_E4M3);
        p[q][r] = lo | (hi << 16);  // byte b of the register: value b (float2's x goes to the low byte)
      }
    }
}

// P as wgmma A fragments; of a half block (kHalfS) only the computed keys,
// the rest zero.
template <typename Traits, bool kHalfS, int kSN>
__device__ __forceinline__ void pack_p(const float (&s)[kSN / 2], uint32_t (&p)[Traits::kPSteps][4]) {
  using Element = typename Traits::Element;
  if constexpr (Traits::kFp8) {
    static_assert(!kHalfS, "no half block with 8-bit inputs");
    pack_p_e4m3<Traits::kPSteps, Traits::kPBits>(s, p);
  } else if constexpr (kHalfS) {
    uint32_t lower[Traits::kPSteps / 2][4];  // P of the computed keys; the rest is zero
    pack_a_fragments<Element>(s, lower);
#pragma unroll
    for (int kk = 0; kk < Traits::kPSteps; ++kk)
#pragma unroll
      for (int r = 0; r < 4; ++r) p[kk][r] = kk < Traits::kPSteps / 2 ? lower[kk][r] : 0u;
  } else {
    pack_a_fragments<Element>(s, p);
  }
}

// One tile as a consumer warpgroup runs it.
struct ConsumerTile {
  Tile t;
  int n_count;       // key blocks to run: t.n_hi - t.n_lo
  uint32_t q_stage;  // the Q stage holding its Q tile
  uint32_t desc_q;   // low word of the descriptor of this warpgroup's Q rows in that stage
  int wg_row0;       // first query row of this warpgroup
  int row0;          // this thread's first row (and + 8)
};

// A consumer warpgroup's side of the main loop: its place and descriptors,
// the turns on the tensor cores with the other consumers (ping-pong), the
// ring position, and the pieces of one key block (issue the GEMMs, release
// the stages). The walk over a tile's key blocks is the consumer's
// (flash_fwd_sm90_kernel.cuh), which also holds O and the row state.
template <typename Traits>
struct FwdConsumerMainloop {
  using QFragments = uint32_t[Traits::kQInRegs ? Traits::kQKSteps : 1][4];
  using PFragments = uint32_t[Traits::kPSteps][4];
  using D = DescSteps<Traits>;
  static constexpr int kNumConsumers = Traits::kConsumerWarpgroups;
  // Issue order among the consumers: a token passed round the ring. Consumer
  // c waits on barrier c (its own 128 threads + the 128 of consumer c - 1
  // arriving), issues its GEMMs, then arrives on barrier c + 1. Consumer 0
  // goes first: the last consumer pre-arrives on barrier 0 once (the
  // constructor), and every later arrival pairs with one sync (drain()).
  // Why the token: without it -8 to -11% at head_dim 64 full, +2% at
  // 8x16x1024x64 causal, -4% at 4x16x4096x128 (H200).
  static constexpr int kTokenThreads = 2 * 128;

  const KernelArgs& a;
  const Smem<Traits>& sm;
  int cwg;
  int warp, lane;
  bool warp_leader;
  int row_in_wg;  // this thread's rows in the warpgroup: + 0 and + 8
  // Descriptors (sm90_primitives.cuh): Q rows of this warpgroup and K are
  // K-major (head_dim contiguous); V is the MN-major B of P·V (head_dim, its N,
  // contiguous), column blocks kKVColBytes apart, or with 8-bit inputs Vᵀ,
  // K-major (keys contiguous). Only their low words move (DescSteps).
  uint32_t desc_q0;  // Q stage 0
  uint32_t desc_k, desc_v;
  int my_barrier, next_barrier;
  RingPos<Traits::kStages> pos;  // the K/V ring, across tiles

  __device__ __forceinline__ FwdConsumerMainloop(const KernelArgs& args, const Smem<Traits>& smem, int consumer)
      : a(args), sm(smem), cwg(consumer) {
    const int tid = threadIdx.x % 128;
    warp = tid / 32;
    lane = tid % 32;
    warp_leader = lane == 0;
    row_in_wg = 16 * warp + lane / 4;
    desc_q0 = smem_desc_sw128_lo(sm.q + cwg * 64 * Traits::kSwizzleBytes, 16);
    desc_k = smem_desc_sw128_lo(sm.k, 16);
    desc_v = smem_desc_sw128_lo(sm.v, Traits::kFp8 ? 16 : Traits::kKVColBytes);
    my_barrier = Traits::kSchedulerBarrier + cwg;
    next_barrier = Traits::kSchedulerBarrier + (cwg + 1) % kNumConsumers;
    if (cwg == kNumConsumers - 1) named_bar_arrive(Traits::kSchedulerBarrier, kTokenThreads);
  }

  // The last consumer's last arrival on barrier 0 is still pending: take it, so
  // every barrier phase completes before the block exits.
  __device__ __forceinline__ void drain() const {
    if (cwg == 0) named_bar_sync(Traits::kSchedulerBarrier, kTokenThreads);
  }

  __device__ __forceinline__ void take_turn() const { named_bar_sync(my_barrier, kTokenThreads); }
  __device__ __forceinline__ void pass_turn() const { named_bar_arrive(next_barrier, kTokenThreads); }

  // A GEMM's base descriptor, shuffled from lane 0 so that ptxas knows it is
  // warp-uniform: it then builds the per-k16-step descriptors in uniform
  // registers (UIADD3, UMOV) instead of general ones each moved over by R2UR
  // before its wgmma (d128 bf16: 130 -> 36 R2UR, 2584 -> 2472 instructions).
  static __device__ __forceinline__ uint32_t uniform(uint32_t x) { return warp_uniform(x); }

  // A packed batch (kVarlen): the V rows of a stage from `rows` on hold the
  // next sequence's keys (or zeros past the tensor). Their P is 0, but 0 · inf
  // is NaN, so this warpgroup writes zeros over them before its P·V reads the
  // stage: a sequence's output never depends on another's values. Each
  // consumer writes the same zeros (the second write changes nothing the
  // other may be reading); the fence orders them before wgmma and the
  // stage's next TMA fill, the barrier before this warpgroup's wgmma. A row's
  // 128-byte swizzled block is permuted within the row only.
  __device__ __forceinline__ void zero_v_rows(uint32_t stage, int rows) const {
    const int tid = threadIdx.x % 128;
    const uint32_t base = sm.v + stage * Traits::kVStageBytes;
    const int per_block = (Traits::kBlockN - rows) * 8;  // 16-byte chunks per column block
    for (int c = tid; c < per_block * Traits::kColBlocks; c += 128) {
      const int cb = c / per_block, in = c - cb * per_block;
      st_shared_zero16(base + cb * Traits::kKVColBytes + (rows + in / 8) * 128 + (in % 8) * 16);
    }
    fence_proxy_async_shared();
    named_bar_sync(Traits::kZeroVBarrier + cwg, 128);
  }

  // One key block's GEMMs, issued in this warpgroup's turn: S = Q·Kᵀ and,
  // after the first block (kFirst), O += P·V of the previous one, each its
  // own wgmma group (kHalfPV: the first kPSteps / 2 k16 steps of P only).
  // prev_rows: the previous block's keys inside the sequence (a packed
  // batch's last key block: the rest of its V is zeroed first).
  template <bool kFirst, bool kHalfPV, int kSN>
  __device__ __forceinline__ void issue_gemms(const ConsumerTile& w, float (&s)[kSN / 2], const QFragments& qf,
                                              const PFragments& p, const RingPos<Traits::kStages>& prev,
                                              float (&o)[Traits::kORegs], int prev_rows) const {
    constexpr int kPVSteps = kHalfPV ? Traits::kPSteps / 2 : Traits::kPSteps;
    // The GEMMs' base descriptors before the waits: their shuffles and
    // moves to uniform registers then finish while this warpgroup waits.
    // Left to ptxas, the V one landed between two Q·Kᵀ wgmma in one build
    // (8x16x1024x64 causal: 276 against 286 TFLOP/s).
    const uint32_t dk = uniform(desc_k + D::stage_off(pos.stage));
    // (Unused with Q in registers; computed anyway, it cost the head_dim 64
    // short-causal kernel 16 instructions, 15 of them UMOV.)
    [[maybe_unused]] const uint32_t dq = Traits::kQInRegs ? 0u : uniform(w.desc_q);
    const uint32_t dv = kFirst ? 0u : uniform(desc_v + D::v_stage_off(prev.stage));
    mbar_wait(sm.k_full(pos.stage), pos.phase);
    if constexpr (!kFirst) mbar_wait(sm.v_full(prev.stage), prev.phase);
    if constexpr (Traits::kVarlen && !kFirst)
      if (prev_rows < Traits::kBlockN) zero_v_rows(prev.stage, prev_rows);
    take_turn();  // my turn to use the tensor cores
    wgmma_fence();
    qk_gemm<Traits, kSN>(s, qf, dq, dk);
    wgmma_commit();
    if constexpr (!kFirst) {
      pv_gemm<Traits, kPVSteps>(o, p, dv);
      wgmma_commit();
    }
    pass_turn();  // the next consumer's turn
  }

  // S read: the K stage goes back, and after the tile's last block the Q
  // stage too (unless Q is in registers, released when loaded).
  __device__ __forceinline__ void release_k(const ConsumerTile& w, int i) const {
    if (warp_leader) {
      if (!Traits::kQInRegs && i == w.n_count - 1) mbar_arrive(sm.q_empty(w.q_stage));  // last read of this Q tile
      mbar_arrive(sm.k_empty(pos.stage));
    }
  }

  // O += P·V of the tile's last key block, then its V stage goes back
  // (prev_rows: as issue_gemms').
  __device__ __forceinline__ void last_pv(float (&o)[Traits::kORegs], PFragments& p,
                                          const RingPos<Traits::kStages>& prev, int prev_rows) const {
    mbar_wait(sm.v_full(prev.stage), prev.phase);
    if constexpr (Traits::kVarlen)
      if (prev_rows < Traits::kBlockN) zero_v_rows(prev.stage, prev_rows);
    const uint32_t dv = uniform(desc_v + D::v_stage_off(prev.stage));
    wgmma_fence();
    pv_gemm<Traits, Traits::kPSteps>(o, p, dv);
    wgmma_commit();
    finish_pv<Traits>(o, p, warp_leader, sm.v_empty(prev.stage));
  }

  // Q as wgmma A fragments (Traits::kQInRegs): this warp's 16 rows, one
  // ldmatrix.x4 per k step (32 bytes of a row). Lanes 0-7 / 8-15 address
  // rows 0-7 / 8-15 of the step's first 16 bytes, lanes 16-31 the same rows
  // of the next 16: registers 0..3 then hold a[0..3] of sm90_wgmma.cuh's A
  // layout, for 16-bit values and, 4 bytes per lane, for 8-bit ones alike.
  // The tile is swizzled as TMA writes it (swizzled_chunk).
  __device__ __forceinline__ void load_q_fragments(const ConsumerTile& w, QFragments& qf) const {
    const int r = cwg * 64 + 16 * warp + (lane % 8) + 8 * ((lane / 8) % 2);  // row in the Q tile
    constexpr int kChunks = Traits::kSwizzleBytes / 16;  // 16-byte chunks per row of a column block
#pragma unroll
    for (int ks = 0; ks < Traits::kQKSteps; ++ks) {
      const int chunk = 2 * ks + lane / 16;  // 16-byte chunk along head_dim
      ldmatrix_x4(qf[ks], sm.q_tile(w.q_stage) + (chunk / kChunks) * Traits::kQColBytes +
                              swizzled_chunk<Traits::kSwizzleBytes>(r, chunk % kChunks));
    }
    // The warp's reads are done (ldmatrix is warp-collective): the
    // producer may load the tile after next into this buffer.
    if (warp_leader) mbar_arrive(sm.q_empty(w.q_stage));
  }

};

}  // namespace attnprof::flash_sm90::detail
