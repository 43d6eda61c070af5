// Plain parameters of one Hopper (sm_90a) attention forward: pointers, sizes,
// flags. No templates, no LibTorch and no CUDA types, so the boundary
// (ops_sm90.cpp) fills it and the launch layer reads it.
#pragma once

#include <cstdint>

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace attnprof::flash {
struct BwdParams;  // flash_attention/flash_bwd_params.h: the backward shares the portable kernels' params
}  // namespace attnprof::flash

namespace attnprof::flash_sm90 {

struct FwdParams {
  // q, o: [batch, heads_q, seqlen_q, head_dim]; k, v: [batch, heads_kv,
  // seqlen_k, head_dim]; all contiguous (the tensor maps assume it).
  const void* q = nullptr;
  const void* k = nullptr;
  const void* v = nullptr;
  void* o = nullptr;
  float* lse = nullptr;  // [batch, heads_q, seqlen_q], natural log

  // Causal launches over more than one query block per head hand tiles out
  // through this counter (in the order of tile_order.h, whichever SM is free
  // takes the next): two zeroed ints, which the kernel leaves zeroed; no other
  // launch may use them meanwhile. Required for causal calls; the others take
  // every gridDim.x-th tile (tiles of equal cost).
  int* tile_counter = nullptr;

  // Without a mask the last round of tiles may be cut along the keys
  // (tail_split.h): the pieces' partial results (fp32) and one counter per
  // (split tile, consumer warp): zeroed ints, which the kernel leaves zeroed.
  // Sized by fwd_workspace(); unused (may be null) where it asks for none.
  float* split_partials = nullptr;
  int64_t split_partial_bytes = 0;
  int* split_counters = nullptr;
  int split_counter_capacity = 0;

  int batch = 0;
  int heads_q = 0;
  int heads_kv = 0;  // divides heads_q; query head h reads KV head h / (heads_q / heads_kv)
  int seqlen_q = 0;
  int seqlen_k = 0;
  int head_dim = 0;
  int num_sms = 0;  // persistent grid: at most one block per SM
  int64_t l2_bytes = 0;  // sizes the head sections of the causal tile order (tile_order.h)

  float scale = 1.f;       // softmax scale applied to Q·Kᵀ
  float scale_log2 = 1.f;  // scale · log2(e): the kernel uses exp2

  // Bottom-right aligned: key j is visible to query i iff j <= i + seqlen_k - seqlen_q.
  bool causal = false;
  bool is_bf16 = true;  // else fp16
};

// What a forward launch needs besides the tensors: fill FwdParams (all but
// the workspace pointers), ask, then give it that much.
struct FwdWorkspace {
  int64_t split_partial_bytes = 0;
  int split_counters = 0;
};
FwdWorkspace fwd_workspace(const FwdParams& params);

// Runtime → template dispatch over (dtype, head_dim); launches on `stream`.
// Head dims 64 and 128. Defined in flash_fwd_sm90_api.cu.
void run_fwd(const FwdParams& params, CUstream_st* stream);

// One launch per (head dim, element type), instantiated in its own
// flash_fwd_sm90_hdim*_*.cu file (flash_fwd_sm90_launch.cuh).
template <int kHeadDim, typename Element>
void run_fwd_hdim(const FwdParams& params, CUstream_st* stream);
template <int kHeadDim, typename Element>
FwdWorkspace fwd_workspace_hdim(const FwdParams& params);

// The backward: the portable preprocessing, the Hopper main kernel (dK, dV,
// dQ into the fp32 workspace), the portable dQ conversion; all on `stream`.
// q, k, v, dout must be contiguous with 16-byte aligned bases (tensor maps);
// dk, dv take the params' strides. Defined in flash_bwd_sm90_api.cu.
void run_bwd(const flash::BwdParams& params, CUstream_st* stream);

template <int kHeadDim, typename Element>
void run_bwd_hdim(const flash::BwdParams& params, CUstream_st* stream);

}  // namespace attnprof::flash_sm90
