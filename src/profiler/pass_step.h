// The work of one step of a problem's pass. The untraced warm-up, the
// profiled schedule, the peak-memory probe, the unprofiled timing and the
// NaN check all run it, so they all measure the same thing:
//   fwd      the forward, without autograd, in an attn_fwd scope;
//   bwd      a forward recording autograd (outside any measured scope), then
//            out.backward(grad_out) in an attn_bwd scope;
//   fwd+bwd  the forward in attn_fwd, then the backward in attn_bwd.
// Scopes are Kineto user scopes and NVTX ranges of the same names.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>

#include "attnprof/problem.h"
#include "attnprof/variant.h"
#include "variants/torch_problem.h"

namespace attnprof {

// Called around the body of each measured scope of a scoped step, inside its
// user scope and NVTX range: the counter pass (profiler/counters.h) counts
// only what runs between enter and leave.
struct ScopeHooks {
  std::function<void(const char* scope)> enter;
  std::function<void(const char* scope)> leave;
};

// Runs one step. `scoped`: inside the pass's scopes (profiled steps) or not.
// Gradients of a previous step are dropped first, so autograd stores the new
// ones instead of adding to them (no accumulation kernel in the trace).
void run_pass_step(Variant& variant, const Problem& p, const Inputs& in, bool scoped,
                   const ScopeHooks* hooks = nullptr);

// A forward whose autograd graph is kept, for timing the backward alone:
// backward() may then run on it any number of times.
class RetainedForward {
 public:
  RetainedForward(Variant& variant, const Problem& p, const Inputs& in);
  // One backward through the kept graph; the gradients are returned, not stored.
  void backward() const;

 private:
  const Inputs* in_;
  at::Tensor out_;
};

// One step's outputs, checked: whether the output (and, for a backward,
// every gradient) is finite, and the forward's output itself.
struct PassOutputs {
  bool finite = true;
  at::Tensor out;
};
PassOutputs check_pass_outputs(Variant& variant, const Problem& p, const Inputs& in);

}  // namespace attnprof
