// The operator's forward dispatch: the plan's path and head_dim → its tile
// configuration (flash_kernel_traits.h). The prefill kernels are instantiated
// here, the decode and combine kernels in flash_fwd_splitkv_launch.cu, both
// paths' paged kernels in flash_fwd_paged_launch.cu, the packed
// variable-length batch's in flash_fwd_varlen_launch.cu (four translation
// units, built in parallel).
#include <cuda_runtime.h>

#include "kernels/common/static_switch.h"
#include "kernels/flash_attention/flash_fwd_launch_template.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

void run_flash_fwd(const FwdParams& p, CUstream_st* stream) {
  if (p.cu_seqlens_q != nullptr || p.plan.path == FwdPath::kPrefillPacked) {
    // Packed rows, heads · head_dim apart; one sequence per block row, unsplit.
    TORCH_CHECK(p.cu_seqlens_q != nullptr && p.plan.path == FwdPath::kPrefillPacked &&
                    p.q_row_stride == int64_t{p.heads_q} * p.head_dim && p.o_row_stride == p.q_row_stride &&
                    p.k_row_stride == int64_t{p.heads_kv} * p.head_dim && p.v_row_stride == p.k_row_stride &&
                    p.q_head_stride == p.head_dim && p.k_head_stride == p.head_dim && p.v_head_stride == p.head_dim &&
                    p.o_head_stride == p.head_dim && p.cu_seqlens_k != nullptr && p.plan.num_splits == 1 &&
                    p.block_table == nullptr,
                kFwdOp, ": a packed batch needs [total, heads, head_dim] rows, both cu_seqlens, one split");
    run_flash_fwd_varlen(p, stream);
    return;
  }
  // The kernels address rows with the compile-time head dim (fewer registers
  // than runtime strides); batch and head strides stay runtime.
  TORCH_CHECK(p.q_row_stride == p.head_dim && p.k_row_stride == p.head_dim &&
                  p.v_row_stride == p.head_dim && p.o_row_stride == p.head_dim,
              kFwdOp, ": rows of q, k, v, out must be head_dim contiguous elements");
  TORCH_CHECK(p.plan.num_splits == 1 || (p.o_accum != nullptr && p.lse_accum != nullptr), kFwdOp, ": ",
              p.plan.num_splits, " key splits need a workspace");
  if (p.block_table != nullptr) {
    run_flash_fwd_paged(p, stream);
  } else if (p.plan.path == FwdPath::kDecode) {
    run_flash_fwd_splitkv(p, stream);
  } else {
    kernels::head_dim_switch(FwdTiles{}, p.head_dim, kFwdOp,
                             [&](auto tile) { run_flash_fwd_tile<decltype(tile)>(p, stream); });
  }
  if (p.plan.num_splits > 1) run_flash_combine(p, stream);
}

}  // namespace attnprof::flash
