// LibTorch boundary of the portable flash family (api.h): the operators'
// schemas (every build), what the family supports, and (CUDA builds) the
// operators themselves. Every tensor check happens here, once; the launch
// layers below trust their params.
#include "kernels/flash_attention/api.h"

#include <torch/library.h>

#include <sstream>

#include "kernels/flash_attention/flash_bwd_kernel_traits.h"
#include "kernels/flash_attention/flash_kernel_traits.h"

#ifdef ATTNPROF_HAVE_CUDA_KERNELS
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>

#include "kernels/flash_attention/checked_tables.h"
#include "kernels/flash_attention/flash_params.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <mutex>
#include <tuple>
#include <utility>
#include <vector>
#endif

TORCH_LIBRARY_FRAGMENT(attnprof, m) {
  // q: [batch, heads_q, seq_q, head_dim]; k, v: [batch, heads_kv, seq_kv,
  // head_dim] with heads_q a multiple of heads_kv (grouped-query / multi-query
  // attention: query head h reads K/V head h / (heads_q / heads_kv), no copy);
  // contiguous, one dtype (bf16 or fp16), head_dim 64 or 128. seq_q and seq_kv
  // may differ. out: like q. lse: [batch, heads_q, seq_q] float32, natural log.
  // causal: bottom-right aligned, key j visible to query i iff
  // j <= i + (seq_kv - seq_q) (top-left when seq_q == seq_kv); a row that sees
  // no key (seq_q > seq_kv) gets out 0 and lse -inf. window (causal only; 0:
  // none): a sliding window of that many keys, bottom-right aligned with the
  // causal mask: query i sees keys j with i + off - window < j <= i + off,
  // off = seq_kv - seq_q (FlashAttention's window_size_left = window - 1);
  // key blocks outside every row's window are skipped. Few queries per KV head
  // run a split-KV decode kernel, the others the prefill kernel; either may
  // split the keys and add a combine kernel (flash_fwd_plan.h).
  m.def("flash_attention(Tensor q, Tensor k, Tensor v, bool causal, float scale, int window=0) -> (Tensor out, Tensor lse)");
  // flash_attention reading K and V from a paged cache, as inference servers
  // keep it, without gathering it: k_cache, v_cache [num_pages, heads_kv,
  // page_size, head_dim] (FlashInfer's HND layout; page_size a power of two),
  // block_table int32 [batch, pages_per_seq] on q's device: key j of sequence
  // b is row j % page_size of page block_table[b][j / page_size]. seqlen_k:
  // the keys of every sequence (0 .. pages_per_seq * page_size; -1: all of
  // them); the table's columns that hold those keys (under a window, from the
  // first key any query sees) must name pages in [0, num_pages), checked on
  // the device once per table (a sync the first time a table, or a new
  // version of it, is seen; in-place writes bump the version; a table made
  // under inference mode has none and is checked on every call). q, causal,
  // scale, window and the outputs as flash_attention's. Forward only.
  m.def("flash_attention_paged(Tensor q, Tensor k_cache, Tensor v_cache, Tensor block_table, int seqlen_k, bool causal, float scale, int window=0) -> (Tensor out, Tensor lse)");
  // flash_attention on a variable-length batch packed as FlashAttention's
  // varlen functions take it: q [total_q, heads_q, head_dim], k, v [total_k,
  // heads_kv, head_dim], sequence b's rows cu_seqlens_q[b] .. cu_seqlens_q[b+1]
  // (and cu_seqlens_k's for its keys); cu_seqlens int32 [batch + 1] on q's
  // device, from 0, non-decreasing, ending at total_q (total_k), no sequence
  // longer than max_seqlen_q (max_seqlen_k): checked on the host once per
  // version of the two tensors (a sync the first time; tensors made under
  // inference mode every call; none during CUDA-graph capture, where the
  // kernel treats a sequence whose offsets leave the tensors as empty). The
  // masks hold per sequence (causal bottom-right with its own lengths, the
  // window too). out: like q; lse: [heads_q, total_q] float32. Forward only.
  m.def("flash_attention_varlen(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k, bool causal, float scale, int window=0) -> (Tensor out, Tensor lse)");
  // Gradients of flash_attention from its saved inputs, output and lse.
  // q, out, grad_out: [batch, heads_q, seq_q, head_dim]; k, v: [batch, heads_kv,
  // seq_k, head_dim] with heads_kv dividing heads_q; one dtype (bf16 or fp16),
  // contiguous; lse float32 [batch, heads_q, seq_q]. causal: bottom-right
  // aligned (key j visible to query i iff j <= i + seq_k - seq_q), window as
  // the forward's; rows with lse = -inf (no visible key) contribute nothing.
  m.def("flash_attention_backward(Tensor grad_out, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse, bool causal, float scale, int window=0) -> (Tensor grad_q, Tensor grad_k, Tensor grad_v)");
}

