// The Hopper backward's epilogue (device code): dK (times the softmax scale)
// and dV of a warpgroup's 64 keys, stored from the wgmma accumulators.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/common/packed_halves.cuh"
#include "kernels/flash_sm90/kernel_args_bwd_sm90.h"

namespace attnprof::flash_sm90::bwd_detail {

using namespace kernels;

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

// dV and dK of this thread's keys; a block whose keys no query sees stores zeros.
template <typename Traits>
__device__ __forceinline__ void store_dk_dv(const BwdKernelArgs& a, int b, int hkv, int key_row0, int lane,
                                            const float (&dv)[Traits::kAccRegs], const float (&dk)[Traits::kAccRegs]) {
  using Element = typename Traits::Element;
  store_rows<Traits>(static_cast<Element*>(a.dv) + b * a.dv_batch_stride + hkv * a.dv_head_stride, a.dv_row_stride,
                     dv, 1.f, key_row0, a.seqlen_k, lane);
  store_rows<Traits>(static_cast<Element*>(a.dk) + b * a.dk_batch_stride + hkv * a.dk_head_stride, a.dk_row_stride,
                     dk, a.scale, key_row0, a.seqlen_k, lane);
}

}  // namespace attnprof::flash_sm90::bwd_detail
