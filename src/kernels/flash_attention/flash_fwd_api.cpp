// LibTorch boundary of the fused-attention forward (flash_fwd_api.h). Built
// only with the CUDA kernels.
#ifdef ATTNPROF_HAVE_CUDA_KERNELS

#include "kernels/flash_attention/flash_fwd_api.h"

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include <cmath>
#include <limits>
#include <mutex>
#include <vector>

#include "kernels/tensor_checks.h"

namespace attnprof::flash {
namespace {

constexpr const char* kOp = "attnprof::flash_attention";
constexpr double kLog2e = 1.4426950408889634;
// Sequence lengths stay well inside int: the kernels form row indices such as
// n · BLOCK_N + 127 in 32-bit arithmetic.
constexpr int64_t kMaxSeq = int64_t{1} << 30;
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();

// The shared checks (tensor_checks.h), then this family's index and grid limits.
void check_fwd_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  kernels::check_flash_fwd_inputs(kOp, q, k, v, scale);
  // Grids: prefill (batch·heads_q, ⌈seq_q / 128⌉, splits), decode (batch·heads_kv,
  // splits, row tiles), combine (⌈batch·heads_q·seq_q / 4⌉).
  const int64_t batch = q.size(0), heads_q = q.size(1), seq_q = q.size(2), seq_kv = k.size(2);
  TORCH_CHECK(seq_q <= kMaxSeq && seq_kv <= kMaxSeq && batch * heads_q <= kMaxGridX &&
                  (seq_q + 127) / 128 <= kMaxGridY && batch * heads_q * seq_q / 4 <= kMaxGridX,
              kOp, ": sizes too large for the kernels' 32-bit indices and grid limits: q ",
              q.sizes(), ", k ", k.sizes(), " (seq_q <= ", kMaxGridY * 128, ", seq_kv <= ", kMaxSeq,
              ", batch*heads_q <= ", kMaxGridX, ")");
}

// Streaming multiprocessors of `device`, read once per device.
int sm_count(c10::DeviceIndex device) {
  static std::mutex mutex;
  static std::vector<int> counts;
  std::lock_guard<std::mutex> lock(mutex);
  if (static_cast<size_t>(device) >= counts.size()) counts.resize(device + 1, 0);
  if (counts[device] == 0) {
    C10_CUDA_CHECK(cudaDeviceGetAttribute(&counts[device], cudaDevAttrMultiProcessorCount, device));
  }
  return counts[device];
}

FwdShape shape_of(const at::Tensor& q, const at::Tensor& k, bool causal) {
  return {q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), causal};
}

}  // namespace

FwdParams make_fwd_params(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& out, const at::Tensor& lse, bool causal, double scale) {
  FwdParams p;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.o = out.data_ptr();
  p.lse = lse.data_ptr<float>();
  p.q_batch_stride = q.stride(0), p.q_head_stride = q.stride(1), p.q_row_stride = q.stride(2);
  p.k_batch_stride = k.stride(0), p.k_head_stride = k.stride(1), p.k_row_stride = k.stride(2);
  p.v_batch_stride = v.stride(0), p.v_head_stride = v.stride(1), p.v_row_stride = v.stride(2);
  p.o_batch_stride = out.stride(0), p.o_head_stride = out.stride(1), p.o_row_stride = out.stride(2);
  p.batch = static_cast<int>(q.size(0));
  p.heads_q = static_cast<int>(q.size(1));
  p.heads_kv = static_cast<int>(k.size(1));
  p.group = p.heads_q / p.heads_kv;
  p.seqlen_q = static_cast<int>(q.size(2));
  p.seqlen_k = static_cast<int>(k.size(2));
  p.head_dim = static_cast<int>(q.size(3));
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * kLog2e);
  p.causal = causal;
  p.is_bf16 = q.scalar_type() == at::kBFloat16;
  return p;
}

FwdPlan plan_for(const at::Tensor& q, const at::Tensor& k, bool causal,
                 const FwdPlanRequest& request) {
  return plan_fwd(shape_of(q, k, causal), sm_count(q.device().index()), request);
}

std::tuple<at::Tensor, at::Tensor> mha_fwd(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, bool causal, double scale,
                                           FwdLauncher launch, const FwdPlanRequest& request) {
  check_fwd_inputs(q, k, v, scale);
  c10::cuda::CUDAGuard guard(q.device());
  at::Tensor out = at::empty_like(q);
  at::Tensor lse = at::empty({q.size(0), q.size(1), q.size(2)}, q.options().dtype(at::kFloat));
  if (q.numel() == 0) return {out, lse};
  if (k.size(2) == 0) {  // no keys: nothing to attend to
    out.zero_();
    lse.fill_(-INFINITY);
    return {out, lse};
  }
  FwdParams p = make_fwd_params(q, k, v, out, lse, causal, scale);
  p.plan = plan_for(q, k, causal, request);
  TORCH_CHECK(p.plan.num_splits <= kMaxGridY && p.plan.row_tiles <= kMaxGridY, kOp, ": ",
              p.plan.num_splits, " key splits x ", p.plan.row_tiles,
              " row tiles exceed the grid limit for q ", q.sizes(), ", k ", k.sizes());
  at::Tensor o_accum, lse_accum;
  if (p.plan.num_splits > 1) {
    // Split workspace from the caching allocator: num_splits · batch·heads_q·seq_q
    // · (head_dim + 1) floats, e.g. 0.53 MB for decode 8 x 32q x 1 at d128 in
    // 4 splits, 16.9 MB for chunked prefill 1 x 32q x 512 at d128 in 2 splits
    // (the planner's choices on 132 SMs).
    const int64_t rows = q.size(0) * q.size(1) * q.size(2);
    o_accum = at::empty({p.plan.num_splits, rows, q.size(3)}, q.options().dtype(at::kFloat));
    lse_accum = at::empty({p.plan.num_splits, rows}, q.options().dtype(at::kFloat));
    p.o_accum = o_accum.data_ptr<float>();
    p.lse_accum = lse_accum.data_ptr<float>();
  }
  launch(p, at::cuda::getCurrentCUDAStream().stream());
  return {out, lse};
}

}  // namespace attnprof::flash

#endif  // ATTNPROF_HAVE_CUDA_KERNELS
