// The attention problem one run measures: the shape (grouped-query heads,
// queries against a longer key/value sequence), dtype, mask, the pass, and
// where it runs. Plain data, no LibTorch types, so the report layer (and its
// tests) can use it without linking LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace attnprof {

// FP8: q, k and v in float8 e4m3 with per-(batch, head) descale factors,
// quantised outside the measured scope from bf16 draws; the output is bf16
// (a forward-only dtype, which the CLI enforces).
enum class DType { BF16, FP16, FP32, FP8 };

const char* dtype_name(DType d);  // "bf16", "fp16", "fp32", "fp8"
std::optional<DType> parse_dtype(const std::string& s);
const std::vector<std::string>& dtype_names();
int dtype_bytes(DType d);  // of one input element (fp8: 1)
// The dtype of the output: the inputs' own, bf16 for fp8 inputs.
DType output_dtype(DType d);

// Which keys a query sees. The causal masks differ only when seq_q != seq_kv:
// top-left lets query i see keys j <= i (PyTorch's is_causal); bottom-right
// lets it see j <= i + (seq_kv - seq_q), the last query seeing every key
// (FlashAttention >= 2.1, PyTorch's causal_lower_right): what decode and
// chunked prefill against a KV cache need.
enum class Mask { none, causal_top_left, causal_bottom_right };

const char* mask_name(Mask m);  // "full", "causal-top-left", "causal"
std::optional<Mask> parse_mask(const std::string& s);

// What one profiled step runs: the forward, the backward of a forward run
// outside the measured scope, or both. Each measured part is one user scope.
enum class Pass { fwd, bwd, fwd_bwd };

const char* pass_name(Pass p);  // "fwd", "bwd", "fwd+bwd"
std::optional<Pass> parse_pass(const std::string& s);
const std::vector<std::string>& pass_names();
// The user scopes (and NVTX ranges) of a pass, in the order they run in a step.
std::vector<std::string> pass_scopes(Pass p);
// The backward of attention does 2.5x the forward's matmul FLOPs (dV, dP, dQ,
// dK and the recomputed S: 5 matmuls against 2), the convention of
// FlashAttention's and PyTorch's benchmarks.
double pass_flop_factor(Pass p);

inline constexpr const char* kForwardScope = "attn_fwd";
inline constexpr const char* kBackwardScope = "attn_bwd";

// The largest page of a paged KV cache, in tokens (the CLI and the summary reader both hold to it).
inline constexpr int64_t kMaxPageSize = int64_t{1} << 16;
// The most sequences a variable-length batch lists (the CLI and the summary reader both hold to it).
inline constexpr int64_t kMaxSeqlens = 4096;

struct Problem {
  int64_t batch = 8;
  int64_t heads_q = 16;
  int64_t heads_kv = 16;  // divides heads_q; fewer = grouped-query attention
  int64_t seq_q = 1024;
  int64_t seq_kv = 1024;
  int64_t head_dim = 64;
  DType dtype = DType::BF16;
  Mask mask = Mask::causal_bottom_right;
  // A sliding window (0: none; with the bottom-right causal mask only, which
  // the CLI enforces): query i sees the `window` most recent keys up to its
  // diagonal, j in (i + seq_kv - seq_q - window, i + seq_kv - seq_q]
  // (FlashAttention's window_size_left = window - 1, Mistral's sliding_window).
  int64_t window = 0;
  // The KV cache's layout: 0, contiguous [batch, heads_kv, seq_kv, head_dim];
  // > 0, paged as inference servers keep it: pages of page_size tokens
  // [pages, heads_kv, page_size, head_dim] (FlashInfer's HND) scattered in a
  // pool and found through a block table [batch, pages per sequence]. A
  // forward-only layout (the CLI enforces it).
  int64_t page_size = 0;
  // A variable-length batch (empty: every sequence seq_kv keys): sequence b
  // holds seqlens[b] keys (batch = its size, seq_kv = its largest), and either
  // as many queries (prefill, packed by cu_seqlens: seq_q == seq_kv) or the
  // last seq_q of them (decode or a chunk against per-sequence cache lengths:
  // seq_q below every length). The masks hold per sequence. A forward-only
  // batch (the CLI enforces it).
  std::vector<int64_t> seqlens;
  // With seqlens: every variant runs the padded batch under a mask, those
  // with a packed (cu_seqlens) kernel too (--varlen-layout padded): what
  // padding costs on the same backend. Variants that only read the packed
  // batch refuse.
  bool varlen_padded = false;
  // fp8 only (--fp8-rotate): q and k are multiplied by one random orthogonal
  // matrix R (seeded) before their quantisation, FlashAttention-3's
  // incoherent processing: (qR)(kR)ᵀ = qkᵀ, so the attention is the same,
  // while a few outlier channels spread over all of them and the per-head
  // scales waste less of e4m3's range. Outside the measured scope (a model
  // folds R into its projections).
  bool fp8_rotated = false;
  Pass pass = Pass::fwd;
  std::string device = "cpu";  // "cpu" or "cuda:N", already resolved
  uint64_t seed = 0;

