// Instantiations of the split-KV decode kernel and of the combine kernel
// (flash_fwd_splitkv_kernel.cuh) for the operator's head dims.
#include <cuda_runtime.h>

#include "kernels/common/static_switch.h"
#include "kernels/flash_attention/flash_fwd_launch_template.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

void run_flash_fwd_splitkv(const FwdParams& p, CUstream_st* stream) {
  kernels::head_dim_switch(DecodeTiles{}, p.head_dim, kFwdOp,
                           [&](auto tile) { run_flash_fwd_splitkv_tile<decltype(tile)>(p, stream); });
}

void run_flash_combine(const FwdParams& p, CUstream_st* stream) {
  kernels::dtype_switch(p.is_bf16, [&](auto element) {
    kernels::head_dim_switch(DecodeTiles{}, p.head_dim, kFwdOp, [&](auto tile) {
      launch_flash_combine<decltype(element), decltype(tile)::kHeadDim>(p, stream);
    });
  });
}

}  // namespace attnprof::flash
