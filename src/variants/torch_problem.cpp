#include "variants/torch_problem.h"

#include <c10/core/GradMode.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "attnprof/interrupt.h"
#include "attnprof/variant.h"
#include "variants/fp8.h"

namespace attnprof {

at::ScalarType scalar_type(DType d) {
  switch (d) {
    case DType::BF16: return at::kBFloat16;
    case DType::FP16: return at::kHalf;
    case DType::FP32: return at::kFloat;
    case DType::FP8: return at::kFloat8_e4m3fn;
  }
  return at::kFloat;
}

at::Device torch_device(const Problem& p) { return at::Device(p.device); }

at::TensorOptions tensor_options(const Problem& p) {
  return at::TensorOptions().dtype(scalar_type(p.dtype)).device(torch_device(p));
}

Inputs random_inputs(const Problem& p) {
  if (p.dtype == DType::FP8) {
    // Drawn in bf16, then quantised here, outside every measured scope.
    TORCH_CHECK(p.pass == Pass::fwd && !p.paged() && !p.varlen(),
                "fp8 inputs are drawn for a dense forward only (the CLI refuses the rest)");
    const auto opt = tensor_options(p).dtype(at::kBFloat16);
    const at::Tensor q = at::randn({p.batch, p.heads_q, p.seq_q, p.head_dim}, opt);
    const at::Tensor k = at::randn({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, opt);
    const at::Tensor v = at::randn({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, opt);
    // Drawn after q, k and v, so a rotated run quantises the same draws.
    return fp8_inputs(q, k, v, p.fp8_rotated ? random_orthogonal(p.head_dim, torch_device(p)) : at::Tensor());
  }
  const auto opt = tensor_options(p);
  Inputs in{at::randn({p.batch, p.heads_q, p.seq_q, p.head_dim}, opt),
            at::randn({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, opt),
            at::randn({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, opt),
            {}};
  if (p.pass != Pass::fwd) {
    in.grad_out = at::randn({p.batch, p.heads_q, p.seq_q, p.head_dim}, opt);
    in.q.requires_grad_(true), in.k.requires_grad_(true), in.v.requires_grad_(true);
  }
  if (p.paged()) in.paged = paged_copy(in.k, in.v, p.page_size);
  if (p.varlen()) {
    c10::NoGradGuard no_grad;
    for (int64_t b = 0; b < p.batch; ++b) {
      in.q[b].narrow(1, p.q_len(b), p.seq_q - p.q_len(b)).zero_();
      in.k[b].narrow(1, p.kv_len(b), p.seq_kv - p.kv_len(b)).zero_();
      in.v[b].narrow(1, p.kv_len(b), p.seq_kv - p.kv_len(b)).zero_();
    }
    in.packed = pack_batch(p, in.q, in.k, in.v);
  }
  return in;
}

namespace {
// Rows [0, len(b)) of t[b] ([B, H, S, D]) for every sequence b, as [sum len, H, D].
at::Tensor pack_rows(const at::Tensor& t, const Problem& p, int64_t (Problem::*len)(int64_t) const) {
  std::vector<at::Tensor> parts;
  parts.reserve(size_t(p.batch));
  for (int64_t b = 0; b < p.batch; ++b) parts.push_back(t[b].narrow(1, 0, (p.*len)(b)).transpose(0, 1));
  return at::cat(parts, 0).contiguous();
}

at::Tensor cumulative(const Problem& p, int64_t (Problem::*len)(int64_t) const, const at::Device& device) {
  std::vector<int32_t> cu(size_t(p.batch) + 1, 0);
  for (int64_t b = 0; b < p.batch; ++b) cu[size_t(b) + 1] = cu[size_t(b)] + int32_t((p.*len)(b));
  return at::tensor(cu, at::TensorOptions().dtype(at::kInt)).to(device);
}
}  // namespace

PackedBatch pack_batch(const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  c10::NoGradGuard no_grad;
  PackedBatch out;
  out.q = pack_rows(q.detach(), p, &Problem::q_len);
  out.k = pack_rows(k.detach(), p, &Problem::kv_len);
  out.v = pack_rows(v.detach(), p, &Problem::kv_len);
  out.cu_seqlens_q = cumulative(p, &Problem::q_len, q.device());
  out.cu_seqlens_k = cumulative(p, &Problem::kv_len, q.device());
  out.max_q = p.seq_q, out.max_kv = p.seq_kv;  // the padded sizes: the longest sequence's
  return out;
}

Sequence sequence_of(const Problem& p, const Inputs& in, int64_t b) {
  Sequence seq{p.sequence(b), {}};
  seq.inputs.q = in.q.narrow(0, b, 1).narrow(2, 0, seq.problem.seq_q);
  seq.inputs.k = in.k.narrow(0, b, 1).narrow(2, 0, seq.problem.seq_kv);
  seq.inputs.v = in.v.narrow(0, b, 1).narrow(2, 0, seq.problem.seq_kv);
  return seq;
}

at::Tensor real_rows(const Problem& p, const at::Tensor& out) {
  if (!p.varlen() || out.dim() != 4) return out;
  return pack_rows(out, p, &Problem::q_len);
}

PagedKv paged_copy(const at::Tensor& k, const at::Tensor& v, int64_t page_size) {
  TORCH_CHECK(page_size > 0, "paged_copy: page_size must be positive, got ", page_size);
  const int64_t batch = k.size(0), heads = k.size(1), seq = k.size(2), dim = k.size(3);
  const int64_t per_seq = (seq + page_size - 1) / page_size;
  const int64_t pages = batch * per_seq;
  PagedKv out;
  out.seq_kv = seq;
  // Page slot s of sequence b is pool page table[b][s], a random permutation.
  out.block_table = at::randperm(pages, k.options().dtype(at::kLong)).view({batch, per_seq});
  const auto to_pages = [&](const at::Tensor& t) {
    at::Tensor padded = at::full({batch, heads, per_seq * page_size, dim}, NAN, t.options());
    padded.narrow(2, 0, seq).copy_(t.detach());
    // [B, H, per_seq, page, D] -> [B * per_seq, H, page, D], page slots in sequence order.
    const at::Tensor slots = padded.view({batch, heads, per_seq, page_size, dim})
                                 .permute({0, 2, 1, 3, 4})
                                 .reshape({pages, heads, page_size, dim});
    // Not empty_like: with one token per page `slots` may be a strided view, whose strides it would keep.
    at::Tensor pool = at::empty(slots.sizes(), slots.options());
    pool.index_copy_(0, out.block_table.flatten(), slots);
    return pool;
  };
  out.k_cache = to_pages(k);
  out.v_cache = to_pages(v);
  out.block_table = out.block_table.to(at::kInt);
  return out;
}

at::Tensor gather_pages(const at::Tensor& cache, const at::Tensor& block_table, int64_t seq_kv) {
  const int64_t batch = block_table.size(0);
  const int64_t heads = cache.size(1), page = cache.size(2), dim = cache.size(3);
  // The index kernel ([B, pages per sequence, H, page, D]), then one copy into
  // [B, H, seq_kv, D]: the whole pages, and a second, short one for the part
  // of a last page that holds keys.
  const at::Tensor pages = cache.index({block_table});  // int32 indices, as the table is kept
  at::Tensor out = at::empty({batch, heads, seq_kv, dim}, cache.options());
  const int64_t whole = seq_kv / page, rest = seq_kv % page;
  if (whole > 0)
    out.narrow(2, 0, whole * page)
        .view({batch, heads, whole, page, dim})
        .copy_(pages.narrow(1, 0, whole).permute({0, 2, 1, 3, 4}));
  if (rest > 0) out.narrow(2, whole * page, rest).copy_(pages.select(1, whole).narrow(2, 0, rest));
  return out;
}

namespace {
// hidden_keys_mask of a variable-length batch: [B, 1, Sq, Skv], from each
// sequence's lengths (its queries at rows [0, q_len), keys at [0, kv_len)).
at::Tensor varlen_hidden_keys(const Problem& p, const at::TensorOptions& options) {
  const auto ints = at::TensorOptions().dtype(at::kLong).device(options.device());
  std::vector<int64_t> ql, kl;
  for (int64_t b = 0; b < p.batch; ++b) ql.push_back(p.q_len(b)), kl.push_back(p.kv_len(b));
  const at::Tensor q_len = at::tensor(ql, at::kLong).to(options.device()).view({p.batch, 1, 1, 1});
  const at::Tensor kv_len = at::tensor(kl, at::kLong).to(options.device()).view({p.batch, 1, 1, 1});
  const at::Tensor i = at::arange(p.seq_q, ints).view({1, 1, p.seq_q, 1});
  const at::Tensor j = at::arange(p.seq_kv, ints).view({1, 1, 1, p.seq_kv});
  at::Tensor hidden = j.ge(kv_len);  // the padded keys, for every row
  const Mask m = p.effective_mask();
  if (m != Mask::none) {
    // Query i of a sequence sees up to key i + offset (bottom-right: its own kv_len - q_len).
    const at::Tensor last = m == Mask::causal_bottom_right ? i + (kv_len - q_len) : i;
    at::Tensor masked = j.gt(last);
    if (p.windowed()) masked = masked.logical_or(j.le(last - p.window));
    hidden = hidden.logical_or(masked.logical_and(i.lt(q_len)));  // padded rows: every real key
  }
  return hidden.expand(hidden_keys_mask_sizes(p)).contiguous();
}
}  // namespace

std::vector<int64_t> hidden_keys_mask_sizes(const Problem& p) {
  if (p.varlen()) return {p.batch, 1, p.seq_q, p.seq_kv};
  return {p.seq_q, p.seq_kv};
}

at::Tensor hidden_keys_of_rows(const Problem& p, const at::Tensor& rows) {
  const Mask m = p.effective_mask();
  if (m == Mask::none) return {};
  // Row i's last visible key is i + offset; a window hides the keys up to i + offset - window.
  const int64_t offset = m == Mask::causal_bottom_right ? p.seq_kv - p.seq_q : 0;
  const at::Tensor last = (rows.to(at::kLong) + offset).view({-1, 1});
  const at::Tensor j = at::arange(p.seq_kv, last.options()).view({1, -1});
  at::Tensor hidden = j.gt(last);
  if (p.windowed()) hidden.logical_or_(j.le(last - p.window));
  return hidden;
}

at::Tensor hidden_keys_mask(const Problem& p, const at::TensorOptions& options) {
  if (p.varlen()) return varlen_hidden_keys(p, options);
  if (p.effective_mask() == Mask::none) return {};
  return hidden_keys_of_rows(p, at::arange(p.seq_q, options.dtype(at::kLong)));
}

at::Tensor expand_kv_heads(const at::Tensor& kv, int64_t heads_q) {
  const int64_t group = heads_q / kv.size(1);
  return group == 1 ? kv : kv.repeat_interleave(group, /*dim=*/1);
}

namespace {
// The float64 reference of query rows `rows` (int64 [R]) of a dense problem,
// [B, Hq, R, D]: fp8 inputs dequantised by their descale factors; one KV head
// and a slice of the batch at a time, so no more than `chunk` elements of K
// or V are in float64 at once and nothing is repeated to the query heads (a
// decode problem's cache is the large part). A stop signal ends it between
// slices.
at::Tensor reference_of_rows(const Problem& p, const Inputs& in, const at::Tensor& rows, int64_t chunk) {
  const int64_t group = p.group_size(), n = rows.numel();
  const int64_t batch_chunk = std::clamp<int64_t>(chunk / std::max<int64_t>(1, p.seq_kv * p.head_dim), 1, p.batch);
  const at::Tensor mask = hidden_keys_of_rows(p, rows);  // [R, Skv], or undefined
  const at::Tensor q_rows = in.q.detach().index_select(2, rows.to(in.q.device()));
  at::Tensor out = at::empty({p.batch, p.heads_q, n, p.head_dim}, q_rows.options().dtype(at::kDouble));
  for (int64_t b0 = 0; b0 < p.batch; b0 += batch_chunk) {
    const int64_t bn = std::min(batch_chunk, p.batch - b0);
    for (int64_t h = 0; h < p.heads_kv; ++h) {
      throw_if_interrupted();
      // Heads [h0, h0 + hn) of batch entries [b0, b0 + bn) in float64.
      const auto slice = [&](const at::Tensor& t, const at::Tensor& descale, int64_t h0, int64_t hn) {
        at::Tensor d = t.detach().narrow(0, b0, bn).narrow(1, h0, hn).to(at::kDouble);
        if (descale.defined())
          d = d * descale.narrow(0, b0, bn).narrow(1, h0, hn).to(at::kDouble).view({bn, hn, 1, 1});
        return d;
      };
      // The group's rows as one matrix per batch entry against its KV head's
      // keys: bmm, not a matmul broadcasting K over the group (which copies it G times).
      const at::Tensor q = slice(q_rows, in.fp8.q_descale, h * group, group).reshape({bn, group * n, p.head_dim});
      const at::Tensor k = slice(in.k, in.fp8.k_descale, h, 1).squeeze(1);  // [bn, Skv, D]
      const at::Tensor v = slice(in.v, in.fp8.v_descale, h, 1).squeeze(1);
      at::Tensor scores = (at::bmm(q, k.transpose(1, 2)) * p.softmax_scale()).view({bn, group, n, p.seq_kv});
      at::Tensor probs;
      if (mask.defined()) {
        scores.masked_fill_(mask, -std::numeric_limits<double>::infinity());
        // A row that sees no key is all -inf: softmax gives NaN there; attention
        // over nothing is defined as zeros (what the fused kernels return).
        probs = at::softmax(scores, -1).nan_to_num(0.0);
      } else {
        probs = at::softmax(scores, -1);
      }
      out.narrow(0, b0, bn).narrow(1, h * group, group)
          .copy_(at::bmm(probs.reshape({bn, group * n, p.seq_kv}), v).view({bn, group, n, p.head_dim}));
    }
  }
  return out;
}
}  // namespace

at::Tensor reference_attention(const Problem& p, const Inputs& in) {
  if (p.varlen()) {
    // Each sequence on its own, unpadded, as a batch of one of its lengths:
    // nothing of the padded layout or its mask reaches the reference.
    at::Tensor out = at::zeros(in.q.sizes(), in.q.options().dtype(at::kDouble));
    for (int64_t b = 0; b < p.batch; ++b) {
      const Sequence seq = sequence_of(p, in, b);
      out.narrow(0, b, 1).narrow(2, 0, seq.problem.seq_q).copy_(reference_attention(seq.problem, seq.inputs));
    }
    return out;
  }
  return reference_of_rows(p, in, at::arange(p.seq_q, in.q.options().dtype(at::kLong).device(in.q.device())),
                           std::numeric_limits<int64_t>::max());
}

namespace {
struct SquaredNorms {
  double diff = 0.0, ref = 0.0;
  int64_t rows = 0;
};

// Up to `budget` score elements of a dense problem's reference on `in` (and
// K and V in float64 `budget` elements at a time): evenly spaced query rows,
// the last (which sees every key) first. `got(rows)` gives the rows compared
// with it, [B, Hq, R, D].
template <class Got>
void add_sampled_rows(const Problem& p, const Inputs& in, Got&& got, int64_t budget, SquaredNorms& acc) {
  const int64_t per_row = std::max<int64_t>(1, p.batch * p.heads_q * p.seq_kv);
  const int64_t n = std::clamp<int64_t>(budget / per_row, 1, p.seq_q);
  const auto doubles = at::TensorOptions().dtype(at::kDouble).device(in.q.device());
  const at::Tensor rows = n == p.seq_q ? at::arange(p.seq_q, doubles.dtype(at::kLong))
                                       : at::linspace(double(p.seq_q - 1), 0.0, n, doubles).round().to(at::kLong);
  const at::Tensor ref = reference_of_rows(p, in, rows, budget);
  const at::Tensor g = got(rows).to(ref.device()).to(at::kDouble);
  acc.diff += (g - ref).square().sum().item<double>();
  acc.ref += ref.square().sum().item<double>();
  acc.rows += n * p.batch;
}

Accuracy error_of(const Problem& p, const SquaredNorms& acc) {
  Accuracy e;
  e.rows = acc.rows;
  e.total_rows = p.total_q();
  e.rel_error = acc.ref > 0.0 ? std::sqrt(acc.diff / acc.ref) : std::sqrt(acc.diff);
  return e;
}
}  // namespace

Accuracy sampled_output_error(const Problem& p, const Inputs& in, const at::Tensor& out, int64_t budget) {
  SquaredNorms acc;
  if (!p.varlen()) {
    const at::Tensor o = out.detach();
    add_sampled_rows(p, in, [&](const at::Tensor& rows) { return o.index_select(2, rows.to(o.device())); }, budget, acc);
    return error_of(p, acc);
  }
  // Sequence by sequence, each with its share of the budget, from the packed rows.
  const at::Tensor packed = real_rows(p, out.detach());
  int64_t first = 0;
  for (int64_t b = 0; b < p.batch; ++b) {
    const Sequence seq = sequence_of(p, in, b);  // fp8 inputs are dense (random_inputs)
    const at::Tensor o = packed.narrow(0, first, seq.problem.seq_q).permute({1, 0, 2}).unsqueeze(0);  // [1, Hq, n, D]
    add_sampled_rows(seq.problem, seq.inputs, [&](const at::Tensor& rows) { return o.index_select(2, rows.to(o.device())); },
                     std::max<int64_t>(1, budget / p.batch), acc);
    first += seq.problem.seq_q;
  }
  return error_of(p, acc);
}

double sampled_quantisation_error(const Problem& p, const Inputs& in, int64_t budget) {
  TORCH_CHECK(in.fp8.defined() && !p.varlen(), "sampled_quantisation_error: dense fp8 inputs only");
  Inputs original;
  original.q = in.fp8.q_original, original.k = in.fp8.k_original, original.v = in.fp8.v_original;
  SquaredNorms acc;
  add_sampled_rows(p, original, [&](const at::Tensor& rows) { return reference_of_rows(p, in, rows, budget); }, budget,
                   acc);
  return error_of(p, acc).rel_error;
}

double relative_frobenius_error(const at::Tensor& out, const at::Tensor& ref) {
  const at::Tensor o = out.detach().to(at::kDouble), r = ref.detach().to(at::kDouble).to(o.device());
  return ((o - r).norm() / r.norm()).item<double>();
}

at::Tensor Variant::forward_paged(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                                  const at::Tensor& block_table, int64_t seq_kv) {
  return forward(q, gather_pages(k_cache, block_table, seq_kv), gather_pages(v_cache, block_table, seq_kv));
}

at::Tensor Variant::forward_varlen(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                   const PackedBatch& packed) {
  (void)packed;
  return forward(q, k, v);
}

at::Tensor Variant::forward_fp8(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Fp8Scales& s) {
  (void)q, (void)k, (void)v, (void)s;
  TORCH_CHECK(false, name(), " has no fp8 path (its supports() refuses fp8 problems)");
}

at::Tensor forward_of(Variant& variant, const Problem& p, const Inputs& in) {
  if (p.dtype == DType::FP8) return variant.forward_fp8(in.q, in.k, in.v, in.fp8);
  if (p.varlen()) return variant.forward_varlen(in.q, in.k, in.v, in.packed);
  if (!p.paged()) return variant.forward(in.q, in.k, in.v);
  const PagedKv& kv = in.paged;
  return variant.forward_paged(in.q, kv.k_cache, kv.v_cache, kv.block_table, kv.seq_kv);
}

std::string first_line(const std::string& message) { return message.substr(0, message.find('\n')); }

}  // namespace attnprof
