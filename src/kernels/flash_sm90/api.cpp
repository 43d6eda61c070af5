// LibTorch boundary of the Hopper flash family (api.h): the operators'
// schemas (every build), what the family supports, and (sm_90a builds) the
// operators themselves. Every tensor check happens here, once; the launch
// layer trusts its params.
#include "kernels/flash_sm90/api.h"

#include <torch/library.h>

#include <cstdint>
#include <sstream>

#include "kernels/flash_sm90/decode_route.h"
#include "kernels/flash_sm90/fp8_vt.h"
#include "kernels/flash_sm90/flash_bwd_sm90_traits.h"
#include "kernels/flash_sm90/flash_sm90_params.h"
#include "kernels/flash_sm90/flash_sm90_traits.h"

#ifdef ATTNPROF_HAVE_SM90_KERNELS
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>

#include "kernels/flash_attention/api.h"
#include "kernels/flash_attention/checked_tables.h"
#include "kernels/flash_attention/flash_bwd_params.h"
#endif

TORCH_LIBRARY_FRAGMENT(attnprof, m) {
  // The Hopper (sm_90a) kernel; CUDA implementation only where it was built
  // and only on compute capability 9.0 devices. q: [batch, heads_q, seq_q,
  // head_dim]; k, v: [batch, heads_kv, seq_kv, head_dim] with
  // heads_q % heads_kv == 0 (query head h reads key/value head
  // h / (heads_q / heads_kv)); contiguous, bf16 or fp16, head_dim 64 or 128.
  // causal: bottom-right aligned (key j visible to query i iff
  // j <= i + seq_kv - seq_q); a row that sees no key gives zeros and lse -inf.
  // out: like q; lse: [batch, heads_q, seq_q] float32, natural log. Decode
  // shapes (decode_route.h: few query rows per KV head) run the portable
  // split-KV kernel instead, as attnprof::flash_attention would.
  m.def("flash_attention_sm90(Tensor q, Tensor k, Tensor v, bool causal, float scale) -> (Tensor out, Tensor lse)");
  // flash_attention_sm90 on a packed variable-length batch, as
  // attnprof::flash_attention_varlen takes it (flash_attention/api.cpp): q
  // [total_q, heads_q, head_dim], k, v [total_k, heads_kv, head_dim], int32
  // cu_seqlens_q / cu_seqlens_k [batch + 1] on q's device (sequence b's query
  // rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1], its keys likewise), causal
  // bottom-right per sequence; out like q, lse [heads_q, total_q]. The
  // offsets are checked on the host once per version of the tensor (a copy);
  // during graph capture they are not, and the kernel skips a sequence whose
  // offsets lie outside the tensors. No sliding window: a window that hides
  // a key is refused (attnprof::flash_attention_varlen takes one).
  m.def("flash_attention_sm90_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, bool causal, float scale, int window=0) -> (Tensor out, Tensor lse)");
  // flash_attention_sm90 on fp8 inputs: q, k, v float8_e4m3fn, shaped and
  // masked as flash_attention_sm90's (head_dim 64, 128, 256), each value times its
  // head's descale factor: q_descale float32 [batch, heads_q], k_descale and
  // v_descale [batch, heads_kv], on q's device, finite and positive (checked
  // once per version of the tensors, as the varlen offsets: a sync the first
  // time; none during graph capture). Q·Kᵀ and P·V run on e4m3 tensor cores,
  // P scaled by 2^8 as e4m3 (at head_dim 64 and 128 its bytes straight from
  // the scores, within 8% of exp2: softmax_sm90.cuh); V transposed in the kernel, or at
  // head dims whose configuration reads a copy (FwdWorkspace::fp8_vt) first
  // by one pass of fp8_vt_kernel over v per call, in the trace. Decode shapes
  // run the split-KV kernel on e4m3 K and V instead (fp16 mma.sync, P in
  // fp16; decode_route.h). out: bf16 like q's shape; lse as
  // flash_attention_sm90's, of the descaled scores. Forward only.
  m.def("flash_attention_sm90_fp8(Tensor q, Tensor k, Tensor v, Tensor q_descale, Tensor k_descale, Tensor v_descale, bool causal, float scale) -> (Tensor out, Tensor lse)");
  // The gradients of flash_attention (flash_attention/api.cpp) from the Hopper
  // (sm_90a) backward kernel (wgmma, TMA); CUDA implementation only where it
  // was built and only on compute capability 9.0 devices; q, k, v, grad_out
  // also 16-byte aligned.
  m.def("flash_attention_backward_sm90(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, bool causal, float scale) -> (Tensor grad_q, Tensor grad_k, Tensor grad_v)");
  // The same two with one named configuration (flash_sm90_traits.h,
  // flash_bwd_sm90_traits.h) for every call instead of the operator's choice:
  // the operator's own and the alternatives built with -DATTNPROF_KERNEL_CONFIGS,
  // for timing them side by side. Its head dim must be q's.
  m.def("flash_attention_sm90_config(Tensor q, Tensor k, Tensor v, bool causal, float scale, str config) -> (Tensor out, Tensor lse)");
  m.def("flash_attention_backward_sm90_config(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, bool causal, float scale, str config) -> (Tensor grad_q, Tensor grad_k, Tensor grad_v)");
  // The names the two above take in this build: the forward's, or with
  // backward=True the backward's (empty without the sm_90a kernels; the
  // packed-batch configurations, run by flash_attention_sm90_varlen, are not among them).
  m.def("flash_attention_sm90_configs(bool backward=False) -> str[]", [](bool backward) {
    return backward ? attnprof::flash_sm90::bwd_config_names() : attnprof::flash_sm90::fwd_config_names();
  });
  // flash_attention_sm90_fp8 with one named fp8 configuration (Sm90FwdFp8Configs and the
  // Sm90FwdFp8Alternatives built with -DATTNPROF_KERNEL_CONFIGS), and the names this build has.
  m.def("flash_attention_sm90_fp8_config(Tensor q, Tensor k, Tensor v, Tensor q_descale, Tensor k_descale, Tensor v_descale, bool causal, float scale, str config) -> (Tensor out, Tensor lse)");
  m.def("flash_attention_sm90_fp8_configs() -> str[]", [] { return attnprof::flash_sm90::fp8_config_names(); });
}


