#include "distributed/process_group.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <cstdlib>
#include <stdexcept>

#if defined(USE_C10D_NCCL) && defined(ATTNPROF_HAVE_NCCL)
#include <c10/cuda/CUDAFunctions.h>
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>
#define ATTNPROF_RING_NCCL 1
#endif
#if defined(USE_C10D_GLOO)
#include "distributed/gloo_backend.h"
#endif

#include "distributed/layout.h"
#include "variants/torch_problem.h"

namespace attnprof::ring {

void disable_nvlink_multicast() {
  ::setenv("NCCL_NVLS_ENABLE", "0", 1);
  ::setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
  ::setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
}

struct ProcessGroup::Impl {
  RankEnv env;
  std::string device;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
};

namespace {

bool is_loopback(const std::string& addr) { return addr == "127.0.0.1" || addr == "localhost" || addr == "::1"; }

class BackendExchange final : public Exchange {
 public:
  BackendExchange(c10::intrusive_ptr<c10d::Backend> b, bool coalesce)
      : b_(std::move(b)), coalesce_(coalesce) {}
  int rank() const override { return b_->getRank(); }
  int world() const override { return b_->getSize(); }
  std::function<void()> start(const at::Tensor& send, const at::Tensor& recv, int step) override {
    std::vector<at::Tensor> s{send}, r{recv};
    const int next = (rank() + 1) % world(), prev = (rank() + world() - 1) % world();
    if (coalesce_) {
      b_->startCoalescing();
      b_->send(s, next, step);
      b_->recv(r, prev, step);
      auto work = b_->endCoalescing();
      TORCH_CHECK(work, "ring exchange: ProcessGroupNCCL coalesced no operation (step ", step, ")");
      return [work] { work->wait(); };
    }
    auto ws = b_->send(s, next, step);
    auto wr = b_->recv(r, prev, step);
    return [ws, wr] {
      ws->wait();
      wr->wait();
    };
  }

 private:
  c10::intrusive_ptr<c10d::Backend> b_;
  bool coalesce_;
};

}  // namespace

std::string backend_unavailable(bool cuda) {
  if (cuda) {
#if defined(ATTNPROF_RING_NCCL)
    return "";
#else
    return "this build has no NCCL (LibTorch without USE_C10D_NCCL, or nccl.h not found at configure time)";
#endif
  }
#if defined(USE_C10D_GLOO)
  return "";
#else
  return "this LibTorch has no gloo backend for CPU tensors (USE_C10D_GLOO)";
#endif
}

std::string ring_refusal(const Problem& p, int world) {
  if (p.seq_q != p.seq_kv)
    return "ring attention shards one sequence: seq_q and seq_kv must be equal, got " + std::to_string(p.seq_q) +
           " and " + std::to_string(p.seq_kv);
  if (p.pass != Pass::fwd) return "forward only (the ring backward is not built yet); use --pass fwd";
  if (world < 2)
    return "needs at least 2 ranks, got " + std::to_string(world) +
           " (one rank is the inner attention on one GPU: run that variant instead)";
  if (const std::string why = backend_unavailable(p.on_cuda()); !why.empty()) return why;
  return sharding_problem(p.seq_q, world, p.causal());
}

ProcessGroup::ProcessGroup(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ProcessGroup::~ProcessGroup() {
  // An orderly shutdown of the communicators (ProcessGroupNCCL warns at exit otherwise).
  try {
    if (impl_ && impl_->backend) impl_->backend->shutdown();
  } catch (...) {
    // Leaving after another error: that one is reported.
  }
}

std::unique_ptr<ProcessGroup> ProcessGroup::join(const RankEnv& env, const std::string& device,
                                                 std::chrono::milliseconds store_timeout,
                                                 std::chrono::milliseconds op_timeout) {
  const bool cuda = device.rfind("cuda", 0) == 0;
  if (const std::string why = backend_unavailable(cuda); !why.empty()) throw std::runtime_error(why);
  disable_nvlink_multicast();
  auto impl = std::make_unique<Impl>();
  impl->env = env;
  impl->device = device;
  c10d::TCPStoreOptions so;
  so.port = env.master_port;
  so.isServer = env.rank == 0 && !env.agent_store;
  so.numWorkers = env.world_size;
  so.waitWorkers = !env.agent_store;  // the server returns once every rank has connected
  so.timeout = store_timeout;
  try {
    c10::intrusive_ptr<c10d::Store> store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
    if (env.agent_store)
      store = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(env.restart_count), store);
    impl->store = c10::make_intrusive<c10d::PrefixStore>("attnprof", store);
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + ": no rendezvous at " + env.master_addr + ":" +
                             std::to_string(env.master_port) + ": " + first_line(e.what()));
  }
  try {
    if (cuda) {
#if defined(ATTNPROF_RING_NCCL)
      c10::cuda::set_device(static_cast<c10::DeviceIndex>(at::Device(device).index()));
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = op_timeout;
      impl->backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(impl->store, env.rank, env.world_size, options);
#endif
    } else {
#if defined(USE_C10D_GLOO)
      impl->backend =
          make_gloo_backend(impl->store, env.rank, env.world_size, op_timeout, is_loopback(env.master_addr));
#endif
    }
  } catch (const std::exception& e) {
    throw std::runtime_error("rank " + std::to_string(env.rank) + ": cannot create the " +
                             (cuda ? "NCCL" : "gloo") + " process group: " + first_line(e.what()));
  }
  return std::unique_ptr<ProcessGroup>(new ProcessGroup(std::move(impl)));
}

