// The bridge from the plain Problem to LibTorch tensors, shared by variants,
// the runner and the tests.
#pragma once

#include <ATen/ATen.h>

#include <string>

#include "attnprof/problem.h"
#include "attnprof/variant.h"

namespace attnprof {

at::ScalarType scalar_type(DType d);
at::Device torch_device(const Problem& p);
at::TensorOptions tensor_options(const Problem& p);

// A paged KV cache (Problem::paged()): k_cache and v_cache [pages, Hkv,
// page_size, D] (FlashInfer's HND layout: a page's rows of one head are
// contiguous), block_table int32 [B, pages per sequence]: key j of sequence b
// is row j % page_size of page block_table[b][j / page_size]. The rows past
// seq_kv in a sequence's last page hold NaN, so a reader that strays past
// the sequence shows in the output.
struct PagedKv {
  at::Tensor k_cache, v_cache, block_table;
  int64_t seq_kv = 0;
  int64_t page_size() const { return k_cache.size(2); }
};

struct Inputs {
  at::Tensor q, k, v;
  at::Tensor grad_out;  // the fixed gradient of a backward pass (undefined for the forward)
  PagedKv paged;        // k and v again, paged, for a paged problem (else undefined)
};
// Standard-normal q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D] (from the current
// generator, so at::manual_seed decides them); for a backward pass q, k, v
// require grad and grad_out [B, Hq, Sq, D] is drawn too; for a paged problem
// k and v are also written into a paged cache (paged_copy).
Inputs random_inputs(const Problem& p);

// k and v [B, Hkv, Skv, D] in pages of `page_size` rows, scattered over a
// pool of B * ceil(Skv / page_size) pages in a random order (a permutation
// from the current generator, as a server's allocator leaves them).
PagedKv paged_copy(const at::Tensor& k, const at::Tensor& v, int64_t page_size);

// One cache's pages gathered back into contiguous [B, Hkv, seq_kv, D]: what a
// variant without a paged kernel runs first (aten::index on the pool, then
// one copy into the [B, Hkv, S, D] order).
at::Tensor gather_pages(const at::Tensor& cache, const at::Tensor& block_table, int64_t seq_kv);

// The problem's forward on its inputs: Variant::forward, or forward_paged on
// the paged cache of a paged problem. What every measured step runs.
at::Tensor forward_of(Variant& variant, const Problem& p, const Inputs& in);

// The boolean mask of the problem, true where a key is hidden, shaped
// [Sq, Skv]; undefined without a causal mask. Bottom-right aligned: key j is
// visible to query i iff j <= i + (Skv - Sq) (and, under a window W,
// j > i + (Skv - Sq) - W); top-left: iff j <= i.
at::Tensor hidden_keys_mask(const Problem& p, const at::TensorOptions& options);

// k or v [B, Hkv, S, D] repeated to the query heads [B, Hq, S, D] (head h reads
// KV head h / (Hq / Hkv)); the tensor itself when there is one KV head per query head.
at::Tensor expand_kv_heads(const at::Tensor& kv, int64_t heads_q);

// Float64 reference on the same device: softmax(q kᵀ * scale + mask) v, with
// k and v expanded to the query heads. Rows that see no key give zeros.
at::Tensor reference_attention(const Problem& p, const Inputs& in);

// ‖out − ref‖_F / ‖ref‖_F, computed in float64.
double relative_frobenius_error(const at::Tensor& out, const at::Tensor& ref);

// The first line of a LibTorch message (errors and warnings put hints and
// backtraces below it): the one-line reason attnprof reports.
std::string first_line(const std::string& message);

}  // namespace attnprof
