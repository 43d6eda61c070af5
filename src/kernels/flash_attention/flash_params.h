// Plain parameters of one fused-attention forward of the portable family:
// the shared ones and the plan (which path, how many key splits). No templates
// and no LibTorch types, so the boundary (api.cpp) fills it and the launch
// layers (flash_fwd_launch.cu, flash_fwd_splitkv_launch.cu) read it.
#pragma once

#include <cstdint>

#include "kernels/common/attention_params.h"
#include "kernels/flash_attention/flash_fwd_plan.h"

struct CUstream_st;  // cudaStream_t is CUstream_st*; no CUDA header needed here.

namespace attnprof::flash {

// The shared forward params (kernels/common/attention_params.h) and what
// only the portable kernels read: the plan and the key splits' workspace.
struct FwdParams : kernels::AttentionParams {
  FwdPlan plan;
  // Partial results of the key splits when plan.num_splits > 1, combined by
  // flash_combine_kernel: [num_splits][batch·heads_q·seqlen_q][head_dim] and
  // [num_splits][batch·heads_q·seqlen_q], each normalised by its own row sum.
  float* o_accum = nullptr;
  float* lse_accum = nullptr;

  // A paged K/V (attnprof::flash_attention_paged) when block_table is set: k
  // and v are page pools [num_pages][heads_kv][page_size][head_dim] (the
  // head stride is page_size · head_dim, the batch strides unused) and key j
  // of batch b is row j & (page_size − 1) of page
  // block_table[b · table_batch_stride + (j >> page_shift)].
  const int* block_table = nullptr;
  int64_t table_batch_stride = 0;
  int64_t k_page_stride = 0, v_page_stride = 0;
  int page_shift = 0;
  int num_pages = 0;

  // A variable-length batch (attnprof::flash_attention_varlen) when
  // cu_seqlens_q is set: q, o [total_q][heads_q][head_dim] and k, v
  // [total_k][heads_kv][head_dim] packed (the row strides heads · head_dim,
  // the batch strides unused), sequence b's query rows
  // [cu_seqlens_q[b], cu_seqlens_q[b + 1]) and key rows likewise, lse
  // [heads_q][total_q]; seqlen_q and seqlen_k are the longest sequence's. The
  // prefill kernel alone, unsplit.
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  int total_q = 0, total_k = 0;
};

// Runs p.plan: the path's kernel, then the combine kernel when the keys are
// split; launches on `stream`. Defined in flash_fwd_launch.cu. Head dims: 64, 128.
void run_flash_fwd(const FwdParams& params, CUstream_st* stream);

// The split-KV decode kernel and the combine kernel (flash_fwd_splitkv_launch.cu).
void run_flash_fwd_splitkv(const FwdParams& params, CUstream_st* stream);
// Both paths' kernels reading a paged K/V (flash_fwd_paged_launch.cu).
void run_flash_fwd_paged(const FwdParams& params, CUstream_st* stream);
// The prefill kernel on a packed variable-length batch (flash_fwd_varlen_launch.cu).
void run_flash_fwd_varlen(const FwdParams& params, CUstream_st* stream);
void run_flash_combine(const FwdParams& params, CUstream_st* stream);

}  // namespace attnprof::flash
