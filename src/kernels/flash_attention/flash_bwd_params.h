// Plain parameters of one fused-attention backward: pointers, strides, sizes
// and flags. No templates and no LibTorch types: the boundary
// (api.cpp) fills it, the launch layer (flash_bwd_launch.cu) reads it.
//
// Memory beyond the inputs and the three gradients (allocated by the boundary,
// sizes with Sq_pad = seqlen_q rounded up to kBwdSeqQPad):
//   dq_accum  float32 [batch, heads_q, Sq_pad, head_dim]  dQ summed over key blocks
//   d_sum     float32 [batch, heads_q, Sq_pad]            D_i = rowsum(dO_i * O_i)
//   lse_log2  float32 [batch, heads_q, Sq_pad]            lse_i * log2(e); +inf where
//                                                         row i sees no key or is padding
// i.e. (head_dim + 2) * 4 bytes per padded query row and head: 134 MiB of
// dq_accum at 4x16x4096x128, 2 MiB of d_sum + lse_log2.
#pragma once

#include <cstdint>

struct CUstream_st;  // cudaStream_t is CUstream_st*; no CUDA header needed here.

namespace attnprof::flash {

// The workspaces' query rows are padded to a multiple of this, so every query
// block of every configuration reads and accumulates whole tiles without bounds
// checks (each kBlockM divides it; static_assert in flash_bwd_kernel_traits.h).
constexpr int kBwdSeqQPad = 128;

struct BwdParams {
  // q, out, grad_out, grad_q: [batch, heads_q, seqlen_q, head_dim];
  // k, v, grad_k, grad_v:     [batch, heads_kv, seqlen_k, head_dim].
  // Rows are head_dim contiguous elements (checked in run_flash_bwd); batch and
  // head strides are free, in elements.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  const void* o = nullptr;
  const void* dout = nullptr;
  const float* lse = nullptr;  // [batch, heads_q, seqlen_q], natural log, contiguous
  void* dq = nullptr;
  void* dk = nullptr;
  void* dv = nullptr;
  float* dq_accum = nullptr;  // workspaces, see above; contiguous
  float* d_sum = nullptr;
  float* lse_log2 = nullptr;

  int64_t q_batch_stride = 0, q_head_stride = 0, q_row_stride = 0;
  int64_t k_batch_stride = 0, k_head_stride = 0, k_row_stride = 0;
  int64_t v_batch_stride = 0, v_head_stride = 0, v_row_stride = 0;
  int64_t o_batch_stride = 0, o_head_stride = 0, o_row_stride = 0;
  int64_t do_batch_stride = 0, do_head_stride = 0, do_row_stride = 0;
  int64_t dq_batch_stride = 0, dq_head_stride = 0, dq_row_stride = 0;
  int64_t dk_batch_stride = 0, dk_head_stride = 0, dk_row_stride = 0;
  int64_t dv_batch_stride = 0, dv_head_stride = 0, dv_row_stride = 0;

  int batch = 0;
  int heads_q = 0;
  int heads_kv = 0;   // divides heads_q; query head h reads KV head h / (heads_q / heads_kv)
  int seqlen_q = 0;
  int seqlen_k = 0;
  int seqlen_q_pad = 0;  // seqlen_q rounded up to kBwdSeqQPad: row count of the workspaces
  int head_dim = 0;

  float scale = 1.f;  // softmax scale applied to Q·Kᵀ

  // Bottom-right aligned: key j is visible to query i iff j <= i + seqlen_k - seqlen_q
  // (the same as top-left when seqlen_q == seqlen_k).
  bool causal = false;
  // Under causal, a sliding window of this many keys (0: none): key j is also
  // hidden from query i when j <= i + seqlen_k - seqlen_q - window (as in
  // kernels::AttentionParams::window). The portable backward only.
  int window = 0;
  bool is_bf16 = true;  // else fp16
};

// Preprocess (D, lse·log2 e, dq_accum = 0), main kernel (dK, dV, dq_accum),
// dQ conversion; all on `stream`. Defined in flash_bwd_launch.cu. Head dims 64, 128.
void run_flash_bwd(const BwdParams& params, CUstream_st* stream);

// The steps around the main kernel, shared with the Hopper backward
// (flash_sm90/flash_bwd_sm90_launch.cuh): the layout checks run_flash_bwd
// makes, the preprocessing and the dQ conversion, each on `stream`; errors
// name the operator `op`.
void check_flash_bwd_params(const BwdParams& params, const char* op);
void run_flash_bwd_preprocess(const BwdParams& params, CUstream_st* stream, const char* op);
void run_flash_bwd_convert_dq(const BwdParams& params, CUstream_st* stream, const char* op);

}  // namespace attnprof::flash
