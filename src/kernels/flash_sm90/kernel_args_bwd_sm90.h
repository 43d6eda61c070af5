// What the Hopper backward kernel (flash_bwd_sm90_kernel.cuh) reads, as the
// launch layer (flash_bwd_sm90_launch.cuh) fills it.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/flash_sm90/tile_order.h"

namespace attnprof::flash_sm90 {

// What the kernel reads: the tensor maps (kernel parameters, read in place by
// TMA: __grid_constant__) and the sizes the launch layer derived.
struct BwdKernelArgs {
  CUtensorMap tma_q;   // [B·Hq][Sq][D], box kBlockM rows × 64 columns
  CUtensorMap tma_do;  // as tma_q
  CUtensorMap tma_k;   // [B·Hkv][Sk][D], box kBlockN rows × 64 columns
  CUtensorMap tma_v;
  CUtensorMap tma_dq;     // dq_accum as [B·Hq][Sq_pad][D] float32, box 64 rows × 32 columns
  CUtensorMap tma_dk;     // kTmaEpilogue: dk, dv as [B·Hkv][Sk][D], box 64 rows × 64 columns
  CUtensorMap tma_dv;
  const float* lse_log2;  // [B·Hq][Sq_pad]: +inf where a row sees no key or is padding
  const float* d_sum;     // [B·Hq][Sq_pad]
  float* dq_accum;        // [B·Hq][Sq_pad][D], zeroed
  void* dk;
  void* dv;
  int64_t dk_batch_stride, dk_head_stride, dk_row_stride;
  int64_t dv_batch_stride, dv_head_stride, dv_row_stride;
  int heads_q;
  int heads_kv;
  int seqlen_q;
  int seqlen_k;
  int seqlen_q_pad;
  int causal_offset;  // seqlen_k - seqlen_q: key j visible to query i iff j <= i + offset
  int num_m_blocks;   // query blocks per head
  int tiles;          // key blocks of all slabs: batch · heads_kv · key blocks
  TileOrder order;    // tile → (slab, key block): bwd_block (tile_order.h)
  float scale;
  float scale_log2;
  bool causal;
};

}  // namespace attnprof::flash_sm90
