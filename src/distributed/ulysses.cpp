#include "distributed/ulysses.h"

#include <ATen/record_function.h>

#include <stdexcept>
#include <string>

#include "distributed/process_group.h"
#include "profiler/nvtx_range.h"

namespace attnprof::ulysses {

std::string refusal(const Problem& p, int world) {
  if (const std::string why = ring::context_parallel_refusal(p, world, "Ulysses"); !why.empty()) return why;
  if (p.seq_q % world != 0)
    return "seq " + std::to_string(p.seq_q) + " is not a multiple of the " + std::to_string(world) + " ranks";
  if (p.heads_q % world != 0)
    return "heads " + std::to_string(p.heads_q) + " is not a multiple of the " + std::to_string(world) +
           " ranks: Ulysses splits the query heads across ranks (the ring splits the sequence instead)";
  if (p.heads_kv % world != 0)
    return "heads_kv " + std::to_string(p.heads_kv) + " is not a multiple of the " + std::to_string(world) +
           " ranks: Ulysses splits the key/value heads across ranks, so it needs heads_kv >= ranks (the ring "
           "keeps every head on every rank)";
  return "";
}

namespace {

// [B, H, L, D] -> [W, B, H/W, L, D], destination rank first.
at::Tensor by_destination(const at::Tensor& t, int world) {
  const int64_t b = t.size(0), h = t.size(1), l = t.size(2), d = t.size(3);
  return t.reshape({b, world, h / world, l, d}).transpose(0, 1);
}

// [W (source), B, H, L, D] -> [B, H, W L, D]: the sources' sequence shards in order.
at::Tensor sequence_of(const at::Tensor& r) {
  const int64_t w = r.size(0), b = r.size(1), h = r.size(2), l = r.size(3), d = r.size(4);
  return r.permute({1, 2, 0, 3, 4}).reshape({b, h, w * l, d});
}

}  // namespace

at::Tensor pack_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int world) {
  return at::cat({by_destination(q, world), by_destination(k, world), by_destination(v, world)}, 2).contiguous();
}

HeadShard unpack_heads(const at::Tensor& received, int64_t heads_q, int64_t heads_kv, int world) {
  const int64_t hq = heads_q / world, hkv = heads_kv / world;
  if (received.dim() != 5 || received.size(0) != world || received.size(2) != hq + 2 * hkv)
    throw std::invalid_argument("ulysses::unpack_heads: received " + std::to_string(received.dim()) +
                                "-d tensor does not hold " + std::to_string(world) + " x (" + std::to_string(hq) +
                                " + 2 x " + std::to_string(hkv) + ") heads");
  return {sequence_of(received.narrow(2, 0, hq)), sequence_of(received.narrow(2, hq, hkv)),
          sequence_of(received.narrow(2, hq + hkv, hkv))};
}

at::Tensor pack_sequence(const at::Tensor& out, int world) {
  const int64_t b = out.size(0), h = out.size(1), s = out.size(2), d = out.size(3);
  return out.reshape({b, h, world, s / world, d}).permute({2, 0, 1, 3, 4}).contiguous();
}

at::Tensor unpack_sequence(const at::Tensor& received) {
  const int64_t w = received.size(0), b = received.size(1), h = received.size(2), l = received.size(3),
                d = received.size(4);
  return received.transpose(0, 1).reshape({b, w * h, l, d});
}

UlyssesAttention::UlyssesAttention(int world, int64_t heads_q, int64_t heads_kv, AllToAll all_to_all,
                                   ring::BlockAttention inner, bool causal, double scale)
    : world_(world),
      heads_q_(heads_q),
      heads_kv_(heads_kv),
      all_to_all_(std::move(all_to_all)),
      inner_(std::move(inner)),
      causal_(causal),
      scale_(scale) {
  if (world < 1 || heads_q % world != 0 || heads_kv % world != 0)
    throw std::invalid_argument("UlyssesAttention: heads " + std::to_string(heads_q) + "/" + std::to_string(heads_kv) +
                                " do not split over " + std::to_string(world) + " ranks");
}

at::Tensor UlyssesAttention::forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  HeadShard heads;
  {
    NvtxRange range("ulysses_a2a_qkv");
    RECORD_USER_SCOPE("ulysses_a2a_qkv");
    const at::Tensor send = pack_heads(q, k, v, world_);
    at::Tensor received = at::empty_like(send);
    all_to_all_(send, received);
    heads = unpack_heads(received, heads_q_, heads_kv_, world_);
  }
  at::Tensor out;
  {
    NvtxRange range("ulysses_attention");
    RECORD_USER_SCOPE("ulysses_attention");
    // The fused kernels read contiguous heads.
    out = inner_(heads.q.contiguous(), heads.k.contiguous(), heads.v.contiguous(), causal_, scale_).out;
  }
  NvtxRange range("ulysses_a2a_out");
  RECORD_USER_SCOPE("ulysses_a2a_out");
  const at::Tensor send = pack_sequence(out, world_);
  at::Tensor received = at::empty_like(send);
  all_to_all_(send, received);
  return unpack_sequence(received).to(q.scalar_type());
}

}  // namespace attnprof::ulysses
