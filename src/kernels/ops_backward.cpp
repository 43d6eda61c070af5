// CUDA implementations of the backward operators: the LibTorch boundary.
// Every tensor check happens here, once; the launch layers below trust their
// params. Compiled only when the CUDA kernels are (ATTNPROF_HAVE_CUDA_KERNELS).
#ifdef ATTNPROF_HAVE_CUDA_KERNELS

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <initializer_list>
#include <tuple>
#include <utility>

#include "kernels/flash_attention/flash_bwd_params.h"
#include "kernels/flash_bwd_boundary.h"
#include "kernels/scaled_masked_softmax/scaled_masked_softmax.h"
#include "kernels/tensor_checks.h"

namespace attnprof {
namespace {

constexpr int64_t kInt32Max = 0x7fffffff;

// Defined, on CUDA, contiguous, on `device`: the layout every kernel here assumes.
void check_operand(const at::Tensor& t, const char* op, const char* name, const at::Device& device) {
  kernels::check_cuda_tensor(t, op, name);
  TORCH_CHECK(t.device() == device, op, ": ", name, " is on ", t.device(), ", the others on ", device);
}

}  // namespace

namespace kernels {

FlashBwdCall prepare_flash_bwd(const char* op, const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse, bool causal,
                               double scale, const std::function<void()>& more_checks) {
  TORCH_CHECK(q.defined() && q.is_cuda(), op, ": q must be a defined CUDA tensor");
  const at::Device device = q.device();
  const std::pair<const at::Tensor*, const char*> operands[] = {
      {&grad_out, "grad_out"}, {&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}, {&lse, "lse"}};
  for (const auto& [t, name] : operands) check_operand(*t, op, name, device);
  const auto dt = q.scalar_type();
  TORCH_CHECK(dt == at::kBFloat16 || dt == at::kHalf, op, ": q must be bfloat16 or float16, got ", dt);
  for (const auto& [t, name] : {std::pair{&k, "k"}, {&v, "v"}, {&out, "out"}, {&grad_out, "grad_out"}})
    TORCH_CHECK(t->scalar_type() == dt, op, ": ", name, " must have q's dtype ", dt, ", got ", t->scalar_type());
  TORCH_CHECK(lse.scalar_type() == at::kFloat, op, ": lse must be float32, got ", lse.scalar_type());
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
              ": q, k, v must be [batch, heads, seq, head_dim], got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), op, ": k and v must have one shape, got ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(out.sizes() == q.sizes() && grad_out.sizes() == q.sizes(), op, ": out ", out.sizes(),
              " and grad_out ", grad_out.sizes(), " must have q's shape ", q.sizes());
  const int64_t batch = q.size(0), heads_q = q.size(1), seq_q = q.size(2), head_dim = q.size(3);
  const int64_t heads_kv = k.size(1), seq_k = k.size(2);
  TORCH_CHECK(lse.dim() == 3 && lse.size(0) == batch && lse.size(1) == heads_q && lse.size(2) == seq_q, op,
              ": lse must be [batch, heads_q, seq_q] = [", batch, ", ", heads_q, ", ", seq_q, "], got ",
              lse.sizes());
  TORCH_CHECK(k.size(0) == batch && k.size(3) == head_dim, op, ": q ", q.sizes(), " and k ", k.sizes(),
              " differ in batch or head_dim");
  TORCH_CHECK(heads_kv >= 1 && heads_q % heads_kv == 0, op, ": the KV heads (", heads_kv,
              ") must divide the query heads (", heads_q, ")");
  TORCH_CHECK(head_dim == 64 || head_dim == 128, op, ": head_dim must be 64 or 128, got ", head_dim);
  TORCH_CHECK(std::isfinite(scale) && scale > 0, op, ": scale must be finite and positive, got ", scale);
  const int64_t seq_q_pad = (seq_q + flash::kBwdSeqQPad - 1) / flash::kBwdSeqQPad * flash::kBwdSeqQPad;
  TORCH_CHECK(batch * heads_q <= kInt32Max && seq_q_pad <= kInt32Max && seq_k <= kInt32Max, op,
              ": sizes too large for 32-bit indices: q ", q.sizes(), ", k ", k.sizes());
  if (more_checks) more_checks();

  FlashBwdCall call;
  if (q.numel() == 0 || k.numel() == 0) {  // nothing attends or nothing to attend to: zero gradients
    call.dq = at::zeros_like(q);
    call.dk = at::zeros_like(k);
    call.dv = at::zeros_like(v);
    call.trivial = true;
    return call;
  }
  at::Tensor& dq = call.dq = at::empty_like(q);
  at::Tensor& dk = call.dk = at::empty_like(k);
  at::Tensor& dv = call.dv = at::empty_like(v);
  // Workspaces (flash_bwd_params.h): fp32 dQ accumulator and the per-row D and
  // lse·log2 e, query rows padded to whole blocks. Every element is written by
  // the preprocessing kernel before the main kernel reads it.
  const auto f32 = q.options().dtype(at::kFloat);
  at::Tensor& dq_accum = call.dq_accum = at::empty({batch, heads_q, seq_q_pad, head_dim}, f32);
  at::Tensor& row_stats = call.row_stats = at::empty({2, batch, heads_q, seq_q_pad}, f32);

  flash::BwdParams& p = call.params;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.o = out.data_ptr();
  p.dout = grad_out.data_ptr();
  p.lse = lse.data_ptr<float>();
  p.dq = dq.data_ptr();
  p.dk = dk.data_ptr();
  p.dv = dv.data_ptr();
  p.dq_accum = dq_accum.data_ptr<float>();
  p.d_sum = row_stats.data_ptr<float>();
  p.lse_log2 = p.d_sum + row_stats.size(1) * row_stats.size(2) * row_stats.size(3);
  p.q_batch_stride = q.stride(0), p.q_head_stride = q.stride(1), p.q_row_stride = q.stride(2);
  p.k_batch_stride = k.stride(0), p.k_head_stride = k.stride(1), p.k_row_stride = k.stride(2);
  p.v_batch_stride = v.stride(0), p.v_head_stride = v.stride(1), p.v_row_stride = v.stride(2);
  p.o_batch_stride = out.stride(0), p.o_head_stride = out.stride(1), p.o_row_stride = out.stride(2);
  p.do_batch_stride = grad_out.stride(0), p.do_head_stride = grad_out.stride(1), p.do_row_stride = grad_out.stride(2);
  p.dq_batch_stride = dq.stride(0), p.dq_head_stride = dq.stride(1), p.dq_row_stride = dq.stride(2);
  p.dk_batch_stride = dk.stride(0), p.dk_head_stride = dk.stride(1), p.dk_row_stride = dk.stride(2);
  p.dv_batch_stride = dv.stride(0), p.dv_head_stride = dv.stride(1), p.dv_row_stride = dv.stride(2);
  p.batch = static_cast<int>(batch);
  p.heads_q = static_cast<int>(heads_q);
  p.heads_kv = static_cast<int>(heads_kv);
  p.seqlen_q = static_cast<int>(seq_q);
  p.seqlen_k = static_cast<int>(seq_k);
  p.seqlen_q_pad = static_cast<int>(seq_q_pad);
  p.head_dim = static_cast<int>(head_dim);
  p.scale = static_cast<float>(scale);
  p.causal = causal;
  p.is_bf16 = dt == at::kBFloat16;
  return call;
}

}  // namespace kernels

namespace {

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward_cuda(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool causal, double scale) {
  kernels::FlashBwdCall call = kernels::prepare_flash_bwd("attnprof::flash_attention_backward", grad_out, q, k,
                                                          v, out, lse, causal, scale);
  c10::cuda::CUDAGuard guard(q.device());
  if (!call.trivial) flash::run_flash_bwd(call.params, at::cuda::getCurrentCUDAStream().stream());
  return {call.dq, call.dk, call.dv};
}

at::Tensor scaled_masked_softmax_backward_cuda(const at::Tensor& grad_out, const at::Tensor& out,
                                               double scale) {
  constexpr const char* op = "attnprof::scaled_masked_softmax_backward";
  TORCH_CHECK(out.defined() && out.is_cuda(), op, ": out must be a defined CUDA tensor");
  check_operand(grad_out, op, "grad_out", out.device());
  check_operand(out, op, "out", out.device());
  const auto st = out.scalar_type();
  TORCH_CHECK(st == at::kBFloat16 || st == at::kHalf || st == at::kFloat, op,
              ": out must be bfloat16, float16 or float32, got ", st);
  TORCH_CHECK(grad_out.scalar_type() == st, op, ": grad_out must have out's dtype ", st, ", got ",
              grad_out.scalar_type());
  TORCH_CHECK(grad_out.sizes() == out.sizes(), op, ": grad_out ", grad_out.sizes(), " and out ", out.sizes(),
              " must have one shape");
  TORCH_CHECK(out.dim() >= 1, op, ": out must have a last (softmax) dimension, got a scalar");
  TORCH_CHECK(std::isfinite(scale), op, ": scale must be finite, got ", scale);
  const int64_t seq_k = out.size(-1);
  TORCH_CHECK(seq_k <= kInt32Max, op, ": rows too long: ", out.sizes());

  c10::cuda::CUDAGuard guard(out.device());
  at::Tensor grad_in = at::empty_like(out);
  if (out.numel() == 0) return grad_in;
  softmax::SoftmaxBwdParams p;
  p.grad_out = grad_out.data_ptr();
  p.out = out.data_ptr();
  p.grad_in = grad_in.data_ptr();
  p.rows = out.numel() / seq_k;
  p.seq_k = static_cast<int>(seq_k);
  p.scale = static_cast<float>(scale);
  p.kind = st == at::kBFloat16 ? softmax::ScalarKind::BF16
           : st == at::kHalf   ? softmax::ScalarKind::FP16
                               : softmax::ScalarKind::FP32;
  softmax::run_scaled_masked_softmax_backward(p, at::cuda::getCurrentCUDAStream().stream());
  return grad_in;
}

}  // namespace
}  // namespace attnprof

TORCH_LIBRARY_IMPL(attnprof, CUDA, m) {
  m.impl("flash_attention_backward", &attnprof::flash_attention_backward_cuda);
  m.impl("scaled_masked_softmax_backward", &attnprof::scaled_masked_softmax_backward_cuda);
}

#endif  // ATTNPROF_HAVE_CUDA_KERNELS