namespace attnprof::flash {

std::optional<std::string> unsupported(const kernels::KernelQuery& query) {
#ifndef ATTNPROF_HAVE_CUDA_KERNELS
  (void)query;
  return "needs attnprof built with the CUDA kernels (this build has none: no CUDA toolkit at configure time)";
#else
  if (query.dtype != at::kBFloat16 && query.dtype != at::kHalf)
    return "supports bf16 and fp16, not " + kernels::dtype_phrase(query.dtype) +
           " (its tensor-core MMA takes 16-bit inputs)";
  // The head dims of its configurations (flash_kernel_traits.h, flash_bwd_kernel_traits.h).
  const bool listed = query.backward ? kernels::has_head_dim(BwdConfigs{}, query.head_dim)
                                     : kernels::has_head_dim(FwdTiles{}, query.head_dim) &&
                                           kernels::has_head_dim(DecodeTiles{}, query.head_dim);
  if (!listed)
    return "supports head_dim " +
           (query.backward ? kernels::head_dims_phrase(BwdConfigs{}) : kernels::head_dims_phrase(FwdTiles{})) +
           ", not " + std::to_string(query.head_dim);
  if (!query.device.is_cuda()) return "runs on CUDA devices, not " + query.device.str();
  // Machine code for sm_80 (which 8.x devices run) and sm_90a, no PTX. (A
  // device that is not there is the caller's to refuse: the runner resolves
  // devices before it asks.)
  if (at::cuda::device_count() == 0) return std::nullopt;
  const c10::DeviceIndex index = query.device.has_index() ? query.device.index() : at::cuda::current_device();
  if (index >= at::cuda::device_count()) return std::nullopt;
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(index);
  if (prop->major == 8 || (prop->major == 9 && prop->minor == 0)) return std::nullopt;
  std::ostringstream why;
  why << "has machine code for compute capability 8.x and 9.0; " << query.device << " is " << prop->name
      << " with compute capability " << prop->major << "." << prop->minor;
  return why.str();
#endif
}

}  // namespace attnprof::flash

#ifdef ATTNPROF_HAVE_CUDA_KERNELS

namespace attnprof::flash {
namespace {

constexpr const char* kOp = "attnprof::flash_attention";
constexpr const char* kBwdOp = "attnprof::flash_attention_backward";
// Sequence lengths stay well inside int: the kernels form row indices such as
// n · BLOCK_N + 127 in 32-bit arithmetic.
constexpr int64_t kMaxSeq = int64_t{1} << 30;
constexpr int64_t kMaxGridY = 65535;
constexpr int64_t kMaxGridX = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

// The kernels' index and grid limits for q against seq_kv keys. Grids:
// prefill (batch·heads_q, ⌈seq_q / 128⌉, splits), decode (batch·heads_kv,
// splits, row tiles), combine (⌈batch·heads_q·seq_q / 4⌉).
void check_sizes(const char* op, const at::Tensor& q, int64_t seq_kv) {
  const int64_t batch = q.size(0), heads_q = q.size(1), seq_q = q.size(2);
  TORCH_CHECK(seq_q <= kMaxSeq && seq_kv <= kMaxSeq && batch * heads_q <= kMaxGridX &&
                  (seq_q + 127) / 128 <= kMaxGridY && batch * heads_q * seq_q / 4 <= kMaxGridX,
              op, ": sizes too large for the kernels' 32-bit indices and grid limits: q ", q.sizes(), ", seq_kv ",
              seq_kv, " (seq_q <= ", kMaxGridY * 128, ", seq_kv <= ", kMaxSeq, ", batch*heads_q <= ", kMaxGridX,
              ")");
}

// The shared checks (common/boundary.h), what the family supports, then its
// index and grid limits.
void check_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, double scale) {
  kernels::check_flash_fwd_inputs(kOp, q, k, v, scale);
  for (const auto& [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}}) kernels::check_aligned(*t, kOp, name);
  kernels::check_supported(unsupported(kernels::query_of(q)), kOp);
  check_sizes(kOp, q, k.size(2));
}

