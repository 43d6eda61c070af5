// Schemas of attnprof's own operators. Compiled in every build, with or
// without CUDA: the schemas exist everywhere, the CUDA implementations
// (ops_cuda.cpp) only where the kernels were built. Callers that need a kernel
// ask the dispatcher whether one is registered for CUDA (custom_flash.cpp).
#include <torch/library.h>

TORCH_LIBRARY(attnprof, m) {
  // q: [batch, heads_q, seq_q, head_dim]; k, v: [batch, heads_kv, seq_kv,
  // head_dim] with heads_q a multiple of heads_kv (grouped-query / multi-query
  // attention: query head h reads K/V head h / (heads_q / heads_kv), no copy);
  // contiguous, one dtype (bf16 or fp16), head_dim 64 or 128. seq_q and seq_kv
  // may differ. out: like q. lse: [batch, heads_q, seq_q] float32, natural log.
  // causal: bottom-right aligned, key j visible to query i iff
  // j <= i + (seq_kv - seq_q) (top-left when seq_q == seq_kv); a row that sees
  // no key (seq_q > seq_kv) gets out 0 and lse -inf. Few queries per KV head
  // run a split-KV decode kernel, the others the prefill kernel; either may
  // split the keys and add a combine kernel (flash_attention/flash_fwd_plan.h).
  m.def("flash_attention(Tensor q, Tensor k, Tensor v, bool causal, float scale) -> (Tensor out, Tensor lse)");
  // The Hopper (sm_90a) kernel; CUDA implementation only where it was built
  // (ops_sm90.cpp) and only on compute capability 9.0 devices. q: [batch,
  // heads_q, seq_q, head_dim]; k, v: [batch, heads_kv, seq_kv, head_dim] with
  // heads_q % heads_kv == 0 (query head h reads key/value head
  // h / (heads_q / heads_kv)); contiguous, bf16 or fp16, head_dim 64 or 128.
  // causal: bottom-right aligned (key j visible to query i iff
  // j <= i + seq_kv - seq_q); a row that sees no key gives zeros and lse -inf.
  // out: like q; lse: [batch, heads_q, seq_q] float32, natural log.
  m.def("flash_attention_sm90(Tensor q, Tensor k, Tensor v, bool causal, float scale) -> (Tensor out, Tensor lse)");
  // softmax(scale · scores) over the last dimension of a contiguous
  // [..., seq_q, seq_k] tensor (bf16, fp16 or fp32), keys after the query masked
  // when causal. Rows with nothing visible give zeros.
  m.def("scaled_masked_softmax(Tensor scores, float scale, bool causal) -> Tensor");
  // Gradients of flash_attention from its saved inputs, output and lse.
  // q, out, grad_out: [batch, heads_q, seq_q, head_dim]; k, v: [batch, heads_kv,
  // seq_k, head_dim] with heads_kv dividing heads_q; one dtype (bf16 or fp16),
  // contiguous; lse float32 [batch, heads_q, seq_q]. causal: bottom-right
  // aligned (key j visible to query i iff j <= i + seq_k - seq_q); rows with
  // lse = -inf (no visible key) contribute nothing.
  m.def("flash_attention_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, bool causal, float scale) -> (Tensor grad_q, Tensor grad_k, Tensor grad_v)");
  // The same gradients from the Hopper (sm_90a) backward kernel (wgmma, TMA);
  // CUDA implementation only where it was built (ops_sm90.cpp) and only on
  // compute capability 9.0 devices; q, k, v, grad_out also 16-byte aligned.
  m.def("flash_attention_backward_sm90(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, bool causal, float scale) -> (Tensor grad_q, Tensor grad_k, Tensor grad_v)");
  // grad_scores = scale * out * (grad_out - rowsum(grad_out * out)) over the last
  // dimension; out is scaled_masked_softmax's output (masked entries are 0).
  m.def("scaled_masked_softmax_backward(Tensor grad_out, Tensor out, float scale) -> Tensor");
}
