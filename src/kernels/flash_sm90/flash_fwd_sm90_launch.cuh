// Launch layer of the Hopper attention forward: tensor maps, persistent grid,
// shared-memory opt-in, launch, launch check. Included by one .cu file per
// (head dim, dtype), so the four kernels compile in parallel.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/flash_sm90/flash_fwd_sm90_kernel.cuh"
#include "kernels/flash_sm90/flash_sm90_params.h"
#include "kernels/flash_sm90/flash_sm90_traits.h"
#include "kernels/flash_sm90/tensor_map.h"
#include "kernels/flash_sm90/tile_order.h"

namespace attnprof::flash_sm90 {

inline constexpr const char* kFwdOp = "attnprof::flash_attention_sm90";

template <typename Traits>
void launch_fwd(const FwdParams& p, cudaStream_t stream) {
  constexpr int kHeadDim = Traits::kHeadDim;
  using Element = typename Traits::Element;
  KernelArgs a;
  a.tma_q = make_tensor_map(p.q, p.is_bf16, kHeadDim, p.seqlen_q, p.batch * p.heads_q, Traits::kBlockM, kFwdOp);
  a.tma_k = make_tensor_map(p.k, p.is_bf16, kHeadDim, p.seqlen_k, p.batch * p.heads_kv, Traits::kBlockN, kFwdOp);
  a.tma_v = make_tensor_map(p.v, p.is_bf16, kHeadDim, p.seqlen_k, p.batch * p.heads_kv, Traits::kBlockN, kFwdOp);
  a.o = p.o;
  a.lse = p.lse;
  a.tile_counter = p.tile_counter;
  a.heads_q = p.heads_q;
  a.heads_kv = p.heads_kv;
  a.seqlen_q = p.seqlen_q;
  a.seqlen_k = p.seqlen_k;
  a.causal_offset = p.seqlen_k - p.seqlen_q;
  const int num_m_blocks = (p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM;
  a.num_n_blocks = (p.seqlen_k + Traits::kBlockN - 1) / Traits::kBlockN;
  a.total_tiles = num_m_blocks * p.batch * p.heads_q;  // bounds checked at the boundary
  // A head's last query block is short when a warpgroup has no rows in it.
  const int tail_rows = p.seqlen_q % Traits::kBlockM;
  a.order = plan_tile_order(p.batch * p.heads_q, p.heads_q / p.heads_kv, num_m_blocks,
                            int64_t{2} * p.seqlen_k * kHeadDim * static_cast<int64_t>(sizeof(Element)),
                            p.l2_bytes, p.num_sms, p.causal, tail_rows != 0 && tail_rows <= Traits::kBlockM - 64);
  a.scale = p.scale;
  a.scale_log2 = p.scale_log2;
  a.causal = p.causal;

  auto* kernel = &flash_fwd_sm90_kernel<Traits>;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      Traits::kSmemBytes));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(std::min(a.total_tiles, p.num_sms)));
  config.blockDim = dim3(Traits::kThreads);
  config.dynamicSmemBytes = Traits::kSmemBytes;
  config.stream = stream;
  // Programmatic dependent launch: the blocks may start, and set up their
  // barriers, in the tail of the kernel before (the kernel waits for it
  // before touching global memory). Back to back on the H200: -1.3% to +7%
  // over the 8 benchmark points, +1.5% on average (run-to-run noise ±2%).
  cudaLaunchAttribute pdl[1];
  pdl[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  pdl[0].val.programmaticStreamSerializationAllowed = 1;
#ifndef ATTNPROF_SM90_NO_PDL  // tuning builds (scripts/build_sm90_alt.py): an ordinary launch
  config.attrs = pdl;
  config.numAttrs = 1;
#endif
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, a));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <int kHeadDim, typename Element>
void run_fwd_hdim(const FwdParams& p, cudaStream_t stream) {
  if (p.causal && p.seqlen_q < kShortCausalRows) {
    launch_fwd<typename FwdConfig<kHeadDim, Element, true>::Traits>(p, stream);
  } else {
    launch_fwd<typename FwdConfig<kHeadDim, Element, false>::Traits>(p, stream);
  }
}

}  // namespace attnprof::flash_sm90
