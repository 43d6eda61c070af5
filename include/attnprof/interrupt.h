// Ctrl-C / SIGTERM / SIGHUP during a run: the first signal asks the run to
// stop at the next step boundary (so nothing is left half-written and finished
// variants keep their files); a second one removes the temp files being
// written (io::remove_registered_temps) and terminates at once.
#pragma once

#include <stdexcept>

namespace attnprof {

void install_interrupt_handlers();
// 0 while no stop was asked for, else the signal number (SIGINT, SIGTERM, SIGHUP).
int interrupt_signal() noexcept;
// "SIGINT", "SIGTERM", "SIGHUP".
const char* signal_name(int sig) noexcept;
// Test hook: behave as if `sig` had arrived.
void request_interrupt(int sig) noexcept;

// Thrown by measuring code at a step boundary after a stop was asked for.
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted") {}
};

// Throws Interrupted when a stop was asked for.
void throw_if_interrupted();

}  // namespace attnprof
