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
  Inputs in{at::randn({p.batch, p.heads_q, p.seq_q, p.head_dim}, opt),
            at::randn({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, opt),
            at::randn({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, opt),
            {}};
  if (p.pass != Pass::fwd) {
    in.grad_out = at::randn({p.batch, p.heads_q, p.seq_q, p.head_dim}, opt);
    in.q.requires_grad_(true), in.k.requires_grad_(true), in.v.requires_grad_(true);
  }
  return in;
}

at::Tensor hidden_keys_mask(const Problem& p, const at::TensorOptions& options) {
  const Mask m = p.effective_mask();
  if (m == Mask::none) return {};
  // triu(d) keeps j >= i + d: hidden are the keys past i + offset; tril(d)
  // keeps j <= i + d: a window hides the keys up to i + offset - window.
  const int64_t offset = m == Mask::causal_bottom_right ? p.seq_kv - p.seq_q : 0;
  const at::Tensor ones = at::ones({p.seq_q, p.seq_kv}, options.dtype(at::kBool));
  if (!p.windowed()) return ones.triu(offset + 1);
  return ones.triu(offset + 1).logical_or_(ones.tril(offset - p.window));
}

at::Tensor expand_kv_heads(const at::Tensor& kv, int64_t heads_q) {
  const int64_t group = heads_q / kv.size(1);
  return group == 1 ? kv : kv.repeat_interleave(group, /*dim=*/1);
}

at::Tensor reference_attention(const Problem& p, const Inputs& in) {
  const at::Tensor q = in.q.detach().to(at::kDouble);
  const at::Tensor k = expand_kv_heads(in.k.detach().to(at::kDouble), p.heads_q);
  const at::Tensor v = expand_kv_heads(in.v.detach().to(at::kDouble), p.heads_q);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * p.softmax_scale();
  const at::Tensor mask = hidden_keys_mask(p, q.options());
  if (!mask.defined()) return at::matmul(at::softmax(scores, -1), v);
  scores.masked_fill_(mask, -std::numeric_limits<double>::infinity());
  // A row that sees no key is all -inf: softmax gives NaN there; attention over
  // nothing is defined as zeros (what the fused kernels return).
  const at::Tensor probs = at::softmax(scores, -1).nan_to_num(0.0);
  return at::matmul(probs, v);
}

double relative_frobenius_error(const at::Tensor& out, const at::Tensor& ref) {
  const at::Tensor o = out.detach().to(at::kDouble), r = ref.detach().to(at::kDouble).to(o.device());
  return ((o - r).norm() / r.norm()).item<double>();
}

std::string first_line(const std::string& message) { return message.substr(0, message.find('\n')); }

}  // namespace attnprof
