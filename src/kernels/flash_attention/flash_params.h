// Plain parameters of one fused-attention forward: pointers, strides, sizes,
// flags and the plan (which path, how many key splits). No templates and no
// LibTorch types, so the boundary (flash_fwd_api.cpp) fills it and the launch
// layers (flash_fwd_launch.cu, flash_fwd_splitkv_launch.cu) read it.
#pragma once

#include <cstdint>

#include "kernels/flash_attention/flash_fwd_plan.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*; no CUDA header needed here.

namespace attnprof::flash {

struct FwdParams {
  // q, o: [batch, heads_q, seqlen_q, head_dim]; k, v: [batch, heads_kv,
  // seqlen_k, head_dim]; the last dimension is contiguous.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // [batch, heads_q, seqlen_q], natural log, contiguous

  // Strides in elements. The kernels require row strides == head_dim (checked
  // in run_flash_fwd); batch and head strides are free.
  int64_t q_batch_stride = 0, q_head_stride = 0, q_row_stride = 0;
  int64_t k_batch_stride = 0, k_head_stride = 0, k_row_stride = 0;
  int64_t v_batch_stride = 0, v_head_stride = 0, v_row_stride = 0;
  int64_t o_batch_stride = 0, o_head_stride = 0, o_row_stride = 0;

  int batch = 0;
  int heads_q = 0;
  int heads_kv = 0;
  int group = 1;  // heads_q / heads_kv: query head h reads K/V head h / group
  int seqlen_q = 0;
  int seqlen_k = 0;
  int head_dim = 0;

  float scale = 1.f;       // softmax scale applied to Q·Kᵀ
  float scale_log2 = 1.f;  // scale · log2(e): the kernels use exp2

  // Bottom-right aligned: key j is visible to query i iff
  // j <= i + (seqlen_k - seqlen_q); top-left when seqlen_q == seqlen_k.
  bool causal = false;
  bool is_bf16 = true;  // else fp16

  FwdPlan plan;
  // Partial results of the key splits when plan.num_splits > 1, combined by
  // flash_combine_kernel: [num_splits][batch·heads_q·seqlen_q][head_dim] and
  // [num_splits][batch·heads_q·seqlen_q], each normalised by its own row sum.
  float* o_accum = nullptr;
  float* lse_accum = nullptr;
};

// Runs p.plan: the path's kernel, then the combine kernel when the keys are
// split; launches on `stream`. Defined in flash_fwd_launch.cu. Head dims: 64, 128.
void run_flash_fwd(const FwdParams& params, CUstream_st* stream);

// The split-KV decode kernel and the combine kernel (flash_fwd_splitkv_launch.cu).
void run_flash_fwd_splitkv(const FwdParams& params, CUstream_st* stream);
void run_flash_combine(const FwdParams& params, CUstream_st* stream);

}  // namespace attnprof::flash
