// out = softmax(scale · in) along the last dimension with keys after the query
// masked (causal, bottom-right aligned: row i of [seq_q, seq_k] sees key j iff
// j <= i + seq_k − seq_q), in one pass: each score row is read once and each
// probability written once.
//
// Fast path: one warp per row, the whole row held in registers as fp32
// (up to 16 vectors of 16 bytes per lane: 4096 bf16/fp16 or 2048 fp32
// columns), 16-byte loads and stores. Under causal masking the masked tail of a
// row is not read at all, only written as zeros. Rows that are not 16-byte
// aligned or longer than that use a block-per-row kernel that reads the row
// three times (max, sum, write).
// Rows with no visible finite score (all −inf, or no visible key at all when
// seq_q > seq_k) produce zeros, not NaN.
//
// Backward (scaled_masked_softmax_backward): grad_in = scale · P ∘ (grad_out −
// rowsum(grad_out ∘ P)), in one kernel: aligned rows up to 8192 16-bit (4096
// fp32) columns are held in registers by one or four warps (each element of
// grad_out and P read once, grad_in written once); others use a block per row
// reading them twice. Masked entries have P = 0, so their gradient is zero
// without the mask.
#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/common/packed_halves.cuh"
#include "kernels/scaled_masked_softmax/scaled_masked_softmax.h"

namespace attnprof::softmax {
namespace {

constexpr float kLog2e = 1.4426950408889634f;

// 16-byte vector of T <-> 8 (bf16, fp16) or 4 (fp32) floats.
template <typename T>
struct Vec {
  static constexpr int kN = 8;
  __device__ static void unpack(const uint4& v, float* f) {
    const uint32_t w[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float2 x = kernels::unpack2<T>(w[i]);
      f[2 * i] = x.x;
      f[2 * i + 1] = x.y;
    }
  }
  __device__ static uint4 pack(const float* f) {
    return make_uint4(kernels::pack2<T>(f[0], f[1]), kernels::pack2<T>(f[2], f[3]),
                      kernels::pack2<T>(f[4], f[5]), kernels::pack2<T>(f[6], f[7]));
  }
};
template <>
struct Vec<float> {
  static constexpr int kN = 4;
  __device__ static void unpack(const uint4& v, float* f) {
    f[0] = __uint_as_float(v.x);
    f[1] = __uint_as_float(v.y);
    f[2] = __uint_as_float(v.z);
    f[3] = __uint_as_float(v.w);
  }
  __device__ static uint4 pack(const float* f) {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]),
                      __float_as_uint(f[3]));
  }
};

// One element to fp32 and back, bf16 and fp16 through their intrinsics (torch's
// build defines __CUDA_NO_HALF_CONVERSIONS__ and __CUDA_NO_BFLOAT16_CONVERSIONS__).
__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
template <typename T>
__device__ __forceinline__ T from_float(float x) { return x; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }
template <>
__device__ __forceinline__ __half from_float<__half>(float x) { return __float2half_rn(x); }

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}
__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}

// Keys visible to the query of `row` (row % seq_q of a [.., seq_q, seq_k]
// matrix): bottom-right causal alignment, clamped to [0, seq_k].
__device__ __forceinline__ int visible_keys(int64_t row, int seq_q, int seq_k, bool causal) {
  if (!causal) return seq_k;
  const int64_t last = static_cast<int64_t>(row % seq_q) + seq_k - seq_q;  // last visible key
  return static_cast<int>(min(static_cast<int64_t>(seq_k), max(int64_t{0}, last + 1)));
}

// 4 rows (warps) per block: a finished block frees its slot sooner than one of 8
// rows would. 144 registers at 16 vectors per lane (sm_90a); 4.06 TB/s measured
// at 4x16x4096x4096 bf16 (94% of the 4.3 TB/s copy rate).
constexpr int kWarpKernelThreads = 128;

