#include "distributed/process_group.h"

#include <ATen/ATen.h>
#include <nlohmann/json.hpp>
#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <stdexcept>
#include <thread>

#include "attnprof/interrupt.h"

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

std::string context_parallel_refusal(const Problem& p, int world, const std::string& scheme) {
  if (p.seq_q != p.seq_kv)
    return scheme + " attention shards one sequence: seq_q and seq_kv must be equal, got " + std::to_string(p.seq_q) +
           " and " + std::to_string(p.seq_kv);
  if (p.pass != Pass::fwd) return "forward only (the " + scheme + " backward is not built yet); use --pass fwd";
  if (p.windowed())
    return "no sliding window: the " + scheme + " blocks mask causally only (window " + std::to_string(p.window) +
           " of " + std::to_string(p.seq_kv) + " keys)";
  if (p.paged())
    return "no paged KV cache: the " + scheme + " blocks shard contiguous K/V (use --kv-layout contiguous)";
  if (p.varlen())
    return "no variable-length batch: the " + scheme + " blocks shard sequences of one length (drop --seqlens)";
  if (world < 2)
    return "needs at least 2 ranks, got " + std::to_string(world) +
           " (one rank is the inner attention on one GPU: run that variant instead)";
  return backend_unavailable(p.on_cuda());
}

std::string ring_refusal(const Problem& p, int world) {
  if (const std::string why = context_parallel_refusal(p, world, "ring"); !why.empty()) return why;
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

namespace {

using Clock = std::chrono::steady_clock;

// What a rendezvous is doing, for the line that says what it waits for.
enum class Phase : int { resolving, connecting, handshake, gathering, backend };

// Shared by the caller and the thread that does the blocking work: the caller
// may leave (a signal, the timeout) while c10d still blocks in that thread.
struct JoinState {
  std::mutex m;
  std::condition_variable cv;
  bool done = false;
  std::exception_ptr error;
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::Backend> backend;
  std::atomic<int> phase{int(Phase::resolving)};
  std::atomic<int> joined{0};
  std::atomic<int> last_errno{0};
  std::atomic<bool> cancelled{false};
};

std::string where(const RankEnv& env) { return env.master_addr + ":" + std::to_string(env.master_port); }

// A socket of `family` listening on `port` of every address; -1 with errno set.
int bind_and_listen(int family, uint16_t port) {
  const int fd = ::socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -1;
  const int on = 1, off = 0;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  sockaddr_storage addr{};
  socklen_t len = 0;
  if (family == AF_INET6) {
    ::setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof off);  // IPv4 clients too
    auto* a = reinterpret_cast<sockaddr_in6*>(&addr);
    a->sin6_family = AF_INET6, a->sin6_addr = in6addr_any, a->sin6_port = htons(port);
    len = sizeof *a;
  } else {
    auto* a = reinterpret_cast<sockaddr_in*>(&addr);
    a->sin_family = AF_INET, a->sin_addr.s_addr = htonl(INADDR_ANY), a->sin_port = htons(port);
    len = sizeof *a;
  }
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || ::listen(fd, 1024) != 0) {
    const int err = errno;
    ::close(fd);
    errno = err;
    return -1;
  }
  return fd;
}

// Rank 0's listening socket on MASTER_PORT, for its store to take over
// (TCPStoreOptions::masterListenFd): a port in use is one clear error here
// rather than c10d's retries.
int listen_on(uint16_t port, const std::string& who) {
  int fd = bind_and_listen(AF_INET6, port);
  if (fd < 0 && (errno == EAFNOSUPPORT || errno == EADDRNOTAVAIL)) fd = bind_and_listen(AF_INET, port);
  if (fd >= 0) return fd;
  throw RendezvousError(who + ": cannot serve the rendezvous on port " + std::to_string(port) + " (MASTER_PORT): " +
                        (errno == EADDRINUSE ? std::string("the port is in use by another process; choose a free one")
                                             : std::string(std::strerror(errno))));
}

// One non-blocking connection attempt to each address, 200 ms each: whether
// something accepts connections at MASTER_ADDR:MASTER_PORT yet.
bool reachable(const addrinfo* addrs, JoinState& st) {
  for (const addrinfo* a = addrs; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) continue;
    int err = ::connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, 200) == 1) {
        socklen_t len = sizeof err;
        ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      } else {
        err = ETIMEDOUT;
      }
    }
    ::close(fd);
    if (err == 0) return true;
    st.last_errno = err;
  }
  return false;
}

