// For the "backward kernels" fact of the flash variants (custom-flash,
// custom-flash-sm90): both forwards record the same autograd node, whose
// backward runs the Hopper kernel where it applies and the portable one
// elsewhere (kernels/operators/backward_choice.h); the fact names the one that runs
// (flash::describe_bwd).
#pragma once

#include <ATen/core/Tensor.h>

#include "kernels/flash_attention/flash_bwd_describe.h"
#ifdef ATTNPROF_HAVE_CUDA_KERNELS
#include "kernels/operators/backward_choice.h"
#endif

namespace attnprof {

// For the inputs a variant prepared (grad_out is a fresh contiguous tensor).
inline bool flash_backward_is_hopper(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
#ifdef ATTNPROF_HAVE_CUDA_KERNELS
  return q.is_cuda() && kernels::hopper_backward_applies({&q, &k, &v});
#else
  (void)q, (void)k, (void)v;
  return false;
#endif
}

}  // namespace attnprof
