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
};
// Standard-normal q, k, v of shape [batch, heads, seq, head_dim].
Inputs random_inputs(const Problem& p);

// Float64 reference on the same device: softmax(q kᵀ * scale + causal mask) v.
at::Tensor reference_attention(const Problem& p, const Inputs& in);

// ‖out − ref‖_F / ‖ref‖_F, computed in float64.
double relative_frobenius_error(const at::Tensor& out, const at::Tensor& ref);

// The first line of a LibTorch message (errors and warnings put hints and
// backtraces below it): the one-line reason attnprof reports.
std::string first_line(const std::string& message);

}  // namespace attnprof
