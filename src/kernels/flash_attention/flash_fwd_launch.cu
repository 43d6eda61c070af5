// The operator's forward dispatch: head_dim → its tile configuration
// (flash_kernel_traits.h), instantiated here and only here.
#include <cuda_runtime.h>

#include "kernels/flash_attention/flash_fwd_launch_template.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

void run_flash_fwd(const FwdParams& p, CUstream_st* stream) {
  // The kernel addresses rows with the compile-time head dim (fewer registers
  // than runtime strides); batch and head strides stay runtime.
  TORCH_CHECK(p.q_row_stride == p.head_dim && p.k_row_stride == p.head_dim &&
                  p.v_row_stride == p.head_dim && p.o_row_stride == p.head_dim,
              "attnprof flash_attention: rows of q, k, v, out must be head_dim contiguous elements");
  switch (p.head_dim) {
    case 64:
      run_flash_fwd_tile<DefaultFwdTile<64>::Tile>(p, stream);
      return;
    case 128:
      run_flash_fwd_tile<DefaultFwdTile<128>::Tile>(p, stream);
      return;
    default:
      TORCH_CHECK(false, "attnprof flash_attention: no kernel for head_dim ", p.head_dim,
                  " (supported: 64, 128)");
  }
}

}  // namespace attnprof::flash
