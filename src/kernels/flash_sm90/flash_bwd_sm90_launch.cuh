// Launch layer of the Hopper attention backward: tensor maps, grid,
// shared-memory opt-in, the three launches and their checks. Included by one
// generated .cu file per (configuration, dtype), so the kernels compile in
// parallel.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/flash_attention/flash_bwd_params.h"
#include "kernels/flash_sm90/flash_bwd_sm90_kernel.cuh"
#include "kernels/flash_sm90/flash_bwd_sm90_traits.h"
#include "kernels/flash_sm90/flash_sm90_params.h"
#include "kernels/flash_sm90/tensor_map.h"

namespace attnprof::flash_sm90 {

inline constexpr const char* kBwdOp = "attnprof::flash_attention_backward_sm90";

// Everything that can fail (tensor maps, grid size) before anything is queued;
// then the portable preprocessing, the main kernel, the portable dQ conversion.
template <typename Traits>
void launch_bwd(const flash::BwdParams& p, cudaStream_t stream) {
  constexpr int kHeadDim = Traits::kHeadDim;
  static_assert(flash::kBwdSeqQPad % Traits::kBlockM == 0,
                "query blocks read whole rows of the padded workspaces");
  // A tile per (key block, batch · KV head).
  const int64_t key_blocks = (p.seqlen_k + Traits::kBlockN - 1) / Traits::kBlockN;
  const int64_t tiles = key_blocks * p.batch * p.heads_kv;
  TORCH_CHECK(tiles <= 0x7fffffff, kBwdOp, ": ", p.batch, " x ", p.heads_kv, " KV heads x ", key_blocks,
              " key blocks of ", Traits::kBlockN, " exceed the grid limit of 2^31 - 1 blocks");
  BwdKernelArgs a;
  a.tma_q = make_tensor_map(p.q, p.is_bf16, kHeadDim, p.seqlen_q, p.batch * p.heads_q, Traits::kBlockM, kBwdOp);
  a.tma_do = make_tensor_map(p.dout, p.is_bf16, kHeadDim, p.seqlen_q, p.batch * p.heads_q, Traits::kBlockM, kBwdOp);
  a.tma_k = make_tensor_map(p.k, p.is_bf16, kHeadDim, p.seqlen_k, p.batch * p.heads_kv, Traits::kBlockN, kBwdOp);
  a.tma_v = make_tensor_map(p.v, p.is_bf16, kHeadDim, p.seqlen_k, p.batch * p.heads_kv, Traits::kBlockN, kBwdOp);
  a.tma_dq = make_tensor_map_f32(p.dq_accum, kHeadDim, p.seqlen_q_pad, p.batch * p.heads_q, 64, kBwdOp);
  if constexpr (Traits::kTmaEpilogue) {  // dk and dv are new tensors laid out as k and v: contiguous
    const int64_t row = kHeadDim, head = p.seqlen_k * row, batch = p.heads_kv * head;
    TORCH_CHECK(p.dk_row_stride == row && p.dk_head_stride == head && p.dk_batch_stride == batch &&
                    p.dv_row_stride == row && p.dv_head_stride == head && p.dv_batch_stride == batch,
                kBwdOp, ": the TMA stores of dk and dv need them contiguous");
    a.tma_dk = make_tensor_map(p.dk, p.is_bf16, kHeadDim, p.seqlen_k, p.batch * p.heads_kv, 64, kBwdOp);
    a.tma_dv = make_tensor_map(p.dv, p.is_bf16, kHeadDim, p.seqlen_k, p.batch * p.heads_kv, 64, kBwdOp);
  }
  a.lse_log2 = p.lse_log2;
  a.d_sum = p.d_sum;
  a.dq_accum = p.dq_accum;
  a.dk = p.dk;
  a.dv = p.dv;
  a.dk_batch_stride = p.dk_batch_stride;
  a.dk_head_stride = p.dk_head_stride;
  a.dk_row_stride = p.dk_row_stride;
  a.dv_batch_stride = p.dv_batch_stride;
  a.dv_head_stride = p.dv_head_stride;
  a.dv_row_stride = p.dv_row_stride;
  a.heads_q = p.heads_q;
  a.heads_kv = p.heads_kv;
  a.seqlen_q = p.seqlen_q;
  a.seqlen_k = p.seqlen_k;
  a.seqlen_q_pad = p.seqlen_q_pad;
  a.causal_offset = p.seqlen_k - p.seqlen_q;
  a.num_m_blocks = (p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM;
  // The tiles' order (plan_bwd_block_order): causal key blocks longest
  // first within sections of slabs. Modelled with each tile handed to the
  // first free SM (one block per SM), slab by slab left the busiest SM 6.9%
  // past the average at 4x16x4096x128, 14% at 4x32q/8kv x 4096 x 128 and 11%
  // at 8x16x1024x64 (causal; test FlashSm90BwdOrder).
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  a.tiles = static_cast<int>(tiles);
  a.order = plan_bwd_block_order(static_cast<int>(p.batch * p.heads_kv), p.heads_q / p.heads_kv,
                                 static_cast<int>(key_blocks), p.seqlen_q, kHeadDim, prop->l2CacheSize,
                                 prop->multiProcessorCount, p.causal);
  // kPersistent (an alternative) without a mask: a block per SM walks the
  // tiles, all of one cost, so the static hand-out balances them. Under causal
  // masking the hardware's hand-out of a block per tile, longest first, does
  // (a static one, every other round backwards, modelled the busiest SM 16%
  // past the average at 4x16x4096x128 and 17% at 8x16x1024x64).
  const bool persistent = Traits::kPersistent && !p.causal;
  const int64_t blocks = persistent ? std::min<int64_t>(tiles, prop->multiProcessorCount) : tiles;
  a.scale = p.scale;
  a.scale_log2 = p.scale * 1.4426950408889634f;  // log2(e)
  a.causal = p.causal;
  auto* kernel = &flash_bwd_sm90_kernel<Traits>;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, Traits::kSmemBytes));

  flash::run_flash_bwd_preprocess(p, stream, kBwdOp);
  kernel<<<static_cast<unsigned>(blocks), Traits::kThreads, Traits::kSmemBytes, stream>>>(a);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  flash::run_flash_bwd_convert_dq(p, stream, kBwdOp);
}

// One named configuration's backward: explicitly instantiated, per
// configuration and dtype, by a file CMake generates from
// bwd_sm90_instance.cu.in (cmake/KernelFamily.cmake).
template <typename Config, typename Element>
void run_bwd_config(const flash::BwdParams& p, CUstream_st* stream) {
  launch_bwd<BwdTraits<Config, Element>>(p, stream);
}

}  // namespace attnprof::flash_sm90
