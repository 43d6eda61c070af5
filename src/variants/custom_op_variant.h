// Shared by the variants that call attnprof's own CUDA operators: the checks
// that the operator can run here (for the problem's pass too), and the scale
// and causal flag set in prepare.
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <optional>
#include <string>

#include "attnprof/variant.h"
#include "kernels/common/boundary.h"
#include "variants/torch_problem.h"

namespace attnprof {

class CustomOpVariant : public Variant {
 public:
  void prepare(const Problem& p, const at::Tensor&, const at::Tensor&, const at::Tensor&) override {
    scale_ = p.softmax_scale();
    causal_ = p.causal();
    window_ = p.effective_window();
    pass_ = p.pass;
    head_dim_ = static_cast<int>(p.head_dim);
  }

 protected:
  // Whether operator `op` (e.g. "attnprof::flash_attention") can run `p`: a CUDA
  // build, a CUDA device, a registered CUDA kernel, an autograd kernel for a
  // backward pass, and a mask the kernels implement (none, or causal aligned
  // bottom-right). Variant-specific limits (dtype, head_dim) are checked by the caller.
  Support operator_support(const std::string& op, const Problem& p) const {
#ifndef ATTNPROF_HAVE_CUDA_KERNELS
    (void)op, (void)p;
    return Support::no(name() + " needs attnprof built with the CUDA kernels (this build has none: no CUDA toolkit at configure time)");
#else
    if (!p.on_cuda()) return Support::no(name() + " needs a CUDA device (this run is on " + p.device + ")");
    auto handle = c10::Dispatcher::singleton().findSchema({op, ""});
    if (!handle || !handle->hasKernelForDispatchKey(c10::DispatchKey::CUDA))
      return Support::no(name() + ": " + op + " has no CUDA kernel registered");
    // attnprof's own autograd kernels are registered under the Autograd alias
    // key (kernels/operators/autograd.cpp), which hasKernelForDispatchKey(AutogradCUDA) does not see.
    if (p.pass != Pass::fwd && !handle->hasKernelForDispatchKey(c10::DispatchKey::Autograd) &&
        !handle->hasKernelForDispatchKey(c10::DispatchKey::AutogradCUDA))
      return Support::no(name() + ": " + op + " has no backward (no autograd kernel registered)");
    if (p.dtype == DType::FP8 && fp8_path() == Fp8Path::none) return fp8_support(op, p);
    if (p.effective_mask() == Mask::causal_top_left)
      return Support::no(name() + " masks causally from the bottom right (key j visible to query i iff j <= i + "
                                  "seq_kv - seq_q), not top-left");
    if (p.varlen() && !takes_varlen())
      return Support::no(name() + " runs batches of one length: " + op + " takes no cu_seqlens (custom-flash and "
                                  "the SDPA kernels run the packed batch; naive, inplace and sdpa-math the padded one)");
    if (p.varlen_padded)
      return Support::no(name() + " reads a variable-length batch packed (" + op + ", cu_seqlens), never padded "
                                  "under a mask: drop --varlen-layout padded");
    if (p.windowed() && !takes_window())
      return Support::no(name() + " has no sliding window: " + op + " masks causally only (window " +
                         std::to_string(p.window) + " of " + std::to_string(p.seq_kv) + " keys)");
    return Support::yes();
#endif
  }

  // The family's answer (its unsupported(), kernels/<family>/api.h) for the
  // problem's device, dtype and head_dim, its forward and, for a pass with a
  // backward, its backward too, with this variant's name in front.
  Support family_support(std::optional<std::string> (*unsupported)(const kernels::KernelQuery&),
                         const Problem& p) const {
    std::optional<std::string> why = unsupported({torch_device(p), scalar_type(p.dtype), p.head_dim, false});
    if (!why && p.pass != Pass::fwd) why = unsupported({torch_device(p), scalar_type(p.dtype), p.head_dim, true});
    return why ? Support::no(name() + " " + *why) : Support::yes();
  }

  // Why a variant without an fp8 path (fp8_path()) cannot run fp8 inputs (by
  // default: its operator takes 16-bit inputs).
  virtual Support fp8_support(const std::string& op, const Problem&) const {
    return Support::no(name() + " has no fp8 path: " + op + " takes bf16 or fp16 inputs, not e4m3");
  }
  // Whether the variant's operator takes a sliding window (Problem::window).
  virtual bool takes_window() const { return false; }
  // Whether it has an operator for a packed variable-length batch (Problem::seqlens).
  virtual bool takes_varlen() const { return false; }

  double scale_ = 1.0;
  bool causal_ = true;
  int64_t window_ = 0;  // the problem's window where it hides keys, else 0
  Pass pass_ = Pass::fwd;  // a backward pass adds the backward kernels to the facts
  int head_dim_ = 0;
};

}  // namespace attnprof
