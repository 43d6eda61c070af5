// Progress and the early estimate as a user meets them, on the real
// executable: plain lines on a pipe at the promised rate (a heartbeat during
// a slow step), one line redrawn in place on a terminal and cleared before
// anything else, nothing under --quiet, stdout free of progress. The
// environment variables ATTNPROF_PROGRESS_INTERVAL and
// ATTNPROF_ESTIMATE_THRESHOLD (for tests) shrink the intervals so a run of a
// few seconds shows what a long one would.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <pty.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "attnprof/io/files.h"
#include "cli/progress_display.h"
#include "test_util.h"

using namespace attnprof::testing;

namespace {

struct Outcome {
  int rc = -1;
  std::string out, err;  // err: the raw bytes (on a terminal, with \r and ESC[K)
};

// Runs attnprof with `args` and the extra environment `env` ("NAME=value"),
// stdout to a file; stderr on a pipe, or on a pseudo-terminal 160 columns wide.
Outcome run_attnprof(const std::vector<std::string>& args, const std::vector<std::string>& env, bool tty) {
  const std::string d = make_temp_dir("progress_io");
  const std::string out_path = d + "/stdout";
  int parent_fd = -1, child_fd = -1;
  if (tty) {
    struct winsize ws {};
    ws.ws_col = 160, ws.ws_row = 40;
    if (::openpty(&parent_fd, &child_fd, nullptr, nullptr, &ws) != 0) return {};
  } else {
    int fds[2];
    if (::pipe(fds) != 0) return {};
    parent_fd = fds[0], child_fd = fds[1];
  }
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::dup2(child_fd, STDERR_FILENO);
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(out, STDOUT_FILENO);
    const int in = ::open("/dev/null", O_RDONLY);
    ::dup2(in, STDIN_FILENO);
    ::close(parent_fd);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    std::vector<char*> argv = {const_cast<char*>(ATTNPROF_EXE)};
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    ::execv(ATTNPROF_EXE, argv.data());
    _exit(127);
  }
  ::close(child_fd);
  Outcome r;
  char buf[4096];
  ssize_t n;
  while ((n = ::read(parent_fd, buf, sizeof(buf))) > 0) r.err.append(buf, size_t(n));  // a pty ends with EIO
  ::close(parent_fd);
  int status = 0;
  ::waitpid(pid, &status, 0);
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = attnprof::io::read_file(out_path);
  remove_tree(d);
  return r;
}

// What a terminal shows after `bytes`: \r returns to column 0, ESC[K erases to
// the end of the line, \n starts the next line.
std::vector<std::string> screen(const std::string& bytes) {
  std::vector<std::string> lines(1);
  size_t col = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    std::string& line = lines.back();
    if (bytes[i] == '\r') {
      col = 0;
    } else if (bytes[i] == '\n') {
      lines.emplace_back();
      col = 0;
    } else if (bytes.compare(i, 3, "\x1b[K") == 0) {
      line.resize(std::min(col, line.size()));
      i += 2;
    } else {
      if (col < line.size()) line[col] = bytes[i];
      else line.push_back(bytes[i]);
      ++col;
    }
  }
  if (lines.back().empty()) lines.pop_back();
  return lines;
}

bool contains(const std::string& s, const std::string& needle) { return s.find(needle) != std::string::npos; }

// "elapsed 1.3 s" (under 10 s, the tenths are shown) -> 1.3
double elapsed_of(const std::string& line) {
  const size_t at = line.find("| elapsed ");
  return at == std::string::npos ? -1.0 : std::stod(line.substr(at + 10));
}

std::vector<std::string> with(std::vector<std::string> args, const std::string& out_dir) {
  args.insert(args.end(), {"--out", out_dir});
  return args;
}

// The README's first problem, one forward per phase: about a second a step on 2 CPU cores.
const std::vector<std::string> kSlowSteps = {"--device", "cpu", "--variant", "naive,inplace", "--warmup-iters", "0",
                                             "--wait", "0", "--warmup", "0", "--active", "1", "--timing-iters", "0"};
const std::vector<std::string> kTiny = {"--device", "cpu", "--batch", "1", "--heads", "2", "--seq", "33",
                                        "--head-dim", "32"};

}  // namespace

