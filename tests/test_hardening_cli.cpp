// Issue 11 on the real executable: closed and full streams, a closed pipe,
// concurrent runs into one directory, a lock held by another process, the
// old set of files kept when a new one cannot be written, stale temps of dead
// runs, resource limits, profiler options, and the trace layout HTA and
// TensorBoard read. (Signals: test_interrupt.cpp; bad inputs: test_errors.cpp.)
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "attnprof/device.h"
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
    EXPECT_EQ(shell_rc(kExe + kTiny + "--dtype fp12 >/dev/null " + redirect), 2);
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
  const std::string tail = ".tmp." + std::to_string(dead) + ".3";
  const std::string live_tail = ".tmp." + std::to_string(::getpid()) + ".3";
  // attnprof's own names, per folder: the profiler's scratch trace, a table, a trace.
  const std::vector<std::pair<std::string, std::string>> own = {
      {d, ".naive_" + kStem + ".json"}, {d + "/naive", "." + kStem + ".summary.json"},
      {d + "/naive/" + kStem, "." + kStem + ".pt.trace.json.gz"}};
  for (const auto& [dir, name] : own)
    for (const std::string& n : {name + tail, name + tail + ".tmp", name + live_tail}) io::write_file_atomic(dir + "/" + n, "x");
  ::rmdir((d + "/naive/" + kStem + ".txt").c_str());
  EXPECT_EQ(run_cli(kTiny + "--variant inplace --out " + d).rc, 0) << "another variant's run clears them too";
  for (const auto& [dir, name] : own) {
    EXPECT_FALSE(path_exists(dir + "/" + name + tail)) << dir;
    EXPECT_FALSE(path_exists(dir + "/" + name + tail + ".tmp")) << dir;
    EXPECT_TRUE(path_exists(dir + "/" + name + live_tail)) << dir;
  }
  remove_tree(d);
}