// One warp per row; kVecs 16-byte vectors per lane cover the row.
template <typename T, int kVecs>
__global__ void __launch_bounds__(kWarpKernelThreads)
    scaled_masked_softmax_warp_kernel(const T* __restrict__ in, T* __restrict__ out, int64_t rows,
                                      int seq_q, int seq_k, float scale_log2, bool causal) {
  constexpr int kN = Vec<T>::kN;
  const int lane = threadIdx.x % 32;
  const int64_t row = static_cast<int64_t>(blockIdx.x) * (kWarpKernelThreads / 32) + threadIdx.x / 32;
  if (row >= rows) return;
  const int visible = visible_keys(row, seq_q, seq_k, causal);
  const uint4* src = reinterpret_cast<const uint4*>(in + row * seq_k);
  uint4* dst = reinterpret_cast<uint4*>(out + row * seq_k);

  // Load everything first (kVecs independent 16-byte loads in flight per lane).
  uint4 raw[kVecs];
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int col = (i * 32 + lane) * kN;
    raw[i] = col < visible ? __ldcs(src + i * 32 + lane) : make_uint4(0, 0, 0, 0);
  }
  float x[kVecs][kN];
  float mx = -INFINITY;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    Vec<T>::unpack(raw[i], x[i]);
    const int col = (i * 32 + lane) * kN;
#pragma unroll
    for (int e = 0; e < kN; ++e) {
      x[i][e] = col + e < visible ? x[i][e] * scale_log2 : -INFINITY;
      mx = fmaxf(mx, x[i][e]);
    }
  }
  mx = warp_max(mx);
  // Fully masked (or all −inf) row: zeros. Subtracting 0 makes every exp2 0.
  const float mx_safe = mx == -INFINITY ? 0.f : mx;
  float sum = 0.f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
#pragma unroll
    for (int e = 0; e < kN; ++e) {
      x[i][e] = exp2f(x[i][e] - mx_safe);
      sum += x[i][e];
    }
  }
  sum = warp_sum(sum);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const int col = (i * 32 + lane) * kN;
    if (col < seq_k) {
#pragma unroll
      for (int e = 0; e < kN; ++e) x[i][e] *= inv;
      dst[i * 32 + lane] = Vec<T>::pack(x[i]);
    }
  }
}

constexpr int kBlockKernelThreads = 256;

__device__ __forceinline__ float block_reduce(float x, bool is_max, float* smem) {
  x = is_max ? warp_max(x) : warp_sum(x);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  __syncthreads();  // smem reused between calls
  if (lane == 0) smem[warp] = x;
  __syncthreads();
  x = lane < kBlockKernelThreads / 32 ? smem[lane] : (is_max ? -INFINITY : 0.f);
  return is_max ? warp_max(x) : warp_sum(x);
}

// Any row length and alignment: one block per row, three reads of the row.
template <typename T>
__global__ void __launch_bounds__(kBlockKernelThreads)
    scaled_masked_softmax_block_kernel(const T* __restrict__ in, T* __restrict__ out, int seq_q,
                                       int seq_k, float scale_log2, bool causal) {
  __shared__ float smem[kBlockKernelThreads / 32];
  const int64_t row = blockIdx.x;
  const int visible = visible_keys(row, seq_q, seq_k, causal);
  const T* src = in + row * seq_k;
  T* dst = out + row * seq_k;
  float mx = -INFINITY;
  for (int c = threadIdx.x; c < visible; c += kBlockKernelThreads)
    mx = fmaxf(mx, to_float(src[c]) * scale_log2);
  mx = block_reduce(mx, true, smem);
  const float mx_safe = mx == -INFINITY ? 0.f : mx;
  float sum = 0.f;
  for (int c = threadIdx.x; c < visible; c += kBlockKernelThreads)
    sum += exp2f(to_float(src[c]) * scale_log2 - mx_safe);
  sum = block_reduce(sum, false, smem);
  const float inv = sum > 0.f ? 1.f / sum : 0.f;
  for (int c = threadIdx.x; c < seq_k; c += kBlockKernelThreads)
    dst[c] = from_float<T>(c < visible ? exp2f(to_float(src[c]) * scale_log2 - mx_safe) * inv : 0.f);
}

