// Host side of the Hopper attention backward: the (dtype, head_dim) dispatch
// (flash_bwd_sm90_launch.cuh queues the three kernels).
#include <c10/util/Exception.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/flash_attention/flash_bwd_params.h"
#include "kernels/flash_sm90/flash_sm90_params.h"

namespace attnprof::flash_sm90 {

void run_bwd(const flash::BwdParams& p, CUstream_st* stream) {
  constexpr const char* kOp = "attnprof::flash_attention_backward_sm90";
  flash::check_flash_bwd_params(p, kOp);
  TORCH_CHECK(p.head_dim == 64 || p.head_dim == 128, kOp, ": no kernel for head_dim ", p.head_dim,
              " (supported: 64, 128)");
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0 || p.seqlen_k == 0) return;
  const bool d64 = p.head_dim == 64;
  if (p.is_bf16) {
    d64 ? run_bwd_hdim<64, __nv_bfloat16>(p, stream) : run_bwd_hdim<128, __nv_bfloat16>(p, stream);
  } else {
    d64 ? run_bwd_hdim<64, __half>(p, stream) : run_bwd_hdim<128, __half>(p, stream);
  }
}

}  // namespace attnprof::flash_sm90
