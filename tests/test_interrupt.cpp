// Ctrl-C in the middle of a multi-variant run: the finished variants keep valid
// files, the interrupted one leaves only a summary that says so, no temp files
// remain, and the exit code is 128 + signal.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>

#include "attnprof/io/files.h"
#include "test_util.h"

using namespace attnprof::testing;

namespace {

struct Interrupted {
  int exit_code = -1;
  std::string err;
};

// Starts attnprof, waits until stderr announces variant `at` ("[3/3] ..."), sends `sig`.
Interrupted run_and_interrupt(const std::string& out_dir, const std::string& at, int sig) {
  int pipefd[2];
  if (pipe(pipefd) != 0) return {};
  const pid_t pid = fork();
  if (pid == 0) {
    dup2(pipefd[1], STDERR_FILENO);
    close(pipefd[0]);
    const int devnull = ::open("/dev/null", O_WRONLY);
    dup2(devnull, STDOUT_FILENO);
    execl(ATTNPROF_EXE, ATTNPROF_EXE, "--device", "cpu", "--batch", "2", "--heads", "4", "--seq", "256",
          "--head-dim", "64", "--variant", "naive,inplace,sdpa-math", "--timing-iters", "30", "--out",
          out_dir.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipefd[1]);
  Interrupted r;
  char buf[4096];
  bool sent = false;
  ssize_t n;
  while ((n = read(pipefd[0], buf, sizeof(buf))) > 0) {
    r.err.append(buf, static_cast<size_t>(n));
    if (!sent && r.err.find(at) != std::string::npos) {
      kill(pid, sig);
      sent = true;
    }
  }
  close(pipefd[0]);
  int status = 0;
  waitpid(pid, &status, 0);
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
  EXPECT_NE(r.err.find("interrupted by " + std::string(sig == SIGINT ? "SIGINT" : "SIGTERM") + " during sdpa-math (3/3)"),
            std::string::npos)
      << r.err;
  expect_finished_variant(dir, "naive");
  expect_finished_variant(dir, "inplace");
  const std::string stem = dir + "/sdpa-math/2_4_256_64_bf16_causal";
  const auto summary = nlohmann::json::parse(attnprof::io::read_file(stem + ".summary.json"));
  EXPECT_EQ(summary["status"], "interrupted");
  EXPECT_FALSE(path_exists(stem));  // no trace folder
  EXPECT_FALSE(path_exists(stem + ".txt"));
  for (const std::string& p : list_tree(dir)) EXPECT_EQ(p.find(".tmp."), std::string::npos) << p;
  remove_tree(dir);
}

INSTANTIATE_TEST_SUITE_P(Signals, InterruptTest, ::testing::Values(SIGINT, SIGTERM),
                         [](const auto& info) { return info.param == SIGINT ? "SIGINT" : "SIGTERM"; });
