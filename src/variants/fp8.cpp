#include "variants/fp8.h"

#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include <limits>

namespace attnprof {

Quantized quantize_e4m3(const at::Tensor& x) {
  TORCH_CHECK(x.dim() == 4, "quantize_e4m3: expected [B, H, S, D], got ", x.dim(), " dimensions");
  c10::NoGradGuard no_grad;
  const at::Tensor xf = x.detach().to(at::kFloat);
  // A NaN would make its head's scale NaN (and that head unscaled), an inf every value of its head NaN.
  TORCH_CHECK(at::isfinite(xf).all().item<bool>(), "quantize_e4m3: the input holds NaN or Inf");
  const at::Tensor amax = xf.abs().amax({2, 3});
  const at::Tensor descale = at::where(amax > 0, amax / kE4m3Max, at::ones_like(amax)).contiguous();
  const at::Tensor scaled = (xf / descale.view({x.size(0), x.size(1), 1, 1})).clamp(-kE4m3Max, kE4m3Max);
  return {scaled.to(at::kFloat8_e4m3fn).contiguous(), descale};
}

at::Tensor random_orthogonal(int64_t d, const at::Device& device) {
  TORCH_CHECK(d >= 1, "random_orthogonal: d must be >= 1, got ", d);
  c10::NoGradGuard no_grad;
  const at::Tensor g = at::randn({d, d}, at::TensorOptions().dtype(at::kDouble));
  const auto [q, r] = at::linalg_qr(g);
  // QR's Q is Haar-distributed once each column takes the sign of R's diagonal.
  const at::Tensor signs = at::where(r.diagonal() < 0, -at::ones({d}, g.options()), at::ones({d}, g.options()));
  return (q * signs).to(at::kFloat).to(device);
}

at::Tensor dequantize(const at::Tensor& values, const at::Tensor& descale, at::ScalarType to) {
  return (values.to(at::kFloat) * descale.view({values.size(0), values.size(1), 1, 1})).to(to);
}

Inputs fp8_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& rotation) {
  Inputs in;
  c10::NoGradGuard no_grad;
  const auto rotated = [&](const at::Tensor& x) {
    return rotation.defined() ? at::matmul(x.detach().to(at::kFloat), rotation) : x;
  };
  const Quantized qq = quantize_e4m3(rotated(q)), kq = quantize_e4m3(rotated(k)), vq = quantize_e4m3(v);
  in.q = qq.values, in.k = kq.values, in.v = vq.values;
  in.fp8.q_descale = qq.descale, in.fp8.k_descale = kq.descale, in.fp8.v_descale = vq.descale;
  in.fp8.q_original = q.detach(), in.fp8.k_original = k.detach(), in.fp8.v_original = v.detach();
  return in;
}

at::Tensor plain_fp8_attention(const Problem& p, const Inputs& in) {
  TORCH_CHECK(in.fp8.defined() && !p.varlen() && !p.paged(), "plain_fp8_attention: dense fp8 inputs only");
  c10::NoGradGuard no_grad;
  const at::Tensor q = dequantize(in.q, in.fp8.q_descale);
  const at::Tensor k = expand_kv_heads(dequantize(in.k, in.fp8.k_descale), p.heads_q);
  // V's e4m3 values, its scale applied to the output (as a kernel applies it).
  const at::Tensor v8 = expand_kv_heads(in.v.to(at::kFloat), p.heads_q);
  const at::Tensor v_descale = expand_kv_heads(in.fp8.v_descale.view({p.batch, p.heads_kv, 1, 1}), p.heads_q);
  at::Tensor s = at::matmul(q, k.transpose(-2, -1)) * p.softmax_scale();
  if (const at::Tensor mask = hidden_keys_mask(p, s.options()); mask.defined())
    s.masked_fill_(mask, -std::numeric_limits<float>::infinity());
  // A row that sees no key has max -inf: it gives zeros, as the kernels do.
  at::Tensor m = std::get<0>(s.max(-1, /*keepdim=*/true));
  m = at::where(at::isinf(m), at::zeros_like(m), m);
  const at::Tensor prob = at::exp(s - m);
  const at::Tensor l = prob.sum(-1, /*keepdim=*/true);
  const at::Tensor p8 = (prob * kFp8ProbabilityScale).to(at::kFloat8_e4m3fn).to(at::kFloat);
  at::Tensor out = at::matmul(p8, v8) * v_descale / (l * kFp8ProbabilityScale);
  out = at::where(l > 0, out, at::zeros_like(out));
  return out.to(at::kBFloat16);
}

Support fp8_refusal(const std::string& variant, const Problem& p, const Fp8Probe& call) {
  try {
    const auto opt = at::TensorOptions().dtype(at::kFloat).device(torch_device(p));
    // A head of 2 rows of 16, whatever the problem: PyTorch's dtype checks come
    // before its size ones, and the probe allocates nothing of the problem's size.
    const at::Tensor x = at::ones({1, 1, 2, 16}, opt).to(at::kFloat8_e4m3fn);
    call(x, x, x);
  } catch (const c10::Error& e) {
    return Support::no(variant + " has no fp8 path; PyTorch refuses e4m3 inputs: " +
                       first_line(e.what_without_backtrace()));
  }
  return Support::no(variant + " has no fp8 path: PyTorch takes its e4m3 inputs but no descale factors, so it "
                               "would attend over the scaled values, not the inputs");
}

void score_matmul_probe(const at::Tensor& q, const at::Tensor& k, const at::Tensor&) {
  (void)at::matmul(q, k.transpose(-2, -1));
}

}  // namespace attnprof
