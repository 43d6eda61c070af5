// LibTorch boundary of the Hopper flash family (attnprof::flash_attention_sm90
// and attnprof::flash_attention_backward_sm90): one answer to "can the sm_90a
// kernels run this here?", for the operators' checks (api.cpp), the autograd
// backward's choice (operators/autograd.cpp) and the custom-flash-sm90
// variant's supports(). Each reason is a phrase the caller puts after its own
// name.
#pragma once

#include <ATen/core/Tensor.h>

#include <optional>
#include <string>

#include "kernels/common/boundary.h"

namespace attnprof::flash_sm90 {

// bf16 or fp16, head_dim 64 or 128, a compute capability 9.0 GPU (wgmma and
// TMA are sm_90a instructions), a build with the sm_90a kernels.
std::optional<std::string> unsupported(const kernels::KernelQuery& query);
// The same at any head dim: the by-name operator (attnprof::flash_attention_sm90_config),
// whose named configuration's head dim is checked after (alternatives may add head dims).
std::optional<std::string> unsupported_any_head_dim(const kernels::KernelQuery& query);

// The same for its fp8 forward (attnprof::flash_attention_sm90_fp8): e4m3
// inputs at a head dim of Sm90FwdFp8Configs (64, 128, 256), forward only.
std::optional<std::string> fp8_unsupported(const kernels::KernelQuery& query);
// The same at any head dim: the by-name fp8 operator, whose named
// configuration's head dim is checked after (alternatives may add head dims).
std::optional<std::string> fp8_unsupported_any_head_dim(const kernels::KernelQuery& query);

// What the tensor maps need of a tensor: dense [slabs][rows][head_dim] (so
// contiguous) and a 16-byte aligned base (TMA reads from such addresses only).
std::optional<std::string> layout_unsupported(const at::Tensor& t, const char* name);

}  // namespace attnprof::flash_sm90
