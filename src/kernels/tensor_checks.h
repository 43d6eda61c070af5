// Tensor checks shared by the operators' LibTorch boundaries (ops_cuda.cpp,
// flash_attention/flash_fwd_api.cpp). Each names the operator in its message.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

namespace attnprof::kernels {

inline void check_cuda_tensor(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is undefined");
  TORCH_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor, got one on ", t.device());
  TORCH_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous (sizes ", t.sizes(),
              ", strides ", t.strides(), "); call .contiguous() first");
}

}  // namespace attnprof::kernels
