// The rank launcher on real processes (/bin/sh scripts as ranks): the
// variables every rank gets, exit codes and error lines collected, a failing
// rank stopping the others, signals forwarded once, nothing left running.
#include <fcntl.h>
#include <pthread.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "attnprof/interrupt.h"
#include "distributed/launcher.h"
#include "test_util.h"

using namespace attnprof;
using namespace attnprof::ring;
namespace tu = attnprof::testing;

namespace {

using Clock = std::chrono::steady_clock;

LaunchSpec shell(const std::string& script, int nproc) {
  LaunchSpec s;
  s.exe = "/bin/sh";
  s.argv = {"sh", "-c", script};
  s.nproc = nproc;
  s.grace_seconds = 0.5;
  s.err_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  return s;
}

bool alive(int pid) {
  if (::kill(pid, 0) != 0) return false;
  // A zombie nobody has reaped yet (no init reaping in a container) counts as gone.
  std::ifstream stat("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(stat, line);
  const size_t paren = line.rfind(')');
  return paren == std::string::npos || line.size() < paren + 3 || line[paren + 2] != 'Z';
}

bool wait_for_files(const std::vector<std::string>& paths, double seconds) {
  const auto until = Clock::now() + std::chrono::milliseconds(int(seconds * 1000));
  while (Clock::now() < until) {
    bool all = true;
    for (const auto& p : paths) all = all && tu::path_exists(p);
    if (all) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return false;
}

class Launcher : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = tu::make_temp_dir("launcher"); }
  void TearDown() override { tu::remove_tree(dir_); }
  std::string dir_;
};

TEST_F(Launcher, EveryRankGetsItsVariables) {
  LaunchSpec s = shell("echo \"$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $MASTER_ADDR $MASTER_PORT $EXTRA\" > " +
                           dir_ + "/rank$RANK",
                       3);
  s.env = {{"EXTRA", "x=1"}};
  const LaunchResult r = launch_ranks(s);
  EXPECT_EQ(r.exit_code(), 0);
  EXPECT_EQ(r.first_failure, -1);
  ASSERT_EQ(r.ranks.size(), 3u);
  EXPECT_GT(r.master_port, 0);
  for (int k = 0; k < 3; ++k) {
    EXPECT_TRUE(r.ranks[k].ok()) << r.ranks[k].how();
    EXPECT_EQ(io::read_file(dir_ + "/rank" + std::to_string(k)),
              std::to_string(k) + " 3 " + std::to_string(k) + " 3 127.0.0.1 " + std::to_string(r.master_port) + " x=1\n");
  }
}

TEST_F(Launcher, FailingRankStopsTheOthersAndIsReported) {
  // Rank 1 fails after rank 0 and 2 are up; rank 2 ignores SIGTERM (as a rank
  // stuck in a collective would) and must be killed after the grace period.
  const std::string script =
      "echo $$ > " + dir_ + "/pid$RANK.tmp; mv " + dir_ + "/pid$RANK.tmp " + dir_ + "/pid$RANK; "
      "if [ $RANK = 1 ]; then while [ ! -f " + dir_ + "/pid2 ] || [ ! -f " + dir_ + "/pid0 ]; do sleep 0.02; done; "
      "echo progress >&2; echo 'attnprof: rank 1: ring-x failed: out of memory' >&2; exit 7; fi; "
      "if [ $RANK = 2 ]; then trap '' TERM; fi; "
      "while :; do sleep 0.05; done";
  const auto t0 = Clock::now();
  const LaunchResult r = launch_ranks(shell(script, 3));
  const double seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  EXPECT_GT(seconds, 1.0) << "SIGTERM after one grace period, SIGKILL after another";
  EXPECT_LT(seconds, 10.0);
  EXPECT_EQ(r.first_failure, 1);
  EXPECT_EQ(r.exit_code(), 7);
  EXPECT_EQ(r.ranks[1].exit_code, 7);
  EXPECT_FALSE(r.ranks[1].stopped_by_launcher);
  EXPECT_EQ(r.ranks[1].last_line, "attnprof: rank 1: ring-x failed: out of memory");
  ASSERT_EQ(r.ranks[1].tail.size(), 2u);
  EXPECT_EQ(r.ranks[1].tail[0], "progress");
  EXPECT_TRUE(r.ranks[0].stopped_by_launcher);
  EXPECT_EQ(r.ranks[0].term_signal, SIGTERM);
  EXPECT_TRUE(r.ranks[2].stopped_by_launcher);
  EXPECT_EQ(r.ranks[2].term_signal, SIGKILL) << "a rank that ignores SIGTERM is killed after the grace period";
  for (const RankOutcome& o : r.ranks) EXPECT_FALSE(alive(o.pid)) << "rank " << o.rank << " left running";
}

TEST_F(Launcher, SignalIsForwardedOnceAndBecomesTheExitCode) {
  // Each rank counts the SIGINTs it receives; one Ctrl-C must arrive once.
  const std::string script = "n=0; trap 'n=$((n+1)); echo $n > " + dir_ +
                             "/int$RANK; exit 130' INT; touch " + dir_ + "/up$RANK; while :; do sleep 0.05; done";
  std::thread interrupter([&] {
    if (wait_for_files({dir_ + "/up0", dir_ + "/up1"}, 10)) ::kill(::getpid(), SIGINT);
  });
  const LaunchResult r = launch_ranks(shell(script, 2));
  interrupter.join();
  EXPECT_EQ(r.forwarded_signal, SIGINT);
  EXPECT_EQ(r.exit_code(), 130);
  for (int k = 0; k < 2; ++k) {
    EXPECT_EQ(r.ranks[k].exit_code, 130) << r.ranks[k].how();
    EXPECT_EQ(io::read_file(dir_ + "/int" + std::to_string(k)), "1\n");
  }
  // The launcher's handler is gone again: SIGINT's disposition is what it was.
  struct sigaction now {};
  ::sigaction(SIGINT, nullptr, &now);
  EXPECT_EQ(now.sa_handler, SIG_DFL);
}

// SigBlk of /proc/PID/status: the blocked signals, bit sig-1.
uint64_t blocked_mask(const std::string& status) {
  const size_t at = status.find("SigBlk:");
  return at == std::string::npos ? ~uint64_t{0} : std::stoull(status.substr(at + 7), nullptr, 16);
}

TEST_F(Launcher, HeldStopSignalsAreBlockedInTheRankOnlyWhenAsked) {
  // cp copies its own status (a shell would not do: dash clears its mask when it starts).
  for (const bool hold : {true, false}) {
    LaunchSpec s = shell("", 1);
    s.exe = "/bin/cp";
    s.argv = {"cp", "/proc/self/status", dir_ + "/status"};
    s.hold_stop_signals = hold;
    ASSERT_EQ(launch_ranks(s).exit_code(), 0);
    const uint64_t mask = blocked_mask(io::read_file(dir_ + "/status"));
    for (int sig : stop_signals())
      EXPECT_EQ((mask >> (sig - 1)) & 1, hold ? 1u : 0u) << signal_name(sig) << ", hold " << hold;
  }
}

// What a held signal is for: one that arrived before the handlers (pending,
// blocked) reaches them when install_interrupt_handlers() unblocks it, instead
// of ending the process silently. In a child: the handlers stay out of this process.
TEST(InterruptHandlers, ASignalHeldUntilTheyAreInReachesThem) {
  const pid_t child = ::fork();
  if (child == 0) {
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    ::pthread_sigmask(SIG_BLOCK, &term, nullptr);
    ::raise(SIGTERM);  // pending: the process lives on
    install_interrupt_handlers();
    ::_exit(interrupt_signal() == SIGTERM ? 0 : 1);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status)) << "ended by signal " << WTERMSIG(status);
  EXPECT_EQ(WEXITSTATUS(status), 0) << "the held SIGTERM did not reach the handler";
}

