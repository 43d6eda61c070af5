// CUDA implementations of the attnprof operators: the LibTorch boundary.
// Every tensor check happens here, once; the launch layers below trust their
// params. Compiled only when the CUDA kernels are (ATTNPROF_HAVE_CUDA_KERNELS).
#ifdef ATTNPROF_HAVE_CUDA_KERNELS

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cmath>
#include <tuple>

#include "kernels/flash_attention/flash_params.h"
#include "kernels/scaled_masked_softmax/scaled_masked_softmax.h"

namespace attnprof {
namespace {

void check_cuda_tensor(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is undefined");
  TORCH_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor, got one on ", t.device());
  TORCH_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous (sizes ", t.sizes(),
              ", strides ", t.strides(), "); call .contiguous() first");
}

std::tuple<at::Tensor, at::Tensor> flash_attention_cuda(const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& v, bool causal,
                                                        double scale) {
  constexpr const char* op = "attnprof::flash_attention";
  check_cuda_tensor(q, op, "q");
  check_cuda_tensor(k, op, "k");
  check_cuda_tensor(v, op, "v");
  TORCH_CHECK(q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf, op,
              ": q must be bfloat16 or float16, got ", q.scalar_type());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), op,
              ": q, k, v must have one dtype, got ", q.scalar_type(), ", ", k.scalar_type(), ", ",
              v.scalar_type());
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(), op,
              ": q, k, v must be on one device, got ", q.device(), ", ", k.device(), ", ", v.device());
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
              ": q, k, v must be [batch, heads, seq, head_dim], got ", q.sizes(), ", ", k.sizes(),
              ", ", v.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), op, ": k and v must have one shape, got ", k.sizes(), " and ",
              v.sizes());
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3), op,
              ": q ", q.sizes(), " and k ", k.sizes(), " differ in batch, heads or head_dim");
  const int64_t head_dim = q.size(3);
  TORCH_CHECK(head_dim == 64 || head_dim == 128, op, ": head_dim must be 64 or 128, got ", head_dim);
  TORCH_CHECK(std::isfinite(scale) && scale > 0, op, ": scale must be finite and positive, got ", scale);
  TORCH_CHECK(q.size(0) * q.size(1) <= 0x7fffffff && q.size(2) <= 0x7fffffff && k.size(2) <= 0x7fffffff,
              op, ": sizes too large for 32-bit grid indices: ", q.sizes(), ", ", k.sizes());

  c10::cuda::CUDAGuard guard(q.device());
  at::Tensor out = at::empty_like(q);
  at::Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  if (q.numel() == 0) return {out, lse};
  if (k.size(2) == 0) {  // no keys: nothing to attend to
    out.zero_();
    lse.fill_(-INFINITY);
    return {out, lse};
  }

  flash::FwdParams p;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.o = out.data_ptr();
  p.lse = lse.data_ptr<float>();
  p.q_batch_stride = q.stride(0), p.q_head_stride = q.stride(1), p.q_row_stride = q.stride(2);
  p.k_batch_stride = k.stride(0), p.k_head_stride = k.stride(1), p.k_row_stride = k.stride(2);
  p.v_batch_stride = v.stride(0), p.v_head_stride = v.stride(1), p.v_row_stride = v.stride(2);
  p.o_batch_stride = out.stride(0), p.o_head_stride = out.stride(1), p.o_row_stride = out.stride(2);
  p.batch = static_cast<int>(q.size(0));
  p.heads = static_cast<int>(q.size(1));
  p.seqlen_q = static_cast<int>(q.size(2));
  p.seqlen_k = static_cast<int>(k.size(2));
  p.head_dim = static_cast<int>(head_dim);
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);  // log2(e)
  p.causal = causal;
  p.is_bf16 = q.scalar_type() == at::kBFloat16;
  flash::run_flash_fwd(p, at::cuda::getCurrentCUDAStream().stream());
  return {out, lse};
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
