#include "attnprof/interrupt.h"

#include <pthread.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstring>

#include "attnprof/io/files.h"

namespace attnprof {

namespace {
volatile std::sig_atomic_t g_signal = 0;
volatile std::sig_atomic_t g_message_fd = STDERR_FILENO;

extern "C" void on_stop_signal(int sig) {
  if (g_signal != 0) {
    // Second signal: the user means it. Only async-signal-safe calls here:
    // unlink the temp files being written, say so, die by the signal.
    io::remove_registered_temps();
    static const char kLine[] = "attnprof: stopped at once by a second signal; files being written were removed\n";
    (void)!::write(g_message_fd, kLine, sizeof kLine - 1);
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal = sig;
}

struct Named {
  int sig;
  const char* name;
};
const Named kStopSignals[] = {{SIGINT, "SIGINT"},   {SIGTERM, "SIGTERM"},     {SIGHUP, "SIGHUP"},
                              {SIGQUIT, "SIGQUIT"}, {SIGUSR1, "SIGUSR1"},     {SIGUSR2, "SIGUSR2"},
                              {SIGALRM, "SIGALRM"}, {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"},
                              {SIGXCPU, "SIGXCPU"}, {SIGPWR, "SIGPWR"}};
}  // namespace

const std::vector<int>& stop_signals() {
  static const std::vector<int> sigs = [] {
    std::vector<int> v;
    for (const Named& n : kStopSignals) v.push_back(n.sig);
    return v;
  }();
  return sigs;
}

sigset_t stop_signal_set() {
  sigset_t set;
  sigemptyset(&set);
  for (int sig : stop_signals()) sigaddset(&set, sig);
  return set;
}

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  for (int sig : stop_signals()) sigaction(sig, &sa, nullptr);
  const sigset_t held = stop_signal_set();
  pthread_sigmask(SIG_UNBLOCK, &held, nullptr);
}

int interrupt_signal() noexcept { return g_signal; }

const char* signal_name(int sig) noexcept {
  for (const Named& n : kStopSignals)
    if (n.sig == sig) return n.name;
  static thread_local char other[24];
  std::snprintf(other, sizeof other, "signal %d", sig);
  return other;
}

void request_interrupt(int sig) noexcept { g_signal = sig; }

void set_interrupt_message_fd(int fd) noexcept { g_message_fd = fd; }

void throw_if_interrupted() {
  if (g_signal != 0) throw Interrupted();
}

}  // namespace attnprof
