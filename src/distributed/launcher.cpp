#include "distributed/launcher.h"

#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <deque>
#include <fstream>
#include <iterator>
#include <optional>
#include <stdexcept>

#include "attnprof/interrupt.h"

extern char** environ;

namespace attnprof::ring {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kTailLines = 20;

std::string errno_text(const char* what) { return std::string(what) + ": " + std::strerror(errno); }

// Signals arrive on a self-pipe, so the poll loop handles them outside the handler.
int g_relay_write_fd = -1;
extern "C" void relay_signal(int sig) {
  const int saved = errno;
  const unsigned char b = static_cast<unsigned char>(sig);
  if (g_relay_write_fd >= 0) (void)!::write(g_relay_write_fd, &b, 1);
  errno = saved;
}

class SignalRelay {
 public:
  SignalRelay() {
    if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) throw std::runtime_error(errno_text("launcher: pipe"));
    g_relay_write_fd = fds_[1];
    struct sigaction sa {};
    sa.sa_handler = relay_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    const std::vector<int>& sigs = stop_signals();
    saved_.resize(sigs.size());
    for (size_t i = 0; i < sigs.size(); ++i) ::sigaction(sigs[i], &sa, &saved_[i]);
  }
  ~SignalRelay() {
    const std::vector<int>& sigs = stop_signals();
    for (size_t i = 0; i < sigs.size(); ++i) ::sigaction(sigs[i], &saved_[i], nullptr);
    g_relay_write_fd = -1;
    ::close(fds_[0]);
    ::close(fds_[1]);
  }
  SignalRelay(const SignalRelay&) = delete;
  SignalRelay& operator=(const SignalRelay&) = delete;

  int fd() const { return fds_[0]; }
  std::vector<int> take() {
    std::vector<int> sigs;
    unsigned char b = 0;
    while (::read(fds_[0], &b, 1) == 1) sigs.push_back(b);
    return sigs;
  }

 private:
  int fds_[2] = {-1, -1};
  std::vector<struct sigaction> saved_;
};

struct Child {
  RankOutcome outcome;
  int err_fd = -1;
  bool running = true;
  std::string partial;  // a stderr line not yet ended
};

// The rank's environment: the launcher's own, minus what the launcher decides.
std::vector<std::string> rank_environment(const LaunchSpec& spec, int rank, uint16_t port) {
  std::vector<std::pair<std::string, std::string>> set = {
      {"RANK", std::to_string(rank)},
      {"WORLD_SIZE", std::to_string(spec.nproc)},
      {"LOCAL_RANK", std::to_string(rank)},
      {"LOCAL_WORLD_SIZE", std::to_string(spec.nproc)},
      {"MASTER_ADDR", spec.master_addr},
      {"MASTER_PORT", std::to_string(port)},
  };
  set.insert(set.end(), spec.env.begin(), spec.env.end());
  // Rank 0 serves the store here; a torchrun agent's store is not ours.
  const std::vector<std::string> drop = {"TORCHELASTIC_USE_AGENT_STORE", "SLURM_PROCID"};
  std::vector<std::string> env;
  for (char** e = environ; e && *e; ++e) {
    const std::string kv = *e;
    const std::string key = kv.substr(0, kv.find('='));
    bool replaced = std::find(drop.begin(), drop.end(), key) != drop.end();
    for (const auto& [k, v] : set) replaced = replaced || k == key;
    if (!replaced) env.push_back(kv);
  }
  for (const auto& [k, v] : set) env.push_back(k + "=" + v);
  return env;
}

std::vector<char*> c_strings(std::vector<std::string>& v) {
  std::vector<char*> out;
  for (std::string& s : v) out.push_back(s.data());
  out.push_back(nullptr);
  return out;
}

