#include "variants/torch_problem.h"

#include <limits>

#include "attnprof/variant.h"

namespace attnprof {

at::ScalarType scalar_type(DType d) {
  switch (d) {
    case DType::BF16: return at::kBFloat16;
    case DType::FP16: return at::kHalf;
    case DType::FP32: return at::kFloat;
  }
  return at::kFloat;
}

at::Device torch_device(const Problem& p) { return at::Device(p.device); }

at::TensorOptions tensor_options(const Problem& p) {
  return at::TensorOptions().dtype(scalar_type(p.dtype)).device(torch_device(p));
}

Inputs random_inputs(const Problem& p) {
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
  return in;
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

at::Tensor hidden_keys_mask(const Problem& p, const at::TensorOptions& options) {
  const Mask m = p.effective_mask();
  if (m == Mask::none) return {};
  // triu(d) keeps j >= i + d: hidden are the keys past i + offset; tril(d)
  // keeps j <= i + d: a window hides the keys up to i + offset - window.
  const int64_t offset = m == Mask::causal_bottom_right ? p.seq_kv - p.seq_q : 0;
  const at::Tensor ones = at::ones({p.seq_q, p.seq_kv}, options.dtype(at::kBool));
  if (!p.windowed()) return ones.triu(offset + 1);
  return ones.triu(offset + 1).logical_or_(ones.tril(offset - p.window));
}

at::Tensor expand_kv_heads(const at::Tensor& kv, int64_t heads_q) {
  const int64_t group = heads_q / kv.size(1);
  return group == 1 ? kv : kv.repeat_interleave(group, /*dim=*/1);
}

at::Tensor reference_attention(const Problem& p, const Inputs& in) {
  const at::Tensor q = in.q.detach().to(at::kDouble);
  const at::Tensor k = expand_kv_heads(in.k.detach().to(at::kDouble), p.heads_q);
  const at::Tensor v = expand_kv_heads(in.v.detach().to(at::kDouble), p.heads_q);
  at::Tensor scores = at::matmul(q, k.transpose(-2, -1)) * p.softmax_scale();
  const at::Tensor mask = hidden_keys_mask(p, q.options());
  if (!mask.defined()) return at::matmul(at::softmax(scores, -1), v);
  scores.masked_fill_(mask, -std::numeric_limits<double>::infinity());
  // A row that sees no key is all -inf: softmax gives NaN there; attention over
  // nothing is defined as zeros (what the fused kernels return).
  const at::Tensor probs = at::softmax(scores, -1).nan_to_num(0.0);
  return at::matmul(probs, v);
}

double relative_frobenius_error(const at::Tensor& out, const at::Tensor& ref) {
  const at::Tensor o = out.detach().to(at::kDouble), r = ref.detach().to(at::kDouble).to(o.device());
  return ((o - r).norm() / r.norm()).item<double>();
}

at::Tensor Variant::forward_paged(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                                  const at::Tensor& block_table, int64_t seq_kv) {
  return forward(q, gather_pages(k_cache, block_table, seq_kv), gather_pages(v_cache, block_table, seq_kv));
}

at::Tensor forward_of(Variant& variant, const Problem& p, const Inputs& in) {
  if (!p.paged()) return variant.forward(in.q, in.k, in.v);
  const PagedKv& kv = in.paged;
  return variant.forward_paged(in.q, kv.k_cache, kv.v_cache, kv.block_table, kv.seq_kv);
}

std::string first_line(const std::string& message) { return message.substr(0, message.find('\n')); }

}  // namespace attnprof
