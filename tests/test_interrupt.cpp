// Ctrl-C in the middle of a multi-variant run: the finished variants keep valid
// files, the interrupted one leaves only a summary that says so, no temp files
// remain, and the exit code is 128 + signal.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attnprof/io/files.h"
#include "test_util.h"

using namespace attnprof::testing;

namespace {

struct Interrupted {
  int exit_code = -1;
  std::string err;
};

struct Child {
  pid_t pid = -1;
  int err_fd = -1;
};

Child start(const std::vector<std::string>& args) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], STDERR_FILENO);
    close(pipefd[0]);
    const int devnull = ::open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    std::vector<char*> argv = {const_cast<char*>(ATTNPROF_EXE)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    execv(ATTNPROF_EXE, argv.data());
    _exit(127);
  }
  close(pipefd[1]);
  return {pid, pipefd[0]};
}

// True once `pid` handles SIGINT (SigCgt in /proc): main() has installed its handlers.
bool handles_sigint(pid_t pid) {
  const std::string status = attnprof::io::read_file("/proc/" + std::to_string(pid) + "/status");
  const size_t at = status.find("SigCgt:");
  if (at == std::string::npos) return false;
  return (std::stoull(status.substr(at + 7), nullptr, 16) >> (SIGINT - 1)) & 1;
}

// Reads stderr to the end; returns (stderr, wait status).
std::pair<std::string, int> finish(const Child& c) {
  std::string err;
  char buf[4096];
  for (ssize_t n; (n = read(c.err_fd, buf, sizeof buf)) > 0;) err.append(buf, size_t(n));
  close(c.err_fd);
  int status = 0;
  waitpid(c.pid, &status, 0);
  return {err, status};
}

void wait_for_handlers(pid_t pid) {
  for (int i = 0; i < 600 && !handles_sigint(pid); ++i) usleep(10000);
}

// Once the handlers are in, `ms` later, `sig`; then (stderr, wait status).
std::pair<std::string, int> stop_after(const Child& c, int ms, int sig) {
  wait_for_handlers(c.pid);
  usleep(ms * 1000);
  kill(c.pid, sig);
  return finish(c);
}

// Starts attnprof, waits until stderr announces variant `at` ("[3/3] ..."), sends `sig`.
Interrupted run_and_interrupt(const std::string& out_dir, const std::string& at, int sig) {
  const Child c = start({"--device", "cpu", "--batch", "2", "--heads", "4", "--seq", "256", "--head-dim", "64",
                         "--variant", "naive,inplace,sdpa-math", "--timing-iters", "30", "--out", out_dir});
  Interrupted r;
  char buf[4096];
  bool sent = false;
  for (ssize_t n; (n = read(c.err_fd, buf, sizeof(buf))) > 0;) {
    r.err.append(buf, static_cast<size_t>(n));
    if (!sent && r.err.find(at) != std::string::npos) {
      kill(c.pid, sig);
      sent = true;
    }
  }
  const auto [rest, status] = finish(c);
  r.err += rest;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

void expect_finished_variant(const std::string& dir, const std::string& variant) {
  const std::string stem = dir + "/" + variant + "/2_4_256_64_bf16_causal";
  const auto trace = nlohmann::json::parse(
      attnprof::io::gzip_decompress(attnprof::io::read_file(stem + "/2_4_256_64_bf16_causal.pt.trace.json.gz")));
  EXPECT_TRUE(trace.contains("traceEvents")) << variant;
  EXPECT_NE(attnprof::io::read_file(stem + ".txt").find("attn_fwd"), std::string::npos) << variant;
  const auto summary = nlohmann::json::parse(attnprof::io::read_file(stem + ".summary.json"));
  EXPECT_EQ(summary["status"], "ok") << variant;
}

}  // namespace

class InterruptTest : public ::testing::TestWithParam<int> {};

