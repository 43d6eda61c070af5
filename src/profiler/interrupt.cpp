#include "attnprof/interrupt.h"

#include <csignal>

namespace attnprof {

namespace {
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_signal != 0) {
    // Second signal: the user means it.
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal = sig;
}
}  // namespace

void install_interrupt_handlers() {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGINT, &sa, nullptr);
  sigaction(SIGTERM, &sa, nullptr);
}

int interrupt_signal() noexcept { return g_signal; }

void request_interrupt(int sig) noexcept { g_signal = sig; }

void throw_if_interrupted() {
  if (g_signal != 0) throw Interrupted();
}

}  // namespace attnprof
