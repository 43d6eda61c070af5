#include "attnprof/interrupt.h"

#include <unistd.h>

#include <csignal>
#include <cstring>

#include "attnprof/io/files.h"

namespace attnprof {

namespace {
volatile std::sig_atomic_t g_signal = 0;

extern "C" void on_stop_signal(int sig) {
  if (g_signal != 0) {
    // Second signal: the user means it. Only async-signal-safe calls here:
    // unlink the temp files being written, say so, die by the signal.
    io::remove_registered_temps();
    static const char kLine[] = "attnprof: stopped at once by a second signal; files being written were removed\n";
    (void)!::write(STDERR_FILENO, kLine, sizeof kLine - 1);
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
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
}

int interrupt_signal() noexcept { return g_signal; }

const char* signal_name(int sig) noexcept {
  switch (sig) {
    case SIGINT: return "SIGINT";
    case SIGTERM: return "SIGTERM";
    case SIGHUP: return "SIGHUP";
    default: return "a signal";
  }
}

void request_interrupt(int sig) noexcept { g_signal = sig; }

void throw_if_interrupted() {
  if (g_signal != 0) throw Interrupted();
}

}  // namespace attnprof