// The blocking part of ProcessGroup::join, on its own thread.
void rendezvous(const std::shared_ptr<JoinState>& st, const RankEnv& env, const std::string& device,
                const JoinOptions& opt, Clock::time_point deadline) {
  const std::string who = "rank " + std::to_string(env.rank);
  const bool cuda = device.rfind("cuda", 0) == 0;
  const bool server = env.rank == 0 && !env.agent_store;
  auto left = [&] {
    return std::max(std::chrono::milliseconds(100),
                    std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()));
  };
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* addrs = nullptr;
  const std::string port = std::to_string(env.master_port);
  if (const int rc = ::getaddrinfo(env.master_addr.c_str(), port.c_str(), &hints, &addrs); rc != 0)
    throw RendezvousError(who + ": cannot resolve MASTER_ADDR '" + env.master_addr + "': " +
                          (rc == EAI_SYSTEM ? std::strerror(errno) : ::gai_strerror(rc)));
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> hold(addrs, &::freeaddrinfo);
  const int listen_fd = server ? listen_on(env.master_port, who) : -1;
  st->phase = int(Phase::connecting);
  while (!reachable(addrs, *st)) {
    if (st->cancelled) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  st->phase = int(Phase::handshake);
  c10d::TCPStoreOptions so;
  so.port = env.master_port;
  so.isServer = server;
  so.waitWorkers = false;  // the ranks count themselves in below, where a wait can be given up
  // Past the caller's deadline, so the caller's timeout is the one that speaks.
  constexpr std::chrono::seconds kPastDeadline{5};
  so.timeout = left() + kPastDeadline;
  if (server) so.masterListenFd = listen_fd;
  c10::intrusive_ptr<c10d::Store> store;
  try {
    store = c10::make_intrusive<c10d::TCPStore>(env.master_addr, so);
    if (env.agent_store)
      store = c10::make_intrusive<c10d::PrefixStore>("/worker/attempt_" + std::to_string(env.restart_count), store);
    store = c10::make_intrusive<c10d::PrefixStore>("attnprof", store);
  } catch (const std::exception& e) {
    throw RendezvousError(who + ": no rendezvous at " + where(env) + ": " + first_line(e.what()));
  }
  st->phase = int(Phase::gathering);
  try {
    int64_t n = store->add("rendezvous/joined", 1);
    while (n < env.world_size) {
      st->joined = int(n);
      if (st->cancelled) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      n = store->add("rendezvous/joined", 0);
    }
    st->joined = int(n);
  } catch (const std::exception& e) {
    throw RendezvousError(who + ": the rendezvous at " + where(env) + " went away (did rank 0 end?): " +
                          first_line(e.what()));
  }
  st->phase = int(Phase::backend);
  store->setTimeout(left() + kPastDeadline);
  c10::intrusive_ptr<c10d::Backend> backend;
  try {
    if (cuda) {
#if defined(ATTNPROF_RING_NCCL)
      c10::cuda::set_device(static_cast<c10::DeviceIndex>(at::Device(device).index()));
      auto options = c10d::ProcessGroupNCCL::Options::create();
      options->timeout = opt.op_timeout;
      backend = c10::make_intrusive<c10d::ProcessGroupNCCL>(store, env.rank, env.world_size, options);
#endif
    } else {
#if defined(USE_C10D_GLOO)
      backend = make_gloo_backend(store, env.rank, env.world_size, opt.op_timeout, is_loopback(env.master_addr));
#endif
    }
  } catch (const std::exception& e) {
    throw std::runtime_error(who + ": cannot create the " + (cuda ? "NCCL" : "gloo") + " process group: " +
                             first_line(e.what()));
  }
  store->setTimeout(opt.store_timeout);
  st->store = store;
  st->backend = backend;
}

std::string seconds(std::chrono::milliseconds ms) { return fmt::format("{:g} s", double(ms.count()) / 1000.0); }

// What a rank waits for: "waiting for rank 0 to serve the rendezvous at 127.0.0.1:29511 ...".
std::string waiting_for(const JoinState& st, const RankEnv& env, const std::string& device) {
  switch (Phase(st.phase.load())) {
    case Phase::resolving: return "resolving MASTER_ADDR '" + env.master_addr + "'";
    case Phase::connecting:
      if (env.rank == 0 && !env.agent_store)
        return "waiting to reach its own rendezvous at " + where(env) +
               " (MASTER_ADDR:MASTER_PORT; MASTER_ADDR must lead to rank 0's host)";
      return std::string("waiting for ") + (env.agent_store ? "the launcher's store" : "rank 0") +
             " to serve the rendezvous at " + where(env) + " (MASTER_ADDR:MASTER_PORT)";
    case Phase::handshake:
      return "waiting for " + where(env) + ", which accepted the connection but does not answer as a rendezvous store";
    case Phase::gathering:
      return fmt::format("waiting for {} more of {} ranks at {}", env.world_size - st.joined.load(), env.world_size,
                         where(env));
    case Phase::backend:
      return std::string("waiting for the other ranks to form the ") +
             (device.rfind("cuda", 0) == 0 ? "NCCL" : "gloo") + " process group";
  }
  return "waiting for the rendezvous at " + where(env);
}