TEST(Progress, PlainLinesOnAPipeAtMostEveryIntervalAndAtLeastEveryHeartbeat) {
  constexpr double kInterval = 0.3, kHeartbeat = 2 * kInterval;
  const std::string d = make_temp_dir("progress");
  // No early estimate: its line would also reset the heartbeat.
  const Outcome r = run_attnprof(with(kSlowSteps, d),
                             {"ATTNPROF_PROGRESS_INTERVAL=0.3", "ATTNPROF_ESTIMATE_THRESHOLD=100000"}, /*tty=*/false);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(contains(r.err, "\r") || contains(r.err, "\x1b[")) << "no terminal codes on a pipe:\n" << r.err;
  EXPECT_FALSE(contains(r.out, "| elapsed")) << "progress stays off stdout";
  for (const char* variant : {"naive", "inplace"}) {
    SCOPED_TRACE(variant);
    // This variant's progress lines ("[1/2] naive: profiled step 1 of 1 | elapsed 0.6 s").
    std::vector<std::string> lines;
    for (const std::string& line : split_lines(r.err))
      if (contains(line, std::string("] ") + variant + ": ")) lines.push_back(line);
    ASSERT_GE(lines.size(), 2u) << r.err;
    // Lines carry the unit's elapsed time (tenths of a second under 10 s,
    // whole seconds above): consecutive ones are an interval apart at least,
    // a heartbeat plus scheduling slack at most.
    double prev = 0.0;  // the header, at the unit's start
    for (const std::string& line : lines) {
      const double t = elapsed_of(line);
      const double resolution = t < 10.0 ? 0.1 : 1.0;
      EXPECT_LE(t - prev, kHeartbeat + 0.5 + resolution) << line << "\n" << r.err;
      if (&line != &lines.front()) EXPECT_GE(t - prev, kInterval - resolution) << line << "\n" << r.err;
      prev = t;
    }
    // A step of a second or more shows life while it runs: only the timer
    // thread can repeat the line of the one profiled step.
    const auto summary = nlohmann::json::parse(
        attnprof::io::read_file(d + "/" + variant + "/8_16_1024_64_bf16_causal.summary.json"));
    double step_s = 0.0;
    for (const auto& phase : summary["phases_ms"])
      if (phase["phase"] == "schedule: active steps") step_s = phase["ms"].get<double>() / 1e3;
    int during_step = 0;
    for (const std::string& line : lines) during_step += contains(line, "profiled step 1 of 1");
    EXPECT_GE(during_step, int(step_s / (kHeartbeat + 0.5))) << "step " << step_s << " s\n" << r.err;
    EXPECT_EQ(summary["schedule"]["warmup_iters"], 0) << "explicit counts win";
  }
  remove_tree(d);
}

TEST(Progress, EarlyEstimateOnceAfterTheFirstStepWithASmallerProblem) {
  const std::string d = make_temp_dir("progress");
  std::vector<std::string> args = kTiny;
  args.insert(args.end(), {"--variant", "naive", "--out", d});
  const Outcome r = run_attnprof(args, {"ATTNPROF_ESTIMATE_THRESHOLD=0"}, /*tty=*/false);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::vector<std::string> lines = split_lines(r.err);
  int estimates = 0;
  for (const std::string& line : lines) {
    if (!contains(line, "per forward")) continue;
    ++estimates;
    EXPECT_EQ(line.rfind("naive on cpu: ", 0), 0u) << line;
    EXPECT_TRUE(contains(line, "more forwards, about ")) << line;
    EXPECT_TRUE(contains(line, " in all")) << line;
    EXPECT_TRUE(contains(line, "(estimate")) << line;
  }
  EXPECT_EQ(estimates, 1) << r.err;
  // Auto counts were used and recorded (how many depends on the step time).
  const auto summary = nlohmann::json::parse(attnprof::io::read_file(d + "/naive/1_2_33_32_bf16_causal.summary.json"));
  EXPECT_GE(summary["schedule"]["warmup_iters"].get<int>(), 1);
  EXPECT_LE(summary["schedule"]["warmup_iters"].get<int>(), 3);
  const int timed = summary["timing"]["reps"].get<int>() * summary["timing"]["iters_per_rep"].get<int>();
  EXPECT_GE(timed, 1);
  EXPECT_LE(timed, 100);
  remove_tree(d);
}

