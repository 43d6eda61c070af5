// Fused attention backward, FlashAttention-2 algorithm: device code only.
//
// Three kernels per backward:
//   1. flash_bwd_preprocess_kernel: per query row, D = rowsum(dO * O) and
//      lse·log2(e) into padded fp32 workspaces; zeroes the fp32 dQ workspace.
//   2. flash_bwd_kernel: one block per (kBlockN keys, batch, KV head). K and V
//      stay in shared memory; the block walks over every query block of every
//      query head of its group (Q, dO, lse, D double-buffered with cp.async) and
//      recomputes Sᵀ = K·Qᵀ, Pᵀ = exp2(Sᵀ·scale·log2 e − lse·log2 e) and
//      dPᵀ = V·dOᵀ in registers, then dSᵀ = Pᵀ ∘ (dPᵀ − D). dV += Pᵀ·dO and
//      dK += dSᵀ·Q accumulate in fp32 registers over the whole walk, so the
//      query heads of a group add up without atomics. dQ += dS·K is formed from
//      dSᵀ in shared memory and added to the fp32 workspace with atomics.
//   3. flash_bwd_convert_dq_kernel: dQ = scale · workspace, to the input dtype.
// Why atomics for dQ rather than a second pass over query blocks: a separate
// dQ kernel has to recompute Qᵀ·K and dO·Vᵀ (7 GEMMs per tile instead of 5,
// 40% more tensor work); the atomics are one fp32 reduction per dQ element and
// key block, issued as 8-byte vector reductions on Hopper.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm80_primitives.cuh"
#include "kernels/common/padded_tile.cuh"
#include "kernels/flash_attention/flash_bwd_kernel_traits.h"
#include "kernels/flash_attention/flash_bwd_params.h"

