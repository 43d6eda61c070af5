// Shared by the variants that call attnprof's own CUDA operators: the checks
// that the operator can run here, and the scale/causal flags set in prepare.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <string>

#include "attnprof/variant.h"

namespace attnprof {

class CustomOpVariant : public Variant {
 public:
  void prepare(const Problem& p, const at::Tensor&, const at::Tensor&, const at::Tensor&) override {
    scale_ = p.softmax_scale();
    causal_ = p.causal;
  }

 protected:
  // Whether operator `op` (e.g. "attnprof::flash_attention") can run `p`: a CUDA
  // build, a CUDA device, a registered CUDA kernel. Variant-specific limits
  // (dtype, head_dim) are checked by the caller.
  Support operator_support(const std::string& op, const Problem& p) const {
#ifndef ATTNPROF_HAVE_CUDA_KERNELS
    (void)op, (void)p;
    return Support::no(name() + " needs attnprof built with the CUDA kernels (this build has none: no CUDA toolkit at configure time)");
#else
    if (!p.on_cuda()) return Support::no(name() + " needs a CUDA device (this run is on " + p.device + ")");
    auto handle = c10::Dispatcher::singleton().findSchema({op, ""});
    if (!handle || !handle->hasKernelForDispatchKey(c10::DispatchKey::CUDA))
      return Support::no(name() + ": " + op + " has no CUDA kernel registered");
    return Support::yes();
#endif
  }

  double scale_ = 1.0;
  bool causal_ = true;
};

}  // namespace attnprof
