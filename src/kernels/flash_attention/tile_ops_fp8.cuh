// The split-KV decode kernel's GEMMs on e4m3 Q, K and V (DecodeFp8Tiles):
// the tiles stay e4m3 in shared memory (half the bytes of a 16-bit tile, the
// layout and swizzle of tile_ops.cuh with 16 elements per chunk), and each
// fragment is widened to fp16 in registers (cvt.rn.f16x2.e4m3x2, exact: every
// e4m3 value is an fp16 value) for mma.sync m16n8k16 with fp32 accumulators;
// P stays fp16. sm_89 and later (the e4m3 conversion); built for sm_90a only.
//
// Q·Kᵀ: one 16-byte chunk of a row is one k16 step. ldmatrix (16-bit units)
// gives lane (g, t) = (lane / 4, lane % 4) bytes 4t..4t+3 of row g of a chunk;
// the GEMM reads them as its k indices 2t, 2t+1 (low half) and 2t+8, 2t+9
// (high half). A dot product does not care in which order its k indices come,
// so long as Q and K agree, and both fragments come from the same ldmatrix
// layout: no shuffles.
//
// P·V: V's rows are keys, and the B fragment wants two keys per half, so
// ldmatrix.trans (16-bit units) of 8 keys x one chunk gives lane (g, t) keys
// 2t and 2t+1 of head-dim bytes 2g and 2g + 1; one byte permute of the two
// 8-key halves makes the fragment of byte 2g (keys 2t, 2t+1, 2t+8, 2t+9) and
// another that of byte 2g + 1. So O's n8 tile 2c holds the even head-dim
// columns of chunk c and tile 2c + 1 the odd ones: lane (g, t) holds columns
// 16c + 4t + {0, 2} in tile 2c and 16c + 4t + {1, 3} in tile 2c + 1
// (fp8_o_columns), which the epilogue writes back in order.
#pragma once

#include <cstdint>

#include "kernels/common/packed_halves.cuh"
#include "kernels/common/sm80_primitives.cuh"

namespace attnprof::flash::detail {

using namespace kernels;

// Bytes 0, 1 of x to fp16 in lo (byte 0 the low half), bytes 2, 3 in hi.
__device__ __forceinline__ void e4m3x4_to_f16x2x2(uint32_t x, uint32_t& lo, uint32_t& hi) {
  asm("{\n"
      ".reg .b16 l, h;\n"
      "mov.b32 {l, h}, %2;\n"
      "cvt.rn.f16x2.e4m3x2 %0, l;\n"
      "cvt.rn.f16x2.e4m3x2 %1, h;\n"
      "}\n"
      : "=r"(lo), "=r"(hi)
      : "r"(x));
}

// The Q tile's A fragments, widened: chunk c is k16 step c. One ldmatrix.x4
// (LaneOffsets::q, a chunk pair j) gives rows g and g + 8 of chunks 2j, 2j + 1.
template <typename Traits>
__device__ __forceinline__ void load_q_fp8(uint32_t (&q_regs)[1][Traits::kHeadDim / 16][4], uint32_t q_off) {
#pragma unroll
  for (int j = 0; j < Traits::kHeadDim / 32; ++j) {
    uint32_t r[4];
    ldmatrix_x4(r, q_off ^ (j * 2 * Traits::kChunkBytes));
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      uint32_t(&a)[4] = q_regs[0][2 * j + c];
      e4m3x4_to_f16x2x2(r[2 * c], a[0], a[2]);      // row g
      e4m3x4_to_f16x2x2(r[2 * c + 1], a[1], a[3]);  // row g + 8
    }
  }
}