int ProcessGroup::rank() const { return impl_->env.rank; }
int ProcessGroup::world_size() const { return impl_->env.world_size; }
const RankEnv& ProcessGroup::env() const { return impl_->env; }
const std::string& ProcessGroup::device() const { return impl_->device; }
std::string ProcessGroup::backend_name() const { return impl_->backend->getBackendName(); }

std::unique_ptr<Exchange> ProcessGroup::ring_exchange() {
  return std::make_unique<BackendExchange>(impl_->backend, backend_name() == "nccl");
}

std::vector<std::string> ProcessGroup::all_gather_strings(const std::string& key, const std::string& mine) {
  impl_->store->set(key + "/" + std::to_string(rank()), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> all;
  for (int r = 0; r < world_size(); ++r) {
    const std::vector<uint8_t> bytes = impl_->store->get(key + "/" + std::to_string(r));
    all.emplace_back(bytes.begin(), bytes.end());
  }
  return all;
}

std::vector<at::Tensor> ProcessGroup::all_gather(const at::Tensor& t) {
  std::vector<at::Tensor> in{t.contiguous()};
  std::vector<std::vector<at::Tensor>> out(1);
  for (int r = 0; r < world_size(); ++r) out[0].push_back(at::empty_like(in[0]));
  impl_->backend->allgather(out, in)->wait();
  return out[0];
}

std::string ProcessGroup::distributed_info_json() const {
  std::vector<int> ranks(world_size());
  for (int r = 0; r < world_size(); ++r) ranks[r] = r;
  const std::string backend = backend_name();
  nlohmann::json info = {
      {"backend", backend},
      {"rank", rank()},
      {"world_size", world_size()},
      {"pg_count", 1},
      {"pg_config",
       {{{"pg_name", "0"}, {"pg_desc", "default_pg"}, {"backend_config", (backend == "nccl" ? "cuda:" : "cpu:") + backend},
         {"pg_size", world_size()}, {"ranks", ranks}}}},
  };
#if defined(ATTNPROF_RING_NCCL)
  if (backend == "nccl") info["nccl_version"] = c10d::getNcclVersion();
#endif
  return info.dump();
}

void ProcessGroup::leave() {
  impl_->store->set("left/" + std::to_string(rank()), std::vector<uint8_t>{1});
  if (rank() != 0 || impl_->env.agent_store) return;
  std::vector<std::string> keys;
  for (int r = 0; r < world_size(); ++r) keys.push_back("left/" + std::to_string(r));
  impl_->store->wait(keys);
}

namespace {
std::unique_ptr<ProcessGroup>& group_slot() {
  static std::unique_ptr<ProcessGroup> g;
  return g;
}
}  // namespace

ProcessGroup* current_group() { return group_slot().get(); }
void set_current_group(std::unique_ptr<ProcessGroup> g) { group_slot() = std::move(g); }

}  // namespace attnprof::ring