namespace attnprof::flash {

constexpr float kBwdLog2e = 1.4426950408889634f;

// Rows of the preprocess and conversion kernels per block: 256 threads, one
// 16-byte chunk (8 elements) of a row per thread.
constexpr int kBwdRowKernelThreads = 256;

template <int kHeadDim, typename Element>
__global__ void __launch_bounds__(kBwdRowKernelThreads)
    flash_bwd_preprocess_kernel(const __grid_constant__ BwdParams p) {
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kRowsPerBlock = kBwdRowKernelThreads / kChunks;
  static_assert(32 % kChunks == 0, "a row's lanes sit in one warp");
  static_assert(kBwdSeqQPad % kRowsPerBlock == 0, "the launch covers whole blocks of padded rows");
  // Row over [batch, heads_q, seqlen_q_pad]; the grid covers exactly these rows.
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kChunks;
  const int c = threadIdx.x % kChunks;
  const int64_t bh = row / p.seqlen_q_pad;
  const int i = static_cast<int>(row % p.seqlen_q_pad);
  const int b = static_cast<int>(bh / p.heads_q);
  const int h = static_cast<int>(bh % p.heads_q);

  float dot = 0.f;
  if (i < p.seqlen_q) {
    const uint4 o = *reinterpret_cast<const uint4*>(
        static_cast<const Element*>(p.o) + b * p.o_batch_stride + h * p.o_head_stride +
        static_cast<int64_t>(i) * kHeadDim + c * 8);
    const uint4 g = *reinterpret_cast<const uint4*>(
        static_cast<const Element*>(p.dout) + b * p.do_batch_stride + h * p.do_head_stride +
        static_cast<int64_t>(i) * kHeadDim + c * 8);
    const uint32_t ow[4] = {o.x, o.y, o.z, o.w};
    const uint32_t gw[4] = {g.x, g.y, g.z, g.w};
#pragma unroll
    for (int w = 0; w < 4; ++w) {
      const float2 of = kernels::unpack2<Element>(ow[w]);
      const float2 gf = kernels::unpack2<Element>(gw[w]);
      dot = fmaf(of.x, gf.x, fmaf(of.y, gf.y, dot));
    }
  }
#pragma unroll
  for (int o = kChunks / 2; o > 0; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
  if (c == 0) {
    p.d_sum[row] = dot;
    // +inf makes exp2(s − lse) zero for padding rows and rows that saw no key.
    const float lse = i < p.seqlen_q ? p.lse[bh * p.seqlen_q + i] : -INFINITY;
    p.lse_log2[row] = lse == -INFINITY ? INFINITY : lse * kBwdLog2e;
  }
  float4* acc = reinterpret_cast<float4*>(p.dq_accum + row * kHeadDim + c * 8);
  acc[0] = make_float4(0.f, 0.f, 0.f, 0.f);
  acc[1] = make_float4(0.f, 0.f, 0.f, 0.f);
}

template <int kHeadDim, typename Element>
__global__ void __launch_bounds__(kBwdRowKernelThreads)
    flash_bwd_convert_dq_kernel(const __grid_constant__ BwdParams p) {
  constexpr int kChunks = kHeadDim / 8;
  // Chunk over [batch, heads_q, seqlen_q, kChunks].
  const int64_t idx = static_cast<int64_t>(blockIdx.x) * kBwdRowKernelThreads + threadIdx.x;
  const int64_t row = idx / kChunks;
  const int c = static_cast<int>(idx % kChunks);
  const int64_t bh = row / p.seqlen_q;
  if (bh >= static_cast<int64_t>(p.batch) * p.heads_q) return;
  const int i = static_cast<int>(row % p.seqlen_q);
  const int b = static_cast<int>(bh / p.heads_q);
  const int h = static_cast<int>(bh % p.heads_q);
  const float4* src = reinterpret_cast<const float4*>(
      p.dq_accum + (bh * p.seqlen_q_pad + i) * kHeadDim + c * 8);
  const float4 x = src[0], y = src[1];
  const float s = p.scale;
  const uint4 out = make_uint4(kernels::pack2<Element>(x.x * s, x.y * s), kernels::pack2<Element>(x.z * s, x.w * s),
                               kernels::pack2<Element>(y.x * s, y.y * s), kernels::pack2<Element>(y.z * s, y.w * s));
  *reinterpret_cast<uint4*>(static_cast<Element*>(p.dq) + b * p.dq_batch_stride + h * p.dq_head_stride +
                            static_cast<int64_t>(i) * kHeadDim + c * 8) = out;
}

namespace bwd_detail {

using namespace kernels;

template <int kMT, int kNT>
__device__ __forceinline__ void zero(float (&acc)[kMT][kNT][4]) {
#pragma unroll
  for (int m = 0; m < kMT; ++m)
#pragma unroll
    for (int n = 0; n < kNT; ++n) acc[m][n][0] = acc[m][n][1] = acc[m][n][2] = acc[m][n][3] = 0.f;
}

// acc[m][n] += A[m]·B[n] over kKSteps k16 steps, both operands ldmatrix'd
// from padded shared tiles: A as kMT m16 tiles at a_lane + m·kAM + ks·kAK
// (kATrans: stored [k][m], pairs8 lane offsets; else [m][k], rows16), B as kNT
// n8 tiles, in pairs, at b_lane + n·kBN + ks·kBK (kBTrans: stored [k][n],
// rows16; else [n][k], pairs8). All offsets in bytes. Each A fragment feeds
// kNT MMAs, each B pair 2·kMT. kUnroll: k16 steps unrolled together.
template <typename Element, int kMT, int kNT, int kKSteps, bool kATrans, int kAM, int kAK, bool kBTrans,
          int kBN, int kBK, int kUnroll = kKSteps>
__device__ __forceinline__ void mma_a_smem_b_smem(float (&acc)[kMT][kNT][4], uint32_t a_lane, uint32_t b_lane) {
#pragma unroll kUnroll
  for (int ks = 0; ks < kKSteps; ++ks) {
    uint32_t a[kMT][4];
#pragma unroll
    for (int m = 0; m < kMT; ++m) {
      if constexpr (kATrans) {
        ldmatrix_x4_trans(a[m], a_lane + m * kAM + ks * kAK);
      } else {
        ldmatrix_x4(a[m], a_lane + m * kAM + ks * kAK);
      }
    }
#pragma unroll
    for (int n = 0; n < kNT; n += 2) {
      uint32_t b[4];
      if constexpr (kBTrans) {
        ldmatrix_x4_trans(b, b_lane + n * kBN + ks * kBK);
      } else {
        ldmatrix_x4(b, b_lane + n * kBN + ks * kBK);
      }
#pragma unroll
      for (int m = 0; m < kMT; ++m) {
        mma_16816<Element>(acc[m][n], a[m], b[0], b[1]);
        mma_16816<Element>(acc[m][n + 1], a[m], b[2], b[3]);
      }
    }
  }
}

// acc[m][n] += A[m]·B[n] with A in registers (kKSteps k16 fragments per m16
// tile) and B stored [k][n] in a padded shared tile with kStride-byte rows,
// read transposed from b_lane (rows16 lane offsets).
template <typename Element, int kMT, int kNT, int kKSteps, int kStride>
__device__ __forceinline__ void mma_a_regs_b_smem_t(float (&acc)[kMT][kNT][4], const uint32_t (&a)[kMT][kKSteps][4],
                                                    uint32_t b_lane) {
#pragma unroll
  for (int ks = 0; ks < kKSteps; ++ks) {
#pragma unroll
    for (int n = 0; n < kNT; n += 2) {
      uint32_t b[4];
      ldmatrix_x4_trans(b, b_lane + ks * 16 * kStride + n * 16);
#pragma unroll
      for (int m = 0; m < kMT; ++m) {
        mma_16816<Element>(acc[m][n], a[m][ks], b[0], b[1]);
        mma_16816<Element>(acc[m][n + 1], a[m][ks], b[2], b[3]);
      }
    }
  }
}

// Writes a warp's fp32 accumulators [kTiles][kDTiles][4] (rows 16·t + g and
// + 8, columns 8·dt + 2·(lane % 4)), times `mul`, as 16-bit values into a
// padded tile. `lane_base` = tile + (first row + g)·stride + 4·(lane % 4).
template <typename Element, int kStride, int kTiles, int kDTiles>
__device__ __forceinline__ void store_acc(uint32_t lane_base, const float (&acc)[kTiles][kDTiles][4],
                                          float mul) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t)
#pragma unroll
    for (int dt = 0; dt < kDTiles; ++dt)
#pragma unroll
      for (int i = 0; i < 2; ++i)
        st_shared_b32(lane_base + (t * 16 + i * 8) * kStride + dt * 16,
                      pack2<Element>(acc[t][dt][2 * i] * mul, acc[t][dt][2 * i + 1] * mul));
}

// threadIdx.x and blockIdx.x read afresh: the epilogue recomputes its indices
// from these instead of keeping the main loop's copies live across it (at 255
// registers ptxas spilled such cheap values rather than recompute them).
__device__ __forceinline__ int fresh_tid() {
  int r;
  asm volatile("mov.u32 %0, %%tid.x;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ int fresh_ctaid_x() {
  int r;
  asm volatile("mov.u32 %0, %%ctaid.x;\n" : "=r"(r));
  return r;
}

// The epilogue, once every warp is done with shared memory: the partial dK
// and dV sums of the query warp groups added up (kWarpsM > 1), then dK
// (scaled) and dV staged as 16-bit rows in the K and V tiles and written with
// 16-byte stores. Its indices are recomputed (see fresh_tid).
template <typename Traits>
__device__ __forceinline__ void store_dk_dv(const BwdParams& p, unsigned char* smem,
                                            float (&acc_dk)[Traits::kKeyTiles][Traits::kHeadDim / 8][4],
                                            float (&acc_dv)[Traits::kKeyTiles][Traits::kHeadDim / 8][4]) {
  using Element = typename Traits::Element;
  using RowsD = PaddedRows<Traits::kHeadDim>;  // the K and V tiles
  constexpr int kD = Traits::kHeadDim, kBN = Traits::kBlockN, kThreads = Traits::kNThreads;
  constexpr int kWarpsN = Traits::kWarpsN, kWarpKeys = Traits::kWarpKeys;
  constexpr int kKT = Traits::kKeyTiles, kDTiles = kD / 8;
  constexpr uint32_t kRS = RowsD::kStride;
  const int tid_e = fresh_tid();
  const int warp_e = tid_e / 32;
  const int lane_e = tid_e % 32;
  const int wn_e = warp_e % kWarpsN;
  const int wm_e = warp_e / kWarpsN;

  // kWarpsM > 1: add the partial dK/dV sums of the query warp groups through
  // the (now free) Q and dO stages, one tensor at a time; warps wm == 0 keep the totals.
  if constexpr (Traits::kWarpsM > 1) {
    static_assert(Traits::kWarpsM == 2, "the reduction below adds exactly two partial sums");
    float4* red = reinterpret_cast<float4*>(smem + Traits::kSmemQ) + (wn_e * kKT * kDTiles) * 32 + lane_e;
    auto add_partials = [&](float (&acc)[kKT][kDTiles][4]) {
      if (wm_e == 1) {
#pragma unroll
        for (int kt = 0; kt < kKT; ++kt)
#pragma unroll
          for (int t = 0; t < kDTiles; ++t)
            red[(kt * kDTiles + t) * 32] = make_float4(acc[kt][t][0], acc[kt][t][1], acc[kt][t][2], acc[kt][t][3]);
      }
      __syncthreads();
      if (wm_e == 0) {
#pragma unroll
        for (int kt = 0; kt < kKT; ++kt)
#pragma unroll
          for (int t = 0; t < kDTiles; ++t) {
            const float4 o = red[(kt * kDTiles + t) * 32];
            acc[kt][t][0] += o.x, acc[kt][t][1] += o.y, acc[kt][t][2] += o.z, acc[kt][t][3] += o.w;
          }
      }
      __syncthreads();
    };
    add_partials(acc_dv);
    add_partials(acc_dk);
  }

  // Stage dK (scaled) and dV as 16-bit rows in the K and V tiles, then write
  // them with 16-byte stores.
  if (wm_e == 0) {
    const uint32_t row_base = (wn_e * kWarpKeys + lane_e / 4) * kRS + (lane_e % 4) * 4;
    const uint32_t base_e = smem_addr(smem);
    store_acc<Element, kRS>(base_e + Traits::kSmemK + row_base, acc_dk, p.scale);
    store_acc<Element, kRS>(base_e + Traits::kSmemV + row_base, acc_dv, 1.f);
  }
  __syncthreads();
  const int b_e = fresh_ctaid_x() / p.heads_kv;
  const int hkv_e = fresh_ctaid_x() % p.heads_kv;
  const int n0_e = blockIdx.y * kBN;
  Element* dk = static_cast<Element*>(p.dk) + b_e * p.dk_batch_stride + hkv_e * p.dk_head_stride;
  Element* dv = static_cast<Element*>(p.dv) + b_e * p.dv_batch_stride + hkv_e * p.dv_head_stride;
  constexpr int kCh = RowsD::kChunks;
#pragma unroll
  for (int i = 0; i < kBN * kCh / kThreads; ++i) {
    const int idx = i * kThreads + tid_e;
    const int r = idx / kCh;
    const int c = idx % kCh;
    if (n0_e + r < p.seqlen_k) {
      const int64_t off = static_cast<int64_t>(n0_e + r) * kD + c * 8;
      *reinterpret_cast<uint4*>(dk + off) = *reinterpret_cast<const uint4*>(smem + Traits::kSmemK + RowsD::offset(r, c));
      *reinterpret_cast<uint4*>(dv + off) = *reinterpret_cast<const uint4*>(smem + Traits::kSmemV + RowsD::offset(r, c));
    }
  }
}

// ldmatrix lane addresses (kernels/common/padded_tile.cuh); every k16 step
// and tile is a compile-time offset from these. This warp's keys of K and V
// are the A operands of Sᵀ and dPᵀ; Q and dO are their B operands (pairs of
// n8 query tiles) and, transposed, the B operands of dK and dV (k16 query
// steps); dSᵀ transposed is the A operand of dQ and K transposed its B operand.
struct LaneAddrs {
  uint32_t k_a, v_a;
  uint32_t qdo_b, qdo_bt;  // + the Q or dO stage
  uint32_t ds_st;          // this thread's dSᵀ element, + the dSᵀ stage
  uint32_t ds_at, k_bt;    // dQ's A (+ the dSᵀ stage) and B
  int dm, dd;              // dQ warp grid: rows dm·kDqRows, columns dd·kDqCols
};

template <typename Traits>
__device__ __forceinline__ LaneAddrs lane_addrs(uint32_t base, int warp, int lane) {
  using RowsD = PaddedRows<Traits::kHeadDim>;
  using RowsS = PaddedRows<Traits::kBlockM>;
  constexpr uint32_t kRS = RowsD::kStride;
  const int wn = warp % Traits::kWarpsN, wm = warp / Traits::kWarpsN;
  LaneAddrs la;
  la.k_a = base + Traits::kSmemK + wn * Traits::kWarpKeys * kRS + RowsD::lane_rows16(lane);
  la.v_a = base + Traits::kSmemV + wn * Traits::kWarpKeys * kRS + RowsD::lane_rows16(lane);
  la.qdo_b = wm * Traits::kWarpQ * kRS + RowsD::lane_pairs8(lane);
  la.qdo_bt = wm * Traits::kWarpQ * kRS + RowsD::lane_rows16(lane);
  // Key row wn·kWarpKeys + 16·kt + g (+ 8), query column wm·kWarpQ + 8·t + 2·(lane % 4).
  la.ds_st = base + Traits::kSmemDs + (wn * Traits::kWarpKeys + lane / 4) * RowsS::kStride + wm * Traits::kWarpQ * 2 +
             (lane % 4) * 4;
  la.dm = warp % Traits::kDqWarpsM;
  la.dd = warp / Traits::kDqWarpsM;
  la.ds_at = base + Traits::kSmemDs + la.dm * Traits::kDqRows * 2 + RowsS::lane_pairs8(lane);
  la.k_bt = base + Traits::kSmemK + la.dd * Traits::kDqCols * 2 + RowsD::lane_rows16(lane);
  return la;
}

// Starts the copies of one step's tiles into stage `st`: Q and dO (query
// rows m0.. of head h), lse·log2 e and D. Thread indices read afresh: cheaper
// than keeping the tile copy's per-thread offsets live across the main loop.
template <typename Traits>
__device__ __forceinline__ void load_step(const BwdParams& p, uint32_t base, int b, int h, int m0, int st) {
  using Element = typename Traits::Element;
  constexpr int kD = Traits::kHeadDim, kBM = Traits::kBlockM, kThreads = Traits::kNThreads;
  const int t = fresh_tid();
  const Element* q = static_cast<const Element*>(p.q) + b * p.q_batch_stride + h * p.q_head_stride;
  const Element* dout = static_cast<const Element*>(p.dout) + b * p.do_batch_stride + h * p.do_head_stride;
  cp_async_rows<kD, kBM, kThreads>(base + Traits::kSmemQ + st * Traits::kQTileBytes, q, m0, p.seqlen_q, t);
  cp_async_rows<kD, kBM, kThreads>(base + Traits::kSmemDo + st * Traits::kQTileBytes, dout, m0, p.seqlen_q, t);
  if (t < kBM / 4) {  // padded workspaces: always whole, aligned chunks
    const int64_t r = (static_cast<int64_t>(b) * p.heads_q + h) * p.seqlen_q_pad + m0 + t * 4;
    cp_async_16(base + Traits::kSmemLse + st * Traits::kRowVecBytes + t * 16, p.lse_log2 + r, true);
    cp_async_16(base + Traits::kSmemDsum + st * Traits::kRowVecBytes + t * 16, p.d_sum + r, true);
  }
}

// One query slice of Sᵀ = K·Qᵀ or dPᵀ = V·dOᵀ for this warp: A its keys of K
// or V [key][d] (a_lane), B the slice `part` of its queries of Q or dO
// [query][d] (b_lane).
template <typename Traits>
__device__ __forceinline__ void keys_by_queries(float (&acc)[Traits::kKeyTiles][Traits::kQTiles / Traits::kParts][4],
                                                uint32_t a_lane, uint32_t b_lane, int part) {
  constexpr int kPartQT = Traits::kQTiles / Traits::kParts;
  constexpr uint32_t kRS = PaddedRows<Traits::kHeadDim>::kStride;
  zero(acc);
  mma_a_smem_b_smem<typename Traits::Element, Traits::kKeyTiles, kPartQT, Traits::kHeadDim / 16, false, 16 * kRS, 32,
                    false, 8 * kRS, 32>(acc, a_lane, b_lane + part * kPartQT * 8 * kRS);
}

// Sets the scores of keys past the end, after a query's diagonal (kCausal)
// or at or before its window's start (kWindow) to −inf, in one slice `part`
// of Sᵀ. Two copies, chosen once per block: without a window the plain test.
template <typename Traits, bool kCausal, bool kWindow>
__device__ __forceinline__ void mask_scores(float (&acc_s)[Traits::kKeyTiles][Traits::kQTiles / Traits::kParts][4],
                                            const BwdParams& p, int n0, int m0, int wn, int g, int q_col, int part,
                                            int causal_off) {
  constexpr int kPartQT = Traits::kQTiles / Traits::kParts;
#pragma unroll
  for (int kt = 0; kt < Traits::kKeyTiles; ++kt)
#pragma unroll
    for (int t = 0; t < kPartQT; ++t)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = n0 + wn * Traits::kWarpKeys + kt * 16 + g + (e & 2) * 4;
        const int qi = m0 + q_col + (part * kPartQT + t) * 8 + (e & 1);
        if (key >= p.seqlen_k || (kCausal && key > qi + causal_off) ||
            (kWindow && key <= qi + causal_off - p.window))
          acc_s[kt][t][e] = -INFINITY;
      }
}

// Pᵀ of one step as 16-bit A fragments (they feed dV += Pᵀ·dO and dS = P ∘
// (dP − D)): Sᵀ = K·Qᵀ for this warp's keys and queries, masked where the
// block crosses the keys' end, the causal diagonal or a window's start, then Pᵀ = exp2(Sᵀ·scale
// ·log2 e − lse·log2 e), in kParts slices of the warp's queries (one slice of
// fp32 Sᵀ live at a time; half the registers of fp32 Pᵀ). Padding rows and
// rows that see no key have lse·log2 e = +inf: P = 0.
template <typename Traits, bool kCausal>
__device__ __forceinline__ void compute_p(uint32_t (&pa)[Traits::kKeyTiles][Traits::kWarpQ / 16][4],
                                          const BwdParams& p, uint32_t k_a, uint32_t q_b, uint32_t lse_st, int n0,
                                          int m0, int wn, int g, int q_col, int causal_off, float scale_log2) {
  using Element = typename Traits::Element;
  constexpr int kKT = Traits::kKeyTiles;
  constexpr int kPartQT = Traits::kQTiles / Traits::kParts;  // n8 query tiles per slice
  // Only the last key block and blocks crossing the diagonal (or a window's
  // start: key n0 hidden from the block's last query) need masking.
  const bool tail = n0 + Traits::kBlockN > p.seqlen_k;
  const bool diag = kCausal && (m0 + causal_off < n0 + Traits::kBlockN - 1 ||
                                (p.window > 0 && n0 <= m0 + Traits::kBlockM - 1 + causal_off - p.window));
#pragma unroll
  for (int part = 0; part < Traits::kParts; ++part) {
    float acc_s[kKT][kPartQT][4];
    keys_by_queries<Traits>(acc_s, k_a, q_b, part);
    if (tail || diag) {  // keys past the end; under causal, keys after the query's last visible one
      if (kCausal && p.window > 0) mask_scores<Traits, kCausal, true>(acc_s, p, n0, m0, wn, g, q_col, part, causal_off);
      else mask_scores<Traits, kCausal, false>(acc_s, p, n0, m0, wn, g, q_col, part, causal_off);
    }
#pragma unroll
    for (int t = 0; t < kPartQT; ++t) {
      const int tq = part * kPartQT + t;  // n8 tile within the warp's queries
      const float2 l = ld_shared_f32x2(lse_st + tq * 32);
#pragma unroll
      for (int kt = 0; kt < kKT; ++kt) {
        uint32_t* a = &pa[kt][tq / 2][(tq % 2) * 2];
        a[0] = pack2<Element>(exp2_approx(fmaf(acc_s[kt][t][0], scale_log2, -l.x)),
                              exp2_approx(fmaf(acc_s[kt][t][1], scale_log2, -l.y)));
        a[1] = pack2<Element>(exp2_approx(fmaf(acc_s[kt][t][2], scale_log2, -l.x)),
                              exp2_approx(fmaf(acc_s[kt][t][3], scale_log2, -l.y)));
      }
    }
  }
}

// dPᵀ = V·dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ − D) into the step's dSᵀ tile (for dQ) and
// dK += dSᵀ·Q (scale applied at the end), in the same query slices as Pᵀ.
template <typename Traits>
__device__ __forceinline__ void compute_ds_dk(float (&acc_dk)[Traits::kKeyTiles][Traits::kHeadDim / 8][4],
                                              const uint32_t (&pa)[Traits::kKeyTiles][Traits::kWarpQ / 16][4],
                                              uint32_t v_a, uint32_t do_b, uint32_t q_bt, uint32_t dsum_st,
                                              uint32_t ds_st) {
  using Element = typename Traits::Element;
  constexpr int kKT = Traits::kKeyTiles;
  constexpr int kPartQT = Traits::kQTiles / Traits::kParts;
  constexpr uint32_t kRS = PaddedRows<Traits::kHeadDim>::kStride;
  constexpr uint32_t kDsRS = PaddedRows<Traits::kBlockM>::kStride;
#pragma unroll
  for (int part = 0; part < Traits::kParts; ++part) {
    float acc_dp[kKT][kPartQT][4];
    keys_by_queries<Traits>(acc_dp, v_a, do_b, part);
    uint32_t da[kKT][kPartQT / 2][4];
#pragma unroll
    for (int t = 0; t < kPartQT; ++t) {
      const int tq = part * kPartQT + t;  // n8 tile within the warp's queries
      const float2 dsum = ld_shared_f32x2(dsum_st + tq * 32);
#pragma unroll
      for (int kt = 0; kt < kKT; ++kt) {
        const uint32_t* pr = &pa[kt][tq / 2][(tq % 2) * 2];
        const float2 p0 = unpack2<Element>(pr[0]), p1 = unpack2<Element>(pr[1]);
        uint32_t* d = &da[kt][t / 2][(t % 2) * 2];
        d[0] = pack2<Element>(p0.x * (acc_dp[kt][t][0] - dsum.x), p0.y * (acc_dp[kt][t][1] - dsum.y));
        d[1] = pack2<Element>(p1.x * (acc_dp[kt][t][2] - dsum.x), p1.y * (acc_dp[kt][t][3] - dsum.y));
        // Row g and g + 8 of dSᵀ, columns 8·tq + 2·(lane % 4) + {0, 1}.
        const uint32_t at = ds_st + kt * 16 * kDsRS + tq * 16;
        st_shared_b32(at, d[0]);
        st_shared_b32(at + 8 * kDsRS, d[1]);
      }
    }
    mma_a_regs_b_smem_t<Element, kKT, Traits::kHeadDim / 8, kPartQT / 2, kRS>(
        acc_dk, da, q_bt + part * (kPartQT / 2) * 16 * kRS);
  }
}

// dQ (this warp's kDqRows x kDqCols) = dS·K over the block's keys, added to
// the fp32 workspace at `dq_acc` (scale applied in the conversion kernel).
// A: dS read transposed from dSᵀ [key][query]; B: K [key][d], transposed.
// 4 k16 steps unrolled at a time, not all 8: with all of them in one block
// ptxas hoisted every step's fragments ahead and spilled at 255 registers
// (4-24 bytes per kernel); 4 at a time: no spills.
template <typename Traits>
__device__ __forceinline__ void accumulate_dq(float* dq_acc, uint32_t ds_at, uint32_t k_bt) {
  using Element = typename Traits::Element;
  constexpr int kD = Traits::kHeadDim;
  constexpr int kDqMT = Traits::kDqRows / 16;
  constexpr int kDqNT = Traits::kDqCols / 8;
  constexpr uint32_t kRS = PaddedRows<Traits::kHeadDim>::kStride;
  constexpr uint32_t kDsRS = PaddedRows<Traits::kBlockM>::kStride;
  float acc_dq[kDqMT][kDqNT][4];
  zero(acc_dq);
  mma_a_smem_b_smem<Element, kDqMT, kDqNT, Traits::kBlockN / 16, true, 32, 16 * kDsRS, true, 16, 16 * kRS, 4>(
      acc_dq, ds_at, k_bt);
  // Rows g and g + 8 of each m16 tile, columns 8·t + 2·(lane % 4) + {0, 1}.
#pragma unroll
  for (int mt = 0; mt < kDqMT; ++mt)
#pragma unroll
    for (int t = 0; t < kDqNT; ++t) {
      red_add_f32x2(dq_acc + (mt * 16) * kD + t * 8, acc_dq[mt][t][0], acc_dq[mt][t][1]);
      red_add_f32x2(dq_acc + (mt * 16 + 8) * kD + t * 8, acc_dq[mt][t][2], acc_dq[mt][t][3]);
    }
}

}  // namespace bwd_detail