TEST_P(InterruptTest, KeepsFinishedVariantsAndMarksTheInterruptedOne) {
  const int sig = GetParam();
  const std::string dir = make_temp_dir("interrupt");
  const Interrupted r = run_and_interrupt(dir, "[3/3]", sig);
  EXPECT_EQ(r.exit_code, 128 + sig) << r.err;
  const std::string name = sig == SIGINT ? "SIGINT" : sig == SIGTERM ? "SIGTERM" : "SIGHUP";
  const std::vector<std::string> lines = split_lines(r.err);
  ASSERT_FALSE(lines.empty());
  // One line says what finished and what did not.
  EXPECT_EQ(lines.back().rfind("attnprof: interrupted by " + name + " during sdpa-math (3/3); finished (files written): "
                               "naive, inplace; ", 0),
            0u)
      << lines.back();
  EXPECT_NE(lines.back().find("marks it interrupted; compare/ not written"), std::string::npos) << lines.back();
  EXPECT_FALSE(path_exists(dir + "/compare")) << "an interrupted run never replaces compare/";
  expect_finished_variant(dir, "naive");
  expect_finished_variant(dir, "inplace");
  const std::string stem = dir + "/sdpa-math/2_4_256_64_bf16_causal";
  const auto summary = nlohmann::json::parse(attnprof::io::read_file(stem + ".summary.json"));
  EXPECT_EQ(summary["status"], "interrupted");
  EXPECT_FALSE(path_exists(stem));  // no trace folder
  EXPECT_FALSE(path_exists(stem + ".txt"));
  for (const std::string& p : list_tree(dir)) {
    EXPECT_EQ(p.find(".tmp."), std::string::npos) << p;
    EXPECT_EQ(p.find(".attnprof.lock"), std::string::npos) << p;
  }
  remove_tree(dir);
}

INSTANTIATE_TEST_SUITE_P(Signals, InterruptTest, ::testing::Values(SIGINT, SIGTERM, SIGHUP), [](const auto& info) {
  return info.param == SIGINT ? "SIGINT" : info.param == SIGTERM ? "SIGTERM" : "SIGHUP";
});


// The repro: a signal while Kineto is prepared but not yet enabled
// (--warmup 10000) used to be reported as "naive failed: Can't disable Kineto
// profiler when it's not running"; in a sweep the point was recorded as failed.
TEST(InterruptDuringKinetoWarmup, IsAnInterruptionInARunAndInASweep) {
  const std::string dir = make_temp_dir("kineto_warmup");
  // 10000 warm-up steps of ~0.3 ms: the signal lands among them. --quiet: the
  // interruption is then the only line (no estimate or progress).
  const std::vector<std::string> tiny = {"--quiet", "--device", "cpu", "--batch", "1", "--heads", "4", "--head-dim", "32",
                                         "--warmup", "10000", "--active", "1", "--timing-iters", "0", "--out", dir};
  std::vector<std::string> run = {"--variant", "naive", "--seq", "256"};
  run.insert(run.end(), tiny.begin(), tiny.end());
  Child c = start(run);
  auto [err, status] = stop_after(c, 500, SIGINT);
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 130) << err;
  EXPECT_EQ(count_lines(err), 1) << err;
  EXPECT_EQ(err.find("Can't disable"), std::string::npos) << err;
  EXPECT_NE(err.find("attnprof: interrupted by SIGINT during naive"), std::string::npos) << err;
  EXPECT_EQ(nlohmann::json::parse(attnprof::io::read_file(dir + "/naive/1_4_256_32_bf16_causal.summary.json"))["status"],
            "interrupted");

  std::vector<std::string> sweep = {"sweep", "--variant", "naive", "--seq", "256,512"};
  sweep.insert(sweep.end(), tiny.begin(), tiny.end());
  c = start(sweep);
  wait_for_handlers(c.pid);
  usleep(500 * 1000);
  kill(c.pid, SIGTERM);
  std::tie(err, status) = finish(c);
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 143) << err;
  const std::vector<std::string> lines = split_lines(err);
  ASSERT_FALSE(lines.empty());
  EXPECT_EQ(lines.back().rfind("attnprof: sweep interrupted by SIGTERM during point 1/2: 0 finished (their files "
                               "written), 1 interrupted, 1 not run; the points reached are in ",
                               0),
            0u)
      << lines.back();
  EXPECT_EQ(err.find("failed"), std::string::npos) << err;
  const std::string csv = attnprof::io::read_file(dir + "/sweep/partial/sweep.csv");
  EXPECT_NE(csv.find(",interrupted,"), std::string::npos) << csv;
  EXPECT_FALSE(path_exists(dir + "/sweep/sweep.csv")) << "an interrupted sweep never replaces sweep/";
  for (const std::string& p : list_tree(dir)) EXPECT_EQ(p.find(".tmp."), std::string::npos) << p;
  remove_tree(dir);
}

