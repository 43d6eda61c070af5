// Launch layer of the fused-attention forward: grid, runtime → template
// dispatch, dynamic shared-memory opt-in, launch, launch check. Templated on
// the tile configuration, so flash_fwd_launch.cu instantiates the operator's
// tiles and scripts/kernel_dev.py the alternatives, from this one definition.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include "kernels/flash_attention/flash_fwd_kernel.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

template <typename Traits, bool kCausal>
void launch_flash_fwd(const FwdParams& p, cudaStream_t stream) {
  auto* kernel = &flash_fwd_kernel<Traits, kCausal>;
  constexpr int smem_bytes = Traits::kSmemBytes;
  if constexpr (smem_bytes > 48 * 1024) {
    C10_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  }
  // x: (batch, head), y: query block. y is the slow axis, so launch order is
  // "all heads of the last query block first" (see m_block in the kernel).
  const dim3 grid(static_cast<unsigned>(p.batch * p.heads),
                  static_cast<unsigned>((p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM));
  kernel<<<grid, Traits::kNThreads, smem_bytes, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// {bf16, fp16} × {causal, full} for one tile configuration.
template <typename Tile>
void run_flash_fwd_tile(const FwdParams& p, cudaStream_t stream) {
  TORCH_CHECK(p.head_dim == Tile::kHeadDim, "attnprof flash_attention: tile ", Tile::kName,
              " is for head_dim ", Tile::kHeadDim, ", got ", p.head_dim);
  auto by_mask = [&](auto element) {
    using Traits = FwdKernelTraits<Tile, decltype(element)>;
    if (p.causal) {
      launch_flash_fwd<Traits, true>(p, stream);
    } else {
      launch_flash_fwd<Traits, false>(p, stream);
    }
  };
  if (p.is_bf16) {
    by_mask(__nv_bfloat16{});
  } else {
    by_mask(__half{});
  }
}

}  // namespace attnprof::flash