template <typename Traits, bool kCausal>
__global__ void __launch_bounds__(Traits::kNThreads, Traits::kMinBlocksPerSm)
    flash_bwd_kernel(const __grid_constant__ BwdParams p) {
  using namespace bwd_detail;
  using Element = typename Traits::Element;
  using RowsD = PaddedRows<Traits::kHeadDim>;  // Q, K, V, dO tiles
  using RowsS = PaddedRows<Traits::kBlockM>;   // dSᵀ tile
  static_assert(RowsD::kStride == Traits::kRowStride && RowsS::kStride == Traits::kDsRowStride,
                "traits and tile layout agree on the padded row strides");
  constexpr int kD = Traits::kHeadDim;
  constexpr int kBM = Traits::kBlockM;
  constexpr int kBN = Traits::kBlockN;
  constexpr int kThreads = Traits::kNThreads;
  constexpr int kKT = Traits::kKeyTiles;  // m16 key tiles per warp
  constexpr int kWarpQ = Traits::kWarpQ;
  constexpr int kDTiles = kD / 8;       // n8 tiles over head_dim
  constexpr int kQSteps = kWarpQ / 16;  // k16 steps over a warp's queries
  constexpr uint32_t kRS = RowsD::kStride;

  extern __shared__ __align__(128) unsigned char smem[];
  const uint32_t base = smem_addr(smem);
  const uint32_t sQ = base + Traits::kSmemQ;
  const uint32_t sDo = base + Traits::kSmemDo;

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const int g = lane / 4;  // accumulator row within an m16 tile (and + 8)
  const int wn = warp % Traits::kWarpsN;
  const int b = blockIdx.x / p.heads_kv;
  const int hkv = blockIdx.x % p.heads_kv;
  // Under causal masking key block 0 has the most query blocks; blockIdx.y is
  // the slow launch axis, so the long blocks start first and short ones fill the tail.
  const int n0 = blockIdx.y * kBN;
  const int group = p.heads_q / p.heads_kv;
  const int causal_off = p.seqlen_k - p.seqlen_q;  // key j visible to query i iff j <= i + off
  // First query block with a query that sees key n0: i + off >= n0; under a
  // window, past the last query that sees key n0 + kBN - 1
  // (i + off - window < n0 + kBN - 1) the block ends.
  const int m_first = kCausal ? max(0, n0 - causal_off) / kBM : 0;
  int m_blocks = (p.seqlen_q + kBM - 1) / kBM;
  if (kCausal && p.window > 0) {
    const int last_query = n0 + kBN - 1 - causal_off + p.window - 1;  // < 0: no query sees these keys
    m_blocks = last_query < 0 ? m_first : min(m_blocks, max(m_first, last_query / kBM + 1));
  }
  const int n_iters = group * (m_blocks - m_first);

  const Element* k = static_cast<const Element*>(p.k) + b * p.k_batch_stride + hkv * p.k_head_stride;
  const Element* v = static_cast<const Element*>(p.v) + b * p.v_batch_stride + hkv * p.v_head_stride;
  cp_async_rows<kD, kBN, kThreads>(base + Traits::kSmemK, k, n0, p.seqlen_k, tid);
  cp_async_rows<kD, kBN, kThreads>(base + Traits::kSmemV, v, n0, p.seqlen_k, tid);

  // The walk: query heads hkv·group .. + group − 1, for each the query blocks
  // m_first .. m_blocks − 1. (h, mb) is the step being computed, (h_next,
  // mb_next) the one being loaded; both advance by one block per step.
  int h = hkv * group, mb = m_first;
  int h_next = h, mb_next = mb;
  auto advance = [&](int& hh, int& mm) {
    if (++mm == m_blocks) mm = m_first, ++hh;
  };
  // Loads step (h_next, mb_next) into stage `st`.
  auto load_next = [&](int st) {
    load_step<Traits>(p, base, b, h_next, mb_next * kBM, st);
    advance(h_next, mb_next);
  };
  // Two steps in flight from the start: each step's tiles are waited for one
  // step after they were issued (see the barrier in the loop).
  if (n_iters > 0) load_next(0);
  cp_async_commit();  // with K and V
  if (n_iters > 1) load_next(1);
  cp_async_commit();
  cp_async_wait<1>();  // K, V and step 0 have landed
  __syncthreads();

  float acc_dk[kKT][kDTiles][4];
  float acc_dv[kKT][kDTiles][4];
  zero(acc_dk);
  zero(acc_dv);

  const LaneAddrs la = lane_addrs<Traits>(base, warp, lane);
  const float scale_log2 = p.scale * kBwdLog2e;
  const int q_col = warp / Traits::kWarpsN * kWarpQ + (lane % 4) * 2;  // this thread's first Sᵀ column in the block

  // One barrier per step, between dSᵀ and dQ. The dSᵀ tile is double-buffered
  // like the Q/dO stages, so a warp that finished step it's dQ may start step
  // it + 1 while others are still reading dSᵀ(it); it cannot reach dSᵀ(it + 2)
  // (the same buffer) before every warp has passed the barrier of step it + 1,
  // that is, finished dQ(it). Against two barriers per step (the first
  // version) it measured 4% faster at d128 (5.51 -> 5.29 ms at 4x16x4096x128
  // full, H200), no change at d64.
  for (int it = 0; it < n_iters; ++it) {
    const int st = it & 1;
    const int m0 = mb * kBM;
    const uint32_t q_st = sQ + st * Traits::kQTileBytes;
    const uint32_t do_st = sDo + st * Traits::kQTileBytes;
    // lse and D of this thread's first Sᵀ column; n8 tile t is 32 bytes on.
    const uint32_t lse_st = base + Traits::kSmemLse + st * Traits::kRowVecBytes + q_col * 4;
    const uint32_t dsum_st = base + Traits::kSmemDsum + st * Traits::kRowVecBytes + q_col * 4;

    uint32_t pa[kKT][kQSteps][4];
    compute_p<Traits, kCausal>(pa, p, la.k_a, q_st + la.qdo_b, lse_st, n0, m0, wn, g, q_col, causal_off, scale_log2);

    // dV += Pᵀ·dO (this warp's queries only).
    mma_a_regs_b_smem_t<Element, kKT, kDTiles, kQSteps, kRS>(acc_dv, pa, do_st + la.qdo_bt);

    compute_ds_dk<Traits>(acc_dk, pa, la.v_a, do_st + la.qdo_b, q_st + la.qdo_bt, dsum_st,
                          la.ds_st + st * Traits::kDsTileBytes);
    cp_async_wait<0>();  // step it + 1 has landed (this thread's copies)
    // dSᵀ(it) complete; step it + 1 visible to all; every warp is done with
    // stage st (Q, dO, lse, D of step it), which step it + 2 now refills.
    __syncthreads();
    if (it + 2 < n_iters) load_next(st);
    cp_async_commit();

    accumulate_dq<Traits>(p.dq_accum +
                              ((static_cast<int64_t>(b) * p.heads_q + h) * p.seqlen_q_pad + m0 +
                               la.dm * Traits::kDqRows + g) * kD +
                              la.dd * Traits::kDqCols + (lane % 4) * 2,
                          la.ds_at + st * Traits::kDsTileBytes, la.k_bt);
    advance(h, mb);
  }
  cp_async_wait<0>();
  __syncthreads();  // every warp is done with shared memory

  store_dk_dv<Traits>(p, smem, acc_dk, acc_dv);
}

}  // namespace attnprof::flash
