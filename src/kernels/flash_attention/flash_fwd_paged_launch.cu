// Instantiations of both forward paths reading a paged K/V (FwdParams::
// block_table): the prefill kernel and the split-KV decode kernel with
// kPaged, for the operator's head dims. The combine kernel is the same for
// both layouts (flash_fwd_splitkv_launch.cu).
#include <cuda_runtime.h>

#include "kernels/common/static_switch.h"
#include "kernels/flash_attention/flash_fwd_launch_template.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

void run_flash_fwd_paged(const FwdParams& p, CUstream_st* stream) {
  if (p.plan.path == FwdPath::kDecode) {
    kernels::head_dim_switch(DecodeTiles{}, p.head_dim, kFwdOp,
                             [&](auto tile) { run_flash_fwd_splitkv_tile<decltype(tile), true>(p, stream); });
  } else {
    kernels::head_dim_switch(FwdTiles{}, p.head_dim, kFwdOp,
                             [&](auto tile) { run_flash_fwd_tile<decltype(tile), true>(p, stream); });
  }
}

}  // namespace attnprof::flash