// acc_s = Q·Kᵀ for kSTiles n8 key tiles. One ldmatrix.x4 (LaneOffsets::k)
// gives keys 0-7 and 8-15 of a tile pair at chunks 2j and 2j + 1.
template <typename Traits, int kSTiles>
__device__ __forceinline__ void gemm_qk_fp8(float (&acc_s)[1][kSTiles][4],
                                            const uint32_t (&q_regs)[1][Traits::kHeadDim / 16][4], uint32_t k_off) {
#pragma unroll
  for (int t = 0; t < kSTiles; ++t) acc_s[0][t][0] = acc_s[0][t][1] = acc_s[0][t][2] = acc_s[0][t][3] = 0.f;
#pragma unroll
  for (int j = 0; j < Traits::kHeadDim / 32; ++j) {
#pragma unroll
    for (int t = 0; t < kSTiles; t += 2) {
      uint32_t kb[4];
      ldmatrix_x4(kb, (k_off ^ (j * 2 * Traits::kChunkBytes)) + t * 8 * Traits::kRowBytes);
#pragma unroll
      for (int i = 0; i < 4; ++i) {  // keys 8·(i / 2) on, chunk 2j + i % 2
        uint32_t b0, b1;
        e4m3x4_to_f16x2x2(kb[i], b0, b1);
        mma_16816<__half>(acc_s[0][t + i / 2], q_regs[0][2 * j + i % 2], b0, b1);
      }
    }
  }
}

// acc_o += P·V over kSTiles / 2 k16 steps of keys; P (fp16) from the S
// accumulators as in gemm_pv. One ldmatrix.x4.trans (LaneOffsets::v) gives
// keys 0-7 and 8-15 of chunks 2u and 2u + 1.
template <typename Traits, int kSTiles, int kOTiles>
__device__ __forceinline__ void gemm_pv_fp8(float (&acc_o)[1][kOTiles][4], const float (&p)[1][kSTiles][4],
                                            uint32_t v_off) {
#pragma unroll
  for (int kk = 0; kk < kSTiles / 2; ++kk) {
    uint32_t pa[4];
    pa[0] = pack2<__half>(p[0][2 * kk][0], p[0][2 * kk][1]);
    pa[1] = pack2<__half>(p[0][2 * kk][2], p[0][2 * kk][3]);
    pa[2] = pack2<__half>(p[0][2 * kk + 1][0], p[0][2 * kk + 1][1]);
    pa[3] = pack2<__half>(p[0][2 * kk + 1][2], p[0][2 * kk + 1][3]);
#pragma unroll
    for (int u = 0; u < Traits::kHeadDim / 32; ++u) {
      uint32_t vb[4];
      ldmatrix_x4_trans(vb, (v_off ^ (u * 2 * Traits::kChunkBytes)) + kk * 16 * Traits::kRowBytes);
#pragma unroll
      for (int c = 0; c < 2; ++c) {
        const int chunk = 2 * u + c;
#pragma unroll
        for (int odd = 0; odd < 2; ++odd) {
          // Byte 2g + odd of keys 2t, 2t + 1 (vb[2c]) and 2t + 8, 2t + 9 (vb[2c + 1]).
          const uint32_t keys = __byte_perm(vb[2 * c], vb[2 * c + 1], odd ? 0x7531 : 0x6420);
          uint32_t b0, b1;
          e4m3x4_to_f16x2x2(keys, b0, b1);
          mma_16816<__half>(acc_o[0][2 * chunk + odd], pa, b0, b1);
        }
      }
    }
  }
}

// Lane (lane % 4 = t)'s O values of row half h (0: row g, 1: row g + 8) of
// chunk c, head-dim columns 16c + 4t .. 16c + 4t + 3 in order.
template <int kOTiles>
__device__ __forceinline__ float4 fp8_o_columns(const float (&acc_o)[1][kOTiles][4], int c, int h) {
  return make_float4(acc_o[0][2 * c][2 * h], acc_o[0][2 * c + 1][2 * h], acc_o[0][2 * c][2 * h + 1],
                     acc_o[0][2 * c + 1][2 * h + 1]);
}

}  // namespace attnprof::flash::detail
