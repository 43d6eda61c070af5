// What every kernel family's LibTorch boundary (its api.cpp) shares: the
// tensor checks, the query a family's supports() answers, and the shared
// forward params filled from tensors. Each check names the operator.
#pragma once

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <tuple>

#include "kernels/common/attention_params.h"

namespace attnprof::kernels {

// The kernels read rows in 16-byte pieces (cp.async, TMA), from 16-byte
// aligned addresses only: a contiguous view one element into its storage
// would stop the device with a misaligned address.
inline bool is_16_byte_aligned(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0; }
inline void check_aligned(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(is_16_byte_aligned(t), op, ": ", name, " must start on a 16-byte boundary (its storage offset is ",
              t.storage_offset(), " elements); call .clone() first");
}

inline void check_cuda_tensor(const at::Tensor& t, const char* op, const char* name) {
  TORCH_CHECK(t.defined(), op, ": ", name, " is undefined");
  TORCH_CHECK(t.is_cuda(), op, ": ", name, " must be a CUDA tensor, got one on ", t.device());
  TORCH_CHECK(t.is_contiguous(), op, ": ", name, " must be contiguous (sizes ", t.sizes(),
              ", strides ", t.strides(), "); call .contiguous() first");
}

// What a family's supports() is asked: can its kernels run attention of this
// dtype and head_dim on this device, in this build? The operator asks with
// its tensors' values, the autograd backward's choice with the saved ones, a
// variant with its problem's before any tensor exists.
struct KernelQuery {
  c10::Device device{c10::kCPU};
  at::ScalarType dtype = at::kBFloat16;
  int64_t head_dim = 0;
  bool backward = false;  // the family's backward kernels (their configurations may differ)
};

inline KernelQuery query_of(const at::Tensor& q, bool backward = false) {
  return {q.device(), q.scalar_type(), q.size(-1), backward};
}

// "bf16", "fp16", "fp32", ... as the CLI names dtypes.
inline std::string dtype_phrase(at::ScalarType t) {
  switch (t) {
    case at::kBFloat16: return "bf16";
    case at::kHalf: return "fp16";
    case at::kFloat: return "fp32";
    case at::kDouble: return "fp64";
    case at::kFloat8_e4m3fn: return "fp8 (e4m3)";
    case at::kFloat8_e5m2: return "e5m2";
    default: return c10::toString(t);
  }
}

// The reason a family's supports() gives, as an operator's error.
inline void check_supported(const std::optional<std::string>& why, const char* op) {
  TORCH_CHECK(!why, op, " ", why ? *why : std::string());
}

// What both flash forwards take, whatever the family supports: q [batch,
// heads_q, seq_q, head_dim] and k, v [batch, heads_kv, seq_kv, head_dim],
// contiguous CUDA tensors of one dtype on one device, heads_q a multiple of
// heads_kv, a finite positive scale. The family then asks its supports() (dtype,
// head_dim, device) and adds its own index limits.
inline void check_flash_fwd_inputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   double scale) {
  check_cuda_tensor(q, op, "q");
  check_cuda_tensor(k, op, "k");
  check_cuda_tensor(v, op, "v");
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
  TORCH_CHECK(std::isfinite(scale) && scale > 0, op, ": scale must be finite and positive, got ", scale);
}

// The sliding window an operator was given, checked (>= 0, only with causal)
// and as the kernels read it (AttentionParams::window): 0 for none and for a
// window that hides nothing (>= seq_kv: no query sees more keys than that).
inline int checked_window(const char* op, bool causal, int64_t window, int64_t seq_kv) {
  TORCH_CHECK(window >= 0, op, ": window must be >= 0 keys (0: no window), got ", window);
  TORCH_CHECK(window == 0 || causal, op, ": a sliding window is bottom-right aligned with the causal mask, so it "
              "needs causal=True; got window ", window, " with causal=False");
  return window >= seq_kv ? 0 : static_cast<int>(window);
}

// A checked (contiguous) [batch, heads, seq, head_dim] tensor's strides as the
// kernels address it: from the sizes, because PyTorch calls a tensor contiguous
// whatever the stride of a dimension of size 1 (one query row made by
// transpose(1, 2).contiguous() keeps heads * head_dim as its row stride).
inline std::tuple<int64_t, int64_t, int64_t> dense_strides(const at::Tensor& t) {  // batch, head, row
  return {t.size(1) * t.size(2) * t.size(3), t.size(2) * t.size(3), t.size(3)};
}

// The shared forward params for checked q, k, v writing into out and lse.
inline AttentionParams make_attention_params(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                             const at::Tensor& out, const at::Tensor& lse, bool causal,
                                             double scale) {
  AttentionParams p;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.o = out.data_ptr();
  p.lse = lse.data_ptr<float>();
  std::tie(p.q_batch_stride, p.q_head_stride, p.q_row_stride) = dense_strides(q);
  std::tie(p.k_batch_stride, p.k_head_stride, p.k_row_stride) = dense_strides(k);
  std::tie(p.v_batch_stride, p.v_head_stride, p.v_row_stride) = dense_strides(v);
  std::tie(p.o_batch_stride, p.o_head_stride, p.o_row_stride) = dense_strides(out);
  p.batch = static_cast<int>(q.size(0));
  p.heads_q = static_cast<int>(q.size(1));
  p.heads_kv = static_cast<int>(k.size(1));
  p.group = p.heads_q / p.heads_kv;
  p.seqlen_q = static_cast<int>(q.size(2));
  p.seqlen_k = static_cast<int>(k.size(2));
  p.head_dim = static_cast<int>(q.size(3));
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);  // log2(e)
  p.causal = causal;
  p.is_bf16 = q.scalar_type() == at::kBFloat16;
  return p;
}

// A forward's outputs on q's device (out like q, lse [batch, heads_q, seq_q]
// float32) and the shared params writing into them; `done` when nothing is
// left to launch: no query rows, or no key to attend to (out 0, lse -inf).
struct FwdCall {
  at::Tensor out, lse;
  AttentionParams params;
  bool done = false;
};

// For checked q, k, v; the caller guards q's device.
inline FwdCall prepare_forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                               double scale, int window = 0) {
  FwdCall call;
  call.out = at::empty_like(q);
  call.lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  call.done = q.numel() == 0 || k.size(2) == 0;
  if (q.numel() > 0 && k.size(2) == 0) {
    call.out.zero_();
    call.lse.fill_(-INFINITY);
  }
  if (!call.done) {
    call.params = make_attention_params(q, k, v, call.out, call.lse, causal, scale);
    call.params.window = window;
  }
  return call;
}

}  // namespace attnprof::kernels
