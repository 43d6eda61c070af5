// The bridge from the plain Problem to LibTorch tensors, shared by variants,
// the runner and the tests.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "attnprof/problem.h"

namespace attnprof {

at::ScalarType scalar_type(DType d);
at::Device torch_device(const Problem& p);
at::TensorOptions tensor_options(const Problem& p);

struct Inputs {
  at::Tensor q, k, v;
  at::Tensor grad_out;  // the fixed gradient of a backward pass (undefined for the forward)
};
// Standard-normal q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D] (from the current
// generator, so at::manual_seed decides them); for a backward pass q, k, v
// require grad and grad_out [B, Hq, Sq, D] is drawn too.
Inputs random_inputs(const Problem& p);

// The boolean mask of the problem, true where a key is hidden, shaped
// [Sq, Skv]; undefined without a causal mask. Bottom-right aligned: key j is
// visible to query i iff j <= i + (Skv - Sq) (and, under a window W,
// j > i + (Skv - Sq) - W); top-left: iff j <= i.
at::Tensor hidden_keys_mask(const Problem& p, const at::TensorOptions& options);

// k or v [B, Hkv, S, D] repeated to the query heads [B, Hq, S, D] (head h reads
// KV head h / (Hq / Hkv)); the tensor itself when there is one KV head per query head.
at::Tensor expand_kv_heads(const at::Tensor& kv, int64_t heads_q);

// Float64 reference on the same device: softmax(q kᵀ * scale + mask) v, with
// k and v expanded to the query heads. Rows that see no key give zeros.
at::Tensor reference_attention(const Problem& p, const Inputs& in);

// ‖out − ref‖_F / ‖ref‖_F, computed in float64.
double relative_frobenius_error(const at::Tensor& out, const at::Tensor& ref);

// The first line of a LibTorch message (errors and warnings put hints and
// backtraces below it): the one-line reason attnprof reports.
std::string first_line(const std::string& message);

}  // namespace attnprof
