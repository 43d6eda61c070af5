#include "profiler/pass_step.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/GradMode.h>
#include <torch/csrc/autograd/autograd.h>

#include "profiler/nvtx_range.h"

namespace attnprof {
namespace {

template <class F>
void in_scope(bool scoped, const char* name, const ScopeHooks* hooks, F&& body) {
  if (!scoped) {
    body();
    return;
  }
  NvtxRange range(name);
  RECORD_USER_SCOPE(name);
  if (hooks && hooks->enter) hooks->enter(name);
  body();
  if (hooks && hooks->leave) hooks->leave(name);
}

void drop_grads(const Inputs& in) {
  for (const at::Tensor* t : {&in.q, &in.k, &in.v})
    if (t->grad().defined()) t->mutable_grad().reset();
}

at::Tensor recorded_forward(Variant& variant, const Problem& p, const Inputs& in) {
  c10::AutoGradMode grad(true);
  return forward_of(variant, p, in);
}

}  // namespace

void run_pass_step(Variant& variant, const Problem& p, const Inputs& in, bool scoped, const ScopeHooks* hooks) {
  switch (p.pass) {
    case Pass::fwd:
      in_scope(scoped, kForwardScope, hooks, [&] {
        c10::NoGradGuard no_grad;
        at::Tensor out = forward_of(variant, p, in);
      });
      return;
    case Pass::bwd: {
      at::Tensor out = recorded_forward(variant, p, in);
      drop_grads(in);
      in_scope(scoped, kBackwardScope, hooks, [&] { out.backward(in.grad_out); });
      return;
    }
    case Pass::fwd_bwd: {
      at::Tensor out;
      in_scope(scoped, kForwardScope, hooks, [&] { out = recorded_forward(variant, p, in); });
      drop_grads(in);
      in_scope(scoped, kBackwardScope, hooks, [&] { out.backward(in.grad_out); });
      return;
    }
  }
}

RetainedForward::RetainedForward(Variant& variant, const Problem& p, const Inputs& in)
    : in_(&in), out_(recorded_forward(variant, p, in)) {}

void RetainedForward::backward() const {
  (void)torch::autograd::grad({out_}, {in_->q, in_->k, in_->v}, {in_->grad_out}, /*retain_graph=*/true);
}

PassOutputs check_pass_outputs(Variant& variant, const Problem& p, const Inputs& in) {
  PassOutputs r;
  if (p.pass == Pass::fwd) {
    c10::NoGradGuard no_grad;
    r.out = forward_of(variant, p, in);
    r.finite = at::isfinite(r.out).all().item<bool>();
    return r;
  }
  const at::Tensor out = recorded_forward(variant, p, in);
  const auto grads = torch::autograd::grad({out}, {in.q, in.k, in.v}, {in.grad_out});
  r.out = out.detach();
  r.finite = at::isfinite(r.out).all().item<bool>();
  for (const at::Tensor& g : grads) r.finite = r.finite && g.defined() && at::isfinite(g).all().item<bool>();
  return r;
}

}  // namespace attnprof