  bool on_cuda() const { return device.rfind("cuda", 0) == 0; }
  bool causal() const { return mask != Mask::none; }
  // The mask with the alignment folded away where it changes nothing
  // (seq_q == seq_kv): what names, compares and dispatches on.
  Mask effective_mask() const;
  int64_t group_size() const { return heads_kv > 0 ? heads_q / heads_kv : 0; }
  double softmax_scale() const;
  // Whether the window hides a key the causal mask shows (a window of at
  // least seq_kv keys hides none: no query sees more).
  bool windowed() const { return window > 0 && window < seq_kv && effective_mask() == Mask::causal_bottom_right; }
  // The window where it hides keys, else 0: what variants pass to a kernel and tables show.
  int64_t effective_window() const { return windowed() ? window : 0; }
  bool paged() const { return page_size > 0; }
  // Pages one sequence's keys fill: ceil(seq_kv / page_size) (0 when contiguous).
  int64_t pages_per_sequence() const { return paged() ? (seq_kv + page_size - 1) / page_size : 0; }
  bool varlen() const { return !seqlens.empty(); }
  // Keys and queries of sequence b (seq_kv and seq_q unless varlen()).
  int64_t kv_len(int64_t b) const { return varlen() ? seqlens[size_t(b)] : seq_kv; }
  int64_t q_len(int64_t b) const { return varlen() && seq_q == seq_kv ? seqlens[size_t(b)] : seq_q; }
  // Sequence b as a problem of its own: batch 1, its own lengths, no seqlens.
  Problem sequence(int64_t b) const;
  // Queries and keys of the whole batch (batch * seq_q and batch * seq_kv unless varlen()).
  int64_t total_q() const;
  int64_t total_kv() const;
  // Query-key pairs a head computes: seq_q * seq_kv without a mask; causal
  // counts the visible area (seq_q^2 / 2 for a square problem, as before:
  // the diagonal counted half), a window only the keys inside it (its
  // diagonal counted half too, so a window of seq_kv keys counts as causal).
  // A variable-length batch: the mean over its sequences, each counted with
  // its own lengths (so forward_flops counts real tokens only).
  double visible_pairs() const;
  // The share of the padded batch's query-key area [batch, seq_q, seq_kv]
  // that is padding (0 unless varlen()): what a variant computing the padded
  // batch wastes.
  double padding_share() const;
  // 4 * B * Hq * pairs * D: the two matmuls of one forward.
  double forward_flops() const;
  // The FLOPs of one step of this problem's pass (forward_flops x factor).
  double flops() const;
  // "<B>_<Hq>_<Sq>_<D>_<dtype>_<mask>" then "_hkv<Hkv>" when the heads differ,
  // "_kv<Skv>" when the sequences differ, "_w<window>" under a window that
  // hides keys, "_p<page_size>" for a paged cache, "_vl<N>-<hash>" for a
  // variable-length batch (its lengths' FNV-1a hash), "_<pass>" when not the forward:
  // every output file of this problem starts with it, and no two problems
  // share one.
  std::string file_stem() const;
  // "8x16x1024x64", "8x32/8x1/32768x128" (heads q/kv, seq q/kv) for tables and logs.
  std::string shape_string() const;
  // "bf16 causal bwd", "bf16 causal window 4096 paged 16", "bf16 causal varlen 128-8192":
  // the rest of the problem in words.
  std::string config_string() const;
};

}  // namespace attnprof
