// C++ signatures of attnprof's operators (each family's api.cpp) for typed calls
// through the dispatcher: op_handle<FlashAttentionFn>("attnprof::flash_attention").
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <tuple>

namespace attnprof::ops {

using FlashAttentionFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor& q, const at::Tensor& k,
                                                            const at::Tensor& v, bool causal, double scale);
using FlashAttentionBackwardFn = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool causal, double scale);
using ScaledMaskedSoftmaxFn = at::Tensor(const at::Tensor& scores, double scale, bool causal);
using ScaledMaskedSoftmaxBackwardFn = at::Tensor(const at::Tensor& grad_out, const at::Tensor& out,
                                                 double scale);

// Throws (c10::Error) when the schema is not registered.
template <typename Fn>
c10::TypedOperatorHandle<Fn> op_handle(const char* name) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(name, "").typed<Fn>();
}

}  // namespace attnprof::ops
