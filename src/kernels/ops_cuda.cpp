// CUDA implementations of the attnprof operators: the LibTorch boundary.
// Every tensor check happens here (for flash_attention in flash_fwd_api.cpp,
// once; the launch layers below trust their
// params. Compiled only when the CUDA kernels are (ATTNPROF_HAVE_CUDA_KERNELS).
#ifdef ATTNPROF_HAVE_CUDA_KERNELS

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cmath>
#include <tuple>

#include "kernels/flash_attention/flash_fwd_api.h"
#include "kernels/scaled_masked_softmax/scaled_masked_softmax.h"
#include "kernels/tensor_checks.h"

namespace attnprof {
namespace {

using kernels::check_cuda_tensor;

std::tuple<at::Tensor, at::Tensor> flash_attention_cuda(const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& v, bool causal,
                                                        double scale) {
  return flash::mha_fwd(q, k, v, causal, scale, &flash::run_flash_fwd);
}

at::Tensor scaled_masked_softmax_cuda(const at::Tensor& scores, double scale, bool causal) {
  constexpr const char* op = "attnprof::scaled_masked_softmax";
  check_cuda_tensor(scores, op, "scores");
  const auto st = scores.scalar_type();
  TORCH_CHECK(st == at::kBFloat16 || st == at::kHalf || st == at::kFloat, op,
              ": scores must be bfloat16, float16 or float32, got ", st);
  TORCH_CHECK(scores.dim() >= 2, op, ": scores must be [..., seq_q, seq_k], got ", scores.sizes());
  TORCH_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
  const int64_t seq_q = scores.size(-2);
  const int64_t seq_k = scores.size(-1);
  TORCH_CHECK(seq_q <= 0x7fffffff && seq_k <= 0x7fffffff, op, ": rows too long: ", scores.sizes());

  c10::cuda::CUDAGuard guard(scores.device());
  at::Tensor out = at::empty_like(scores);
  if (scores.numel() == 0) return out;

  softmax::SoftmaxParams p;
  p.in = scores.data_ptr();
  p.out = out.data_ptr();
  p.rows = scores.numel() / seq_k;
  p.seq_q = static_cast<int>(seq_q);
  p.seq_k = static_cast<int>(seq_k);
  p.scale = static_cast<float>(scale);
  p.causal = causal;
  p.kind = st == at::kBFloat16 ? softmax::ScalarKind::BF16
           : st == at::kHalf   ? softmax::ScalarKind::FP16
                               : softmax::ScalarKind::FP32;
  softmax::run_scaled_masked_softmax(p, at::cuda::getCurrentCUDAStream().stream());
  return out;
}

}  // namespace
}  // namespace attnprof

TORCH_LIBRARY_IMPL(attnprof, CUDA, m) {
  m.impl("flash_attention", &attnprof::flash_attention_cuda);
  m.impl("scaled_masked_softmax", &attnprof::scaled_masked_softmax_cuda);
}

#endif  // ATTNPROF_HAVE_CUDA_KERNELS
