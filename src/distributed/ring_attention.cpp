#include "distributed/ring_attention.h"

#include <ATen/record_function.h>

#include <limits>
#include <stdexcept>
#include <string>

#include "profiler/nvtx_range.h"

namespace attnprof::ring {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

at::Tensor rows_tensor(const std::vector<int64_t>& rows, const at::Device& device) {
  return at::tensor(rows, at::TensorOptions().dtype(at::kLong)).to(device);
}
}  // namespace

BlockResult math_block(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale) {
  const int64_t group = q.size(1) / k.size(1);
  const at::ScalarType acc = q.scalar_type() == at::kDouble ? at::kDouble : at::kFloat;
  const at::Tensor kf = (group == 1 ? k : k.repeat_interleave(group, 1)).to(acc);
  const at::Tensor vf = (group == 1 ? v : v.repeat_interleave(group, 1)).to(acc);
  at::Tensor scores = at::matmul(q.to(acc), kf.transpose(-2, -1)) * scale;
  if (causal) {
    // Bottom-right aligned, as the fused kernels: key j visible to query i iff j <= i + (Sk - Sq).
    const int64_t sq = q.size(2), sk = k.size(2);
    const at::Tensor hidden = at::ones({sq, sk}, q.options().dtype(at::kBool)).triu(sk - sq + 1);
    scores.masked_fill_(hidden, -kInf);
  }
  // Softmax kernels only, no at::exp or at::logsumexp: in torch 2.11 on the CPU a process's first call of the
  // elementwise exp (float or double; logsumexp uses it) returned about half its elements ~1e-4 off (3% of
  // processes with 2 intra-op threads, none after a warm-up); softmax and log_softmax: 0 of 250.
  // lse = s - log_softmax(s) at the row's max; a row that sees nothing (or an infinite score) keeps its max.
  const at::Tensor row_max = at::amax(scores, -1);
  const at::Tensor lse = at::where(row_max.isinf(), row_max, row_max - at::amax(at::log_softmax(scores, -1), -1));
  // NaN (0 / 0) for a row that sees nothing: zero output there.
  const at::Tensor probs = at::softmax(scores, -1).nan_to_num(0.0);
  return {at::matmul(probs, vf).to(q.scalar_type()), lse};
}

void merge_block(at::Tensor out, at::Tensor lse, const at::Tensor& block_out, const at::Tensor& block_lse) {
  const at::Tensor b_lse = block_lse.to(lse.scalar_type());
  const at::Tensor weight =
      at::sigmoid(at::nan_to_num(b_lse - lse, 0.0, kInf, -kInf)).unsqueeze(-1).to(out.scalar_type());
  out.lerp_(block_out.to(out.scalar_type()), weight);
  lse.copy_(at::logaddexp(lse, b_lse));
}

Shards cut_shards(const Layout& l, int rank, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  const at::Tensor rows = rows_tensor(l.global_rows(rank), q.device());
  Shards s;
  s.q = q.index_select(2, rows);
  s.kv = at::stack({k.index_select(2, rows), v.index_select(2, rows)});
  if (l.zigzag()) s.q_back = s.q.narrow(2, l.chunk_len(), l.chunk_len()).contiguous();
  return s;
}

at::Tensor unshard(const Layout& l, const std::vector<at::Tensor>& per_rank) {
  if (static_cast<int>(per_rank.size()) != l.world)
    throw std::invalid_argument("ring::unshard: " + std::to_string(per_rank.size()) + " shards for world " +
                                std::to_string(l.world));
  std::vector<int64_t> order;
  for (int r = 0; r < l.world; ++r) {
    const std::vector<int64_t> rows = l.global_rows(r);
    order.insert(order.end(), rows.begin(), rows.end());
  }
  const at::Tensor all = at::cat(per_rank, 2);
  return at::empty_like(all).index_copy_(2, rows_tensor(order, all.device()), all);
}

RingAttention::RingAttention(Layout layout, Exchange& exchange, BlockAttention inner, double scale)
    : layout_(layout), exchange_(exchange), inner_(std::move(inner)), scale_(scale) {
  if (exchange_.world() != layout_.world)
    throw std::invalid_argument("RingAttention: layout for " + std::to_string(layout_.world) + " ranks, transport for " +
                                std::to_string(exchange_.world()));
}

BlockResult RingAttention::block(int step, const at::Tensor& kv, const Shards& s, int64_t& first_row) const {
  const int rank = exchange_.rank();
  const int64_t c = layout_.chunk_len();
  const at::Tensor k = kv[0], v = kv[1];
  first_row = 0;
  switch (layout_.classify(rank, layout_.source_at_step(rank, step))) {
    case BlockKind::causal_diagonal: return inner_(s.q, k, v, /*causal=*/true, scale_);
    case BlockKind::full: return inner_(s.q, k, v, false, scale_);
    case BlockKind::all_q_front_kv:
      return inner_(s.q, k.narrow(2, 0, c).contiguous(), v.narrow(2, 0, c).contiguous(), false, scale_);
    case BlockKind::back_q_all_kv: first_row = c; return inner_(s.q_back, k, v, false, scale_);
  }
  throw std::logic_error("RingAttention: unknown block kind");
}

at::Tensor RingAttention::forward(const Shards& s) {
  const int world = layout_.world;
  at::Tensor held = s.kv, out, lse;
  for (int step = 0; step < world; ++step) {
    const std::string scope = "ring_step_" + std::to_string(step);
    NvtxRange range(scope.c_str());
    RECORD_USER_SCOPE(scope);
    std::function<void()> wait;
    at::Tensor& next = recv_[step % 2];
    if (step + 1 < world) {
      if (!next.defined() || next.sizes() != held.sizes() || next.scalar_type() != held.scalar_type() ||
          next.device() != held.device())
        next = at::empty_like(held);
      wait = exchange_.start(held, next, step);
    }
    int64_t first_row = 0;
    BlockResult b = block(step, held, s, first_row);
    if (step == 0) {  // the own shard: every local query sees at least itself
      out = b.out.to(at::kFloat);
      lse = b.lse.to(at::kFloat).contiguous();
    } else {
      const int64_t rows = b.out.size(2);
      merge_block(out.narrow(2, first_row, rows), lse.narrow(2, first_row, rows), b.out, b.lse);
    }
    if (wait) {
      wait();
      held = next;
    }
  }
  return out.to(s.q.scalar_type());
}

}  // namespace attnprof::ring
