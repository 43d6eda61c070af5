// Host side of the Hopper attention backward: the dispatch to a
// configuration and dtype (flash_bwd_sm90_launch.cuh queues the three kernels).
#include <c10/util/Exception.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "kernels/common/static_switch.h"
#include "kernels/flash_attention/flash_bwd_params.h"
#include "kernels/flash_sm90/flash_bwd_sm90_traits.h"
#include "kernels/flash_sm90/flash_sm90_params.h"

namespace attnprof::flash_sm90 {

void run_bwd(const flash::BwdParams& p, CUstream_st* stream) {
  constexpr const char* kOp = "attnprof::flash_attention_backward_sm90";
  flash::check_flash_bwd_params(p, kOp);
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0 || p.seqlen_k == 0) return;
  kernels::dtype_switch(p.is_bf16, [&](auto element) {
    kernels::head_dim_switch(Sm90BwdConfigs{}, p.head_dim, kOp, [&](auto config) {
      run_bwd_config<decltype(config), decltype(element)>(p, stream);
    });
  });
}

}  // namespace attnprof::flash_sm90
