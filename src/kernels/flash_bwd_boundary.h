// The shared part of the fused-attention backward operators' LibTorch
// boundaries (ops_backward.cpp, ops_sm90.cpp): every tensor check, the
// gradients and workspaces, and the plain params for the launch layers.
// Compiled only with the CUDA kernels (ATTNPROF_HAVE_CUDA_KERNELS).
#pragma once

#include <ATen/ATen.h>

#include <functional>

#include "kernels/flash_attention/flash_bwd_params.h"

namespace attnprof::kernels {

struct FlashBwdCall {
  at::Tensor dq, dk, dv;            // the gradients, shaped and laid out like q, k, v
  at::Tensor dq_accum, row_stats;   // workspaces (flash_bwd_params.h), alive until the launches are queued
  flash::BwdParams params;          // filled when !trivial
  bool trivial = false;             // nothing attends or nothing to attend to: the gradients are zeros
};

// Checks the operands of `op` (all defined, CUDA, contiguous, on q's device,
// one 16-bit dtype, shapes consistent, head_dim 64 or 128, scale finite and
// positive), then runs `more_checks` (an operator's own, e.g. the GPU it
// needs), and only then allocates the gradients and workspaces on q's device.
// The caller guards that device for the launches.
FlashBwdCall prepare_flash_bwd(const char* op, const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse, bool causal,
                               double scale, const std::function<void()>& more_checks = {});

}  // namespace attnprof::kernels
