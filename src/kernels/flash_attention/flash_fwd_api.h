// LibTorch boundary of the fused-attention forward: tensor checks, output
// and workspace allocation, the plan, and the one function that fills
// FwdParams from tensors. The operator (ops_cuda.cpp) goes through mha_fwd.
#pragma once

#include <ATen/core/Tensor.h>

#include <tuple>

#include "kernels/flash_attention/flash_fwd_plan.h"
#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

// Fills the launch parameters for q, k, v (already checked) writing into out
// and lse; the plan and workspace pointers are left to the caller.
FwdParams make_fwd_params(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& out, const at::Tensor& lse, bool causal, double scale);

// The plan mha_fwd would run for these inputs on their device (for the
// variant's facts); q and k as the operator takes them.
FwdPlan plan_for(const at::Tensor& q, const at::Tensor& k, bool causal,
                 const FwdPlanRequest& request = {});

// Launches the forward for filled params on a stream: run_flash_fwd (the
// operator), or another instantiation of the launch template.
using FwdLauncher = void (*)(const FwdParams&, CUstream_st*);

// attnprof::flash_attention: checks every input (TORCH_CHECK naming the
// operator), allocates out, lse and the split workspace, plans, and launches
// on the current stream.
std::tuple<at::Tensor, at::Tensor> mha_fwd(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, bool causal, double scale,
                                           FwdLauncher launch, const FwdPlanRequest& request = {});

}  // namespace attnprof::flash