// Backward, rows held in registers: kWarpsPerRow warps per row (1: four rows
// per block; 4: one row per block), each lane kVecs 16-byte vectors of
// grad_out and of P kept packed (2·kVecs·4 registers) between the rowsum and
// the write pass. kVecs <= 8: at 16 vectors ptxas held the unpacked fp32
// values as well and spilled at 255 registers; long rows take 4 warps instead.
template <typename T, int kVecs, int kWarpsPerRow>
__global__ void __launch_bounds__(kWarpKernelThreads)
    scaled_masked_softmax_bwd_rows_kernel(const T* __restrict__ grad_out, const T* __restrict__ probs,
                                          T* __restrict__ grad_in, int64_t rows, int seq_k, float scale) {
  constexpr int kN = Vec<T>::kN;
  constexpr int kRowsPerBlock = kWarpKernelThreads / 32 / kWarpsPerRow;
  constexpr int kRowThreads = 32 * kWarpsPerRow;
  static_assert(kVecs <= 8 && kRowsPerBlock >= 1, "see above");
  __shared__ float partial[kWarpKernelThreads / 32];
  const int t = threadIdx.x % kRowThreads;  // thread within the row
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + threadIdx.x / kRowThreads;
  if (kWarpsPerRow == 1 && row >= rows) return;  // (multi-warp rows: one row per block, always valid)
  const uint4* g_src = reinterpret_cast<const uint4*>(grad_out + row * seq_k);
  const uint4* p_src = reinterpret_cast<const uint4*>(probs + row * seq_k);
  uint4* dst = reinterpret_cast<uint4*>(grad_in + row * seq_k);

  uint4 g_raw[kVecs], p_raw[kVecs];
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    const bool in_row = (i * kRowThreads + t) * kN < seq_k;
    g_raw[i] = in_row ? __ldcs(g_src + i * kRowThreads + t) : make_uint4(0, 0, 0, 0);
    p_raw[i] = in_row ? __ldcs(p_src + i * kRowThreads + t) : make_uint4(0, 0, 0, 0);
  }
  float dot = 0.f;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    float g[kN], pr[kN];
    Vec<T>::unpack(g_raw[i], g);
    Vec<T>::unpack(p_raw[i], pr);
#pragma unroll
    for (int e = 0; e < kN; ++e) dot = fmaf(g[e], pr[e], dot);
  }
  dot = warp_sum(dot);
  if constexpr (kWarpsPerRow > 1) {
    if (threadIdx.x % 32 == 0) partial[threadIdx.x / 32] = dot;
    __syncthreads();
    dot = 0.f;
#pragma unroll
    for (int w = 0; w < kWarpsPerRow; ++w) dot += partial[w];
  }
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    if ((i * kRowThreads + t) * kN < seq_k) {
      float g[kN], pr[kN];
      Vec<T>::unpack(g_raw[i], g);
      Vec<T>::unpack(p_raw[i], pr);
#pragma unroll
      for (int e = 0; e < kN; ++e) g[e] = scale * pr[e] * (g[e] - dot);
      dst[i * kRowThreads + t] = Vec<T>::pack(g);
    }
  }
}

// Backward, any row length and alignment: one block per row, two reads.
template <typename T>
__global__ void __launch_bounds__(kBlockKernelThreads)
    scaled_masked_softmax_bwd_block_kernel(const T* __restrict__ grad_out, const T* __restrict__ probs,
                                           T* __restrict__ grad_in, int seq_k, float scale) {
  __shared__ float smem[kBlockKernelThreads / 32];
  const int64_t row = blockIdx.x;
  const T* g = grad_out + row * seq_k;
  const T* pr = probs + row * seq_k;
  T* dst = grad_in + row * seq_k;
  float dot = 0.f;
  for (int c = threadIdx.x; c < seq_k; c += kBlockKernelThreads) dot = fmaf(to_float(g[c]), to_float(pr[c]), dot);
  dot = block_reduce(dot, false, smem);
  for (int c = threadIdx.x; c < seq_k; c += kBlockKernelThreads)
    dst[c] = from_float<T>(scale * to_float(pr[c]) * (to_float(g[c]) - dot));
}