// Called between fork and exec: async-signal-safe calls only.
// `mask`: the signals the rank starts with blocked.
[[noreturn]] void exec_rank(pid_t launcher, int err_write_fd, const char* exe, char* const* argv, char* const* envp,
                            const sigset_t& mask) {
  ::setpgid(0, 0);  // its own group: a terminal's Ctrl-C reaches it only through the launcher
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != launcher) ::_exit(127);  // the launcher died before prctl took effect
  ::dup2(err_write_fd, 2);
  // The stop signals arrive blocked (launch_ranks blocks them around fork): until exec this process
  // has the launcher's relay handler, which would swallow one and tell the launcher it came twice.
  for (int sig : stop_signals()) ::signal(sig, SIG_DFL);
  ::sigprocmask(SIG_SETMASK, &mask, nullptr);
  ::execve(exe, argv, envp);
  static const char msg[] = "attnprof launcher: cannot execute the rank program\n";
  (void)!::write(2, msg, sizeof msg - 1);
  ::_exit(127);
}

void write_all(int fd, const char* data, size_t n) {
  while (n > 0) {
    const ssize_t w = ::write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return;
    data += w, n -= static_cast<size_t>(w);
  }
}

void keep_line(RankOutcome& o, std::string line) {
  while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.pop_back();
  if (line.empty()) return;
  o.last_line = line;
  o.tail.push_back(std::move(line));
  if (o.tail.size() > kTailLines) o.tail.erase(o.tail.begin());
}

// Reads what is there; returns false at end of file.
bool pump(Child& c, int rank, int err_fd) {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(c.err_fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno == EAGAIN || errno == EWOULDBLOCK;
    if (n == 0) return false;
    if (rank == 0) write_all(err_fd, buf, static_cast<size_t>(n));
    for (ssize_t i = 0; i < n; ++i) {
      if (buf[i] == '\n' || buf[i] == '\r') {
        keep_line(c.outcome, std::move(c.partial));
        c.partial.clear();
      } else {
        c.partial += buf[i];
      }
    }
  }
}

void close_stream(Child& c) {
  if (c.err_fd < 0) return;
  keep_line(c.outcome, std::move(c.partial));
  c.partial.clear();
  ::close(c.err_fd);
  c.err_fd = -1;
}

}  // namespace

std::string RankOutcome::how() const {
  std::string s = term_signal ? "signal " + std::to_string(term_signal) : "exit " + std::to_string(exit_code);
  if (stopped_by_launcher) s += " (stopped by the launcher)";
  return s;
}

int LaunchResult::exit_code() const {
  if (forwarded_signal) return 128 + forwarded_signal;
  if (first_failure < 0) return 0;
  const RankOutcome& o = ranks[first_failure];
  return o.term_signal ? 128 + o.term_signal : o.exit_code;
}

