// Tensor checks shared by the operators' LibTorch boundaries (ops_cuda.cpp,
// ops_backward.cpp, and both flash forwards: flash_attention/flash_fwd_api.cpp,
// ops_sm90.cpp). Each names the operator in its message.
#pragma once

#include <ATen/core/Tensor.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>

namespace attnprof::kernels {

inline void check_cuda_tensor(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is undefined");
  TORCH_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor, got one on ", t.device());
  TORCH_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous (sizes ", t.sizes(),
              ", strides ", t.strides(), "); call .contiguous() first");
}

// What both flash forwards take: q [batch, heads_q, seq_q, head_dim] and k, v
// [batch, heads_kv, seq_kv, head_dim], contiguous 16-bit tensors on one CUDA
// device, heads_q a multiple of heads_kv, head_dim 64 or 128, a finite positive
// scale. Each family adds its own index limits (and the Hopper one its layout).
inline void check_flash_fwd_inputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   double scale) {
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
              ": q must be [batch, heads_q, seq_q, head_dim] and k, v [batch, heads_kv, seq_kv, "
              "head_dim], got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), op, ": k and v must have one shape, got ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(q.size(0) == k.size(0) && q.size(3) == k.size(3), op, ": q ", q.sizes(), " and k ", k.sizes(),
              " differ in batch or head_dim");
  const int64_t heads_q = q.size(1), heads_kv = k.size(1);
  TORCH_CHECK(heads_kv >= 1, op, ": k and v need at least one head, got ", k.sizes());
  TORCH_CHECK(heads_q % heads_kv == 0, op, ": query heads (", heads_q, ") must be a multiple of key/value heads (",
              heads_kv, ")");
  const int64_t head_dim = q.size(3);
  TORCH_CHECK(head_dim == 64 || head_dim == 128, op, ": head_dim must be 64 or 128, got ", head_dim);
  TORCH_CHECK(std::isfinite(scale) && scale > 0, op, ": scale must be finite and positive, got ", scale);
}

}  // namespace attnprof::kernels
