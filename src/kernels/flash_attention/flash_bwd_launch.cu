// Launch layer of the fused-attention backward: grids, runtime → template
// dispatch, dynamic shared-memory opt-in, launches, launch checks. Only the
// dispatched combinations are instantiated: {bf16, fp16} × d{64, 128} × causal.
#include <c10/cuda/CUDAException.h>
#include <cuda_runtime.h>

#include "kernels/common/static_switch.h"
#include "kernels/flash_attention/flash_bwd_kernel.cuh"
#include "kernels/flash_attention/flash_bwd_kernel_traits.h"
#include "kernels/flash_attention/flash_bwd_params.h"

namespace attnprof::flash {
namespace {

constexpr const char* kOp = "attnprof::flash_attention_backward";

template <typename Traits, bool kCausal>
void launch_flash_bwd_main(const BwdParams& p, cudaStream_t stream) {
  auto* kernel = &flash_bwd_kernel<Traits, kCausal>;
  constexpr int smem_bytes = Traits::kSmemBytes;
  if constexpr (smem_bytes > 48 * 1024) {
    C10_CUDA_CHECK(
        cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes));
  }
  // x: (batch, KV head); y: key block, the slow axis, so all heads of key
  // block 0 (the longest under causal masking) launch first.
  const int64_t key_blocks = (p.seqlen_k + Traits::kBlockN - 1) / Traits::kBlockN;
  TORCH_CHECK(key_blocks <= 65535, kOp, ": seq_k ", p.seqlen_k, " needs ", key_blocks,
              " key blocks, over the grid limit of 65535");
  const dim3 grid(static_cast<unsigned>(p.batch * p.heads_kv), static_cast<unsigned>(key_blocks));
  kernel<<<grid, Traits::kNThreads, smem_bytes, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <int kHeadDim, typename Element>
void run_preprocess_hdim(const BwdParams& p, cudaStream_t stream, const char* op) {
  constexpr int kChunks = kHeadDim / 8;
  constexpr int kRowsPerBlock = kBwdRowKernelThreads / kChunks;
  const int64_t padded_rows = static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q_pad;
  const int64_t blocks = padded_rows / kRowsPerBlock;  // exact: seqlen_q_pad % kBwdSeqQPad == 0
  TORCH_CHECK(blocks <= 0x7fffffff, op, ": too many query rows for one grid (", padded_rows, ")");
  flash_bwd_preprocess_kernel<kHeadDim, Element>
      <<<static_cast<unsigned>(blocks), kBwdRowKernelThreads, 0, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

template <int kHeadDim, typename Element>
void run_convert_dq_hdim(const BwdParams& p, cudaStream_t stream, const char* op) {
  constexpr int kChunks = kHeadDim / 8;
  const int64_t blocks =
      (static_cast<int64_t>(p.batch) * p.heads_q * p.seqlen_q * kChunks + kBwdRowKernelThreads - 1) /
      kBwdRowKernelThreads;
  TORCH_CHECK(blocks <= 0x7fffffff, op, ": too many query rows for one grid (", p.seqlen_q, " per head)");
  flash_bwd_convert_dq_kernel<kHeadDim, Element>
      <<<static_cast<unsigned>(blocks), kBwdRowKernelThreads, 0, stream>>>(p);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// What to launch for one backward: everything, or one of the steps the
// Hopper backward shares.
enum class BwdPart { kAll, kPreprocess, kConvertDq };

template <typename Config, typename Element>
void run_part_config(const BwdParams& p, cudaStream_t stream, BwdPart part, const char* op) {
  constexpr int kHeadDim = Config::kHeadDim;
  if (part == BwdPart::kPreprocess || part == BwdPart::kAll) run_preprocess_hdim<kHeadDim, Element>(p, stream, op);
  if (part == BwdPart::kAll) {
    kernels::bool_switch(p.causal, [&](auto causal) {
      launch_flash_bwd_main<BwdKernelTraits<Config, Element>, decltype(causal)::value>(p, stream);
    });
  }
  if (part == BwdPart::kConvertDq || part == BwdPart::kAll) run_convert_dq_hdim<kHeadDim, Element>(p, stream, op);
}

// The preprocessing and dQ conversion take the head dim of the configuration
// (the Hopper backward's head dims are the same: Sm90BwdConfigs).
void run_part(const BwdParams& p, cudaStream_t stream, BwdPart part, const char* op) {
  kernels::dtype_switch(p.is_bf16, [&](auto element) {
    kernels::head_dim_switch(BwdConfigs{}, p.head_dim, op, [&](auto config) {
      run_part_config<decltype(config), decltype(element)>(p, stream, part, op);
    });
  });
}

}  // namespace

void check_flash_bwd_params(const BwdParams& p, const char* op) {
  // The kernels address rows with the compile-time head dim; batch and head
  // strides stay runtime. The workspaces hold whole padded query blocks.
  const int64_t d = p.head_dim;
  TORCH_CHECK(p.q_row_stride == d && p.k_row_stride == d && p.v_row_stride == d && p.o_row_stride == d &&
                  p.do_row_stride == d && p.dq_row_stride == d && p.dk_row_stride == d && p.dv_row_stride == d,
              op, ": rows of every tensor must be head_dim contiguous elements");
  TORCH_CHECK(p.seqlen_q_pad % kBwdSeqQPad == 0 && p.seqlen_q_pad >= p.seqlen_q, op,
              ": workspace rows ", p.seqlen_q_pad, " are not seq_q ", p.seqlen_q, " padded to ", kBwdSeqQPad);
  TORCH_CHECK(p.heads_kv > 0 && p.heads_q % p.heads_kv == 0, op, ": heads_kv ", p.heads_kv,
              " must divide heads_q ", p.heads_q);
}

void run_flash_bwd_preprocess(const BwdParams& p, CUstream_st* stream, const char* op) {
  run_part(p, stream, BwdPart::kPreprocess, op);
}

void run_flash_bwd_convert_dq(const BwdParams& p, CUstream_st* stream, const char* op) {
  run_part(p, stream, BwdPart::kConvertDq, op);
}

void run_flash_bwd(const BwdParams& p, CUstream_st* stream) {
  check_flash_bwd_params(p, kOp);
  if (p.batch == 0 || p.heads_q == 0 || p.seqlen_q == 0 || p.seqlen_k == 0) return;
  run_part(p, stream, BwdPart::kAll, kOp);
}

}  // namespace attnprof::flash
