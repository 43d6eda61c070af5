// `attnprof --nproc N`: one process per rank on this host, as torchrun starts
// them. Each rank is the same program (fork + exec) with RANK, WORLD_SIZE,
// LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR and MASTER_PORT set. The launcher
// forwards rank 0's stderr as it comes, keeps the other ranks' last lines,
// stops the others when one rank fails and they do not end on their own
// within a grace period (SIGTERM, then SIGKILL after another: a rank stuck in
// a collective with a dead peer never returns), and
// forwards a stop signal (attnprof/interrupt.h) once to every rank (the ranks run in their
// own process groups, so a terminal's Ctrl-C reaches them only through here;
// a second signal kills them). Ranks die with the launcher (PR_SET_PDEATHSIG),
// and every rank is reaped before launch_ranks returns: no orphans, no zombies.
// POSIX only, no LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace attnprof::ring {

struct LaunchSpec {
  std::string exe;                // the program every rank runs
  std::vector<std::string> argv;  // its argv, argv[0] included
  int nproc = 2;
  std::string master_addr = "127.0.0.1";
  uint16_t master_port = 0;  // 0: a free port of this host is chosen
  // Set in every rank over the inherited environment.
  std::vector<std::pair<std::string, std::string>> env;
  // After a rank fails: before SIGTERM to the others, and again before SIGKILL;
  // after a forwarded signal: before SIGKILL.
  double grace_seconds = 3.0;
  int err_fd = 2;              // where rank 0's stderr goes as it comes, and the launcher's own lines
  // The stop signals blocked in each rank across exec, for a rank program that
  // unblocks them once its handlers are in (attnprof's install_interrupt_handlers):
  // a signal forwarded while a rank still loads its libraries then reaches its
  // handler instead of ending it silently (rank 0 said nothing on a loaded
  // 16-core GPU host, SIGTERM 6 s after the start). Off for other programs.
  bool hold_stop_signals = false;
};

struct RankOutcome {
  int rank = 0;
  int pid = 0;
  int exit_code = -1;      // when it exited; -1 when killed by a signal
  int term_signal = 0;     // when a signal ended it
  bool stopped_by_launcher = false;  // ended after the launcher signalled it (a peer failed, or a forwarded signal)
  std::string last_line;   // its last non-empty stderr line
  std::vector<std::string> tail;  // its last stderr lines (at most 20)

  bool ok() const { return exit_code == 0; }
  // "exit 1", "signal 9 (stopped by the launcher)"
  std::string how() const;
};

struct LaunchResult {
  std::vector<RankOutcome> ranks;  // by rank
  uint16_t master_port = 0;
  int forwarded_signal = 0;  // a signal the launcher received and passed on
  int first_failure = -1;    // the rank whose failure came first (the cause), -1 if none

  // 0 when every rank succeeded; 128 + signal after a forwarded signal; else
  // the first failing rank's exit code (128 + signal if a signal ended it).
  int exit_code() const;
};

// Throws std::runtime_error (one line) when no rank could be started; a rank
// that fails later is a RankOutcome.
LaunchResult launch_ranks(const LaunchSpec& spec);

// A TCP port that was free on this host a moment ago (bound to port 0, read
// back, closed). Throws std::runtime_error.
uint16_t free_tcp_port();

// This program's own path (/proc/self/exe) and argv (/proc/self/cmdline), so
// the CLI can start copies of itself without threading argv through.
std::string self_exe();
std::vector<std::string> self_argv();

}  // namespace attnprof::ring
