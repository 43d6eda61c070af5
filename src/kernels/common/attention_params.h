// What every flash forward reads of one call: the tensors as pointers and
// strides, the sizes, the scale and the mask. No templates, no LibTorch and no
// CUDA types: each family's LibTorch boundary (its api.cpp) fills it once
// (kernels::make_attention_params, boundary.h), its launch layer reads it.
// A family's own params derive from it and add only what its launches need
// (flash::FwdParams: the plan and the split workspace; flash_sm90::FwdParams:
// the tile counter, the tail split, the SM count and L2 size).
#pragma once

#include <cstdint>

namespace attnprof::kernels {

struct AttentionParams {
  // q, o: [batch, heads_q, seqlen_q, head_dim]; k, v: [batch, heads_kv,
  // seqlen_k, head_dim]; the last dimension is contiguous.
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // [batch, heads_q, seqlen_q], natural log, contiguous

  // Strides in elements. Every kernel requires row strides == head_dim (the
  // portable launch checks it, the Hopper tensor maps assume it); batch and
  // head strides are free for the portable kernels.
  int64_t q_batch_stride = 0, q_head_stride = 0, q_row_stride = 0;
  int64_t k_batch_stride = 0, k_head_stride = 0, k_row_stride = 0;
  int64_t v_batch_stride = 0, v_head_stride = 0, v_row_stride = 0;
  int64_t o_batch_stride = 0, o_head_stride = 0, o_row_stride = 0;

  int batch = 0, heads_q = 0, heads_kv = 0;
  int group = 1;  // heads_q / heads_kv: query head h reads K/V head h / group
  int seqlen_q = 0, seqlen_k = 0, head_dim = 0;

  float scale = 1.f;       // softmax scale applied to Q·Kᵀ
  float scale_log2 = 1.f;  // scale · log2(e): the kernels use exp2

  // Bottom-right aligned: key j is visible to query i iff
  // j <= i + (seqlen_k - seqlen_q); top-left when seqlen_q == seqlen_k.
  bool causal = false;
  // A sliding window (causal only; 0: none, and the boundary stores 0 for a
  // window that hides nothing, >= seqlen_k): key j is visible to query i iff
  // also j > i + (seqlen_k - seqlen_q) - window, the window most recent keys
  // the diagonal's included (FlashAttention's window_size_left = window - 1).
  int window = 0;
  bool is_bf16 = true;  // else fp16

  // 8-bit inputs (attnprof::flash_attention_sm90_fp8): q, k, v e4m3, each
  // value times its head's descale, float32 q_descale [B·Hq], k_descale and
  // v_descale [B·Hkv]; o bf16 (is_bf16 false).
  bool is_fp8 = false;
  const float* q_descale = nullptr;
  const float* k_descale = nullptr;
  const float* v_descale = nullptr;
};

}  // namespace attnprof::kernels
