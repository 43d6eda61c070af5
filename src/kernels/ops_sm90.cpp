// CUDA implementation of attnprof::flash_attention_sm90: the LibTorch boundary
// of the Hopper (sm_90a) kernels. Every tensor check happens here, once; the
// launch layer trusts its params. Compiled only when those kernels are built
// (ATTNPROF_HAVE_SM90_KERNELS).
#ifdef ATTNPROF_HAVE_SM90_KERNELS

#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "kernels/flash_attention/flash_bwd_params.h"
#include "kernels/flash_bwd_boundary.h"
#include "kernels/flash_sm90/flash_sm90_params.h"
#include "kernels/flash_sm90/hopper_support.h"
#include "kernels/tensor_checks.h"

namespace attnprof {
namespace {

constexpr const char* kOp = "attnprof::flash_attention_sm90";
constexpr const char* kBwdOp = "attnprof::flash_attention_backward_sm90";
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

void check_layout(const at::Tensor& t, const char* name, const char* op = kOp) {
  const std::optional<std::string> why = flash_sm90::layout_unsupported(t, name);
  TORCH_CHECK(!why, op, ": ", *why);
}

void check_hopper(const at::Device& device, const char* op) {
  const std::optional<std::string> why = flash_sm90::device_unsupported(device.index());
  TORCH_CHECK(!why, op, ": ", *why);
}

// The forward's counters for the current stream, zeroed once: the causal tile
// counter (two ints: next tile, blocks finished) and, after it, the tail
// split's per-(tile, warp) counters (at most 16 per SM: fewer split tiles than
// SMs, at most 12 consumer warps). The kernel leaves every counter it used
// zeroed (flash_fwd_sm90_kernel.cuh), and launches on one stream run one after
// another, so every call on the stream reuses them without a fill kernel
// before it (8×16×1024×64 causal on the H200: 282 against 272 TFLOP/s with a
// zeroed tensor and its fill kernel per call). Fresh zeroed counters instead
// (`fresh` keeps them alive; their fill runs on the stream ahead of the kernel):
//  - for a stream being captured into a CUDA graph: the graph may later be
//    replayed on another stream, next to this one;
//  - for cudaStreamPerThread: one handle, and one stream id, for as many
//    streams as there are host threads.
// The legacy default stream is one stream for every thread, and is never
// itself captured (asking it would fail while another blocking stream is).
// Kept counters are keyed by stream id: a destroyed external stream whose
// handle is reused before its last kernel finished would share them.
constexpr int kTileCounterInts = 2;
constexpr int kSplitCountersPerSm = 16;

int counter_ints(const cudaDeviceProp& prop) {
  return kTileCounterInts + kSplitCountersPerSm * prop.multiProcessorCount;
}

int* stream_counters(const at::Device& device, int ints, at::Tensor& fresh) {
  const at::cuda::CUDAStream stream = at::cuda::getCurrentCUDAStream(device.index());
  const auto zeros = [&] { return at::zeros({ints}, at::TensorOptions().device(device).dtype(at::kInt)); };
  bool shared = stream.stream() != cudaStreamPerThread;
  if (shared && stream.stream() != nullptr) {
    cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
    C10_CUDA_CHECK(cudaStreamIsCapturing(stream.stream(), &capture));
    shared = capture == cudaStreamCaptureStatusNone;
  }
  if (!shared) {
    fresh = zeros();
    return fresh.data_ptr<int>();
  }
  static std::mutex mutex;
  // Never freed: at exit the CUDA runtime may be gone before static destructors run.
  static auto* kept = new std::map<std::pair<c10::DeviceIndex, c10::StreamId>, at::Tensor>();
  const std::lock_guard<std::mutex> lock(mutex);
  const std::pair<c10::DeviceIndex, c10::StreamId> key{device.index(), stream.id()};
  auto it = kept->find(key);
  // Zeroed on this stream, ahead of the first kernel; inserted only once made,
  // so an allocation failure leaves no half-made entry behind.
  if (it == kept->end()) it = kept->emplace(key, zeros()).first;
  return it->second.data_ptr<int>();
}

std::tuple<at::Tensor, at::Tensor> flash_attention_sm90_cuda(const at::Tensor& q, const at::Tensor& k,
                                                             const at::Tensor& v, bool causal,
                                                             double scale) {
  kernels::check_flash_fwd_inputs(kOp, q, k, v, scale);
  const int64_t batch = q.size(0), heads_q = q.size(1), seq_q = q.size(2), head_dim = q.size(3);
  const int64_t heads_kv = k.size(1), seq_k = k.size(2);

  c10::cuda::CUDAGuard guard(q.device());
  check_hopper(q.device(), kOp);
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(q.device().index());

  check_layout(q, "q");
  check_layout(k, "k");
  check_layout(v, "v");
  // The kernel indexes with 32-bit ints: (batch, head) slabs, rows, and tiles
  // of 128 query rows (batch · heads_q · ceil(seq_q / 128)).
  TORCH_CHECK(batch * heads_q <= kInt32Max && seq_q <= kInt32Max && seq_k <= kInt32Max &&
                  batch * heads_q * ((seq_q + 127) / 128) <= kInt32Max,
              kOp, ": sizes too large for 32-bit tile indices: q ", q.sizes(), ", k ", k.sizes());

  at::Tensor out = at::empty_like(q);
  at::Tensor lse = at::empty({batch, heads_q, seq_q}, q.options().dtype(at::kFloat));
  if (q.numel() == 0) return {out, lse};
  if (seq_k == 0) {  // no keys: nothing to attend to
    out.zero_();
    lse.fill_(-INFINITY);
    return {out, lse};
  }

  flash_sm90::FwdParams p;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.o = out.data_ptr();
  p.lse = lse.data_ptr<float>();
  p.batch = static_cast<int>(batch);
  p.heads_q = static_cast<int>(heads_q);
  p.heads_kv = static_cast<int>(heads_kv);
  p.seqlen_q = static_cast<int>(seq_q);
  p.seqlen_k = static_cast<int>(seq_k);
  p.head_dim = static_cast<int>(head_dim);
  p.num_sms = prop->multiProcessorCount;
  p.l2_bytes = prop->l2CacheSize;
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);  // log2(e)
  p.causal = causal;
  p.is_bf16 = q.scalar_type() == at::kBFloat16;
  // Causal tiles differ in cost (a tile's key blocks grow with its row): hand
  // them out dynamically from a counter. Without a mask the last round may be
  // split along the keys: partial results and counters.
  // (The launch checks that the kept counters are enough.)
  const flash_sm90::FwdWorkspace need = flash_sm90::fwd_workspace(p);
  const int ints = counter_ints(*prop);
  at::Tensor fresh_counters, partials;
  if (causal || need.split_counters > 0) {
    int* counters = stream_counters(q.device(), ints, fresh_counters);
    if (causal) p.tile_counter = counters;
    p.split_counters = counters + kTileCounterInts;
    p.split_counter_capacity = ints - kTileCounterInts;
  }
  if (need.split_partial_bytes > 0) {
    partials = at::empty({(need.split_partial_bytes + 3) / 4}, q.options().dtype(at::kFloat));
    p.split_partials = partials.data_ptr<float>();
    p.split_partial_bytes = need.split_partial_bytes;
  }
  flash_sm90::run_fwd(p, at::cuda::getCurrentCUDAStream().stream());
  return {out, lse};
}

// The checks and workspaces are the portable backward's (flash_bwd_boundary.h);
// on top, a Hopper GPU and what the tensor maps need of q, k, v and grad_out.
std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward_sm90_cuda(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool causal, double scale) {
  kernels::FlashBwdCall call =
      kernels::prepare_flash_bwd(kBwdOp, grad_out, q, k, v, out, lse, causal, scale, [&] {
        check_hopper(q.device(), kBwdOp);
        check_layout(q, "q", kBwdOp);
        check_layout(k, "k", kBwdOp);
        check_layout(v, "v", kBwdOp);
        check_layout(grad_out, "grad_out", kBwdOp);
      });
  c10::cuda::CUDAGuard guard(q.device());
  if (!call.trivial) flash_sm90::run_bwd(call.params, at::cuda::getCurrentCUDAStream().stream());
  return {call.dq, call.dk, call.dv};
}

}  // namespace
}  // namespace attnprof

TORCH_LIBRARY_IMPL(attnprof, CUDA, m) {
  m.impl("flash_attention_sm90", &attnprof::flash_attention_sm90_cuda);
  m.impl("flash_attention_backward_sm90", &attnprof::flash_attention_backward_sm90_cuda);
}

#endif  // ATTNPROF_HAVE_SM90_KERNELS
