// Launch layer of the fused-attention forward: grid, runtime → template
// dispatch, dynamic shared-memory opt-in, launch, launch check. Templated on
// the tile configuration, so flash_fwd_launch.cu / flash_fwd_splitkv_launch.cu
// instantiate the operator's tiles from this one definition.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAFunctions.h>
#include <cuda_runtime.h>

#include <atomic>
#include <cstdint>
#include <type_traits>

#include "kernels/common/grid_dependency.cuh"
#include "kernels/common/static_switch.h"
#include "kernels/flash_attention/flash_fwd_kernel.cuh"
#include "kernels/flash_attention/flash_fwd_splitkv_kernel.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

inline constexpr const char* kFwdOp = "attnprof::flash_attention";

// Runs `configure` (cudaFuncSetAttribute calls) the first time a kernel is
// launched on the current device: `devices` is that kernel's bit set of
// configured devices, so later launches skip the driver calls. Two threads may
// both configure; the calls are idempotent.
template <typename Configure>
void configure_once_per_device(std::atomic<uint64_t>& devices, Configure configure) {
  const int device = c10::cuda::current_device();
  const uint64_t bit = device < 64 ? uint64_t{1} << device : 0;
  if (bit != 0 && (devices.load(std::memory_order_acquire) & bit)) return;
  configure();
  devices.fetch_or(bit, std::memory_order_release);
}

// Dynamic shared memory past the 48 KB default needs an opt-in per kernel.
template <typename Kernel>
void set_smem_bytes(Kernel* kernel, int smem_bytes) {
  if (smem_bytes > 48 * 1024) {
    C10_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  }
}

template <typename Traits, bool kCausal, bool kPaged, bool kVarlen = false>
void launch_flash_fwd(const FwdParams& p, cudaStream_t stream) {
  auto* kernel = &flash_fwd_kernel<Traits, kCausal, kPaged, kVarlen>;
  static std::atomic<uint64_t> configured{0};
  configure_once_per_device(configured, [&] { set_smem_bytes(kernel, Traits::kSmemBytes); });
  // x: (batch, query head), y: query block, z: key split. y is slower than x,
  // so launch order is "all heads of the last query block first" (see m_block
  // in the kernel); heads sharing a K/V head are neighbours in x. A packed
  // batch's y covers its longest sequence (seqlen_q).
  const dim3 grid(static_cast<unsigned>(p.batch * p.heads_q),
                  static_cast<unsigned>((p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM),
                  static_cast<unsigned>(p.plan.num_splits));
  kernel<<<grid, Traits::kNThreads, Traits::kSmemBytes, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <typename Traits, bool kCausal, bool kPaged>
void launch_flash_fwd_splitkv(const FwdParams& p, cudaStream_t stream) {
  auto* kernel = &flash_fwd_splitkv_kernel<Traits, kCausal, kPaged>;
  static std::atomic<uint64_t> configured{0};
  configure_once_per_device(configured, [&] {
    set_smem_bytes(kernel, Traits::kSmemBytes);
    // Two resident blocks need 2 x kSmemBytes of the unified L1/shared array;
    // the kernel reads K/V with cp.async.cg (L2 only), so L1 can give way.
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                                        cudaSharedmemCarveoutMaxShared));
  });
  // x: (batch, KV head), y: key split, z: m16 tile of the group's query rows.
  const dim3 grid(static_cast<unsigned>(p.batch * p.heads_kv),
                  static_cast<unsigned>(p.plan.num_splits), static_cast<unsigned>(p.plan.row_tiles));
  kernel<<<grid, Traits::kNThreads, Traits::kSmemBytes, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Runs launch<Traits, causal> for p's dtype and mask: {bf16, fp16} × {causal, full}.
template <template <typename, typename> class TraitsOf, typename Tile, typename Launch>
void dispatch_dtype_mask(const FwdParams& p, Launch launch) {
  TORCH_CHECK(p.head_dim == Tile::kHeadDim, kFwdOp, ": tile ", Tile::kName, " is for head_dim ", Tile::kHeadDim,
              ", got ", p.head_dim);
  kernels::dtype_switch(p.is_bf16, [&](auto element) {
    kernels::bool_switch(p.causal, [&](auto causal) { launch(TraitsOf<Tile, decltype(element)>{}, causal); });
  });
}

// The prefill kernel for one tile configuration, reading contiguous or paged
// K/V, or a packed variable-length batch (kPaged, kVarlen: each instantiated
// in its own translation unit).
template <typename Tile, bool kPaged = false, bool kVarlen = false>
void run_flash_fwd_tile(const FwdParams& p, cudaStream_t stream) {
  dispatch_dtype_mask<FwdKernelTraits, Tile>(p, [&](auto traits, auto causal) {
    launch_flash_fwd<decltype(traits), decltype(causal)::value, kPaged, kVarlen>(p, stream);
  });
}

// The split-KV decode kernel for one tile configuration.
template <typename Tile, bool kPaged = false>
void run_flash_fwd_splitkv_tile(const FwdParams& p, cudaStream_t stream) {
  dispatch_dtype_mask<DecodeKernelTraits, Tile>(p, [&](auto traits, auto causal) {
    launch_flash_fwd_splitkv<decltype(traits), decltype(causal)::value, kPaged>(p, stream);
  });
}

template <typename Element, int kHeadDim>
void launch_flash_combine(const FwdParams& p, cudaStream_t stream) {
  constexpr int kRowsPerBlock = 128 / (kHeadDim / 4);  // as in flash_combine_kernel
  const int64_t rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q;
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>((rows + kRowsPerBlock - 1) / kRowsPerBlock));
  config.blockDim = dim3(128);
  config.stream = stream;
  // Programmatic dependent launch (compute capability 9.0 on): the grid is
  // set up while the kernel before it (split-KV or split prefill) drains, and
  // waits in the kernel for that one's completion. Neither lets it in early
  // (no launch_dependents), so the two overlap by the launch only and each
  // one's profiled time stays its own (combine 2.3 us either way). H100, one
  // process: +2.1-4.1% at 4096-8192 keys, +0.1-1.7% from 32768 (notes).
  cudaLaunchAttribute pdl;
  kernels::allow_programmatic_launch(config, pdl, at::cuda::getCurrentDeviceProperties()->major >= 9);
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, &flash_combine_kernel<Element, kHeadDim>, p));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

}  // namespace attnprof::flash