// A second signal ends the process at once (by that signal), after removing
// the temp files being written and the lock, and saying so.
TEST(SecondSignal, EndsAtOnceAndLeavesNothingHidden) {
  const std::string dir = make_temp_dir("second_signal");
  Child c = start({"--device", "cpu", "--batch", "1", "--heads", "2", "--seq", "16", "--head-dim", "16", "--variant",
                   "naive,inplace", "--warmup", "10000", "--active", "1", "--timing-iters", "0", "--out", dir});
  wait_for_handlers(c.pid);
  usleep(300 * 1000);  // in the profiled steps: Kineto's temp trace file exists
  // Back to back, so the second arrives before the first is acted on (two
  // SIGINTs would merge into one while pending; the handler treats any second
  // stop signal alike).
  kill(c.pid, SIGINT);
  kill(c.pid, SIGTERM);
  auto [err, status] = finish(c);
  ASSERT_TRUE(WIFSIGNALED(status)) << err;
  EXPECT_TRUE(WTERMSIG(status) == SIGINT || WTERMSIG(status) == SIGTERM) << WTERMSIG(status);  // the second one's
  EXPECT_NE(err.find("attnprof: stopped at once by a second signal; files being written were removed"),
            std::string::npos)
      << err;
  for (const std::string& p : list_tree(dir)) {
    EXPECT_EQ(p.find(".tmp."), std::string::npos) << p;
    EXPECT_EQ(p.find(".attnprof.lock"), std::string::npos) << p;
  }
  remove_tree(dir);
}

// A tiny naive run of 10000 profiler warm-up steps (~0.3 ms each): a signal
// sent once the handlers are in lands among them.
std::vector<std::string> long_tiny_run(const std::string& dir) {
  return {"--quiet", "--device", "cpu", "--batch", "1", "--heads", "2", "--seq", "16", "--head-dim", "16",
          "--variant", "naive", "--warmup", "10000", "--active", "1", "--timing-iters", "0", "--out", dir};
}

// Every signal whose default action would end the process (and leave the
// lock file) stops a run as SIGTERM does: at a step boundary, 128 + n, one
// line naming it, nothing hidden left.
TEST(OtherStopSignals, EndARunLikeSigtermAndLeaveNothingHidden) {
  for (const auto& [sig, name] : std::vector<std::pair<int, std::string>>{
           {SIGQUIT, "SIGQUIT"}, {SIGUSR1, "SIGUSR1"}, {SIGUSR2, "SIGUSR2"}, {SIGALRM, "SIGALRM"},
           {SIGVTALRM, "SIGVTALRM"}, {SIGPROF, "SIGPROF"}, {SIGXCPU, "SIGXCPU"}, {SIGPWR, "SIGPWR"}}) {
    SCOPED_TRACE(name);
    const std::string dir = make_temp_dir("other_signal");
    auto [err, status] = stop_after(start(long_tiny_run(dir)), 300, sig);
    ASSERT_TRUE(WIFEXITED(status)) << "ended by the signal's default action: " << WTERMSIG(status) << "\n" << err;
    EXPECT_EQ(WEXITSTATUS(status), 128 + sig) << err;
    EXPECT_EQ(count_lines(err), 1) << err;
    EXPECT_NE(err.find("attnprof: interrupted by " + name + " during naive"), std::string::npos) << err;
    for (const std::string& p : list_tree(dir)) {
      EXPECT_EQ(p.find(".tmp."), std::string::npos) << p;
      EXPECT_EQ(p.find(".attnprof.lock"), std::string::npos) << p;
    }
    remove_tree(dir);
  }
}

