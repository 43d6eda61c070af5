// Which kernel the flash operators' autograd backward runs (ops_autograd.cpp):
// the Hopper one (attnprof::flash_attention_backward_sm90) where it applies,
// else the portable one. Variants ask too, so their facts name what runs.
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>

namespace attnprof::kernels {

// True when the sm_90a kernels were built and registered, the tensors' GPU
// has compute capability 9.0, and every tensor is contiguous with a 16-byte
// aligned base (the tensor maps' needs). Defined in ops_autograd.cpp (CUDA
// builds only).
bool hopper_backward_applies(std::initializer_list<const at::Tensor*> tensors);

}  // namespace attnprof::kernels