// p.plan against the grid limits, the key splits' workspace when the plan
// splits, then the launch on the current stream. Split workspace from the
// caching allocator: num_splits · batch·heads_q·seq_q · (head_dim + 1) floats,
// e.g. 0.53 MB for decode 8 x 32q x 1 at d128 in 4 splits, 16.9 MB for
// chunked prefill 1 x 32q x 512 at d128 in 2 splits (the planner's choices on
// 132 SMs).
void launch_planned(const char* op, FwdParams& p, const at::Tensor& q,
                    void (*run)(const FwdParams&, CUstream_st*) = run_flash_fwd) {
  TORCH_CHECK(p.plan.num_splits <= kMaxGridY && p.plan.row_tiles <= kMaxGridY, op, ": ", p.plan.num_splits,
              " key splits x ", p.plan.row_tiles, " row tiles exceed the grid limit for q ", q.sizes());
  at::Tensor o_accum, lse_accum;  // alive until the launches are queued
  if (p.plan.num_splits > 1) {
    const int64_t rows = q.size(0) * q.size(1) * q.size(2);
    o_accum = at::empty({p.plan.num_splits, rows, q.size(3)}, q.options().dtype(at::kFloat));
    lse_accum = at::empty({p.plan.num_splits, rows}, q.options().dtype(at::kFloat));
    p.o_accum = o_accum.data_ptr<float>();
    p.lse_accum = lse_accum.data_ptr<float>();
  }
  run(p, at::cuda::getCurrentCUDAStream().stream());
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

std::tuple<at::Tensor, at::Tensor> flash_attention_cuda(const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& v, bool causal, double scale,
                                                        int64_t window) {
  check_inputs(q, k, v, scale);
  const int kernel_window = kernels::checked_window(kOp, causal, window, k.size(2));
  c10::cuda::CUDAGuard guard(q.device());
  const kernels::FwdCall call = kernels::prepare_forward(q, k, v, causal, scale, kernel_window);
  if (call.done) return {call.out, call.lse};
  FwdParams p;
  static_cast<kernels::AttentionParams&>(p) = call.params;
  p.plan = plan_for(q, k, causal);
  launch_planned(kOp, p, q);
  return {call.out, call.lse};
}

constexpr const char* kPagedOp = "attnprof::flash_attention_paged";

std::tuple<at::Tensor, at::Tensor> flash_attention_paged_cuda(const at::Tensor& q, const at::Tensor& k_cache,
                                                              const at::Tensor& v_cache, const at::Tensor& block_table,
                                                              int64_t seqlen_k, bool causal, double scale,
                                                              int64_t window) {
  kernels::check_cuda_tensor(q, kPagedOp, "q");
  kernels::check_cuda_tensor(k_cache, kPagedOp, "k_cache");
  kernels::check_cuda_tensor(v_cache, kPagedOp, "v_cache");
  kernels::check_cuda_tensor(block_table, kPagedOp, "block_table");
  for (const auto& [t, name] : {std::pair{&k_cache, "k_cache"}, {&v_cache, "v_cache"}, {&block_table, "block_table"}})
    TORCH_CHECK(t->device() == q.device(), kPagedOp, ": ", name, " is on ", t->device(), ", q on ", q.device());
  TORCH_CHECK(k_cache.scalar_type() == q.scalar_type() && v_cache.scalar_type() == q.scalar_type(), kPagedOp,
              ": q, k_cache, v_cache must have one dtype, got ", q.scalar_type(), ", ", k_cache.scalar_type(), ", ",
              v_cache.scalar_type());
  TORCH_CHECK(block_table.scalar_type() == at::kInt, kPagedOp, ": block_table must be int32, got ",
              block_table.scalar_type());
  TORCH_CHECK(q.dim() == 4 && k_cache.dim() == 4 && v_cache.dim() == 4 && block_table.dim() == 2, kPagedOp,
              ": q must be [batch, heads_q, seq_q, head_dim], k_cache and v_cache [num_pages, heads_kv, page_size, "
              "head_dim], block_table [batch, pages_per_seq]; got ", q.sizes(), ", ", k_cache.sizes(), ", ",
              v_cache.sizes(), ", ", block_table.sizes());
  TORCH_CHECK(k_cache.sizes() == v_cache.sizes(), kPagedOp, ": k_cache and v_cache must have one shape, got ",
              k_cache.sizes(), " and ", v_cache.sizes());
  const int64_t batch = q.size(0), heads_q = q.size(1), head_dim = q.size(3);
  const int64_t num_pages = k_cache.size(0), heads_kv = k_cache.size(1), page_size = k_cache.size(2);
  const int64_t pages_per_seq = block_table.size(1);
  TORCH_CHECK(k_cache.size(3) == head_dim, kPagedOp, ": k_cache's head_dim ", k_cache.size(3), " is not q's ",
              head_dim);
  TORCH_CHECK(block_table.size(0) == batch, kPagedOp, ": block_table has ", block_table.size(0),
              " rows; q's batch is ", batch);
  TORCH_CHECK(heads_kv >= 1 && heads_q % heads_kv == 0, kPagedOp, ": query heads (", heads_q,
              ") must be a multiple of the cache's key/value heads (", heads_kv, ")");
  TORCH_CHECK(page_size >= 1 && (page_size & (page_size - 1)) == 0 && page_size <= (int64_t{1} << 30), kPagedOp,
              ": page_size (k_cache.size(2)) must be a power of two (the kernels find a key's page by shift and "
              "mask), got ", page_size);
  TORCH_CHECK(num_pages <= kInt32Max, kPagedOp, ": ", num_pages, " pages exceed the int32 block table's range");
  const int64_t capacity = pages_per_seq * page_size;
  const int64_t keys = seqlen_k == -1 ? capacity : seqlen_k;
  TORCH_CHECK(keys >= 0 && keys <= capacity, kPagedOp, ": seqlen_k ", seqlen_k, " must be -1 (every key) or 0 .. ",
              capacity, " (pages_per_seq ", pages_per_seq, " x page_size ", page_size, ")");
  TORCH_CHECK(std::isfinite(scale) && scale > 0, kPagedOp, ": scale must be finite and positive, got ", scale);
  kernels::check_supported(unsupported(kernels::query_of(q)), kPagedOp);
  for (const auto& [t, name] : {std::pair{&q, "q"}, {&k_cache, "k_cache"}, {&v_cache, "v_cache"}})
    kernels::check_aligned(*t, kPagedOp, name);
  const int64_t seq_q = q.size(2);
  check_sizes(kPagedOp, q, keys);
  const int kernel_window = kernels::checked_window(kPagedOp, causal, window, keys);

  // The pages the keys use must be in the pool: from the page of the first key
  // any query sees (under a window, query 0's oldest) to the last key's. Not
  // while a CUDA graph is being captured (a host read would break the
  // capture): the kernels' guard then keeps the reads inside the pools.
  const int64_t used = (keys + page_size - 1) / page_size;
  const int64_t first_key = kernel_window > 0 ? std::max<int64_t>(0, keys - seq_q - kernel_window + 1) : 0;
  const int64_t first_column = first_key / page_size;
  static CheckedTables checked;
  const std::optional<CheckedTables::Key> key = CheckedTables::key_of(block_table, first_column, used, num_pages);
  if (used > first_column && batch > 0 && !(key && checked.contains(*key)) &&
      c10::cuda::currentStreamCaptureStatusMayInitCtx() == c10::cuda::CaptureStatus::None) {
    const at::Tensor columns = block_table.narrow(1, first_column, used - first_column);
    const auto [lo, hi] = at::aminmax(columns);
    const int64_t min_page = lo.item<int64_t>(), max_page = hi.item<int64_t>();
    TORCH_CHECK(min_page >= 0 && max_page < num_pages, kPagedOp, ": block_table names page ",
                min_page < 0 ? min_page : max_page, " in columns ", first_column, " .. ", used - 1, " (the pages of ",
                keys, " keys", first_column > 0 ? " inside the window" : "", "); the pool has pages 0 .. ",
                num_pages - 1);
    if (key) checked.add(*key);
  }

  c10::cuda::CUDAGuard guard(q.device());
  // The shared params read the pools as k and v (head and row strides hold);
  // then the sequence length is the keys', and the batch strides are the table's.
  kernels::FwdCall call = kernels::prepare_forward(q, k_cache, v_cache, causal, scale, kernel_window);
  if (call.done) return {call.out, call.lse};
  if (keys == 0) {  // nothing to attend to
    call.out.zero_();
    call.lse.fill_(-INFINITY);
    return {call.out, call.lse};
  }
  FwdParams p;
  static_cast<kernels::AttentionParams&>(p) = call.params;
  p.seqlen_k = static_cast<int>(keys);
  // The pools' batch strides (from their sizes, as every stride here) are the page strides.
  p.k_page_stride = p.k_batch_stride;
  p.v_page_stride = p.v_batch_stride;
  p.k_batch_stride = p.v_batch_stride = 0;
  p.block_table = block_table.data_ptr<int>();
  p.table_batch_stride = block_table.size(1);
  p.page_shift = 0;
  while ((int64_t{1} << p.page_shift) < page_size) ++p.page_shift;
  p.num_pages = static_cast<int>(num_pages);
  p.plan = plan_fwd({batch, heads_q, heads_kv, seq_q, keys, head_dim, causal}, sm_count(q.device().index()));
  launch_planned(kPagedOp, p, q);
  return {call.out, call.lse};
}

constexpr const char* kVarlenOp = "attnprof::flash_attention_varlen";

// cu_seqlens from 0, non-decreasing, ending at `total`, no sequence longer
// than `max_len`: one copy to the host, once per version of the tensor (a
// separate cache from the block tables'; its key's columns hold total and max_len).
void check_offsets(const char* op, const at::Tensor& cu, const char* name, int64_t total, int64_t max_len) {
  static CheckedTables checked;
  const std::optional<CheckedTables::Key> key = CheckedTables::key_of(cu, total, max_len, 0);
  if ((key && checked.contains(*key)) ||
      c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None)
    return;
  const at::Tensor host = cu.cpu();
  const int* c = host.data_ptr<int>();
  const int64_t n = host.numel();
  TORCH_CHECK(c[0] == 0, op, ": ", name, "[0] must be 0, got ", c[0]);
  for (int64_t b = 0; b + 1 < n; ++b) {
    const int64_t len = int64_t{c[b + 1]} - c[b];
    TORCH_CHECK(len >= 0, op, ": ", name, " must not decrease, got ", c[b], " then ", c[b + 1], " at ", b);
    TORCH_CHECK(len <= max_len, op, ": sequence ", b, " has ", len, " rows in ", name, ", more than max_seqlen ",
                max_len);
  }
  TORCH_CHECK(c[n - 1] == total, op, ": ", name, " ends at ", c[n - 1], ", not at the ", total,
              " packed rows");
  if (key) checked.add(*key);
}

std::tuple<at::Tensor, at::Tensor> flash_attention_varlen_cuda(const at::Tensor& q, const at::Tensor& k,
                                                               const at::Tensor& v, const at::Tensor& cu_seqlens_q,
                                                               const at::Tensor& cu_seqlens_k, int64_t max_seqlen_q,
                                                               int64_t max_seqlen_k, bool causal, double scale,
                                                               int64_t window) {
  VarlenCall call = prepare_varlen(kVarlenOp, q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, causal,
                                   scale, window, &unsupported, [&](int64_t longest_q, int64_t longest_k, int) {
                                     // Grid (batch · heads_q, ⌈longest_q / 128⌉).
                                     const int64_t batch = cu_seqlens_q.numel() - 1;
                                     TORCH_CHECK(longest_q <= kMaxSeq && longest_k <= kMaxSeq &&
                                                     q.size(1) * batch <= kMaxGridX &&
                                                     (longest_q + 127) / 128 <= kMaxGridY,
                                                 kVarlenOp, ": sizes outside the kernels' grid limits: batch ", batch,
                                                 " x heads_q ", q.size(1), " (at most ", kMaxGridX,
                                                 "), the longest query sequence ", longest_q, " (at most ",
                                                 kMaxGridY * 128, "), the longest key sequence ", longest_k,
                                                 " (at most ", kMaxSeq, "); max_seqlen above the packed rows counts "
                                                 "as the rows");
                                   });
  if (call.done) return {call.out, call.lse};
  c10::cuda::CUDAGuard guard(q.device());
  FwdParams p = packed_params<FwdParams>(call);
  // The prefill kernel, one block row per sequence's query block, every key of a sequence in one split.
  p.plan.path = FwdPath::kPrefillPacked;
  p.plan.num_splits = 1;
  p.plan.keys_per_split = std::max(p.seqlen_k, 1);
  run_flash_fwd(p, at::cuda::getCurrentCUDAStream().stream());
  return {call.out, call.lse};
}

// Defined, on CUDA, contiguous, on `device`: the layout every kernel here assumes.
void check_operand(const at::Tensor& t, const char* op, const char* name, const at::Device& device) {
  kernels::check_cuda_tensor(t, op, name);
  TORCH_CHECK(t.device() == device, op, ": ", name, " is on ", t.device(), ", the others on ", device);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> flash_attention_backward_cuda(
    const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, bool causal, double scale, int64_t window) {
  int kernel_window = 0;
  FlashBwdCall call = prepare_flash_bwd(kBwdOp, grad_out, q, k, v, out, lse, causal, scale, &unsupported,
                                        [&] {
                                          kernel_window = kernels::checked_window(kBwdOp, causal, window, k.size(2));
                                          // The kernel finds a key block's last query in 32-bit arithmetic:
                                          // seq_q + seq_k + window stays under 2^31.
                                          TORCH_CHECK(kernel_window == 0 || q.size(2) + 2 * k.size(2) < kInt32Max - 256,
                                                      kBwdOp, ": sizes too large for a sliding window's 32-bit "
                                                      "indices: q ", q.sizes(), ", k ", k.sizes());
                                        });
  call.params.window = kernel_window;
  c10::cuda::CUDAGuard guard(q.device());
  if (!call.trivial) run_flash_bwd(call.params, at::cuda::getCurrentCUDAStream().stream());
  return {call.dq, call.dk, call.dv};
}

}  // namespace

FwdPlan plan_for(const at::Tensor& q, const at::Tensor& k, bool causal) {
  const FwdShape shape{q.size(0), q.size(1), k.size(1), q.size(2), k.size(2), q.size(3), causal};
  return plan_fwd(shape, sm_count(q.device().index()));
}

void run_planned_forward(const char* op, const kernels::FwdCall& call, const at::Tensor& q, const at::Tensor& k,
                         const FwdPlan& plan) {
  kernels::check_supported(unsupported(kernels::query_of(q)), op);
  check_sizes(op, q, k.size(2));
  FwdParams p;
  static_cast<kernels::AttentionParams&>(p) = call.params;
  p.plan = plan;
  launch_planned(op, p, q);
}

void run_planned_forward(const char* op, FwdParams& p, const at::Tensor& q, void (*run)(const FwdParams&, CUstream_st*)) {
  check_sizes(op, q, p.seqlen_k);
  launch_planned(op, p, q, run);
}

FlashBwdCall prepare_flash_bwd(const char* op, const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse, bool causal,
                               double scale,
                               const std::function<std::optional<std::string>(const kernels::KernelQuery&)>& supports,
                               const std::function<void()>& more_checks) {
  TORCH_CHECK(q.defined() && q.is_cuda(), op, ": q must be a defined CUDA tensor");
  const at::Device device = q.device();
  const std::pair<const at::Tensor*, const char*> operands[] = {
      {&grad_out, "grad_out"}, {&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}, {&lse, "lse"}};
  for (const auto& [t, name] : operands) check_operand(*t, op, name, device);
  for (const auto& [t, name] : {std::pair{&grad_out, "grad_out"}, {&q, "q"}, {&k, "k"}, {&v, "v"}, {&out, "out"}})
    kernels::check_aligned(*t, op, name);
  const auto dt = q.scalar_type();
  for (const auto& [t, name] : {std::pair{&k, "k"}, {&v, "v"}, {&out, "out"}, {&grad_out, "grad_out"}})
    TORCH_CHECK(t->scalar_type() == dt, op, ": ", name, " must have q's dtype ", dt, ", got ", t->scalar_type());
  TORCH_CHECK(lse.scalar_type() == at::kFloat, op, ": lse must be float32, got ", lse.scalar_type());
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4, op,
              ": q, k, v must be [batch, heads, seq, head_dim], got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), op, ": k and v must have one shape, got ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(out.sizes() == q.sizes() && grad_out.sizes() == q.sizes(), op, ": out ", out.sizes(),
              " and grad_out ", grad_out.sizes(), " must have q's shape ", q.sizes());
  const int64_t batch = q.size(0), heads_q = q.size(1), seq_q = q.size(2), head_dim = q.size(3);
  const int64_t heads_kv = k.size(1), seq_k = k.size(2);
  TORCH_CHECK(lse.dim() == 3 && lse.size(0) == batch && lse.size(1) == heads_q && lse.size(2) == seq_q, op,
              ": lse must be [batch, heads_q, seq_q] = [", batch, ", ", heads_q, ", ", seq_q, "], got ",
              lse.sizes());
  TORCH_CHECK(k.size(0) == batch && k.size(3) == head_dim, op, ": q ", q.sizes(), " and k ", k.sizes(),
              " differ in batch or head_dim");
  TORCH_CHECK(heads_kv >= 1 && heads_q % heads_kv == 0, op, ": the KV heads (", heads_kv,
              ") must divide the query heads (", heads_q, ")");
  TORCH_CHECK(std::isfinite(scale) && scale > 0, op, ": scale must be finite and positive, got ", scale);
  kernels::check_supported(supports(kernels::query_of(q, /*backward=*/true)), op);
  const int64_t seq_q_pad = (seq_q + kBwdSeqQPad - 1) / kBwdSeqQPad * kBwdSeqQPad;
  TORCH_CHECK(batch * heads_q <= kInt32Max && seq_q_pad <= kInt32Max && seq_k <= kInt32Max, op,
              ": sizes too large for 32-bit indices: q ", q.sizes(), ", k ", k.sizes());
  if (more_checks) more_checks();

  FlashBwdCall call;
  if (q.numel() == 0 || k.numel() == 0) {  // nothing attends or nothing to attend to: zero gradients
    call.dq = at::zeros_like(q);
    call.dk = at::zeros_like(k);
    call.dv = at::zeros_like(v);
    call.trivial = true;
    return call;
  }
  at::Tensor& dq = call.dq = at::empty_like(q);
  at::Tensor& dk = call.dk = at::empty_like(k);
  at::Tensor& dv = call.dv = at::empty_like(v);
  // Workspaces (flash_bwd_params.h): fp32 dQ accumulator and the per-row D and
  // lse·log2 e, query rows padded to whole blocks. Every element is written by
  // the preprocessing kernel before the main kernel reads it.
  const auto f32 = q.options().dtype(at::kFloat);
  at::Tensor& dq_accum = call.dq_accum = at::empty({batch, heads_q, seq_q_pad, head_dim}, f32);
  at::Tensor& row_stats = call.row_stats = at::empty({2, batch, heads_q, seq_q_pad}, f32);

  BwdParams& p = call.params;
  p.q = q.data_ptr();
  p.k = k.data_ptr();
  p.v = v.data_ptr();
  p.o = out.data_ptr();
  p.dout = grad_out.data_ptr();
  p.lse = lse.data_ptr<float>();
  p.dq = dq.data_ptr();
  p.dk = dk.data_ptr();
  p.dv = dv.data_ptr();
  p.dq_accum = dq_accum.data_ptr<float>();
  p.d_sum = row_stats.data_ptr<float>();
  p.lse_log2 = p.d_sum + row_stats.size(1) * row_stats.size(2) * row_stats.size(3);
  std::tie(p.q_batch_stride, p.q_head_stride, p.q_row_stride) = kernels::dense_strides(q);
  std::tie(p.k_batch_stride, p.k_head_stride, p.k_row_stride) = kernels::dense_strides(k);
  std::tie(p.v_batch_stride, p.v_head_stride, p.v_row_stride) = kernels::dense_strides(v);
  std::tie(p.o_batch_stride, p.o_head_stride, p.o_row_stride) = kernels::dense_strides(out);
  std::tie(p.do_batch_stride, p.do_head_stride, p.do_row_stride) = kernels::dense_strides(grad_out);
  std::tie(p.dq_batch_stride, p.dq_head_stride, p.dq_row_stride) = kernels::dense_strides(dq);
  std::tie(p.dk_batch_stride, p.dk_head_stride, p.dk_row_stride) = kernels::dense_strides(dk);
  std::tie(p.dv_batch_stride, p.dv_head_stride, p.dv_row_stride) = kernels::dense_strides(dv);
  p.batch = static_cast<int>(batch);
  p.heads_q = static_cast<int>(heads_q);
  p.heads_kv = static_cast<int>(heads_kv);
  p.seqlen_q = static_cast<int>(seq_q);
  p.seqlen_k = static_cast<int>(seq_k);
  p.seqlen_q_pad = static_cast<int>(seq_q_pad);
  p.head_dim = static_cast<int>(head_dim);
  p.scale = static_cast<float>(scale);
  p.causal = causal;
  p.is_bf16 = dt == at::kBFloat16;
  return call;
}

VarlenCall prepare_varlen(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& cu_seqlens_q, const at::Tensor& cu_seqlens_k, int64_t max_seqlen_q,
                          int64_t max_seqlen_k, bool causal, double scale, int64_t window,
                          const std::function<std::optional<std::string>(const kernels::KernelQuery&)>& supports,
                          const std::function<void(int64_t, int64_t, int)>& more_checks) {
  for (const auto& [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}, {&cu_seqlens_q, "cu_seqlens_q"},
                                {&cu_seqlens_k, "cu_seqlens_k"}}) {
    kernels::check_cuda_tensor(*t, op, name);
    TORCH_CHECK(t->device() == q.device(), op, ": ", name, " is on ", t->device(), ", q on ", q.device());
  }
  TORCH_CHECK(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(), op,
              ": q, k, v must have one dtype, got ", q.scalar_type(), ", ", k.scalar_type(), ", ", v.scalar_type());
  TORCH_CHECK(cu_seqlens_q.scalar_type() == at::kInt && cu_seqlens_k.scalar_type() == at::kInt, op,
              ": cu_seqlens_q and cu_seqlens_k must be int32, got ", cu_seqlens_q.scalar_type(), " and ",
              cu_seqlens_k.scalar_type());
  TORCH_CHECK(q.dim() == 3 && k.dim() == 3 && v.dim() == 3 && cu_seqlens_q.dim() == 1 && cu_seqlens_k.dim() == 1,
              op, ": q must be [total_q, heads_q, head_dim], k and v [total_k, heads_kv, head_dim], "
              "cu_seqlens_q and cu_seqlens_k [batch + 1]; got ", q.sizes(), ", ", k.sizes(), ", ", v.sizes(), ", ",
              cu_seqlens_q.sizes(), ", ", cu_seqlens_k.sizes());
  TORCH_CHECK(k.sizes() == v.sizes(), op, ": k and v must have one shape, got ", k.sizes(), " and ", v.sizes());
  TORCH_CHECK(k.size(2) == q.size(2), op, ": k's head_dim ", k.size(2), " is not q's ", q.size(2));
  TORCH_CHECK(cu_seqlens_q.numel() >= 1 && cu_seqlens_q.numel() == cu_seqlens_k.numel(), op,
              ": cu_seqlens_q and cu_seqlens_k must both hold batch + 1 offsets, got ", cu_seqlens_q.numel(), " and ",
              cu_seqlens_k.numel());
  const int64_t total_q = q.size(0), heads_q = q.size(1), head_dim = q.size(2);
  const int64_t total_k = k.size(0), heads_kv = k.size(1), batch = cu_seqlens_q.numel() - 1;
  TORCH_CHECK(heads_kv >= 1 && heads_q % heads_kv == 0, op, ": query heads (", heads_q,
              ") must be a multiple of key/value heads (", heads_kv, ")");
  TORCH_CHECK(std::isfinite(scale) && scale > 0, op, ": scale must be finite and positive, got ", scale);
  kernels::check_supported(supports(kernels::query_of(q)), op);
  TORCH_CHECK(max_seqlen_q >= 0 && max_seqlen_k >= 0, op, ": max_seqlen_q ", max_seqlen_q, " and max_seqlen_k ",
              max_seqlen_k, " must not be negative");
  TORCH_CHECK(total_q <= kInt32Max && total_k <= kInt32Max && max_seqlen_q <= kInt32Max &&
                  max_seqlen_k <= kInt32Max && batch * heads_q <= kInt32Max,
              op, ": sizes outside the kernels' 32-bit indices: q ", q.sizes(), ", k ", k.sizes(), ", batch ", batch,
              " (total rows and max_seqlen < 2^31)");
  // No sequence inside the tensors is longer than their rows (the kernels skip one that is).
  const int64_t longest_q = std::min(max_seqlen_q, total_q), longest_k = std::min(max_seqlen_k, total_k);
  VarlenCall call;
  call.window = kernels::checked_window(op, causal, window, max_seqlen_k);
  if (more_checks) more_checks(longest_q, longest_k, call.window);
  for (const auto& [t, name] : {std::pair{&q, "q"}, {&k, "k"}, {&v, "v"}}) kernels::check_aligned(*t, op, name);
  // On q's device before the offsets are checked: the capture test reads its stream.
  c10::cuda::CUDAGuard guard(q.device());
  check_offsets(op, cu_seqlens_q, "cu_seqlens_q", total_q, max_seqlen_q);
  check_offsets(op, cu_seqlens_k, "cu_seqlens_k", total_k, max_seqlen_k);

  // Rows of a sequence the kernel skips (offsets changed behind the check, or
  // unchecked during graph capture) are left as allocated: unspecified.
  call.out = at::empty_like(q);
  call.lse = at::empty({heads_q, total_q}, q.options().dtype(at::kFloat));
  call.done = q.numel() == 0 || batch == 0 || max_seqlen_q == 0;
  if (call.done) return call;
  kernels::AttentionParams& p = call.params;
  p.q = q.data_ptr(), p.k = k.data_ptr(), p.v = v.data_ptr(), p.o = call.out.data_ptr();
  p.lse = call.lse.data_ptr<float>();
  p.q_head_stride = p.o_head_stride = p.k_head_stride = p.v_head_stride = head_dim;
  p.q_row_stride = p.o_row_stride = heads_q * head_dim;
  p.k_row_stride = p.v_row_stride = heads_kv * head_dim;
  p.batch = static_cast<int>(batch);
  p.heads_q = static_cast<int>(heads_q);
  p.heads_kv = static_cast<int>(heads_kv);
  p.group = p.heads_q / p.heads_kv;
  p.seqlen_q = static_cast<int>(longest_q);
  p.seqlen_k = static_cast<int>(longest_k);
  p.head_dim = static_cast<int>(head_dim);
  p.scale = static_cast<float>(scale);
  p.scale_log2 = static_cast<float>(scale * 1.4426950408889634);  // log2(e)
  p.causal = causal;
  p.window = call.window;
  p.is_bf16 = q.scalar_type() == at::kBFloat16;
  call.cu_seqlens_q = cu_seqlens_q.data_ptr<int>();
  call.cu_seqlens_k = cu_seqlens_k.data_ptr<int>();
  call.total_q = static_cast<int>(total_q);
  call.total_k = static_cast<int>(total_k);
  return call;
}

}  // namespace attnprof::flash

TORCH_LIBRARY_IMPL(attnprof, CUDA, m) {
  m.impl("flash_attention", &attnprof::flash::flash_attention_cuda);
  m.impl("flash_attention_backward", &attnprof::flash::flash_attention_backward_cuda);
  m.impl("flash_attention_paged", &attnprof::flash::flash_attention_paged_cuda);
  m.impl("flash_attention_varlen", &attnprof::flash::flash_attention_varlen_cuda);
}

#endif  // ATTNPROF_HAVE_CUDA_KERNELS
