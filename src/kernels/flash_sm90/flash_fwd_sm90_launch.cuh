// Launch layer of the Hopper attention forward: tensor maps, persistent grid,
// shared-memory opt-in, launch, launch check. Included by one generated .cu
// file per (configuration, dtype), so the kernels compile in parallel.
#pragma once

#include <c10/cuda/CUDAException.h>
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>

#include "kernels/common/grid_dependency.cuh"
#include "kernels/flash_sm90/flash_fwd_sm90_kernel.cuh"
#include "kernels/flash_sm90/flash_sm90_params.h"
#include "kernels/flash_sm90/flash_sm90_traits.h"
#include "kernels/flash_sm90/tail_split.h"
#include "kernels/flash_sm90/tensor_map.h"
#include "kernels/flash_sm90/tile_order.h"

namespace attnprof::flash_sm90 {

inline constexpr const char* kFwdOp = "attnprof::flash_attention_sm90";
inline constexpr const char* kFwdVarlenOp = "attnprof::flash_attention_sm90_varlen";
inline constexpr const char* kFwdFp8Op = "attnprof::flash_attention_sm90_fp8";

// The tile order and the tail split of one launch: what the workspace is
// sized by (fwd_workspace) and the launch follows.
struct FwdPlan {
  TileOrder order;
  TailSplit split;
  int num_n_blocks = 0;
  int total_tiles = 0;
  bool tile_counter = false;  // hand tiles out through FwdParams::tile_counter
};

template <typename Traits>
FwdPlan plan_fwd(const FwdParams& p) {
  FwdPlan plan;
  const int num_m_blocks = (p.seqlen_q + Traits::kBlockM - 1) / Traits::kBlockM;
  plan.num_n_blocks = (p.seqlen_k + Traits::kBlockN - 1) / Traits::kBlockN;
  plan.total_tiles = num_m_blocks * p.batch * p.heads_q;  // bounds checked at the boundary
  // A head's last query block is short when a warpgroup has no rows in it.
  const int tail_rows = p.seqlen_q % Traits::kBlockM;
  plan.order = plan_tile_order(p.batch * p.heads_q, p.heads_q / p.heads_kv, num_m_blocks,
                               int64_t{2} * p.seqlen_k * Traits::kHeadDim * static_cast<int64_t>(sizeof(typename Traits::Element)),
                               p.l2_bytes, p.num_sms, p.causal, tail_rows != 0 && tail_rows <= Traits::kBlockM - 64);
  // Tiles of one cost are handed out statically, and the last round may be
  // split: no mask and no short last blocks ordered apart, or a causal mask
  // over a single query block per head (decode, short chunks: every tile
  // sees the same key blocks). Other causal launches take tiles from the
  // counter, longest first.
  if constexpr (Traits::kVarlen) {
    // A packed batch: total_tiles bounds the tiles of every sequence (the
    // kernel walks them, varlen_tiles.h), all taken from the counter.
    plan.tile_counter = true;
    plan.split = plan_tail_split(plan.total_tiles, plan.num_n_blocks, p.num_sms, false);
    return plan;
  }
  int equal_blocks = plan.num_n_blocks;
  bool equal_cost = !p.causal && plan.order.short_last_heads == 0;
  if (p.causal && num_m_blocks == 1) {
    const int last_key = std::min(Traits::kBlockM, p.seqlen_q) - 1 + (p.seqlen_k - p.seqlen_q);
    equal_blocks = last_key < 0 ? 0 : std::min(plan.num_n_blocks, last_key / Traits::kBlockN + 1);
    equal_cost = true;
  }
  plan.tile_counter = p.causal && num_m_blocks > 1;
  plan.split = plan_tail_split(plan.total_tiles, equal_blocks, p.num_sms, equal_cost && Traits::kTailSplit);
  return plan;
}

// What a launch following `plan` needs besides the tensors.
template <typename Traits>
FwdWorkspace workspace_of(const FwdPlan& plan) {
  FwdWorkspace w;
  w.fp8_vt = Traits::kFp8 && !Traits::kTransposeV;
  if (plan.split.tiles > 0) {
    w.split_partial_bytes = int64_t{2} * plan.split.grid * detail::kSplitSlotFloats<Traits> * int64_t{4};
    w.split_counters = plan.split.tiles * Traits::kConsumerWarps;
  }
  return w;
}

template <typename Traits>
void launch_fwd(const FwdParams& p, cudaStream_t stream) {
  constexpr int kHeadDim = Traits::kHeadDim;
  KernelArgs a;
  const char* op = p.is_fp8 ? kFwdFp8Op : p.varlen() ? kFwdVarlenOp : kFwdOp;
  TORCH_CHECK(p.varlen() == Traits::kVarlen, op, ": configuration ", Traits::kName,
              Traits::kVarlen ? " runs packed variable-length batches only" : " runs batches of one length only");
  TORCH_CHECK(p.is_fp8 == Traits::kFp8, op, ": configuration ", Traits::kName,
              Traits::kFp8 ? " runs fp8 (e4m3) inputs only" : " runs 16-bit inputs only");
  a.q_descale = a.k_descale = a.v_descale = nullptr;
  if constexpr (Traits::kFp8) {
    // Rows of head_dim bytes; Vᵀ's rows are its vt_keys keys (boxes of kVColKeys keys × head_dim rows), or
    // with kTransposeV V's are (boxes of kVColKeys keys, as K's).
    TORCH_CHECK((Traits::kTransposeV || (p.vt != nullptr && p.vt_keys % 32 == 0 && p.vt_keys >= p.seqlen_k)) &&
                    p.q_descale != nullptr && p.k_descale != nullptr && p.v_descale != nullptr,
                op, ": an fp8 launch of ", Traits::kName, " needs ", Traits::kTransposeV ? "" : "Vᵀ and ",
                "the three descales");
    a.tma_q = make_tensor_map_8bit(p.q, kHeadDim, p.seqlen_q, p.batch * p.heads_q, kHeadDim,
                                   int64_t{p.seqlen_q} * kHeadDim, Traits::kBlockM, Traits::kSwizzleBytes, op);
    a.tma_k = make_tensor_map_8bit(p.k, kHeadDim, p.seqlen_k, p.batch * p.heads_kv, kHeadDim,
                                   int64_t{p.seqlen_k} * kHeadDim, Traits::kBlockN, Traits::kSwizzleBytes, op);
    if constexpr (Traits::kTransposeV)
      a.tma_v = make_tensor_map_8bit(p.v, kHeadDim, p.seqlen_k, p.batch * p.heads_kv, kHeadDim,
                                     int64_t{p.seqlen_k} * kHeadDim, Traits::kVColKeys, Traits::kSwizzleBytes, op);
    else
      a.tma_v = make_tensor_map_8bit(p.vt, p.vt_keys, kHeadDim, p.batch * p.heads_kv, p.vt_keys,
                                     int64_t{kHeadDim} * p.vt_keys, kHeadDim, Traits::kVColKeys, op);
    a.q_descale = p.q_descale;
    a.k_descale = p.k_descale;
    a.v_descale = p.v_descale;
  } else if constexpr (Traits::kVarlen) {
    a.tma_q = make_packed_tensor_map(p.q, p.is_bf16, kHeadDim, p.total_q, p.heads_q, int64_t{p.heads_q} * kHeadDim,
                                     kHeadDim, Traits::kBlockM, op);
    a.tma_k = make_packed_tensor_map(p.k, p.is_bf16, kHeadDim, p.total_k, p.heads_kv,
                                     int64_t{p.heads_kv} * kHeadDim, kHeadDim, Traits::kBlockN, op);
    a.tma_v = make_packed_tensor_map(p.v, p.is_bf16, kHeadDim, p.total_k, p.heads_kv,
                                     int64_t{p.heads_kv} * kHeadDim, kHeadDim, Traits::kBlockN, op);
  } else {
    a.tma_q = make_tensor_map(p.q, p.is_bf16, kHeadDim, p.seqlen_q, p.batch * p.heads_q, Traits::kBlockM, op);
    a.tma_k = make_tensor_map(p.k, p.is_bf16, kHeadDim, p.seqlen_k, p.batch * p.heads_kv, Traits::kBlockN, op);
    a.tma_v = make_tensor_map(p.v, p.is_bf16, kHeadDim, p.seqlen_k, p.batch * p.heads_kv, Traits::kBlockN, op);
  }
  a.o = p.o;
  a.lse = p.lse;
  a.packed.cu_seqlens_q = p.cu_seqlens_q;
  a.packed.cu_seqlens_k = p.cu_seqlens_k;
  a.packed.batch = p.batch;
  a.packed.heads_q = p.heads_q;
  a.packed.total_q = p.total_q;
  a.packed.total_k = p.total_k;
  a.packed.max_seqlen_q = p.seqlen_q;
  a.packed.max_seqlen_k = p.seqlen_k;
  a.packed.causal = p.causal;
  a.tile_counter = nullptr;
  a.heads_q = p.heads_q;
  a.heads_kv = p.heads_kv;
  a.seqlen_q = p.seqlen_q;
  a.seqlen_k = p.seqlen_k;
  a.causal_offset = p.seqlen_k - p.seqlen_q;
  const FwdPlan plan = plan_fwd<Traits>(p);
  a.num_n_blocks = plan.num_n_blocks;
  a.total_tiles = plan.total_tiles;
  a.order = plan.order;
  a.split = plan.split;
  if (plan.tile_counter) {
    TORCH_CHECK(p.tile_counter != nullptr, op, ": a causal or packed launch needs the tile counter");
    a.tile_counter = p.tile_counter;
  }
  a.split_partials = p.split_partials;
  a.split_counters = p.split_counters;
  if (a.split.tiles > 0) {
    const FwdWorkspace need = workspace_of<Traits>(plan);
    TORCH_CHECK(p.split_partials != nullptr && p.split_counters != nullptr &&
                    p.split_partial_bytes >= need.split_partial_bytes &&
                    p.split_counter_capacity >= need.split_counters,
                op, ": the launch needs the workspace fwd_workspace() sized (", need.split_partial_bytes,
                " bytes, ", need.split_counters, " counters)");
  }
  a.scale = p.scale;
  a.scale_log2 = p.scale_log2;
  a.causal = p.causal;

  auto* kernel = &flash_fwd_sm90_kernel<Traits>;
  C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                      Traits::kSmemBytes));
  cudaLaunchConfig_t config = {};
  config.gridDim = dim3(static_cast<unsigned>(a.split.grid));
  config.blockDim = dim3(Traits::kThreads);
  config.dynamicSmemBytes = Traits::kSmemBytes;
  config.stream = stream;
  // Programmatic dependent launch: the blocks may start, and set up their
  // barriers, in the tail of the kernel before (the kernel waits for it
  // before touching global memory). Back to back on the H200: -1.3% to +7%
  // over the 8 benchmark points, +1.5% on average (run-to-run noise ±2%).
  cudaLaunchAttribute pdl;
  kernels::allow_programmatic_launch(config, pdl, true);
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, a));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// One launch of a named configuration: explicitly instantiated, per
// configuration and dtype, by a file CMake generates from
// fwd_sm90_instance.cu.in (cmake/KernelFamily.cmake).
template <typename Config, typename Element>
void run_fwd_config(const FwdParams& p, CUstream_st* stream) {
  launch_fwd<FwdTraits<Config, Element>>(p, stream);
}

template <typename Config, typename Element>
FwdWorkspace fwd_workspace_config(const FwdParams& p) {
  using Traits = FwdTraits<Config, Element>;
  return workspace_of<Traits>(plan_fwd<Traits>(p));
}

}  // namespace attnprof::flash_sm90
