// Vᵀ for the Hopper fp8 forward on the GPU: one pass over V, in the layout
// fp8_vt.h describes (the ATen copy there is the reference the tests hold
// this to). The ATen copy of that permuted view moved one byte per thread:
// ncu 226 us for the 32 MiB V of 4x16x4096x128 on the H100, a fifth of the
// whole forward.
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "kernels/flash_sm90/flash_sm90_params.h"
#include "kernels/flash_sm90/fp8_layout.h"

namespace attnprof::flash_sm90 {
namespace {

constexpr int kTileKeys = 64;     // keys per tile: two groups of kFp8KeyGroup
constexpr int kMaxHeadDim = 256;  // bytes of a key row the tile holds
constexpr int kThreads = 256;

// One (slab, 64 keys) tile per iteration: the keys' rows into shared memory
// (16-byte loads, zeros past seqlen), then each thread writes 8 Vᵀ columns of
// 4 head-dim rows (8-byte stores), gathering the keys in fp8_vt_key's order
// as 32-bit words and their bytes with byte_perm. A row of the tile is
// padded by one word, so the column reads of one warp spread over the banks.
__global__ void __launch_bounds__(kThreads) fp8_vt_kernel(const uint8_t* __restrict__ v, uint8_t* __restrict__ vt,
                                                          int64_t slabs, int seqlen, int padded, int head_dim) {
  __shared__ uint32_t tile[kTileKeys * (kMaxHeadDim / 4 + 1)];
  const int words = head_dim / 4, stride = words + 1, vecs = head_dim / 16;
  const int chunks = (padded + kTileKeys - 1) / kTileKeys;
  for (int64_t item = blockIdx.x; item < slabs * chunks; item += gridDim.x) {
    const int64_t slab = item / chunks;
    const int k0 = static_cast<int>(item % chunks) * kTileKeys;
    const int keys = min(kTileKeys, padded - k0);  // a multiple of kFp8KeyGroup
    const uint8_t* src = v + (slab * seqlen + k0) * head_dim;
    for (int i = threadIdx.x; i < keys * vecs; i += kThreads) {
      const int r = i / vecs, c = i % vecs;
      uint4 x = make_uint4(0u, 0u, 0u, 0u);
      if (k0 + r < seqlen) x = __ldg(reinterpret_cast<const uint4*>(src + static_cast<int64_t>(r) * head_dim) + c);
      uint32_t* dst = tile + r * stride + 4 * c;
      dst[0] = x.x;
      dst[1] = x.y;
      dst[2] = x.z;
      dst[3] = x.w;
    }
    __syncthreads();
    const int col8 = keys / 8;  // 8-column pieces of a Vᵀ row in this tile
    for (int i = threadIdx.x; i < words * col8; i += kThreads) {
      const int dw = i / col8, c8 = i % col8;  // neighbouring threads: neighbouring pieces of a row
      uint32_t w[8];
#pragma unroll
      for (int j = 0; j < 8; ++j) {
        const int k = 8 * c8 + j;  // logical column in the tile
        w[j] = tile[((k & ~(kFp8KeyGroup - 1)) + fp8_vt_key(k & (kFp8KeyGroup - 1))) * stride + dw];
      }
#pragma unroll
      for (int e = 0; e < 4; ++e) {  // head-dim row 4 dw + e: byte e of each word
        const uint32_t pick = e | ((4 + e) << 4);
        const uint32_t lo = __byte_perm(__byte_perm(w[0], w[1], pick), __byte_perm(w[2], w[3], pick), 0x5410);
        const uint32_t hi = __byte_perm(__byte_perm(w[4], w[5], pick), __byte_perm(w[6], w[7], pick), 0x5410);
        uint8_t* row = vt + (slab * head_dim + 4 * dw + e) * static_cast<int64_t>(padded) + k0 + 8 * c8;
        *reinterpret_cast<uint2*>(row) = make_uint2(lo, hi);
      }
    }
    __syncthreads();
  }
}

}  // namespace

void run_fp8_vt(const void* v, void* vt, int64_t slabs, int seqlen, int padded, int head_dim, int num_sms,
                CUstream_st* stream) {
  const int64_t tiles = slabs * ((padded + kTileKeys - 1) / kTileKeys);
  if (tiles == 0) return;
  // 8 blocks of 256 threads fill an SM (8.3 KB of shared memory each).
  const int grid = static_cast<int>(std::min<int64_t>(tiles, int64_t{8} * std::max(num_sms, 1)));
  fp8_vt_kernel<<<grid, kThreads, 0, stream>>>(static_cast<const uint8_t*>(v), static_cast<uint8_t*>(vt), slabs,
                                               seqlen, padded, head_dim);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace attnprof::flash_sm90