LaunchResult launch_ranks(const LaunchSpec& spec) {
  if (spec.nproc < 1) throw std::runtime_error("launcher: nproc must be positive, got " + std::to_string(spec.nproc));
  LaunchResult result;
  result.master_port = spec.master_port ? spec.master_port : free_tcp_port();
  SignalRelay relay;  // before the first fork: a signal from here on is forwarded

  std::vector<Child> children(spec.nproc);
  std::vector<std::string> argv = spec.argv;
  std::vector<char*> c_argv = c_strings(argv);
  const pid_t self = ::getpid();
  auto kill_all = [&](int sig) {
    for (Child& c : children)
      if (c.running && c.outcome.pid > 0) {
        ::kill(c.outcome.pid, sig);
        c.outcome.stopped_by_launcher = true;
      }
  };
  const sigset_t stops = stop_signal_set();
  sigset_t none;
  sigemptyset(&none);
  const sigset_t& rank_mask = spec.hold_stop_signals ? stops : none;
  for (int r = 0; r < spec.nproc; ++r) {
    std::vector<std::string> env = rank_environment(spec, r, result.master_port);
    std::vector<char*> c_env = c_strings(env);
    int p[2];
    if (::pipe2(p, O_CLOEXEC) != 0) {
      kill_all(SIGKILL);
      throw std::runtime_error(errno_text("launcher: pipe"));
    }
    // Blocked around fork: one that comes meanwhile waits in the launcher (for the relay) or, sent to
    // the new rank, in the rank (see exec_rank), never in a child still running the launcher's handler.
    sigset_t before;
    ::pthread_sigmask(SIG_BLOCK, &stops, &before);
    const pid_t pid = ::fork();
    if (pid == 0) exec_rank(self, p[1], spec.exe.c_str(), c_argv.data(), c_env.data(), rank_mask);
    ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
    ::close(p[1]);
    if (pid < 0) {
      ::close(p[0]);
      const std::string why = errno_text("launcher: fork");
      kill_all(SIGKILL);
      for (Child& c : children)
        if (c.outcome.pid > 0) ::waitpid(c.outcome.pid, nullptr, 0);
      throw std::runtime_error(why);
    }
    ::setpgid(pid, pid);  // also here, so it holds before the parent signals the group
    ::fcntl(p[0], F_SETFL, ::fcntl(p[0], F_GETFL) | O_NONBLOCK);
    children[r].outcome.rank = r;
    children[r].outcome.pid = pid;
    children[r].err_fd = p[0];
  }

  const auto grace = std::chrono::milliseconds(static_cast<int64_t>(spec.grace_seconds * 1000));
  std::optional<Clock::time_point> term_at, kill_at;
  int signals_seen = 0;
  auto stop_others = [&](int sig) {
    kill_all(sig);
    if (!kill_at) kill_at = Clock::now() + grace;
  };
  size_t running = children.size();
  while (running > 0) {
    std::vector<pollfd> fds = {{relay.fd(), POLLIN, 0}};
    std::vector<Child*> owners = {nullptr};
    for (Child& c : children)
      if (c.err_fd >= 0) fds.push_back({c.err_fd, POLLIN, 0}), owners.push_back(&c);
    ::poll(fds.data(), fds.size(), 100);
    for (int sig : relay.take()) {
      if (++signals_seen == 1) {
        result.forwarded_signal = sig;
        stop_others(sig);
      } else {
        kill_all(SIGKILL);  // a second signal: the user means it
      }
    }
    for (size_t i = 1; i < fds.size(); ++i)
      if (fds[i].revents && !pump(*owners[i], owners[i]->outcome.rank, spec.err_fd)) close_stream(*owners[i]);
    for (Child& c : children) {
      if (!c.running) continue;
      int status = 0;
      if (::waitpid(c.outcome.pid, &status, WNOHANG) != c.outcome.pid) continue;
      c.running = false;
      --running;
      if (WIFEXITED(status)) c.outcome.exit_code = WEXITSTATUS(status);
      if (WIFSIGNALED(status)) c.outcome.term_signal = WTERMSIG(status);
      if (c.outcome.ok() || c.outcome.stopped_by_launcher || result.first_failure >= 0) continue;
      result.first_failure = c.outcome.rank;
      // Its peers may be leaving too (every rank refuses a variant alike); if
      // not, they would wait for it forever: SIGTERM after the grace period.
      if (running > 0 && !term_at) term_at = Clock::now() + grace;
    }
    if (term_at && Clock::now() >= *term_at) {
      term_at.reset();
      stop_others(SIGTERM);
    }
    if (kill_at && Clock::now() >= *kill_at) {
      kill_all(SIGKILL);
      kill_at.reset();
    }
  }
  for (Child& c : children) {
    // Whatever is still buffered; a grandchild holding the pipe is not waited for.
    if (c.err_fd >= 0) pump(c, c.outcome.rank, spec.err_fd);
    close_stream(c);
    result.ranks.push_back(c.outcome);
  }
  return result;
}

uint16_t free_tcp_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) throw std::runtime_error(errno_text("cannot find a free port: socket"));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = errno_text("cannot find a free port");
    ::close(fd);
    throw std::runtime_error(why);
  }
  ::close(fd);
  return ntohs(addr.sin_port);
}

std::string self_exe() {
  std::string path(4096, '\0');
  const ssize_t n = ::readlink("/proc/self/exe", path.data(), path.size() - 1);
  if (n <= 0) throw std::runtime_error(errno_text("cannot find this program's path: /proc/self/exe"));
  path.resize(static_cast<size_t>(n));
  return path;
}

std::vector<std::string> self_argv() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> argv;
  size_t start = 0;
  while (start < all.size()) {
    const size_t end = all.find('\0', start);
    argv.push_back(all.substr(start, end == std::string::npos ? std::string::npos : end - start));
    if (end == std::string::npos) break;
    start = end + 1;
  }
  if (argv.empty()) throw std::runtime_error("cannot read this program's arguments: /proc/self/cmdline is empty");
  return argv;
}

}  // namespace attnprof::ring
