// Instantiations of the prefill kernel on a packed variable-length batch
// (FwdParams::cu_seqlens_q), for the operator's head dims: its own translation
// unit, built beside the others.
#include <cuda_runtime.h>

#include "kernels/common/static_switch.h"
#include "kernels/flash_attention/flash_fwd_launch_template.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

void run_flash_fwd_varlen(const FwdParams& p, CUstream_st* stream) {
  kernels::head_dim_switch(VarlenTiles{}, p.head_dim, kFwdOp,
                           [&](auto tile) { run_flash_fwd_tile<decltype(tile), false, true>(p, stream); });
}

}  // namespace attnprof::flash
