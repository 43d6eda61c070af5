// Ring attention forward (context parallelism): each rank holds one shard of
// the sequence (distributed/layout.h); key/value shards travel one hop round
// the ring per step while the rank computes attention of its queries against
// the shard it holds, and the partial outputs are merged through their
// log-sum-exp. After world steps every query has seen every key.
//
// Ordering on CUDA (NCCL): the exchange for step i+1 is issued on the compute
// stream's timeline before step i's block, and ProcessGroupNCCL runs it on its
// own stream after an event wait on the compute stream, so it overlaps the
// block; Work::wait() then makes the compute stream wait for the received
// shard before step i+1 reads it (no host synchronisation anywhere). Two
// receive buffers alternate: the one a step receives into was last read by the
// block two steps before, which the NCCL stream has already waited for.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <memory>
#include <vector>

#include "distributed/layout.h"

namespace attnprof::ring {

// One block of attention: the output [B, Hq, Sq, D] in q's dtype, and the
// log-sum-exp of each query's scaled scores [B, Hq, Sq], fp32, natural log.
struct BlockResult {
  at::Tensor out, lse;
};
using BlockAttention = std::function<BlockResult(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                                 bool causal, double scale)>;

// The textbook formula in fp32 (fp64 for fp64 inputs): scores, log-sum-exp,
// probabilities, output. The inner of the CPU tests, where the fused kernels
// do not run.
BlockResult math_block(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale);

// Folds a block's attention over some keys into the running (out, lse) over
// other keys, in place; out and lse may be views (rows of the accumulators).
// The merged softmax weighs the block by e^lse_b / (e^lse + e^lse_b) =
// sigmoid(lse_b - lse): no exponential of a large number is ever formed. A
// query that saw no key on either side (both -inf) keeps a zero output.
void merge_block(at::Tensor out, at::Tensor lse, const at::Tensor& block_out, const at::Tensor& block_lse);

// This rank's part of one input set, cut once (outside the measured forward).
struct Shards {
  at::Tensor q;       // [B, Hq, L, D], L = seq / world, local order, contiguous
  at::Tensor q_back;  // zigzag: local rows [L/2, L), contiguous (the second chunk's queries)
  at::Tensor kv;      // [2, B, Hkv, L, D]: k then v, one message per ring step
};
Shards cut_shards(const Layout& l, int rank, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);
// The inverse over all ranks: per-rank tensors (rank order, sequence on dim 2) to global order.
at::Tensor unshard(const Layout& l, const std::vector<at::Tensor>& per_rank);

// Point-to-point transport of one ring step: send to rank+1, receive from rank-1.
class Exchange {
 public:
  virtual ~Exchange() = default;
  virtual int rank() const = 0;
  virtual int world() const = 0;
  // Starts the transfer; the returned function waits for it (on CUDA: makes the
  // current stream wait, without blocking the host).
  virtual std::function<void()> start(const at::Tensor& send, const at::Tensor& recv, int step) = 0;
};

class RingAttention {
 public:
  RingAttention(Layout layout, Exchange& exchange, BlockAttention inner, double scale);
  // This rank's output shard [B, Hq, L, D] in q's dtype, local order. Each
  // step is a user scope and NVTX range "ring_step_<i>".
  at::Tensor forward(const Shards& s);

 private:
  BlockResult block(int step, const at::Tensor& kv, const Shards& s, int64_t& first_row) const;

  Layout layout_;
  Exchange& exchange_;
  BlockAttention inner_;
  double scale_;
  at::Tensor recv_[2];  // alternating receive buffers, kept across forwards
};

}  // namespace attnprof::ring