template <typename T, int kVecs>
void launch_warp(const SoftmaxParams& p, cudaStream_t stream) {
  constexpr int kRowsPerBlock = kWarpKernelThreads / 32;
  const int64_t blocks = (p.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  scaled_masked_softmax_warp_kernel<T, kVecs><<<static_cast<unsigned>(blocks), kWarpKernelThreads, 0, stream>>>(
      static_cast<const T*>(p.in), static_cast<T*>(p.out), p.rows, p.seq_q, p.seq_k,
      p.scale * kLog2e, p.causal);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void run_typed(const SoftmaxParams& p, cudaStream_t stream) {
  constexpr int kN = Vec<T>::kN;
  const bool aligned = p.seq_k % kN == 0 && reinterpret_cast<uintptr_t>(p.in) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(p.out) % 16 == 0;
  const int vecs_needed = (p.seq_k + 32 * kN - 1) / (32 * kN);
  if (aligned && vecs_needed <= 16) {
    // Round up to a power of two: five instantiations per dtype.
    if (vecs_needed <= 1) return launch_warp<T, 1>(p, stream);
    if (vecs_needed <= 2) return launch_warp<T, 2>(p, stream);
    if (vecs_needed <= 4) return launch_warp<T, 4>(p, stream);
    if (vecs_needed <= 8) return launch_warp<T, 8>(p, stream);
    return launch_warp<T, 16>(p, stream);
  }
  TORCH_CHECK(p.rows <= 0x7fffffff, "attnprof scaled_masked_softmax: too many rows (", p.rows, ")");
  scaled_masked_softmax_block_kernel<T><<<static_cast<unsigned>(p.rows), kBlockKernelThreads, 0, stream>>>(
      static_cast<const T*>(p.in), static_cast<T*>(p.out), p.seq_q, p.seq_k, p.scale * kLog2e,
      p.causal);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T, int kVecs, int kWarpsPerRow>
void launch_bwd_rows(const SoftmaxBwdParams& p, cudaStream_t stream) {
  constexpr int kRowsPerBlock = kWarpKernelThreads / 32 / kWarpsPerRow;
  const int64_t blocks = (p.rows + kRowsPerBlock - 1) / kRowsPerBlock;
  TORCH_CHECK(blocks <= 0x7fffffff, "attnprof scaled_masked_softmax_backward: too many rows (", p.rows, ")");
  scaled_masked_softmax_bwd_rows_kernel<T, kVecs, kWarpsPerRow>
      <<<static_cast<unsigned>(blocks), kWarpKernelThreads, 0, stream>>>(
          static_cast<const T*>(p.grad_out), static_cast<const T*>(p.out), static_cast<T*>(p.grad_in), p.rows,
          p.seq_k, p.scale);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename T>
void run_bwd_typed(const SoftmaxBwdParams& p, cudaStream_t stream) {
  constexpr int kN = Vec<T>::kN;
  const bool aligned = p.seq_k % kN == 0 && reinterpret_cast<uintptr_t>(p.grad_out) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(p.out) % 16 == 0 &&
                       reinterpret_cast<uintptr_t>(p.grad_in) % 16 == 0;
  const int vecs_needed = (p.seq_k + 32 * kN - 1) / (32 * kN);  // per lane, one warp per row
  if (aligned && vecs_needed <= 32) {
    if (vecs_needed <= 1) return launch_bwd_rows<T, 1, 1>(p, stream);
    if (vecs_needed <= 2) return launch_bwd_rows<T, 2, 1>(p, stream);
    if (vecs_needed <= 4) return launch_bwd_rows<T, 4, 1>(p, stream);
    if (vecs_needed <= 8) return launch_bwd_rows<T, 8, 1>(p, stream);
    if (vecs_needed <= 16) return launch_bwd_rows<T, 4, 4>(p, stream);
    return launch_bwd_rows<T, 8, 4>(p, stream);
  }
  TORCH_CHECK(p.rows <= 0x7fffffff, "attnprof scaled_masked_softmax_backward: too many rows (", p.rows, ")");
  scaled_masked_softmax_bwd_block_kernel<T><<<static_cast<unsigned>(p.rows), kBlockKernelThreads, 0, stream>>>(
      static_cast<const T*>(p.grad_out), static_cast<const T*>(p.out), static_cast<T*>(p.grad_in), p.seq_k,
      p.scale);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace

void run_scaled_masked_softmax_backward(const SoftmaxBwdParams& p, CUstream_st* stream) {
  if (p.rows == 0 || p.seq_k == 0) return;
  switch (p.kind) {
    case ScalarKind::BF16:
      return run_bwd_typed<__nv_bfloat16>(p, stream);
    case ScalarKind::FP16:
      return run_bwd_typed<__half>(p, stream);
    case ScalarKind::FP32:
      return run_bwd_typed<float>(p, stream);
  }
}

void run_scaled_masked_softmax(const SoftmaxParams& p, CUstream_st* stream) {
  if (p.rows == 0 || p.seq_k == 0) return;
  switch (p.kind) {
    case ScalarKind::BF16:
      return run_typed<__nv_bfloat16>(p, stream);
    case ScalarKind::FP16:
      return run_typed<__half>(p, stream);
    case ScalarKind::FP32:
      return run_typed<float>(p, stream);
  }
}

}  // namespace attnprof::softmax