// The FLAGS_caffe2_log_level of c10's logging, raised for a scope: c10d's
// connection retries log a warning with a C++ stack trace every second, and
// what they say is in the one line the caller gets.
class QuietC10d {
 public:
  QuietC10d() : saved_(FLAGS_caffe2_log_level) { FLAGS_caffe2_log_level = std::max(saved_, 3); }  // FATAL only
  ~QuietC10d() {
    if (!keep_) FLAGS_caffe2_log_level = saved_;
  }
  QuietC10d(const QuietC10d&) = delete;
  QuietC10d& operator=(const QuietC10d&) = delete;
  // A thread left inside c10d keeps retrying until the process ends: keep it quiet.
  void keep() { keep_ = true; }

 private:
  int saved_;
  bool keep_ = false;
};

}  // namespace

std::unique_ptr<ProcessGroup> ProcessGroup::join(const RankEnv& env, const std::string& device,
                                                 const JoinOptions& opt) {
  const bool cuda = device.rfind("cuda", 0) == 0;
  if (const std::string why = backend_unavailable(cuda); !why.empty()) throw std::runtime_error(why);
  disable_nvlink_multicast();
  const Clock::time_point start = Clock::now(), deadline = start + opt.rendezvous_timeout;
  auto st = std::make_shared<JoinState>();
  QuietC10d quiet;
  // The thread keeps its own copies: the caller may leave before it ends.
  std::thread worker([st, env, device, opt, deadline] {
    try {
      rendezvous(st, env, device, opt, deadline);
    } catch (...) {
      st->error = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(st->m);
    st->done = true;
    st->cv.notify_all();
  });
  // Said once, at half a short timeout: a rendezvous that ends before it says nothing.
  const auto say_after = std::min(opt.say_after, opt.rendezvous_timeout / 2);
  bool said = false;
  std::unique_lock<std::mutex> lock(st->m);
  while (!st->done) {
    st->cv.wait_for(lock, std::chrono::milliseconds(50));
    if (st->done) break;
    const bool stop = interrupt_signal() != 0, late = Clock::now() >= deadline;
    if (stop || late) {
      // c10d may block in the thread for as long as it likes; the process
      // ends without waiting for it (main() ends with _Exit).
      st->cancelled = true;
      const std::string what = waiting_for(*st, env, device);
      const int err = st->last_errno.load();
      lock.unlock();
      worker.detach();
      quiet.keep();
      if (stop) throw Interrupted();
      throw RendezvousError(fmt::format("rank {} gave up after {} (--rendezvous-timeout) {}{}", env.rank,
                                        seconds(opt.rendezvous_timeout), what,
                                        Phase(st->phase.load()) == Phase::connecting && err
                                            ? std::string("; last attempt: ") + std::strerror(err)
                                            : std::string()));
    }
    if (!said && opt.on_waiting && Clock::now() - start >= say_after) {
      said = true;
      const std::string what = waiting_for(*st, env, device);
      lock.unlock();
      opt.on_waiting(fmt::format("rank {} is {}; giving up after {} (--rendezvous-timeout)", env.rank, what,
                                 seconds(opt.rendezvous_timeout)));
      lock.lock();
    }
  }
  lock.unlock();
  worker.join();
  if (st->error) std::rethrow_exception(st->error);
  auto impl = std::make_unique<Impl>();
  impl->env = env;
  impl->device = device;
  impl->store = st->store;
  impl->backend = st->backend;
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

void ProcessGroup::wait_for_keys(const std::vector<std::string>& keys, const std::string& what) {
  // Polled rather than Store::wait, which no signal ends: rank 0 may run a
  // single-GPU baseline for minutes while the others wait here.
  const auto deadline = Clock::now() + impl_->store->getTimeout();
  while (!impl_->store->check(keys)) {
    throw_if_interrupted();
    if (Clock::now() >= deadline)
      throw std::runtime_error(fmt::format("rank {}: no answer from the other ranks ({}) within {}", rank(), what,
                                           seconds(std::chrono::duration_cast<std::chrono::milliseconds>(
                                               impl_->store->getTimeout()))));
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
}

std::vector<std::string> ProcessGroup::all_gather_strings(const std::string& key, const std::string& mine) {
  impl_->store->set(key + "/" + std::to_string(rank()), std::vector<uint8_t>(mine.begin(), mine.end()));
  std::vector<std::string> keys;
  for (int r = 0; r < world_size(); ++r) keys.push_back(key + "/" + std::to_string(r));
  wait_for_keys(keys, key);
  std::vector<std::string> all;
  for (const std::string& k : keys) {
    const std::vector<uint8_t> bytes = impl_->store->get(k);
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

void ProcessGroup::all_to_all(const at::Tensor& send, at::Tensor& received) {
  if (send.dim() < 1 || send.size(0) != world_size() || !send.is_contiguous() || !received.is_contiguous() ||
      received.sizes() != send.sizes())
    throw std::invalid_argument("ProcessGroup::all_to_all: send and received must be contiguous, of one shape, " +
                                std::to_string(world_size()) + " parts on the first dimension");
  at::Tensor in = send, out = received;
  std::vector<int64_t> equal;  // empty: equal splits
  impl_->backend->alltoall_base(out, in, equal, equal)->wait();
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
  wait_for_keys(keys, "the end of the run");
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
