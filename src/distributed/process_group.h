// A rank's membership of its process group, through LibTorch's c10d: a
// TCPStore rendezvous at MASTER_ADDR:MASTER_PORT (rank 0 serves it, unless
// torchrun's agent already does), then ProcessGroupNCCL for CUDA tensors or
// ProcessGroupGloo for CPU tensors. The store also carries the small messages
// ranks agree through (which variants run, each rank's figures for rank 0).
#pragma once

#include <ATen/core/Tensor.h>

#include <chrono>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnprof/problem.h"
#include "distributed/rank_env.h"
#include "distributed/ring_attention.h"

namespace attnprof::ring {

// --rendezvous-timeout's default: c10d's own store timeout (Store::kDefaultTimeout).
inline constexpr int kDefaultRendezvousSeconds = 300;

// Multicast (NVLS) buys point-to-point rings nothing and can take a shared
// host's GPUs out of service: off in every rank, launched or joined.
void disable_nvlink_multicast();

// How long a rank waits, and for what.
struct JoinOptions {
  // Every rank at MASTER_ADDR:MASTER_PORT and the backend formed (--rendezvous-timeout).
  std::chrono::milliseconds rendezvous_timeout{kDefaultRendezvousSeconds * 1000};
  // Each later wait on the store (rank 0 may run a single-GPU baseline meanwhile).
  std::chrono::milliseconds store_timeout{std::chrono::minutes(60)};
  // Each collective and point-to-point operation.
  std::chrono::milliseconds op_timeout{std::chrono::minutes(10)};
  // Called once, from the calling thread, when the rendezvous has waited
  // `say_after` (or half the timeout, when sooner): what it waits for
  // ("rank 1 is waiting for rank 0 to serve the rendezvous at ...").
  std::function<void(const std::string&)> on_waiting;
  std::chrono::milliseconds say_after{std::chrono::seconds(10)};
};

// The ranks could not meet: an unresolvable MASTER_ADDR, a port in use, no
// rendezvous within the timeout, a peer that went away. One line.
class RendezvousError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class ProcessGroup {
 public:
  // `device`: "cuda:N" (NCCL) or "cpu" (gloo). Every wait of the rendezvous
  // checks for a stop signal (throws attnprof::Interrupted) and gives up after
  // `opt.rendezvous_timeout` (throws RendezvousError); c10d's own retry
  // warnings stay off stderr meanwhile. Throws std::runtime_error when the
  // backend cannot be created.
  static std::unique_ptr<ProcessGroup> join(const RankEnv& env, const std::string& device, const JoinOptions& opt);
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
  // every rank and used once. The wait for the others ends at a stop signal
  // (attnprof::Interrupted) and after the store timeout (std::runtime_error).
  std::vector<std::string> all_gather_strings(const std::string& key, const std::string& mine);
  // Every rank's `t` (one shape on all ranks), by rank, through the backend.
  std::vector<at::Tensor> all_gather(const at::Tensor& t);
  // Equal splits of `send`'s first dimension (one per rank, world of them):
  // `received`'s part s is what rank s sent to this rank (c10d alltoall_base).
  // Returns once `received` may be read: on CUDA the current stream waits for
  // it (ProcessGroupNCCL runs the collective on its own stream after an event
  // wait on the current one), on the CPU the host has waited.
  void all_to_all(const at::Tensor& send, at::Tensor& received);
  // torch.profiler's "distributedInfo" trace metadata (what HTA reads rank and
  // world size from): backend, rank, world_size, pg_count, pg_config, nccl_version.
  std::string distributed_info_json() const;
  // The end of a rank's run: every rank says it is done; rank 0, which serves
  // the store, returns only once all have, so no rank finds the store gone.
  void leave();

 private:
  struct Impl;
  explicit ProcessGroup(std::unique_ptr<Impl> impl);
  // Until every key is in the store; `what` names the wait in the timeout's message.
  void wait_for_keys(const std::vector<std::string>& keys, const std::string& what);
  std::unique_ptr<Impl> impl_;
};

// The group of this rank process; nullptr in a single-process run. Set by the
// CLI's rank mode, read by the multi-GPU variants.
ProcessGroup* current_group();
void set_current_group(std::unique_ptr<ProcessGroup> g);  // nullptr: shuts the communicators down

// "" when this build can run a ring on CUDA (NCCL) or CPU (gloo), else why not.
std::string backend_unavailable(bool cuda);
// What every context-parallel scheme ("ring", "Ulysses") needs, whatever it
// splits: one sequence (seq_q == seq_kv), the forward pass, at least 2 ranks
// and a backend. "" when they pass.
std::string context_parallel_refusal(const Problem& p, int world, const std::string& scheme);
// Ring checks that do not depend on the inner kernel: one sequence (seq_q ==
// seq_kv), the forward pass, at least 2 ranks, a backend, and a sequence that
// shards evenly. "" when they pass.
std::string ring_refusal(const Problem& p, int world);

}  // namespace attnprof::ring
