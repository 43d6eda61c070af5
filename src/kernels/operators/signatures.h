// C++ signatures of attnprof's operators (each family's api.cpp) for typed calls
// through the dispatcher: op_handle<FlashAttentionFn>("attnprof::flash_attention").
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>

#include <cstring>
#include <functional>
#include <tuple>

namespace attnprof::ops {

// attnprof::flash_attention and its backward (a sliding window of `window`
// keys, 0: none)...
using FlashAttentionFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor& q, const at::Tensor& k,
                                                            const at::Tensor& v, bool causal, double scale,
                                                            int64_t window);
using FlashAttentionBackwardFn = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool causal, double scale, int64_t window);
// attnprof::flash_attention_paged: K/V read from a paged cache through a block table.
using FlashAttentionPagedFn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor& q, const at::Tensor& k_cache,
                                                                 const at::Tensor& v_cache,
                                                                 const at::Tensor& block_table, int64_t seqlen_k,
                                                                 bool causal, double scale, int64_t window);
// attnprof::flash_attention_varlen: a packed variable-length batch with its cu_seqlens.
using FlashAttentionVarlenFn = std::tuple<at::Tensor, at::Tensor>(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& cu_seqlens_q,
    const at::Tensor& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k, bool causal, double scale,
    int64_t window);
// ...and the Hopper ones, attnprof::flash_attention_sm90 and
// attnprof::flash_attention_backward_sm90 (no window).
using FlashAttentionSm90Fn = std::tuple<at::Tensor, at::Tensor>(const at::Tensor& q, const at::Tensor& k,
                                                                const at::Tensor& v, bool causal, double scale);
// attnprof::flash_attention_sm90_fp8: e4m3 q, k, v with their descale factors.
using FlashAttentionSm90Fp8Fn = std::tuple<at::Tensor, at::Tensor>(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& q_descale,
    const at::Tensor& k_descale, const at::Tensor& v_descale, bool causal, double scale);
using FlashAttentionBackwardSm90Fn = std::tuple<at::Tensor, at::Tensor, at::Tensor>(
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

// attnprof::flash_attention (without a window) or attnprof::flash_attention_sm90,
// and their backwards, by name behind one call: for the callers that run
// either family (the ring's blocks, tests).
struct FlashForwardOp {
  std::function<std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&, bool,
                                                   double)>
      fn;
  std::tuple<at::Tensor, at::Tensor> call(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                                          double scale) const {
    return fn(q, k, v, causal, scale);
  }
};
inline FlashForwardOp flash_forward_op(const char* name) {
  if (std::strcmp(name, "attnprof::flash_attention") == 0)
    return {[h = op_handle<FlashAttentionFn>(name)](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                     bool causal, double scale) {
      return h.call(q, k, v, causal, scale, 0);
    }};
  return {[h = op_handle<FlashAttentionSm90Fn>(name)](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                       bool causal, double scale) {
    return h.call(q, k, v, causal, scale);
  }};
}

struct FlashBackwardOp {
  std::function<std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&,
                                                                const at::Tensor&, const at::Tensor&,
                                                                const at::Tensor&, const at::Tensor&, bool, double)>
      fn;
  std::tuple<at::Tensor, at::Tensor, at::Tensor> call(const at::Tensor& grad_out, const at::Tensor& q,
                                                      const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                                                      const at::Tensor& lse, bool causal, double scale) const {
    return fn(grad_out, q, k, v, out, lse, causal, scale);
  }
};
inline FlashBackwardOp flash_backward_op(const char* name) {
  if (std::strcmp(name, "attnprof::flash_attention_backward") == 0)
    return {[h = op_handle<FlashAttentionBackwardFn>(name)](const at::Tensor& go, const at::Tensor& q,
                                                             const at::Tensor& k, const at::Tensor& v,
                                                             const at::Tensor& o, const at::Tensor& lse, bool causal,
                                                             double scale) {
      return h.call(go, q, k, v, o, lse, causal, scale, 0);
    }};
  return {[h = op_handle<FlashAttentionBackwardSm90Fn>(name)](const at::Tensor& go, const at::Tensor& q,
                                                               const at::Tensor& k, const at::Tensor& v,
                                                               const at::Tensor& o, const at::Tensor& lse,
                                                               bool causal, double scale) {
    return h.call(go, q, k, v, o, lse, causal, scale);
  }};
}

}  // namespace attnprof::ops
