// Launch layer of the fused-attention forward: grid, runtime → template
// dispatch, dynamic shared-memory opt-in, launch, launch check. Only the
// dispatched combinations are instantiated: {bf16, fp16} × d{64, 128} × causal.
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include "kernels/flash_attention/flash_fwd_kernel.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {
namespace {

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

template <int kHeadDim, typename Element>
void run_flash_fwd_hdim(const FwdParams& p, cudaStream_t stream) {
  using Traits = typename FwdConfig<kHeadDim, Element>::Traits;
  if (p.causal) {
    launch_flash_fwd<Traits, true>(p, stream);
  } else {
    launch_flash_fwd<Traits, false>(p, stream);
  }
}

template <typename Element>
void run_flash_fwd_dtype(const FwdParams& p, cudaStream_t stream) {
  switch (p.head_dim) {
    case 64:
      run_flash_fwd_hdim<64, Element>(p, stream);
      return;
    case 128:
      run_flash_fwd_hdim<128, Element>(p, stream);
      return;
    default:
      TORCH_CHECK(false, "attnprof flash_attention: no kernel for head_dim ", p.head_dim,
                  " (supported: 64, 128)");
  }
}

}  // namespace

void run_flash_fwd(const FwdParams& p, CUstream_st* stream) {
  // The kernel addresses rows with the compile-time head dim (fewer registers
  // than runtime strides); batch and head strides stay runtime.
  TORCH_CHECK(p.q_row_stride == p.head_dim && p.k_row_stride == p.head_dim &&
                  p.v_row_stride == p.head_dim && p.o_row_stride == p.head_dim,
              "attnprof flash_attention: rows of q, k, v, out must be head_dim contiguous elements");
  if (p.is_bf16) {
    run_flash_fwd_dtype<__nv_bfloat16>(p, stream);
  } else {
    run_flash_fwd_dtype<__half>(p, stream);
  }
}

}  // namespace attnprof::flash
