// The bridge from the plain Problem to LibTorch tensors, shared by variants,
// the runner and the tests.
#pragma once

#include <ATen/ATen.h>

#include <string>
#include <vector>

#include "attnprof/problem.h"
#include "attnprof/run_record.h"
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

// A variable-length batch packed as FlashAttention's varlen entry points and
// packed training take it (Problem::varlen()): q [total_q, Hq, D], k and v
// [total_kv, Hkv, D], sequence b's rows from cu_seqlens_q[b] (cu_seqlens_k[b])
// to the next entry; cu_seqlens int32 [B + 1] on the inputs' device.
struct PackedBatch {
  at::Tensor q, k, v, cu_seqlens_q, cu_seqlens_k;
  int64_t max_q = 0, max_kv = 0;
};

// fp8 inputs (DType::FP8): q, k, v are e4m3, x ≈ x_e4m3 * descale, one
// float32 factor per (batch, head): q_descale [B, Hq], k_descale and
// v_descale [B, Hkv] (FlashAttention-3's descale arguments are [B, Hkv] for
// all three: its q scale is shared by a KV head's group).
// `original` holds the bf16 draws they were quantised from.
struct Fp8Scales {
  at::Tensor q_descale, k_descale, v_descale;
  at::Tensor q_original, k_original, v_original;
  bool defined() const { return q_descale.defined(); }
};

struct Inputs {
  at::Tensor q, k, v;
  at::Tensor grad_out;  // the fixed gradient of a backward pass (undefined for the forward)
  PagedKv paged;        // k and v again, paged, for a paged problem (else undefined)
  PackedBatch packed;   // q, k and v again, packed, for a variable-length batch (else undefined)
  Fp8Scales fp8;        // the descale factors of fp8 inputs (else undefined)
};
// Standard-normal q [B, Hq, Sq, D], k and v [B, Hkv, Skv, D] (from the current
// generator, so at::manual_seed decides them; fp8: drawn in bf16, then
// quantised by fp8_inputs, variants/fp8.h; a dense forward only); for a backward pass q, k, v
// require grad and grad_out [B, Hq, Sq, D] is drawn too; for a paged problem
// k and v are also written into a paged cache (paged_copy); for a
// variable-length batch the rows past each sequence's lengths are zeros (what
// a framework pads with) and q, k, v are also packed (pack_batch).
Inputs random_inputs(const Problem& p);

// k and v [B, Hkv, Skv, D] in pages of `page_size` rows, scattered over a
// pool of B * ceil(Skv / page_size) pages in a random order (a permutation
// from the current generator, as a server's allocator leaves them).
PagedKv paged_copy(const at::Tensor& k, const at::Tensor& v, int64_t page_size);

// One cache's pages gathered back into contiguous [B, Hkv, seq_kv, D]: what a
// variant without a paged kernel runs first (aten::index on the pool, then
// one copy into the [B, Hkv, S, D] order).
at::Tensor gather_pages(const at::Tensor& cache, const at::Tensor& block_table, int64_t seq_kv);

// The real rows of padded q [B, H, Sq, D] and k, v [B, Hkv, Skv, D] packed by
// the problem's lengths, with their cu_seqlens.
PackedBatch pack_batch(const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

// Sequence b of a variable-length batch as a problem of its own (batch 1, its
// own lengths, no seqlens) and its unpadded q, k, v (views of `in`'s padded ones).
struct Sequence {
  Problem problem;
  Inputs inputs;
};
Sequence sequence_of(const Problem& p, const Inputs& in, int64_t b);

// A variable-length batch's output as packed rows [total_q, Hq, D], from a
// padded [B, Hq, Sq, D] output or a packed one (returned as it is); any other
// problem's output unchanged. What is compared with the reference.
at::Tensor real_rows(const Problem& p, const at::Tensor& out);

// The problem's forward on its inputs: Variant::forward, forward_paged on the
// paged cache of a paged problem, forward_varlen on a variable-length batch,
// forward_fp8 on fp8 inputs.
// What every measured step runs.
at::Tensor forward_of(Variant& variant, const Problem& p, const Inputs& in);

// The boolean mask of the problem, true where a key is hidden, shaped
// [Sq, Skv]; undefined without a causal mask. Bottom-right aligned: key j is
// visible to query i iff j <= i + (Skv - Sq) (and, under a window W,
// j > i + (Skv - Sq) - W); top-left: iff j <= i. A variable-length batch's is
// [B, 1, Sq, Skv], per sequence with its own lengths, the padded keys hidden
// too (with or without a causal mask); a padded query row sees every real key
// of its sequence, so no row is all hidden and the padding stays finite.
at::Tensor hidden_keys_mask(const Problem& p, const at::TensorOptions& options);
// The same rule for query rows `rows` (int64 [R]) of a dense problem:
// [R, Skv], true where hidden; undefined without a causal mask.
at::Tensor hidden_keys_of_rows(const Problem& p, const at::Tensor& rows);
// Its sizes: [Sq, Skv], or [B, 1, Sq, Skv] for a variable-length batch.
std::vector<int64_t> hidden_keys_mask_sizes(const Problem& p);

// k or v [B, Hkv, S, D] repeated to the query heads [B, Hq, S, D] (head h reads
// KV head h / (Hq / Hkv)); the tensor itself when there is one KV head per query head.
at::Tensor expand_kv_heads(const at::Tensor& kv, int64_t heads_q);

// Float64 reference on the same device: softmax(q kᵀ * scale + mask) v, each
// query head against its KV head. Rows that see no key give zeros. A
// variable-length batch: each sequence on its own rows, unpadded (the padding
// rows of the [B, Hq, Sq, D] result are zeros). fp8 inputs: of their
// dequantised values.
at::Tensor reference_attention(const Problem& p, const Inputs& in);

// How far a variant's output is from the float64 reference, on a sample of
// query rows so a large problem costs no more than `budget` score elements
// of reference (evenly spaced rows, the last one, which sees every key,
// always among them; every row when they fit): rel_error, rows and
// total_rows of an Accuracy (run_record.h). fp8 inputs are compared with the
// reference of their dequantised values. `out` is what forward_of returned for `in`.
Accuracy sampled_output_error(const Problem& p, const Inputs& in, const at::Tensor& out, int64_t budget);
// What quantising dense fp8 inputs alone does: the float64 reference of the
// dequantised inputs against that of the bf16 draws (Fp8Scales::original),
// on the same sample of rows; the Accuracy::input_quantisation_error of a run.
double sampled_quantisation_error(const Problem& p, const Inputs& in, int64_t budget);

// ‖out − ref‖_F / ‖ref‖_F, computed in float64.
double relative_frobenius_error(const at::Tensor& out, const at::Tensor& ref);

// The first line of a LibTorch message (errors and warnings put hints and
// backtraces below it): the one-line reason attnprof reports.
std::string first_line(const std::string& message);

}  // namespace attnprof