// A signal that came before a failure to write still decides the exit code
// (the README's order: a signal, then 4), and the one line says both.
TEST(SignalFirst, AWriteFailureAfterASignalIsStill128PlusTheSignal) {
  const std::string dir = make_temp_dir("signal_first");
  const std::string stem = "1_2_16_16_bf16_causal";
  attnprof::io::ensure_writable_dir(dir + "/naive/" + stem + ".summary.json/in_the_way");
  auto [err, status] = stop_after(start(long_tiny_run(dir)), 300, SIGINT);
  ASSERT_TRUE(WIFEXITED(status)) << err;
  EXPECT_EQ(WEXITSTATUS(status), 130) << err;
  EXPECT_EQ(count_lines(err), 1) << err;
  EXPECT_NE(err.find("attnprof: interrupted by SIGINT during naive"), std::string::npos) << err;
  EXPECT_NE(err.find("could not be written"), std::string::npos) << err;
  EXPECT_NE(err.find("is a directory"), std::string::npos) << err;
  remove_tree(dir);
}

// compare reading a FIFO whose writer is slow: a signal ends the wait at
// once; a writer that sends nothing is named as such (not "no writer").
TEST(CompareFifo, ASlowWriterDoesNotHoldOffASignalAndAnEmptyOneIsNamed) {
  const std::string dir = make_temp_dir("compare_fifo");
  const std::string fifo = dir + "/in.fifo", good = dir + "/good.summary.json";
  {
    const CliResult r = run_cli("--quiet --device cpu --batch 1 --heads 2 --seq 16 --head-dim 16 --variant naive "
                                "--timing-iters 0 --out " + dir + "/run");
    ASSERT_EQ(r.rc, 0) << r.err;
    attnprof::io::write_file_atomic(good, attnprof::io::read_file(dir + "/run/naive/1_2_16_16_bf16_causal.summary.json"));
  }
  ASSERT_EQ(mkfifo(fifo.c_str(), 0644), 0);
  for (const bool sends_nothing : {false, true}) {
    SCOPED_TRACE(sends_nothing ? "a writer that sends nothing" : "a slow writer");
    const pid_t writer = fork();
    if (writer == 0) {
      const int fd = ::open(fifo.c_str(), O_WRONLY);  // waits for the reader
      usleep(sends_nothing ? 200 * 1000 : 20 * 1000 * 1000);
      _exit(fd >= 0 ? 0 : 1);
    }
    Child c = start({"compare", fifo, good});
    wait_for_handlers(c.pid);
    if (!sends_nothing) {
      usleep(800 * 1000);
      kill(c.pid, SIGINT);
    }
    const auto t0 = std::chrono::steady_clock::now();
    auto [err, status] = finish(c);
    const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    kill(writer, SIGKILL);
    waitpid(writer, nullptr, 0);
    ASSERT_TRUE(WIFEXITED(status)) << err;
    EXPECT_EQ(count_lines(err), 1) << err;
    if (sends_nothing) {
      EXPECT_EQ(WEXITSTATUS(status), 4) << err;
      EXPECT_NE(err.find("in.fifo: cannot read: its writer closed the FIFO without sending anything"), std::string::npos)
          << err;
    } else {
      EXPECT_EQ(WEXITSTATUS(status), 130) << err;
      EXPECT_NE(err.find("attnprof: interrupted by SIGINT while reading the inputs; nothing written"), std::string::npos)
          << err;
      EXPECT_LT(waited, 5.0) << "the signal, not the writer, ended the wait";
    }
  }
  remove_tree(dir);
}