// attnprof deletes only what it wrote: a file named like a dead temp but not
// for one of attnprof's own file names, or in a folder it never writes, stays
// (it deleted a user's file: anything named .*.tmp.<dead pid>.<n> under --out).
TEST(Files, DeadTempCleanupNeverTouchesAUsersFiles) {
  const std::string d = make_temp_dir("usertemps");
  ASSERT_EQ(run_cli(kTiny + "--variant naive --out " + d).rc, 0);
  const pid_t dead = ::fork();
  if (dead == 0) _exit(0);
  ::waitpid(dead, nullptr, 0);
  const std::string tail = ".tmp." + std::to_string(dead) + ".1";
  std::vector<std::string> users;
  for (const std::string& dir : {d, d + "/naive", d + "/naive/" + kStem, d + "/mydata", d + "/mydata/naive",
                                 d + "/naive/" + kStem + "/deeper"}) {
    io::ensure_writable_dir(dir);
    for (const std::string& name : {std::string(".notes.txt"), std::string(".draft.summary.json"), "." + kStem + ".bak"}) {
      users.push_back(dir + "/" + name + tail);
      io::write_file_atomic(users.back(), "the user's");
    }
  }
  // attnprof's own name, but in a folder it never writes.
  users.push_back(d + "/mydata/." + kStem + ".summary.json" + tail);
  io::write_file_atomic(users.back(), "the user's");
  ASSERT_EQ(run_cli(kTiny + "--variant naive,inplace --out " + d).rc, 0);
  ASSERT_EQ(run_cli("compare " + d + "/naive/" + kStem + ".summary.json " + d + "/naive/" + kStem +
                    ".summary.json --csv " + d + "/mydata/diff.csv --out " + d + "/cmp").rc,
            0);
  for (const std::string& u : users) EXPECT_EQ(io::read_file(u), "the user's") << u;
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

// Line breaks and backslashes in --out work end to end (Kineto deletes line
// breaks from its file name and turns backslashes into slashes: the run used
// to fail at Kineto's rename, after all of its work).
TEST(Files, LineBreaksAndBackslashesInOutWorkEndToEnd) {
  const std::string d = make_temp_dir("ctrl_nl");
  for (const std::string& name : {std::string("a\nb"), std::string("c\\d"), std::string("e\n\\f")}) {
    SCOPED_TRACE(name);
    const std::string out = d + "/" + name;
    const CliResult r = run_cli(kTiny + "--variant naive,inplace --out \"" + out + "\"");
    ASSERT_EQ(r.rc, 0) << r.err;
    const std::string trace = out + "/naive/" + kStem + "/" + kStem + ".pt.trace.json.gz";
    const json t = json::parse(io::gzip_decompress(io::read_file(trace)));
    EXPECT_EQ(t["traceName"], trace);
    EXPECT_EQ(read_json(out + "/naive/" + kStem + ".summary.json")["status"], "ok");
    EXPECT_TRUE(path_exists(out + "/compare/" + kStem + ".trace.json.gz"));
    for (const std::string& line : split_lines(r.out))
      if (line.find("files: ") != std::string::npos) EXPECT_NE(line.find(d + "/"), std::string::npos) << "one line per list: " << line;
    EXPECT_TRUE(no_temps_or_lock(out));
  }
  remove_tree(d);
}

// Multi-variant runs into one --out: compare/ holds one run's set, every time.
TEST(Files, CompareFolderNeverMixesRuns) {
  if (attnprof::cuda_available()) GTEST_SKIP() << "needs variants that cannot run here (a machine without CUDA)";
  const std::string d = make_temp_dir("compare_set");
  const std::string c = d + "/compare/" + kStem;
  ASSERT_EQ(run_cli(kTiny + "--variant naive,inplace --out " + d).rc, 0);
  // Only one variant of two runs here: the merged trace and the picture are
  // this run's (one process, one row), not the first run's beside new tables.
  const CliResult one = run_cli(kTiny + "--variant sdpa-math,sdpa-cudnn --out " + d);
  ASSERT_EQ(one.rc, 0) << one.err;
  const json glance = read_json(c + ".json");
  ASSERT_EQ(glance.size(), 2u);
  std::set<std::string> processes;
  const json merged = json::parse(io::gzip_decompress(io::read_file(c + ".trace.json.gz")));
  for (const json& e : merged["traceEvents"])
    if (e.value("name", "") == "process_name") processes.insert(e["args"]["name"].get<std::string>());
  ASSERT_EQ(processes.size(), 1u);
  EXPECT_EQ(processes.begin()->rfind("sdpa-math", 0), 0u) << *processes.begin();
  const std::string svg = io::read_file(c + ".timeline.svg");
  EXPECT_NE(svg.find("sdpa-math"), std::string::npos);
  EXPECT_EQ(svg.find("inplace"), std::string::npos) << "the first run's picture stayed";
  // A run in which nothing can run replaces nothing.
  const std::string before = io::read_file(c + ".json") + io::read_file(c + ".trace.json.gz");
  const CliResult none = run_cli(kTiny + "--variant sdpa-cudnn,sdpa-efficient --out " + d);
  EXPECT_EQ(none.rc, 3) << none.err;
  EXPECT_EQ(count_lines(none.err), 1) << none.err;
  EXPECT_EQ(io::read_file(c + ".json") + io::read_file(c + ".trace.json.gz"), before);
  EXPECT_TRUE(no_temps_or_lock(d));
  remove_tree(d);
}

// A --no-gzip run after a gzip run (and back) leaves one trace in the folder:
// HTA reads every .json/.gz there as a rank.
TEST(Traces, SwitchingCompressionLeavesOneTrace) {
  const std::string d = make_temp_dir("gzip_switch");
  const std::string folder = d + "/naive/" + kStem;
  for (const bool gzip : {true, false, true}) {
    ASSERT_EQ(run_cli(kTiny + "--variant naive --out " + d + (gzip ? "" : " --no-gzip")).rc, 0);
    std::vector<std::string> in_folder;
    for (const std::string& p : list_tree(folder))
      if (p != folder) in_folder.push_back(p.substr(folder.size() + 1));
    EXPECT_EQ(in_folder, std::vector<std::string>{kStem + (gzip ? ".pt.trace.json.gz" : ".pt.trace.json")});
    EXPECT_EQ(read_json(d + "/naive/" + kStem + ".summary.json")["files"]["trace"],
              "naive/" + kStem + "/" + kStem + (gzip ? ".pt.trace.json.gz" : ".pt.trace.json"));
  }
  remove_tree(d);
}

// An output that names one of the command's inputs is refused before any
// work, and the input is as it was (compare A B --out A replaced A's own
// merged trace and timeline).
TEST(Files, OutputsNamingInputsAreRefusedBeforeAnyWork) {
  const std::string d = make_temp_dir("clash");
  ASSERT_EQ(run_cli(kTiny + "--variant naive,inplace --out " + d + "/a").rc, 0);
  ASSERT_EQ(run_cli(kTiny + "--variant naive,inplace --out " + d + "/b").rc, 0);
  const std::vector<std::string> before = list_tree(d);
  std::string bytes;
  for (const std::string& p : before)
    if (p.find(".trace.json.gz") != std::string::npos || p.find(".svg") != std::string::npos) bytes += io::read_file(p);
  const std::string sa = d + "/a/naive/" + kStem + ".summary.json", sb = d + "/b/naive/" + kStem + ".summary.json";
  for (const std::string& args : {"compare " + d + "/a " + d + "/b --out " + d + "/a",
                                  "compare " + d + "/a " + d + "/b --out " + d + "/b/",
                                  "compare " + sa + " " + sb + " --out " + d + "/a",
                                  "compare " + sa + " " + sb + " --csv " + sb,
                                  "compare " + d + "/a " + d + "/b --md " + d + "/b/naive/" + kStem + "/" + kStem +
                                      ".pt.trace.json.gz --out " + d + "/c",
                                  "compare " + sa + " " + sb + " --csv " + d + "/x.csv --md " + d + "/x.csv --out " +
                                      d + "/c"}) {
    SCOPED_TRACE(args);
    const CliResult r = run_cli(args);
    EXPECT_EQ(r.rc, 2) << r.err;
    EXPECT_EQ(count_lines(r.err), 1) << r.err;
    EXPECT_EQ(r.out, "") << "refused before anything is printed";
  }
  std::string after;
  for (const std::string& p : list_tree(d))
    if (p.find(".trace.json.gz") != std::string::npos || p.find(".svg") != std::string::npos) after += io::read_file(p);
  EXPECT_EQ(list_tree(d), before);
  EXPECT_EQ(after, bytes);
  remove_tree(d);
}

// compare on folders walks only their own trees: a link to / inside one used
// to walk into /proc; a link to a summary outside is not read either.
TEST(Files, CompareWalksDoNotFollowLinksOutOfTheTree) {
  const std::string d = make_temp_dir("walk");
  ASSERT_EQ(run_cli(kTiny + "--variant naive --out " + d + "/a").rc, 0);
  ASSERT_EQ(run_cli(kTiny + "--variant inplace --out " + d + "/outside").rc, 0);
  ASSERT_EQ(::symlink("/", (d + "/a/root").c_str()), 0);
  ASSERT_EQ(::symlink((d + "/outside/inplace").c_str(), (d + "/a/inplace").c_str()), 0);
  ASSERT_EQ(::symlink((d + "/outside/inplace/" + kStem + ".summary.json").c_str(),
                      (d + "/a/naive/elsewhere.summary.json").c_str()),
            0);
  const auto t0 = std::chrono::steady_clock::now();
  const CliResult r = run_cli("compare " + d + "/a " + d + "/a --out " + d + "/cmp", 120);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(60));
  EXPECT_NE(r.out.find("naive/" + kStem + ".summary.json"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("inplace"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("elsewhere"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("root/"), std::string::npos) << r.out;
  remove_tree(d);
}

// "the files were written" only where files were: not after --help,
// --version, --list-variants, or a compare that writes none.
TEST(Streams, AFullStdoutSaysFilesWereWrittenOnlyWhenTheyWere) {
  const std::string d = make_temp_dir("full_nofiles");
  ASSERT_EQ(run_cli(kTiny + "--variant naive --out " + d + "/run").rc, 0);
  // A copied summary: the trace it names is not beside it, so compare writes nothing.
  const std::string s = d + "/loose.summary.json";
  io::write_file_atomic(s, io::read_file(d + "/run/naive/" + kStem + ".summary.json"));
  for (const std::string& args : {std::string("--help"), std::string("--version"), std::string("--list-variants --device cpu"),
                                  "compare " + s + " " + s + " --out " + d + "/cmp"}) {
    SCOPED_TRACE(args);
    const int rc = shell_rc(kExe + " " + args + " >/dev/full 2>" + d + "/err");
    const std::string err = io::read_file(d + "/err");
    EXPECT_EQ(rc, 5) << err;
    EXPECT_NE(err.find("standard output could not be written"), std::string::npos) << err;
    EXPECT_EQ(err.find("files were written"), std::string::npos) << err;
  }
  EXPECT_FALSE(path_exists(d + "/cmp"));
  EXPECT_EQ(shell_rc(kExe + kTiny + "--variant naive --out " + d + "/run >/dev/full 2>" + d + "/err"), 5);
  EXPECT_NE(io::read_file(d + "/err").find("; the files were written"), std::string::npos);
  remove_tree(d);
}

// --profile-memory: the table has Python's memory columns, and LibTorch's
// raw allocator warnings ("[W... CPUAllocator.cpp:245] Memory block of
// unknown size") stay off stderr; the summary keeps them as warnings.
TEST(Traces, ProfileMemoryTableAsPythonsAndNoRawWarnings) {
  const std::string d = make_temp_dir("profile_memory");
  const CliResult r = run_cli(kTiny + "--variant naive --pass bwd --profile-memory --quiet --out " + d);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err, "") << "nothing raw on stderr";
  const std::string table = io::read_file(d + "/naive/" + kStem + "_bwd.txt");
  EXPECT_NE(table.find("       CPU Mem  Self CPU Mem    # of Calls  \n"), std::string::npos) << table;
  EXPECT_NE(r.out.find("Self CPU Mem"), std::string::npos) << "the printed table too";
  const json s = read_json(d + "/naive/" + kStem + "_bwd.summary.json");
  bool allocated = false;
  for (const json& op : s["ops"]) {
    ASSERT_TRUE(op.contains("self_cpu_memory_usage_bytes")) << op.dump();
    allocated = allocated || op["self_cpu_memory_usage_bytes"].get<int64_t>() > 0;
  }
  EXPECT_TRUE(allocated) << "some op allocated its own memory";
  // The summary reads back (compare) with the memory fields.
  EXPECT_EQ(run_cli("compare " + d + "/naive/" + kStem + "_bwd.summary.json " + d + "/naive/" + kStem +
                    "_bwd.summary.json --out " + d + "/cmp").rc,
            0);
  remove_tree(d);
}

// The start-up figure counts from this process's own start of code, never
// the time its parent spent before exec (`bash -c 'sleep 15; exec attnprof'`
// recorded 15 s of "loading LibTorch").
TEST(Traces, StartUpExcludesTimeBeforeExec) {
  const std::string d = make_temp_dir("startup");
  ASSERT_EQ(shell_rc("exec bash -c \"sleep 6; exec " + kExe + kTiny + "--variant naive --quiet --out " + d +
                     " >/dev/null\""),
            0);
  const json s = read_json(d + "/naive/" + kStem + ".summary.json");
  ASSERT_FALSE(s["phases_ms"].empty());
  EXPECT_EQ(s["phases_ms"][0]["phase"], "program start to main (loading LibTorch)");
  EXPECT_LT(s["phases_ms"][0]["ms"].get<double>(), 5000.0) << "the 6 s before exec were counted";
  EXPECT_GT(s["phases_ms"][0]["ms"].get<double>(), 0.0);
  remove_tree(d);
}
