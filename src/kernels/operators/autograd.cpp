// Autograd for attnprof's operators, registered under the Autograd dispatch
// key: attnprof::flash_attention (and _sm90) and attnprof::scaled_masked_softmax called
// through the dispatcher (the custom-flash and custom-softmax variants, or
// torch.ops.attnprof.* from Python) record a torch::autograd::Function node
// whose backward calls the fused backward operator. The forward redispatches
// below autograd, to the CUDA kernels. In a trace the nodes appear as
// "autograd::engine::evaluate_function: torch::autograd::CppNode<attnprof::
// FlashAttentionFunction>" (and ScaledMaskedSoftmaxFunction), their kernels
// under them. Compiled only when the CUDA kernels are.
#ifdef ATTNPROF_HAVE_CUDA_KERNELS

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <torch/csrc/autograd/custom_function.h>
#include <torch/library.h>

#include <cstdint>
#include <initializer_list>
#include <tuple>

#include "kernels/flash_sm90/api.h"
#include "kernels/operators/backward_choice.h"
#include "kernels/operators/signatures.h"

namespace attnprof {

namespace kernels {

// The Hopper backward is 1.5-1.9x faster than the portable one at the
// backward benchmark shapes on the H200 (op level, bf16; BENCHMARKS.md), so
// the backward of both flash forwards runs it wherever it can.
bool hopper_backward_applies(std::initializer_list<const at::Tensor*> ts) {
  if (flash_sm90::unsupported(query_of(**ts.begin(), /*backward=*/true))) return false;
  for (const at::Tensor* t : ts)
    if (flash_sm90::layout_unsupported(*t, "")) return false;
  return true;
}

}  // namespace kernels

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

namespace {

using ops::op_handle;
using FlashFn = ops::FlashAttentionFn;
using FlashBwdFn = ops::FlashAttentionBackwardFn;
using FlashSm90Fn = ops::FlashAttentionSm90Fn;
using FlashBwdSm90Fn = ops::FlashAttentionBackwardSm90Fn;
using SoftmaxFn = ops::ScaledMaskedSoftmaxFn;
using SoftmaxBwdFn = ops::ScaledMaskedSoftmaxBackwardFn;

bool any_requires_grad(std::initializer_list<const at::Tensor*> ts) {
  if (!at::GradMode::is_enabled()) return false;
  for (const at::Tensor* t : ts)
    if (t->defined() && t->requires_grad()) return true;
  return false;
}

// The forward kernel's operator: attnprof::flash_attention (which takes a
// sliding window), or attnprof::flash_attention_sm90 (window 0), whose out and
// lse have the same meaning, so one backward kernel serves both.
enum class FlashForward { portable, hopper };

std::tuple<at::Tensor, at::Tensor> call_forward(FlashForward which, const at::Tensor& q, const at::Tensor& k,
                                                const at::Tensor& v, bool causal, double scale, int64_t window) {
  static const auto portable = op_handle<FlashFn>("attnprof::flash_attention");
  static const auto hopper = op_handle<FlashSm90Fn>("attnprof::flash_attention_sm90");
  return which == FlashForward::portable ? portable.call(q, k, v, causal, scale, window)
                                         : hopper.call(q, k, v, causal, scale);
}

}  // namespace

// Saves q, k, v, out and lse (all the backward kernel reads besides grad_out).
struct FlashAttentionFunction : torch::autograd::Function<FlashAttentionFunction> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, bool causal, double scale, int64_t window,
                               FlashForward which) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    auto [out, lse] = call_forward(which, q, k, v, causal, scale, window);
    ctx->save_for_backward({q, k, v, out, lse});
    ctx->saved_data["causal"] = causal;
    ctx->saved_data["scale"] = scale;
    // A window of seq_kv keys or more hides nothing: no window, so the Hopper backward may run.
    ctx->saved_data["window"] = window >= k.size(2) ? int64_t{0} : window;
    ctx->mark_non_differentiable({lse});
    // lse has no gradient: without this autograd would hand backward a zero
    // tensor for it (one fill kernel per backward, seen in the profile).
    ctx->set_materialize_grads(false);
    return {out, lse};
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor& grad_out = grads[0];
    if (!grad_out.defined())
      return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const variable_list saved = ctx->get_saved_variables();
    static const auto portable = op_handle<FlashBwdFn>("attnprof::flash_attention_backward");
    static const auto hopper = op_handle<FlashBwdSm90Fn>("attnprof::flash_attention_backward_sm90");
    // The kernels read rows of grad_out; autograd may hand over a broadcast or
    // strided gradient (e.g. from out.sum()).
    const at::Tensor go = grad_out.contiguous();
    const bool causal = ctx->saved_data["causal"].toBool();
    const double scale = ctx->saved_data["scale"].toDouble();
    const int64_t window = ctx->saved_data["window"].toInt();
    // The Hopper backward has no sliding window.
    auto [dq, dk, dv] =
        window == 0 && kernels::hopper_backward_applies({&saved[0], &saved[1], &saved[2], &go})
            ? hopper.call(go, saved[0], saved[1], saved[2], saved[3], saved[4], causal, scale)
            : portable.call(go, saved[0], saved[1], saved[2], saved[3], saved[4], causal, scale, window);
    return {dq, dk, dv, at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
  }
};

