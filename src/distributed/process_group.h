// A rank's membership of its process group, through LibTorch's c10d: a
// TCPStore rendezvous at MASTER_ADDR:MASTER_PORT (rank 0 serves it, unless
// torchrun's agent already does), then ProcessGroupNCCL for CUDA tensors or
// ProcessGroupGloo for CPU tensors. The store also carries the small messages
// ranks agree through (which variants run, each rank's figures for rank 0).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "attnprof/problem.h"
#include "distributed/rank_env.h"
#include "distributed/ring_attention.h"

namespace attnprof::ring {

// Multicast (NVLS) buys point-to-point rings nothing and can take a shared
// host's GPUs out of service: off in every rank, launched or joined.
void disable_nvlink_multicast();

class ProcessGroup {
 public:
  // `device`: "cuda:N" (NCCL) or "cpu" (gloo). `store_timeout` bounds every
  // wait on the store (rank 0 may run a single-GPU baseline meanwhile);
  // `op_timeout` every collective and point-to-point operation. Throws
  // std::runtime_error with a one-line reason.
  static std::unique_ptr<ProcessGroup> join(const RankEnv& env, const std::string& device,
                                            std::chrono::milliseconds store_timeout,
                                            std::chrono::milliseconds op_timeout);
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const;
  int world_size() const;
  const RankEnv& env() const;
  const std::string& device() const;
  std::string backend_name() const;  // "nccl" or "gloo"

  // Send to rank+1, receive from rank-1: NCCL sends and receives of a step in
  // one group (ncclGroupStart/End through c10d coalescing, as
  // torch.distributed.batch_isend_irecv), which a 2-rank ring needs to not
  // deadlock; gloo's are asynchronous on their own.
  std::unique_ptr<Exchange> ring_exchange();
  // Every rank's `mine`, by rank, through the store. `key` must be the same on
  // every rank and used once.
  std::vector<std::string> all_gather_strings(const std::string& key, const std::string& mine);
  // Every rank's `t` (one shape on all ranks), by rank, through the backend.
  std::vector<at::Tensor> all_gather(const at::Tensor& t);
  // torch.profiler's "distributedInfo" trace metadata (what HTA reads rank and
  // world size from): backend, rank, world_size, pg_count, pg_config, nccl_version.
  std::string distributed_info_json() const;
  // The end of a rank's run: every rank says it is done; rank 0, which serves
  // the store, returns only once all have, so no rank finds the store gone.
  void leave();

 private:
  struct Impl;
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

// The group of this rank process; nullptr in a single-process run. Set by the
// CLI's rank mode, read by the multi-GPU variants.
ProcessGroup* current_group();
void set_current_group(std::unique_ptr<ProcessGroup> g);  // nullptr: shuts the communicators down

// "" when this build can run a ring on CUDA (NCCL) or CPU (gloo), else why not.
std::string backend_unavailable(bool cuda);
// Ring checks that do not depend on the inner kernel: one sequence (seq_q ==
// seq_kv), the forward pass, at least 2 ranks, a backend, and a sequence that
// shards evenly. "" when they pass.
std::string ring_refusal(const Problem& p, int world);

}  // namespace attnprof::ring
