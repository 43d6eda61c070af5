// Plain parameters of one fused-attention forward launch: pointers, strides,
// sizes and flags. No templates and no LibTorch types, so the boundary
// (ops_cuda.cpp) fills it and the launch layer (flash_fwd_launch.cu) reads it.
#pragma once

#include <cstdint>

struct CUstream_st;  // cudaStream_t is CUstream_st*; no CUDA header needed here.

namespace attnprof::flash {

struct FwdParams {
  // [batch, heads, seq, head_dim]; the last dimension is contiguous.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // [batch, heads, seqlen_q], natural log, contiguous

  // Strides in elements. The kernel requires row strides == head_dim (checked
  // in run_flash_fwd); batch and head strides are free.
  int64_t q_batch_stride = 0, q_head_stride = 0, q_row_stride = 0;
  int64_t k_batch_stride = 0, k_head_stride = 0, k_row_stride = 0;
  int64_t v_batch_stride = 0, v_head_stride = 0, v_row_stride = 0;
  int64_t o_batch_stride = 0, o_head_stride = 0, o_row_stride = 0;

  int batch = 0;
  int heads = 0;
  int seqlen_q = 0;
  int seqlen_k = 0;
  int head_dim = 0;

  float scale = 1.f;       // softmax scale applied to Q·Kᵀ
  float scale_log2 = 1.f;  // scale · log2(e): the kernel uses exp2

  bool causal = false;     // top-left aligned: key j is visible to query i iff j <= i
  bool is_bf16 = true;     // else fp16
};

// Runtime → template dispatch over (dtype, head_dim, causal); launches on `stream`.
// Defined in flash_fwd_launch.cu. Head dims: 64 and 128.
void run_flash_fwd(const FwdParams& params, CUstream_st* stream);

}  // namespace attnprof::flash
