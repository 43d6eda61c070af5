// Stop signals during a run (Ctrl-C, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1,
// SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGXCPU, SIGPWR: every signal whose
// default action ends the process and that a person or a tool sends): the
// first asks the run to stop at the next step boundary (so nothing is left
// half-written and finished variants keep their files); a second one removes
// the temp files being written and the lock (io::remove_registered_temps) and
// ends the process at once, by that signal. Crash signals (SIGSEGV, SIGBUS,
// SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS), SIGKILL, SIGSTKFLT, SIGIO and the
// real-time signals keep their default action.
#pragma once

#include <signal.h>

#include <stdexcept>
#include <vector>

namespace attnprof {

// The signals above, in that order.
const std::vector<int>& stop_signals();
// The same as a set, to block or unblock them.
sigset_t stop_signal_set();
// Installs the handlers, then unblocks the stop signals in the calling thread:
// one a launcher held blocked across exec (LaunchSpec::hold_stop_signals) is
// delivered now, to the handler.
void install_interrupt_handlers();
// 0 while no stop was asked for, else the signal number.
int interrupt_signal() noexcept;
// "SIGINT", "SIGTERM", ...; "signal N" for any other.
const char* signal_name(int sig) noexcept;
// Where the second signal's line goes: standard error, or the descriptor
// that still reaches it while StderrCapture holds fd 2.
void set_interrupt_message_fd(int fd) noexcept;
// Test hook: behave as if `sig` had arrived.
void request_interrupt(int sig) noexcept;

// Thrown by measuring code at a step boundary, and by waits that would
// otherwise block (a FIFO's reader, a rendezvous), after a stop was asked for.
class Interrupted : public std::runtime_error {
 public:
  Interrupted() : std::runtime_error("interrupted") {}
};

// Throws Interrupted when a stop was asked for.
void throw_if_interrupted();

}  // namespace attnprof