// Saves the probabilities: the backward needs nothing else.
struct ScaledMaskedSoftmaxFunction : torch::autograd::Function<ScaledMaskedSoftmaxFunction> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& scores, double scale, bool causal) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static const auto op = op_handle<SoftmaxFn>("attnprof::scaled_masked_softmax");
    at::Tensor out = op.call(scores, scale, causal);
    ctx->save_for_backward({out});
    ctx->saved_data["scale"] = scale;
    return out;
  }

  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const at::Tensor& grad_out = grads[0];
    if (!grad_out.defined()) return {at::Tensor(), at::Tensor(), at::Tensor()};
    static const auto op = op_handle<SoftmaxBwdFn>("attnprof::scaled_masked_softmax_backward");
    at::Tensor grad_in = op.call(grad_out.contiguous(), ctx->get_saved_variables()[0],
                                 ctx->saved_data["scale"].toDouble());
    return {grad_in, at::Tensor(), at::Tensor()};
  }
};

namespace {

// Without a gradient to record, the forward goes straight to the kernel: no
// node, no saved tensors (inference profiling pays nothing for autograd).
std::tuple<at::Tensor, at::Tensor> flash_autograd(FlashForward which, const at::Tensor& q, const at::Tensor& k,
                                                  const at::Tensor& v, bool causal, double scale, int64_t window) {
  if (!any_requires_grad({&q, &k, &v})) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return call_forward(which, q, k, v, causal, scale, window);
  }
  variable_list outs = FlashAttentionFunction::apply(q, k, v, causal, scale, window, which);
  return {outs[0], outs[1]};
}

std::tuple<at::Tensor, at::Tensor> flash_attention_autograd(const at::Tensor& q, const at::Tensor& k,
                                                            const at::Tensor& v, bool causal, double scale,
                                                            int64_t window) {
  return flash_autograd(FlashForward::portable, q, k, v, causal, scale, window);
}

std::tuple<at::Tensor, at::Tensor> flash_attention_sm90_autograd(const at::Tensor& q, const at::Tensor& k,
                                                                 const at::Tensor& v, bool causal, double scale) {
  return flash_autograd(FlashForward::hopper, q, k, v, causal, scale, 0);
}

at::Tensor scaled_masked_softmax_autograd(const at::Tensor& scores, double scale, bool causal) {
  if (!any_requires_grad({&scores})) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    static const auto op = op_handle<SoftmaxFn>("attnprof::scaled_masked_softmax");
    return op.call(scores, scale, causal);
  }
  return ScaledMaskedSoftmaxFunction::apply(scores, scale, causal);
}

}  // namespace
}  // namespace attnprof

TORCH_LIBRARY_IMPL(attnprof, Autograd, m) {
  m.impl("flash_attention", &attnprof::flash_attention_autograd);
  m.impl("flash_attention_sm90", &attnprof::flash_attention_sm90_autograd);
  m.impl("scaled_masked_softmax", &attnprof::scaled_masked_softmax_autograd);
}

#endif  // ATTNPROF_HAVE_CUDA_KERNELS
