// LibTorch boundary of the fused-attention forward: tensor checks, output
// allocation and the one function that fills FwdParams from tensors. The
// operator (ops_cuda.cpp) and scripts/kernel_dev.py's alternative tiles both
// go through mha_fwd, so they cannot disagree on what they launch.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

// Fills the launch parameters for q, k, v (already checked) writing into out and lse.
FwdParams make_fwd_params(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& out, const at::Tensor& lse, bool causal, double scale);

// Launches the forward for filled params on a stream: run_flash_fwd (the
// operator), or a development instantiation of another tile
// (scripts/kernel_dev_tile_op.cu, which does not link run_flash_fwd).
using FwdLauncher = void (*)(const FwdParams&, CUstream_st*);

// attnprof::flash_attention: checks every input (TORCH_CHECK naming the
// operator), allocates out and lse, launches on the current stream.
std::tuple<at::Tensor, at::Tensor> mha_fwd(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, bool causal, double scale,
                                           FwdLauncher launch);

}  // namespace attnprof::flash
