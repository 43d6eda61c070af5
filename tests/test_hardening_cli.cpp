// Issue 11 on the real executable: closed and full streams, a closed pipe,
// concurrent runs into one directory, a lock held by another process, the
// old set of files kept when a new one cannot be written, stale temps of dead
// runs, resource limits, profiler options, and the trace layout HTA and
// TensorBoard read. (Signals: test_interrupt.cpp; bad inputs: test_errors.cpp.)
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "attnprof/io/files.h"
#include "test_util.h"

using namespace attnprof::testing;
namespace io = attnprof::io;
using nlohmann::json;

namespace {

const std::string kExe = ATTNPROF_EXE;
const std::string kTiny = " --device cpu --batch 1 --heads 2 --seq 33 --head-dim 32 --timing-iters 0 ";
const std::string kStem = "1_2_33_32_bf16_causal";

// Exit code of a shell command line (128 + n when a signal n ended it).
int shell_rc(const std::string& cmd) {
  const int status = std::system(("timeout -k 5 300 sh -c '" + cmd + "'").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

bool no_temps_or_lock(const std::string& dir) {
  for (const std::string& p : list_tree(dir))
    if (p.find(".tmp.") != std::string::npos || p.find(".attnprof.lock") != std::string::npos) {
      ADD_FAILURE() << "left behind: " << p;
      return false;
    }
  return true;
}

json read_json(const std::string& path) { return json::parse(io::read_file(path)); }

}  // namespace

// fmt::print threw on a failed write inside the error report and the process
// aborted (134); now stderr is only ever lost.
TEST(Streams, ClosedOrFullStderrNeverAborts) {
  const std::string d = make_temp_dir("stderr");
  for (const std::string redirect : {"2>&-", "2>/dev/full"}) {
    SCOPED_TRACE(redirect);
    EXPECT_EQ(shell_rc(kExe + kTiny + "--dtype fp8 >/dev/null " + redirect), 2);
    EXPECT_EQ(shell_rc(kExe + " sweep --device cpu --seq 0 >/dev/null " + redirect), 2);
    EXPECT_EQ(shell_rc(kExe + " compare " + d + "/missing " + d + "/missing >/dev/null " + redirect), 4);
    EXPECT_EQ(shell_rc(kExe + kTiny + "--variant naive,inplace --out " + d + "/multi >/dev/null " + redirect), 0);
    EXPECT_TRUE(path_exists(d + "/multi/compare/" + kStem + ".json"));
    EXPECT_EQ(shell_rc(kExe + " sweep --device cpu --batch 1 --heads 2 --seq 16 --head-dim 16 --variant naive "
                              "--timing-iters 0 --out " + d + "/sweep >/dev/null " + redirect),
              0);
  }
  EXPECT_TRUE(no_temps_or_lock(d));
  remove_tree(d);
}

// Printing must not decide whether files are written: a closed, full or
// broken stdout is exit 5, after every variant and compare/ was written.
TEST(Streams, LostStdoutIsExitFiveAfterEveryFileIsWritten) {
  const std::string d = make_temp_dir("stdout");
  const std::string run = kExe + kTiny + "--variant naive,inplace,sdpa-math --out ";
  const std::vector<std::pair<std::string, std::string>> ways = {
      {"full", run + d + "/full >/dev/full 2>" + d + "/full.err; echo $? >" + d + "/full.rc"},
      {"closed", run + d + "/closed >&- 2>" + d + "/closed.err; echo $? >" + d + "/closed.rc"},
      // `| head -c 1`: the pipe closes after the first byte, while variants are still to run.
      {"pipe", "{ " + run + d + "/pipe 2>" + d + "/pipe.err; echo $? >" + d + "/pipe.rc; } | head -c 1 >/dev/null"},
  };
  for (const auto& [name, cmd] : ways) {
    SCOPED_TRACE(name);
    shell_rc(cmd);
    EXPECT_EQ(io::read_file(d + "/" + name + ".rc"), "5\n");
    const std::vector<std::string> err = split_lines(io::read_file(d + "/" + name + ".err"));
    ASSERT_FALSE(err.empty());
    EXPECT_NE(err.back().find("standard output could not be written"), std::string::npos) << err.back();
    for (const char* v : {"naive", "inplace", "sdpa-math"})
      EXPECT_EQ(read_json(d + "/" + name + "/" + v + "/" + kStem + ".summary.json")["status"], "ok") << v;
    EXPECT_TRUE(path_exists(d + "/" + name + "/compare/" + kStem + ".md"));
  }
  EXPECT_TRUE(no_temps_or_lock(d));
  remove_tree(d);
}

// The four concurrent runs: compare/ mixed figures of different runs.
// One run holds the directory; the others are refused with exit 6 and one line.
TEST(Concurrency, RunsIntoOneDirectoryNeverMixTheirFiles) {
  const std::string d = make_temp_dir("concurrent");
  std::string cmd;
  for (int i = 0; i < 4; ++i)
    cmd += "( " + kExe + kTiny + "--variant naive,inplace --out " + d + "/out >/dev/null 2>" + d + "/" +
           std::to_string(i) + ".err; echo $? >" + d + "/" + std::to_string(i) + ".rc ) & ";
  shell_rc(cmd + "wait");
  int ok = 0;
  for (int i = 0; i < 4; ++i) {
    const std::string rc = io::read_file(d + "/" + std::to_string(i) + ".rc");
    const std::string err = io::read_file(d + "/" + std::to_string(i) + ".err");
    if (rc == "0\n") {
      ++ok;
      continue;
    }
    EXPECT_EQ(rc, "6\n") << err;
    EXPECT_EQ(count_lines(err), 1) << err;
    EXPECT_NE(err.find("is in use by another attnprof run (pid "), std::string::npos) << err;
  }
  EXPECT_GE(ok, 1);
  // compare/ holds the figures of the run whose variant files are there.
  const json glance = read_json(d + "/out/compare/" + kStem + ".json");
  const json naive = read_json(d + "/out/naive/" + kStem + ".summary.json");
  ASSERT_TRUE(glance.is_array() && !glance.empty());
  EXPECT_DOUBLE_EQ(glance[0]["cpu_time_us"].get<double>(),
                   naive["headline"]["scopes"][0]["cpu_time_avg_us"].get<double>());
  EXPECT_TRUE(no_temps_or_lock(d));
  remove_tree(d);
}

TEST(Concurrency, ALockHeldElsewhereIsExitSixNamingTheHolder) {
  const std::string d = make_temp_dir("locked");
  {
    io::DirLock held(d);
    const CliResult r = run_cli(kTiny + "--variant naive --out " + d);
    EXPECT_EQ(r.rc, 6) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("(pid " + std::to_string(::getpid()) + ")"), std::string::npos) << r.err;
    EXPECT_FALSE(path_exists(d + "/naive"));
  }
  EXPECT_EQ(run_cli(kTiny + "--variant naive --out " + d).rc, 0);
  remove_tree(d);
}

// A run whose files cannot all be written leaves the earlier complete set as
// it was; stale temps of dead runs are cleared by the next run.
TEST(Files, AFailedRunKeepsTheOldSetAndALaterRunClearsDeadTemps) {
  const std::string d = make_temp_dir("oldset");
  ASSERT_EQ(run_cli(kTiny + "--variant naive --out " + d).rc, 0);
  const std::string trace = d + "/naive/" + kStem + "/" + kStem + ".pt.trace.json.gz";
  const std::string summary = d + "/naive/" + kStem + ".summary.json";
  const std::string old_trace = io::read_file(trace), old_summary = io::read_file(summary);
  // The table's place taken by a directory: the new set cannot be complete.
  ::unlink((d + "/naive/" + kStem + ".txt").c_str());
  io::ensure_writable_dir(d + "/naive/" + kStem + ".txt");
  const CliResult r = run_cli(kTiny + "--variant naive --out " + d);
  EXPECT_EQ(r.rc, 4) << r.err;
  EXPECT_EQ(count_lines(r.err), 1) << r.err;
  EXPECT_EQ(io::read_file(trace), old_trace);
  EXPECT_EQ(io::read_file(summary), old_summary);
  EXPECT_TRUE(no_temps_or_lock(d));

  // Temps a killed run left (its pid is gone) go; a live process's stay.
  const pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string stale = ".x.summary.json.tmp." + std::to_string(dead) + ".3";
  const std::string live = ".x.summary.json.tmp." + std::to_string(::getpid()) + ".3";
  for (const std::string& dir : {d, d + "/naive", d + "/naive/" + kStem})
    for (const std::string& n : {stale, stale + ".tmp", live}) io::write_file_atomic(dir + "/" + n, "x");
  ::rmdir((d + "/naive/" + kStem + ".txt").c_str());
  EXPECT_EQ(run_cli(kTiny + "--variant naive --out " + d).rc, 0);
  for (const std::string& dir : {d, d + "/naive", d + "/naive/" + kStem}) {
    EXPECT_FALSE(path_exists(dir + "/" + stale)) << dir;
    EXPECT_FALSE(path_exists(dir + "/" + stale + ".tmp")) << dir;
    EXPECT_TRUE(path_exists(dir + "/" + live)) << dir;
  }
  remove_tree(d);
}

// sweep/ is one set: a directory where sweep.csv goes writes none of it.
TEST(Files, SweepSetIsAllOrNothing) {
  const std::string d = make_temp_dir("sweepset");
  io::ensure_writable_dir(d + "/sweep/sweep.csv");
  const CliResult r = run_cli("sweep --device cpu --batch 1 --heads 2 --seq 16 --head-dim 16 --variant naive "
                              "--timing-iters 0 --out " + d);
  EXPECT_EQ(r.rc, 4) << r.err;
  EXPECT_NE(split_lines(r.err).back().find("sweep.csv"), std::string::npos) << r.err;
  for (const std::string& p : list_tree(d + "/sweep"))
    EXPECT_TRUE(p == d + "/sweep" || p.rfind(d + "/sweep/sweep.csv", 0) == 0) << "written: " << p;
  EXPECT_TRUE(no_temps_or_lock(d));
  remove_tree(d);
}

// `ulimit -f`: SIGXFSZ is ignored, the write fails with EFBIG, one line, exit 4.
TEST(Files, FileSizeLimitIsAnErrorNotASignal) {
  const std::string d = make_temp_dir("ulimit");
  const int rc = shell_rc("ulimit -f 16; " + kExe + kTiny + "--variant naive --no-gzip --out " + d + " >/dev/null 2>" +
                          d + "/err");
  const std::string err = io::read_file(d + "/err");
  EXPECT_EQ(rc, 4) << err;
  EXPECT_EQ(count_lines(err), 1) << err;
  EXPECT_TRUE(err.find("File too large") != std::string::npos || err.find("not complete JSON") != std::string::npos)
      << err;
  EXPECT_FALSE(path_exists(d + "/naive/" + kStem + ".summary.json"));
  EXPECT_TRUE(no_temps_or_lock(d));
  remove_tree(d);
}

// Paths with control characters work; what is printed shows them escaped.
TEST(Files, ControlCharactersInPathsAreWrittenAndShownEscaped) {
  const std::string d = make_temp_dir("ctrl");
  const CliResult r = run_cli(kTiny + "--variant naive --out \"" + d + "/a$(printf '\\033')b\"");
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_TRUE(path_exists(d + "/a\x1b" "b/naive/" + kStem + ".summary.json"));
  EXPECT_EQ(r.out.find('\x1b'), std::string::npos) << "an escape reached the terminal";
  EXPECT_NE(r.out.find("a\\x1bb/"), std::string::npos) << r.out;
  remove_tree(d);
}

// The trace alone in its folder, as HTA (a folder is one job's ranks) and
// TensorBoard's plugin (*.pt.trace.json.gz) expect, with the fields they read.
TEST(Traces, LayoutAndFieldsForHtaAndTensorBoard) {
  const std::string d = make_temp_dir("layout");
  const CliResult r =
      run_cli(kTiny + "--variant naive --record-shapes --profile-memory --with-stack --out " + d);
  ASSERT_EQ(r.rc, 0) << r.err;
  const std::string folder = d + "/naive/" + kStem;
  std::set<std::string> in_folder;
  for (const std::string& p : list_tree(folder))
    if (p != folder) in_folder.insert(p.substr(folder.size() + 1));
  EXPECT_EQ(in_folder, std::set<std::string>{kStem + ".pt.trace.json.gz"});
  const std::string text = io::gzip_decompress(io::read_file(folder + "/" + kStem + ".pt.trace.json.gz"));
  EXPECT_NE(text.find("\"rank\": 0"), std::string::npos) << "HTA's pattern is \"rank\":\\s+(\\d+)";
  const json t = json::parse(text);
  EXPECT_EQ(t["distributedInfo"]["rank"], 0);
  EXPECT_EQ(t["distributedInfo"]["world_size"], 1);
  EXPECT_EQ(t["traceName"], folder + "/" + kStem + ".pt.trace.json.gz");
  ASSERT_TRUE(t["trace_id"].is_string());
  EXPECT_EQ(t["trace_id"].get<std::string>().size(), 32u);
  for (const char* flag : {"record_shapes", "profile_memory", "with_stack"}) EXPECT_EQ(t[flag], 1) << flag;
  bool shapes = false, memory = false;
  for (const json& e : t["traceEvents"]) {
    shapes = shapes || (e.value("cat", "") == "cpu_op" && e["args"].contains("Input Dims"));
    memory = memory || e.value("name", "") == "[memory]";
  }
  EXPECT_TRUE(shapes) << "--record-shapes: input shapes in the ops' args";
  EXPECT_TRUE(memory) << "--profile-memory: [memory] events";
  const json s = read_json(d + "/naive/" + kStem + ".summary.json");
  for (const char* flag : {"record_shapes", "profile_memory", "with_stack"}) EXPECT_EQ(s["schedule"][flag], true);
  EXPECT_EQ(s["files"]["trace"], "naive/" + kStem + "/" + kStem + ".pt.trace.json.gz");
  // compare finds the summaries by name, not the traces.
  const CliResult c = run_cli("compare " + d + " " + d + " --out " + d + "/cmp");
  EXPECT_EQ(c.rc, 0) << c.err;
  remove_tree(d);
}