TEST_F(Launcher, RanksDieWithTheLauncher) {
  // A launcher killed with SIGKILL cannot stop its ranks; PR_SET_PDEATHSIG does.
  const pid_t helper = ::fork();
  if (helper == 0) {
    LaunchSpec s = shell("echo $$ > " + dir_ + "/pid$RANK.tmp; mv " + dir_ + "/pid$RANK.tmp " + dir_ +
                             "/pid$RANK; while :; do sleep 0.05; done",
                         2);
    (void)launch_ranks(s);
    ::_exit(0);
  }
  ASSERT_TRUE(wait_for_files({dir_ + "/pid0", dir_ + "/pid1"}, 10));
  const int pid0 = std::stoi(io::read_file(dir_ + "/pid0")), pid1 = std::stoi(io::read_file(dir_ + "/pid1"));
  EXPECT_TRUE(alive(pid0));
  ::kill(helper, SIGKILL);
  ::waitpid(helper, nullptr, 0);
  const auto until = Clock::now() + std::chrono::seconds(5);
  while ((alive(pid0) || alive(pid1)) && Clock::now() < until) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(alive(pid0));
  EXPECT_FALSE(alive(pid1));
}

TEST(LauncherSelf, ArgvAndExeAreThisProcess) {
  const std::vector<std::string> argv = self_argv();
  ASSERT_FALSE(argv.empty());
  EXPECT_NE(argv[0].find("test_launcher"), std::string::npos);
  EXPECT_NE(self_exe().find("test_launcher"), std::string::npos);
  const uint16_t port = free_tcp_port();
  EXPECT_GT(port, 0);
}

TEST(LauncherSelf, UnstartableProgramIsAFailedRank) {
  LaunchSpec s;
  s.exe = "/nonexistent/attnprof";
  s.argv = {"attnprof"};
  s.nproc = 2;
  s.err_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  const LaunchResult r = launch_ranks(s);
  EXPECT_EQ(r.exit_code(), 127);
  EXPECT_NE(r.ranks[r.first_failure].last_line.find("cannot execute"), std::string::npos);
}

}  // namespace