#ifdef ATTNPROF_HAVE_SM90_KERNELS

namespace attnprof::flash_sm90 {
namespace {

constexpr const char* kOp = "attnprof::flash_attention_sm90";
constexpr const char* kBwdOp = "attnprof::flash_attention_backward_sm90";
constexpr const char* kVarlenOp = "attnprof::flash_attention_sm90_varlen";
constexpr const char* kFp8Op = "attnprof::flash_attention_sm90_fp8";
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

void check_layout(const at::Tensor& t, const char* name, const char* op) {
  const std::optional<std::string> why = layout_unsupported(t, name);
  TORCH_CHECK(!why, op, ": ", *why);
}

std::optional<std::string> unsupported_of(const kernels::KernelQuery& query, bool any_head_dim);
std::optional<std::string> fp8_unsupported_of(const kernels::KernelQuery& query, bool any_head_dim);

// Which kernels an operator's inputs are checked against, and at which head dims: the operator's
// own list, or (by name) any, the named configuration's checked after (config_entry).
enum class HeadDims { operators, any };

// The shared checks (common/boundary.h), what the family's 16-bit or (`fp8`) e4m3 kernels support,
// the layout the tensor maps need, then the kernel's index limits.
void check_inputs(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale,
                  bool fp8 = false, HeadDims head_dims = HeadDims::operators) {
  kernels::check_flash_fwd_inputs(op, q, k, v, scale);
  const kernels::KernelQuery query = kernels::query_of(q);
  const bool any = head_dims == HeadDims::any;
  kernels::check_supported(fp8 ? fp8_unsupported_of(query, any) : unsupported_of(query, any), op);
  check_layout(q, "q", op);
  check_layout(k, "k", op);
  check_layout(v, "v", op);
  // The kernel indexes with 32-bit ints: (batch, head) slabs, rows, and tiles
  // of 128 query rows (batch · heads_q · ceil(seq_q / 128)).
  const int64_t batch = q.size(0), heads_q = q.size(1), seq_q = q.size(2), seq_k = k.size(2);
  TORCH_CHECK(batch * heads_q <= kInt32Max && seq_q <= kInt32Max && seq_k <= kInt32Max &&
                  batch * heads_q * ((seq_q + 127) / 128) <= kInt32Max,
              op, ": sizes too large for 32-bit tile indices: q ", q.sizes(), ", k ", k.sizes());
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

// A named configuration's registry entry for q's dtype and head dim, else an
// error naming the ones there are.
template <typename Entry>
const Entry& config_entry(const Entry* entry, const std::string& name, const at::Tensor& q, const char* op,
                          const std::vector<std::string>& names) {
  std::string valid;
  for (const std::string& n : names) valid += (valid.empty() ? "" : ", ") + n;
  TORCH_CHECK(entry != nullptr, op, ": no configuration '", name, "' in this build (built: ", valid,
              "; alternatives are built with -DATTNPROF_KERNEL_CONFIGS)");
  TORCH_CHECK(entry->head_dim == q.size(3), op, ": configuration '", name, "' is for head_dim ", entry->head_dim,
              ", q has head_dim ", q.size(3));
  return *entry;
}

// Launches p (all but the device facts and the workspace filled) on q's
// device, guarded by the caller, with the operator's own choice of
// configuration (config null) or a named one. fp8_v: 8-bit v, whose Vᵀ is
// written first (one pass of its own kernel, in the trace) for a
// configuration that reads one (FwdWorkspace::fp8_vt).
void launch(FwdParams& p, const at::Tensor& q, const FwdConfigEntry* config, const at::Tensor* fp8_v = nullptr) {
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(q.device().index());
  p.num_sms = prop->multiProcessorCount;
  p.l2_bytes = prop->l2CacheSize;
  // Causal tiles differ in cost (a tile's key blocks grow with its row), and
  // a packed batch's with its sequence: hand them out dynamically from a
  // counter. Without a mask the last round may be split along the keys:
  // partial results and counters.
  // (The launch checks that the kept counters are enough.)
  const FwdWorkspace need = config ? config->workspace(p) : fwd_workspace(p);
  const int ints = counter_ints(*prop);
  at::Tensor fresh_counters, partials;
  const bool counted = p.causal || p.varlen();
  if (counted || need.split_counters > 0) {
    int* counters = stream_counters(q.device(), ints, fresh_counters);
    if (counted) p.tile_counter = counters;
    p.split_counters = counters + kTileCounterInts;
    p.split_counter_capacity = ints - kTileCounterInts;
  }
  if (need.split_partial_bytes > 0) {
    partials = at::empty({(need.split_partial_bytes + 3) / 4}, q.options().dtype(at::kFloat));
    p.split_partials = partials.data_ptr<float>();
    p.split_partial_bytes = need.split_partial_bytes;
  }
  at::Tensor vt;
  if (need.fp8_vt) {
    TORCH_CHECK(fp8_v != nullptr, kFp8Op, ": the configuration reads Vᵀ, and no fp8 v was given");
    vt = fp8_vt(*fp8_v);
    p.vt = vt.data_ptr();
    p.vt_keys = static_cast<int>(vt.size(3));
  }
  if (config) config->run(p, at::cuda::getCurrentCUDAStream().stream());
  else run_fwd(p, at::cuda::getCurrentCUDAStream().stream());
}

std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                           bool causal, double scale, const FwdConfigEntry* config) {
  c10::cuda::CUDAGuard guard(q.device());
  const kernels::FwdCall call = kernels::prepare_forward(q, k, v, causal, scale);
  if (call.done) return {call.out, call.lse};
  if (!config) {  // the operator's own choice: decode on the split-KV kernel (decode_route.h)
    const flash::FwdPlan plan = flash::plan_for(q, k, causal);
    if (runs_split_kv_decode(plan)) {
      flash::run_planned_forward(kOp, call, q, k, plan);
      return {call.out, call.lse};
    }
  }
  FwdParams p;
  static_cast<kernels::AttentionParams&>(p) = call.params;
  launch(p, q, config);
  return {call.out, call.lse};
}

std::tuple<at::Tensor, at::Tensor> flash_attention_sm90_cuda(const at::Tensor& q, const at::Tensor& k,
                                                             const at::Tensor& v, bool causal, double scale) {
  check_inputs(kOp, q, k, v, scale);
  return forward(q, k, v, causal, scale, nullptr);
}

std::tuple<at::Tensor, at::Tensor> flash_attention_sm90_varlen_cuda(const at::Tensor& q, const at::Tensor& k,
                                                                    const at::Tensor& v, const at::Tensor& cu_seqlens_q,
                                                                    const at::Tensor& cu_seqlens_k, int64_t max_seqlen_q,
                                                                    int64_t max_seqlen_k, bool causal, double scale,
                                                                    int64_t window) {
  flash::VarlenCall call = flash::prepare_varlen(
      kVarlenOp, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal, scale, window,
      &unsupported, [&](int64_t longest_q, int64_t, int kernel_window) {
        // Before the offsets are copied to the host: a window that hides a key is refused.
        TORCH_CHECK(kernel_window == 0, kVarlenOp,
                    ": the Hopper kernel has no sliding window (window ", window, " of up to ", max_seqlen_k,
                    " keys); attnprof::flash_attention_varlen takes one");
        // The kernel numbers the tiles of 64 query rows or more of every
        // (sequence, head), bounded by batch · heads_q · ⌈longest_q / 64⌉, in 32-bit ints.
        const int64_t batch = cu_seqlens_q.numel() - 1;
        const int64_t bound = batch * q.size(1) * ((longest_q + 63) / 64);
        TORCH_CHECK(bound <= kInt32Max - 1024, kVarlenOp, ": sizes too large for 32-bit tile indices: batch ", batch,
                    " x heads_q ", q.size(1), " x ⌈", longest_q, " query rows / 64⌉ = ", bound, " tiles (at most ",
                    kInt32Max - 1024, ")");
      });
  if (call.done) return {call.out, call.lse};
  c10::cuda::CUDAGuard guard(q.device());
  if (call.total_k == 0) {  // no key anywhere (a tensor map needs rows): every row sees none
    call.out.zero_();
    call.lse.fill_(-INFINITY);
    return {call.out, call.lse};
  }
  FwdParams p = flash::packed_params<FwdParams>(call);
  launch(p, q, nullptr);
  return {call.out, call.lse};
}

// A descale tensor as the fp8 kernel reads it: float32 [batch, heads] on q's
// device, contiguous; its values finite and positive, checked on the host
// once per version of the three tensors together (one sync), none during
// graph capture (the kernel then reads whatever they hold, as scale factors).
void check_descale(const at::Tensor& d, const char* name, int64_t batch, int64_t heads, const at::Tensor& q,
                   const char* op) {
  TORCH_CHECK(d.defined(), op, ": ", name, " is undefined; fp8 inputs need their descale factors");
  TORCH_CHECK(d.device() == q.device(), op, ": ", name, " must be on q's device ", q.device(), ", got ",
              d.device());
  TORCH_CHECK(d.scalar_type() == at::kFloat, op, ": ", name, " must be float32, got ",
              kernels::dtype_phrase(d.scalar_type()));
  TORCH_CHECK(d.dim() == 2 && d.size(0) == batch && d.size(1) == heads, op, ": ", name, " must be [batch ",
              batch, ", heads ", heads, "], got ", d.sizes());
  TORCH_CHECK(d.is_contiguous(), op, ": ", name, " must be contiguous (strides ", d.strides(), ")");
}
void check_descale_values(const at::Tensor& qd, const at::Tensor& kd, const at::Tensor& vd, const char* op) {
  static flash::CheckedTables checked[3];
  const at::Tensor* ds[3] = {&qd, &kd, &vd};
  std::optional<flash::CheckedTables::Key> keys[3];
  bool known = true;
  for (int i = 0; i < 3; ++i) {
    keys[i] = flash::CheckedTables::key_of(*ds[i], 0, ds[i]->numel(), 0);
    known = known && keys[i] && checked[i].contains(*keys[i]);
  }
  if (known || qd.numel() + kd.numel() == 0 ||
      c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None)
    return;
  const auto invalid = [](const at::Tensor& d) { return at::logical_not(at::isfinite(d) & (d > 0)); };
  const auto bad = [&](const at::Tensor& d) { return invalid(d).sum(); };
  // Each query head's q and k descales multiply into its scores' scale: their product must stay finite too.
  const int64_t batch = qd.size(0), heads_kv = kd.size(1), group = qd.size(1) / heads_kv;
  const at::Tensor qk = qd.view({batch, heads_kv, group}) * kd.view({batch, heads_kv, 1});
  const at::Tensor counts = at::stack({bad(qd), bad(kd), bad(vd), bad(qk)}).cpu();
  static constexpr const char* kNames[3] = {"q_descale", "k_descale", "v_descale"};
  for (int i = 0; i < 3; ++i) {
    const int64_t n = counts[i].item<int64_t>();
    if (n > 0) {
      const at::Tensor d = ds[i]->flatten();
      const int64_t first = invalid(d).nonzero()[0][0].item<int64_t>();
      TORCH_CHECK(false, op, ": ", kNames[i], " must be finite and positive, got ", d[first].item<float>(),
                  " at [", first / ds[i]->size(1), ", ", first % ds[i]->size(1), "] (", n, " such values)");
    }
  }
  TORCH_CHECK(counts[3].item<int64_t>() == 0, op, ": q_descale x k_descale overflows float32 (largest ",
              qd.max().item<float>(), " and ", kd.max().item<float>(), ")");
  for (int i = 0; i < 3; ++i)
    if (keys[i]) checked[i].add(*keys[i]);
}

// The fp8 forward of inputs check_inputs took, with the operator's configuration (config null) or a
// named one; `op` names the operator in errors.
std::tuple<at::Tensor, at::Tensor> fp8_forward(const char* op, const at::Tensor& q, const at::Tensor& k,
                                               const at::Tensor& v, const at::Tensor& q_descale,
                                               const at::Tensor& k_descale, const at::Tensor& v_descale, bool causal,
                                               double scale, const FwdConfigEntry* config) {
  const int64_t batch = q.size(0), heads_q = q.size(1), heads_kv = k.size(1);
  // Vᵀ's rows hold seq_kv keys rounded up to 32, in a 32-bit int.
  TORCH_CHECK(k.size(2) <= kInt32Max - 31, op, ": seq_kv ", k.size(2), " too large (at most ", kInt32Max - 31, ")");
  check_descale(q_descale, "q_descale", batch, heads_q, q, op);
  check_descale(k_descale, "k_descale", batch, heads_kv, q, op);
  check_descale(v_descale, "v_descale", batch, heads_kv, q, op);
  c10::cuda::CUDAGuard guard(q.device());
  check_descale_values(q_descale, k_descale, v_descale, op);
  at::Tensor out = at::empty(q.sizes(), q.options().dtype(at::kBFloat16));
  at::Tensor lse = at::empty({batch, heads_q, q.size(2)}, q.options().dtype(at::kFloat));
  if (q.numel() == 0) return {out, lse};
  if (k.size(2) == 0) {  // nothing to attend to
    out.zero_();
    lse.fill_(-INFINITY);
    return {out, lse};
  }
  kernels::AttentionParams params = kernels::make_attention_params(q, k, v, out, lse, causal, scale);
  params.is_bf16 = false;
  params.is_fp8 = true;
  params.q_descale = q_descale.data_ptr<float>();
  params.k_descale = k_descale.data_ptr<float>();
  params.v_descale = v_descale.data_ptr<float>();
  // The operator's own choice: decode on the e4m3 split-KV kernel at its head dims (decode_route.h).
  if (kFp8DecodeRouteOn && !config && kernels::has_head_dim(flash::DecodeFp8Tiles{}, q.size(3))) {
    const flash::FwdPlan plan = flash::plan_for(q, k, causal);
    if (runs_fp8_split_kv_decode(plan, q.size(3))) {
      flash::FwdParams p;
      static_cast<kernels::AttentionParams&>(p) = params;
      p.plan = plan;
      flash::run_planned_forward(op, p, q, &run_fp8_decode);
      return {out, lse};
    }
  }
  FwdParams p;
  static_cast<kernels::AttentionParams&>(p) = params;
  launch(p, q, config, &v);
  return {out, lse};
}

std::tuple<at::Tensor, at::Tensor> flash_attention_sm90_fp8_cuda(const at::Tensor& q, const at::Tensor& k,
                                                                 const at::Tensor& v, const at::Tensor& q_descale,
                                                                 const at::Tensor& k_descale,
                                                                 const at::Tensor& v_descale, bool causal,
                                                                 double scale) {
  check_inputs(kFp8Op, q, k, v, scale, /*fp8=*/true);
  return fp8_forward(kFp8Op, q, k, v, q_descale, k_descale, v_descale, causal, scale, nullptr);
}

std::tuple<at::Tensor, at::Tensor> flash_attention_sm90_fp8_config_cuda(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& q_descale,
    const at::Tensor& k_descale, const at::Tensor& v_descale, bool causal, double scale, c10::string_view config) {
  constexpr const char* op = "attnprof::flash_attention_sm90_fp8_config";
  check_inputs(op, q, k, v, scale, /*fp8=*/true, HeadDims::any);
  const std::string name(config);
  // fp8 configurations register as not bf16, as fp16 ones do; their names differ.
  const FwdConfigEntry* found = find_fwd_config(name, false);
  // A 16-bit configuration of that name: say what it runs, not that it is missing.
  TORCH_CHECK((found == nullptr || found->fp8) && find_fwd_config(name, true) == nullptr, op, ": configuration '", name,
              "' runs 16-bit inputs (attnprof::flash_attention_sm90_config runs it)");
  const FwdConfigEntry& entry = config_entry(found, name, q, op, fp8_config_names());
  return fp8_forward(op, q, k, v, q_descale, k_descale, v_descale, causal, scale, &entry);
}

std::tuple<at::Tensor, at::Tensor> flash_attention_sm90_config_cuda(const at::Tensor& q, const at::Tensor& k,
                                                                    const at::Tensor& v, bool causal, double scale,
                                                                    c10::string_view config) {
  constexpr const char* op = "attnprof::flash_attention_sm90_config";
  check_inputs(op, q, k, v, scale, /*fp8=*/false, HeadDims::any);
  const std::string name(config);
  const bool bf16 = q.scalar_type() == at::kBFloat16;
  // An fp8 configuration registers as not bf16: named with bf16 inputs, say what it runs, not that it is missing.
  if (const FwdConfigEntry* fp8 = find_fwd_config(name, false); fp8 != nullptr && fp8->fp8)
    TORCH_CHECK(false, op, ": configuration '", name, "' runs fp8 (e4m3) inputs only (", kFp8Op, " runs it)");
  const FwdConfigEntry& entry = config_entry(find_fwd_config(name, bf16), name, q, op, fwd_config_names());
  TORCH_CHECK(!entry.varlen, op, ": configuration '", name, "' runs packed variable-length batches only (", kVarlenOp,
              " runs it)");
  return forward(q, k, v, causal, scale, &entry);
}

// The checks and workspaces are the portable backward's (flash_attention/api.h),
// asking this family's supports(); on top, what the tensor maps need of q, k,
// v and grad_out.
flash::FlashBwdCall prepare_backward(const char* op, const at::Tensor& grad_out, const at::Tensor& q,
                                     const at::Tensor& k, const at::Tensor& v, const at::Tensor& out,
                                     const at::Tensor& lse, bool causal, double scale) {
  return flash::prepare_flash_bwd(op, grad_out, q, k, v, out, lse, causal, scale, &unsupported, [&] {
    check_layout(q, "q", op);
    check_layout(k, "k", op);
    check_layout(v, "v", op);
    check_layout(grad_out, "grad_out", op);
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward_sm90_cuda(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool causal, double scale) {
  flash::FlashBwdCall call = prepare_backward(kBwdOp, grad_out, q, k, v, out, lse, causal, scale);
  c10::cuda::CUDAGuard guard(q.device());
  if (!call.trivial) run_bwd(call.params, at::cuda::getCurrentCUDAStream().stream());
  return {call.dq, call.dk, call.dv};
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward_sm90_config_cuda(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool causal, double scale, c10::string_view config) {
  constexpr const char* op = "attnprof::flash_attention_backward_sm90_config";
  flash::FlashBwdCall call = prepare_backward(op, grad_out, q, k, v, out, lse, causal, scale);
  const std::string name(config);
  const BwdConfigEntry& entry = config_entry(find_bwd_config(name, q.scalar_type() == at::kBFloat16), name, q, op,
                                             bwd_config_names());
  c10::cuda::CUDAGuard guard(q.device());
  if (!call.trivial) {
    flash::check_flash_bwd_params(call.params, op);
    entry.run(call.params, at::cuda::getCurrentCUDAStream().stream());
  }
  return {call.dq, call.dk, call.dv};
}

}  // namespace
}  // namespace attnprof::flash_sm90

TORCH_LIBRARY_IMPL(attnprof, CUDA, m) {
  m.impl("flash_attention_sm90", &attnprof::flash_sm90::flash_attention_sm90_cuda);
  m.impl("flash_attention_backward_sm90", &attnprof::flash_sm90::flash_attention_backward_sm90_cuda);
  m.impl("flash_attention_sm90_varlen", &attnprof::flash_sm90::flash_attention_sm90_varlen_cuda);
  m.impl("flash_attention_sm90_fp8", &attnprof::flash_sm90::flash_attention_sm90_fp8_cuda);
  m.impl("flash_attention_sm90_fp8_config", &attnprof::flash_sm90::flash_attention_sm90_fp8_config_cuda);
  m.impl("flash_attention_sm90_config", &attnprof::flash_sm90::flash_attention_sm90_config_cuda);
  m.impl("flash_attention_backward_sm90_config", &attnprof::flash_sm90::flash_attention_backward_sm90_config_cuda);
}

#endif  // ATTNPROF_HAVE_SM90_KERNELS

namespace attnprof::flash_sm90 {

namespace {

// What any of the family's kernels needs, whatever the dtype and head dim: a
// build with the sm_90a kernels and a compute capability 9.0 device.
std::optional<std::string> device_unsupported(const kernels::KernelQuery& query) {
#if !defined(ATTNPROF_HAVE_CUDA_KERNELS)
  (void)query;
  return "needs attnprof built with the CUDA kernels (this build has none: no CUDA toolkit at configure time)";
#elif !defined(ATTNPROF_HAVE_SM90_KERNELS)
  (void)query;
  return "needs attnprof built with its sm_90a kernels (this build has none: configured with "
         "ATTNPROF_SM90_KERNELS=OFF)";
#else
  // wgmma and TMA are sm_90a instructions: compute capability 9.0 exactly.
  std::ostringstream why;
  why << "needs a compute capability 9.0 GPU (Hopper, e.g. H100/H200: wgmma and TMA); ";
  if (!query.device.is_cuda()) return why.str() + query.device.str() + " is not a CUDA device";
  if (at::cuda::device_count() == 0) return why.str() + "this machine has no CUDA device";
  const c10::DeviceIndex index = query.device.has_index() ? query.device.index() : at::cuda::current_device();
  if (index >= at::cuda::device_count())
    return why.str() + query.device.str() + " is not there (" + std::to_string(at::cuda::device_count()) +
           " CUDA devices)";
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(index);
  if (prop->major != 9 || prop->minor != 0) {
    why << c10::Device(c10::kCUDA, index) << " is " << prop->name << " with compute capability " << prop->major
        << "." << prop->minor;
    return why.str();
  }
  return std::nullopt;
#endif
}

std::optional<std::string> unsupported_of(const kernels::KernelQuery& query, bool any_head_dim) {
  if (std::optional<std::string> why = device_unsupported(query)) return why;
  if (query.dtype != at::kBFloat16 && query.dtype != at::kHalf)
    return "supports bf16 and fp16, not " + kernels::dtype_phrase(query.dtype) + " (wgmma takes 16-bit inputs here)";
  if (any_head_dim) return std::nullopt;
  // The head dims of its configurations (flash_sm90_traits.h, flash_bwd_sm90_traits.h).
  const bool listed = query.backward ? kernels::has_head_dim(Sm90BwdConfigs{}, query.head_dim)
                                     : kernels::has_head_dim(Sm90FwdConfigs{}, query.head_dim);
  if (!listed)
    return "supports head_dim " +
           (query.backward ? kernels::head_dims_phrase(Sm90BwdConfigs{}) : kernels::head_dims_phrase(Sm90FwdConfigs{})) +
           ", not " + std::to_string(query.head_dim);
  return std::nullopt;
}

}  // namespace

std::optional<std::string> unsupported(const kernels::KernelQuery& query) { return unsupported_of(query, false); }
std::optional<std::string> unsupported_any_head_dim(const kernels::KernelQuery& query) {
  return unsupported_of(query, true);
}

namespace {

std::optional<std::string> fp8_unsupported_of(const kernels::KernelQuery& query, bool any_head_dim) {
  // What this build's fp8 kernels take first (true on any machine), then the device.
  if (query.backward) return std::string("has no fp8 backward (the fp8 kernel is a forward)");
  if (query.dtype != at::kFloat8_e4m3fn)
    return "runs fp8 as e4m3 (float8_e4m3fn), not " + kernels::dtype_phrase(query.dtype) +
           (query.dtype == at::kFloat8_e5m2 ? " (e5m2 has too few mantissa bits for attention's inputs)" : "");
  if (!any_head_dim && !kernels::has_head_dim(Sm90FwdFp8Configs{}, query.head_dim))
    return "runs fp8 at head_dim " + kernels::head_dims_phrase(Sm90FwdFp8Configs{}) + ", not " +
           std::to_string(query.head_dim) + " (other head dims: docs/notes/flash_sm90_fp8.md)";
  return device_unsupported(query);
}

}  // namespace

std::optional<std::string> fp8_unsupported(const kernels::KernelQuery& query) {
  return fp8_unsupported_of(query, false);
}
std::optional<std::string> fp8_unsupported_any_head_dim(const kernels::KernelQuery& query) {
  return fp8_unsupported_of(query, true);
}

std::optional<std::string> layout_unsupported(const at::Tensor& t, const char* name) {
  const bool contiguous = t.is_contiguous();
  if (contiguous && kernels::is_16_byte_aligned(t)) return std::nullopt;
  std::ostringstream why;
  if (!contiguous)
    why << name << " must be contiguous (sizes " << t.sizes() << ", strides " << t.strides()
        << "); call .contiguous() first";
  else
    why << name << " must start at a 16-byte aligned address (storage offset " << t.storage_offset() << ")";
  return why.str();
}

}  // namespace attnprof::flash_sm90
