// Ulysses attention (DeepSpeed-Ulysses; head-parallel context parallelism):
// each rank holds a contiguous shard of the sequence for every head; one
// all-to-all turns that into every position of 1/world of the heads, the
// inner attention runs on the whole sequence of those heads, and the inverse
// all-to-all gives each rank its sequence shard of every head back. Two
// collectives per forward against the ring's world - 1 point-to-point steps;
// the heads, not the sequence, must divide by the world (grouped-query heads
// included: rank r takes query heads [r Hq/W, (r+1) Hq/W) and the key/value
// heads they read, [r Hkv/W, (r+1) Hkv/W)).
//
// q, k and v travel in one message: per destination rank, its query heads,
// then its key heads, then its value heads.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>

#include "attnprof/problem.h"
#include "distributed/ring_attention.h"

namespace attnprof::ulysses {

// "" when `p` can run head-parallel over `world` ranks, else why not.
std::string refusal(const Problem& p, int world);

// The send buffer of a rank's sequence shards q [B, Hq, L, D], k and v
// [B, Hkv, L, D]: [W, B, (Hq + 2 Hkv) / W, L, D], destination rank first.
at::Tensor pack_heads(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, int world);
// What a rank received (sources in rank order, i.e. sequence order) as its
// heads' whole sequence: q [B, Hq/W, W L, D], k and v [B, Hkv/W, W L, D].
struct HeadShard {
  at::Tensor q, k, v;
};
HeadShard unpack_heads(const at::Tensor& received, int64_t heads_q, int64_t heads_kv, int world);
// The inverse pair for the output: out [B, Hq/W, W L, D] to [W, B, Hq/W, L, D]
// (destination = the rank holding that sequence shard), and the received
// [W (source = head group), B, Hq/W, L, D] to this rank's [B, Hq, L, D].
at::Tensor pack_sequence(const at::Tensor& out, int world);
at::Tensor unpack_sequence(const at::Tensor& received);

// The collective: `received` gets, at index s of its first dimension, what
// rank s sent at this rank's index. Returns once `received` may be read (on
// CUDA: the current stream waits for it).
using AllToAll = std::function<void(const at::Tensor& send, at::Tensor& received)>;

class UlyssesAttention {
 public:
  UlyssesAttention(int world, int64_t heads_q, int64_t heads_kv, AllToAll all_to_all, ring::BlockAttention inner,
                   bool causal, double scale);
  // This rank's output shard [B, Hq, L, D] in q's dtype, from its sequence
  // shards. The collectives are user scopes and NVTX ranges "ulysses_a2a_qkv"
  // and "ulysses_a2a_out", the attention "ulysses_attention".
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

 private:
  int world_;
  int64_t heads_q_, heads_kv_;
  AllToAll all_to_all_;
  ring::BlockAttention inner_;
  bool causal_;
  double scale_;
};

}  // namespace attnprof::ulysses
