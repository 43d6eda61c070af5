// Instantiations of the split-KV decode kernel and of the combine kernel
// (flash_fwd_splitkv_kernel.cuh) for the operator's head dims.
#include <cuda_runtime.h>

#include "kernels/flash_attention/flash_fwd_launch_template.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

void run_flash_fwd_splitkv(const FwdParams& p, CUstream_st* stream) {
  switch (p.head_dim) {
    case 64:
      run_flash_fwd_splitkv_tile<DefaultDecodeTile<64>::Tile>(p, stream);
      return;
    case 128:
      run_flash_fwd_splitkv_tile<DefaultDecodeTile<128>::Tile>(p, stream);
      return;
    default:
      TORCH_CHECK(false, "attnprof flash_attention: no decode kernel for head_dim ", p.head_dim);
  }
}

void run_flash_combine(const FwdParams& p, CUstream_st* stream) {
  auto by_dim = [&](auto element) {
    using Element = decltype(element);
    switch (p.head_dim) {
      case 64:
        launch_flash_combine<Element, 64>(p, stream);
        return;
      case 128:
        launch_flash_combine<Element, 128>(p, stream);
        return;
      default:
        TORCH_CHECK(false, "attnprof flash_attention: no combine kernel for head_dim ", p.head_dim);
    }
  };
  if (p.is_bf16) {
    by_dim(__nv_bfloat16{});
  } else {
    by_dim(__half{});
  }
}

}  // namespace attnprof::flash
