// Which kernel the flash operators' autograd backward runs (autograd.cpp):
// the Hopper one (attnprof::flash_attention_backward_sm90) where its family
// supports the call (flash_sm90/api.h), else the portable one. Variants ask
// too, so their facts name what runs.
#pragma once

#include <ATen/core/Tensor.h>

#include <initializer_list>

namespace attnprof::kernels {

// True when flash_sm90::unsupported() has no reason for q's device, dtype and
// head_dim, and every tensor has the layout the tensor maps need. Defined in
// autograd.cpp (CUDA builds only).
bool hopper_backward_applies(std::initializer_list<const at::Tensor*> tensors);

}  // namespace attnprof::kernels