TEST(Progress, QuietPrintsNothingAndStdoutIsTheSame) {
  const std::string d = make_temp_dir("progress");
  std::vector<std::string> args = kTiny;
  args.insert(args.end(), {"--variant", "naive,inplace", "--timing-iters", "3", "--out", d});
  std::vector<std::string> quiet = args;
  quiet.push_back("--quiet");
  const std::vector<std::string> env = {"ATTNPROF_PROGRESS_INTERVAL=0.01", "ATTNPROF_ESTIMATE_THRESHOLD=0"};
  const Outcome loud = run_attnprof(args, env, /*tty=*/false);
  const Outcome q = run_attnprof(quiet, env, /*tty=*/false);
  ASSERT_EQ(loud.rc, 0) << loud.err;
  ASSERT_EQ(q.rc, 0) << q.err;
  EXPECT_TRUE(contains(loud.err, "[1/2] naive")) << loud.err;
  EXPECT_TRUE(contains(loud.err, "per forward")) << loud.err;
  EXPECT_EQ(q.err, "") << "--quiet: no headers, progress or estimate";
  // The same report on stdout, up to the measured numbers.
  const auto skeleton = [](const std::string& s) {
    std::string k;
    for (char c : s) k += (c >= '0' && c <= '9') || c == '.' ? '#' : c;
    return k;
  };
  const std::vector<std::string> a = split_lines(skeleton(loud.out)), b = split_lines(skeleton(q.out));
  EXPECT_EQ(a.size(), b.size());
  EXPECT_FALSE(contains(loud.out, "elapsed") || contains(loud.out, "per forward"));
  remove_tree(d);
}

TEST(Progress, OnATerminalOneLineRedrawnInPlaceAndClearedBeforeOutput) {
  const std::string d = make_temp_dir("progress");
  std::vector<std::string> args = kTiny;
  args.insert(args.end(), {"--variant", "naive,inplace", "--timing-iters", "3", "--out", d});
  const Outcome r = run_attnprof(args, {}, /*tty=*/true);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(contains(r.err, "\r")) << "redrawn in place";
  EXPECT_TRUE(contains(r.err, "\x1b[K")) << "cleared to the end of the line";
  EXPECT_TRUE(contains(r.err, "naive: ")) << r.err;
  // What stays on the screen: the two header lines, no half line.
  const std::vector<std::string> shown = screen(r.err);
  ASSERT_EQ(shown.size(), 2u) << r.err;
  EXPECT_EQ(shown[0].rfind("[1/2] naive (1x2x33x32 bf16 causal on cpu) | elapsed ", 0), 0u) << shown[0];
  EXPECT_EQ(shown[1].rfind("[2/2] inplace (", 0), 0u) << shown[1];
  EXPECT_TRUE(contains(shown[1], "left")) << "the second header estimates the rest: " << shown[1];
  remove_tree(d);
}

TEST(Progress, OnATerminalASingleVariantErrorIsStillOneLine) {
  std::vector<std::string> args = kTiny;
  args.insert(args.end(), {"--variant", "sdpa-cudnn", "--out", "/tmp/attnprof_never_written"});
  const Outcome r = run_attnprof(args, {}, /*tty=*/true);
  EXPECT_EQ(r.rc, 3) << r.err;
  const std::vector<std::string> shown = screen(r.err);
  ASSERT_EQ(shown.size(), 1u) << r.err;
  EXPECT_EQ(shown[0].rfind("attnprof: sdpa-cudnn cannot run here: ", 0), 0u) << shown[0];
}

// The early estimate takes its pace from the second step: with a long --wait
// the first forward of a CPU run took 30x the others, and an estimate from it
// said "about 4 min" for a 7 s run.
TEST(ProgressEstimate, ComesFromTheSecondStepNotAnOutlierFirst) {
  std::FILE* out = std::tmpfile();
  ASSERT_NE(out, nullptr);
  attnprof::cli::ProgressSettings settings;
  settings.estimate_threshold_s = 0.0;
  {
    attnprof::cli::ProgressDisplay display(settings, 1, 0.0, out);
    attnprof::Problem p;
    p.device = "cpu";
    display.begin(0, {"naive", "naive (1x2x33x32)", "in all", p, {}, false});
    const attnprof::ProgressCallback report = display.callback();
    attnprof::RunProgress first{attnprof::RunPhase::warmup, 1, 0, 2.4};
    first.steps_done = 1, first.steps_left = 100, first.step_seconds = 2.4;
    report(first);
    std::fflush(out);
    EXPECT_EQ(std::ftell(out), 0L) << "no estimate from the first step alone";
    attnprof::RunProgress second{attnprof::RunPhase::profiling, 1, 100, 0.08};
    second.steps_done = 2, second.steps_left = 99, second.step_seconds = 0.08;
    report(second);
    display.end();
  }
  std::rewind(out);
  std::string text;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, out)) > 0;) text.append(buf, n);
  std::fclose(out);
  EXPECT_NE(text.find("naive on cpu: 80 ms per forward, 99 more forwards, about"), std::string::npos) << text;
  EXPECT_NE(text.find("(estimate from the second forward)"), std::string::npos) << text;
  EXPECT_EQ(text.find("min"), std::string::npos) << "99 x 80 ms is seconds, not minutes: " << text;
}
