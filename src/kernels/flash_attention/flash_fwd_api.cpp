// LibTorch boundary of the fused-attention forward (flash_fwd_api.h). Built
// only with the CUDA kernels.
#ifdef ATTNPROF_HAVE_CUDA_KERNELS

#include "kernels/flash_attention/flash_fwd_api.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <cmath>

#include "kernels/tensor_checks.h"

namespace attnprof::flash {
namespace {

constexpr const char* kOp = "attnprof::flash_attention";
constexpr double kLog2e = 1.4426950408889634;

void check_fwd_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  using kernels::check_cuda_tensor;
  check_cuda_tensor(q, kOp, "q");
  check_cuda_tensor(k, kOp, "k");
  check_cuda_tensor(v, kOp, "v");
  TORCH_CHECK(q.scalar_type() == at::kBFloat16 || q.scalar_type() == at::kHalf, kOp,
              ": q must be bfloat16 or float16, got ", q.scalar_type());
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), kOp,
              ": q, k, v must have one dtype, got ", q.scalar_type(), ", ", k.scalar_type(), ", ",
              v.scalar_type());
  TORCH_CHECK(k.device() == q.device() && v.device() == q.device(), kOp,
              ": q, k, v must be on one device, got ", q.device(), ", ", k.device(), ", ", v.device());
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, kOp,
              ": q, k, v must be [batch, heads, seq, head_dim], got ", q.sizes(), ", ", k.sizes(),
              ", ", v.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), kOp, ": k and v must have one shape, got ", k.sizes(),
              " and ", v.sizes());
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(1) == k.size(1) && q.size(3) == k.size(3), kOp,
              ": q ", q.sizes(), " and k ", k.sizes(), " differ in batch, heads or head_dim");
  const int64_t head_dim = q.size(3);
  TORCH_CHECK(head_dim == 64 || head_dim == 128, kOp, ": head_dim must be 64 or 128, got ",
              head_dim);
  TORCH_CHECK(std::isfinite(scale) && scale > 0, kOp, ": scale must be finite and positive, got ",
              scale);
  TORCH_CHECK(q.size(0) * q.size(1) <= 0x7fffffff && q.size(2) <= 0x7fffffff &&
                  k.size(2) <= 0x7fffffff,
              kOp, ": sizes too large for 32-bit grid indices: ", q.sizes(), ", ", k.sizes());
}

}  // namespace

FwdParams make_fwd_params(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& out, const at::Tensor& lse, bool causal, double scale) {
  FwdParams p;
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
  p.head_dim = static_cast<int>(q.size(3));
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * kLog2e);
  p.causal = causal;
  p.is_bf16 = q.scalar_type() == at::kBFloat16;
  return p;
}

std::tuple<at::Tensor, at::Tensor> mha_fwd(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, bool causal, double scale,
                                           FwdLauncher launch) {
  check_fwd_inputs(q, k, v, scale);
  c10::cuda::CUDAGuard guard(q.device());
  at::Tensor out = at::empty_like(q);
  at::Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  if (q.numel() == 0) return {out, lse};
  if (k.size(2) == 0) {  // no keys: nothing to attend to
    out.zero_();
    lse.fill_(-INFINITY);
    return {out, lse};
  }
  launch(make_fwd_params(q, k, v, out, lse, causal, scale),
         at::cuda::getCurrentCUDAStream().stream());
  return {out, lse};
}

}  // namespace attnprof::flash

#endif  // ATTNPROF_HAVE_CUDA_KERNELS
