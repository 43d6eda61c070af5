#include "variants/torch_problem.h"

#include <limits>

namespace attnprof {

at::ScalarType scalar_type(DType d) {
  switch (d) {
    case DType::BF16: return at::kBFloat16;
    case DType::FP16: return at::kHalf;
    case DType::FP32: return at::kFloat;
  }
  return at::kFloat;
}

at::Device torch_device(const Problem& p) { return at::Device(p.device); }

at::TensorOptions tensor_options(const Problem& p) {
  return at::TensorOptions().dtype(scalar_type(p.dtype)).device(torch_device(p));
}

Inputs random_inputs(const Problem& p) {
  const auto opt = tensor_options(p);
  const std::vector<int64_t> shape = {p.batch, p.heads, p.seq, p.head_dim};
  return {at::randn(shape, opt), at::randn(shape, opt), at::randn(shape, opt)};
}

at::Tensor reference_attention(const Problem& p, const Inputs& in) {
  const at::Tensor q = in.q.to(at::kDouble), k = in.k.to(at::kDouble), v = in.v.to(at::kDouble);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * p.softmax_scale();
  if (p.causal) {
    const at::Tensor mask =
        at::ones({p.seq, p.seq}, at::TensorOptions().dtype(at::kBool).device(q.device())).triu(1);
    scores.masked_fill_(mask, -std::numeric_limits<double>::infinity());
  }
  return at::matmul(at::softmax(scores, -1), v);
}

double relative_frobenius_error(const at::Tensor& out, const at::Tensor& ref) {
  const at::Tensor o = out.to(at::kDouble), r = ref.to(at::kDouble).to(o.device());
  return ((o - r).norm() / r.norm()).item<double>();
}

std::string first_line(const std::string& message) { return message.substr(0, message.find('\n')); }

}  // namespace attnprof
