// LibTorch boundary of the scaled masked softmax family: the operators'
// schemas (every build) and (CUDA builds) the operators. Every tensor check
// happens here, once; the launchers (scaled_masked_softmax.h) trust their params.
#include <torch/library.h>

#ifdef ATTNPROF_HAVE_CUDA_KERNELS
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>
#include <cstdint>

#include "kernels/common/boundary.h"
#include "kernels/scaled_masked_softmax/scaled_masked_softmax.h"
#endif

TORCH_LIBRARY_FRAGMENT(attnprof, m) {
  // softmax(scale · scores) over the last dimension of a contiguous
  // [..., seq_q, seq_k] tensor (bf16, fp16 or fp32), keys after the query masked
  // when causal. Rows with nothing visible give zeros.
  m.def("scaled_masked_softmax(Tensor scores, float scale, bool causal) -> Tensor");
  // grad_scores = scale * out * (grad_out - rowsum(grad_out * out)) over the last
  // dimension; out is scaled_masked_softmax's output (masked entries are 0).
  m.def("scaled_masked_softmax_backward(Tensor grad_out, Tensor out, float scale) -> Tensor");
}

#ifdef ATTNPROF_HAVE_CUDA_KERNELS

namespace attnprof::softmax {
namespace {

constexpr int64_t kInt32Max = 0x7fffffff;

// bf16, fp16 or fp32, else an error naming the operator.
ScalarKind scalar_kind(at::ScalarType st, const char* op, const char* name) {
  TORCH_CHECK(st == at::kBFloat16 || st == at::kHalf || st == at::kFloat, op, ": ", name,
              " must be bfloat16, float16 or float32, got ", st);
  return st == at::kBFloat16 ? ScalarKind::BF16 : st == at::kHalf ? ScalarKind::FP16 : ScalarKind::FP32;
}

at::Tensor scaled_masked_softmax_cuda(const at::Tensor& scores, double scale, bool causal) {
  constexpr const char* op = "attnprof::scaled_masked_softmax";
  kernels::check_cuda_tensor(scores, op, "scores");
  const ScalarKind kind = scalar_kind(scores.scalar_type(), op, "scores");
  TORCH_CHECK(scores.dim() >= 2, op, ": scores must be [..., seq_q, seq_k], got ", scores.sizes());
  TORCH_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
  const int64_t seq_q = scores.size(-2);
  const int64_t seq_k = scores.size(-1);
  TORCH_CHECK(seq_q <= kInt32Max && seq_k <= kInt32Max, op, ": rows too long: ", scores.sizes());

  c10::cuda::CUDAGuard guard(scores.device());
  at::Tensor out = at::empty_like(scores);
  if (scores.numel() == 0) return out;

  SoftmaxParams p;
  p.in = scores.data_ptr();
  p.out = out.data_ptr();
  p.rows = scores.numel() / seq_k;
  p.seq_q = static_cast<int>(seq_q);
  p.seq_k = static_cast<int>(seq_k);
  p.scale = static_cast<float>(scale);
  p.causal = causal;
  p.kind = kind;
  run_scaled_masked_softmax(p, at::cuda::getCurrentCUDAStream().stream());
  return out;
}

at::Tensor scaled_masked_softmax_backward_cuda(const at::Tensor& grad_out, const at::Tensor& out, double scale) {
  constexpr const char* op = "attnprof::scaled_masked_softmax_backward";
  TORCH_CHECK(out.defined() && out.is_cuda(), op, ": out must be a defined CUDA tensor");
  for (const auto& [t, name] : {std::pair{&grad_out, "grad_out"}, {&out, "out"}}) {
    kernels::check_cuda_tensor(*t, op, name);
    TORCH_CHECK(t->device() == out.device(), op, ": ", name, " is on ", t->device(), ", the others on ", out.device());
  }
  const ScalarKind kind = scalar_kind(out.scalar_type(), op, "out");
  TORCH_CHECK(grad_out.scalar_type() == out.scalar_type(), op, ": grad_out must have out's dtype ",
              out.scalar_type(), ", got ", grad_out.scalar_type());
  TORCH_CHECK(grad_out.sizes() == out.sizes(), op, ": grad_out ", grad_out.sizes(), " and out ", out.sizes(),
              " must have one shape");
  TORCH_CHECK(out.dim() >= 1, op, ": out must have a last (softmax) dimension, got a scalar");
  TORCH_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
  const int64_t seq_k = out.size(-1);
  TORCH_CHECK(seq_k <= kInt32Max, op, ": rows too long: ", out.sizes());

  c10::cuda::CUDAGuard guard(out.device());
  at::Tensor grad_in = at::empty_like(out);
  if (out.numel() == 0) return grad_in;
  SoftmaxBwdParams p;
  p.grad_out = grad_out.data_ptr();
  p.out = out.data_ptr();
  p.grad_in = grad_in.data_ptr();
  p.rows = out.numel() / seq_k;
  p.seq_k = static_cast<int>(seq_k);
  p.scale = static_cast<float>(scale);
  p.kind = kind;
  run_scaled_masked_softmax_backward(p, at::cuda::getCurrentCUDAStream().stream());
  return grad_in;
}

}  // namespace
}  // namespace attnprof::softmax

TORCH_LIBRARY_IMPL(attnprof, CUDA, m) {
  m.impl("scaled_masked_softmax", &attnprof::softmax::scaled_masked_softmax_cuda);
  m.impl("scaled_masked_softmax_backward", &attnprof::softmax::scaled_masked_softmax_backward_cuda);
}

#endif  // ATTNPROF_HAVE_CUDA_KERNELS
