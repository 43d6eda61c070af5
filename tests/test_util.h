// Temp-dir helpers for tests that link LibTorch. They use POSIX calls because the
// LibTorch wheel exports its own std::filesystem symbols, which interpose on
// libstdc++'s and crashed std::filesystem::remove_all in these binaries.
#pragma once

#include <ftw.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "attnprof/io/files.h"

namespace attnprof::testing {

inline std::string make_temp_dir(const std::string& tag) {
  std::string templ = "/tmp/attnprof_" + tag + "_XXXXXX";
  if (!::mkdtemp(templ.data())) return "";
  return templ;
}

inline std::vector<std::string>& walk_sink() {
  static std::vector<std::string> paths;
  return paths;
}

// Every path under `dir` (files and directories), depth first.
inline std::vector<std::string> list_tree(const std::string& dir) {
  walk_sink().clear();
  ::nftw(dir.c_str(), [](const char* p, const struct stat*, int, struct FTW*) {
    walk_sink().emplace_back(p);
    return 0;
  }, 16, FTW_PHYS);
  return walk_sink();
}

inline void remove_tree(const std::string& dir) {
  ::nftw(dir.c_str(), [](const char* p, const struct stat*, int, struct FTW*) { return ::remove(p); }, 16,
         FTW_DEPTH | FTW_PHYS);
}

inline bool path_exists(const std::string& p) {
  struct stat st {};
  return ::stat(p.c_str(), &st) == 0;
}

// Lines of `s`; a last line without '\n' counts too.
inline std::vector<std::string> split_lines(const std::string& s) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < s.size()) {
    const size_t nl = s.find('\n', start);
    lines.push_back(s.substr(start, nl == std::string::npos ? std::string::npos : nl - start));
    if (nl == std::string::npos) break;
    start = nl + 1;
  }
  return lines;
}

inline int count_lines(const std::string& s) {
  int n = 0;
  for (char c : s) n += c == '\n';
  return n;
}

#ifdef ATTNPROF_EXE
struct CliResult {
  int rc = -1;
  std::string out, err;
};

// Runs the real attnprof executable with `args` (a shell fragment), no stdin;
// `env` ("RANK=0 WORLD_SIZE=2") is set for it alone. A run that hangs is killed
// after `timeout_s` (exit 124: the test says so).
inline CliResult run_cli(const std::string& args, const std::string& env, int timeout_s = 300) {
  const std::string d = make_temp_dir("cli_io");
  const std::string out = d + "/stdout", err = d + "/stderr";
  const std::string cmd = "timeout -k 5 " + std::to_string(timeout_s) + " " + (env.empty() ? "" : "env " + env + " ") +
                          std::string(ATTNPROF_EXE) + " " + args + " >" + out + " 2>" + err + " </dev/null";
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.rc = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = io::read_file(out);
  r.err = io::read_file(err);
  remove_tree(d);
  return r;
}
inline CliResult run_cli(const std::string& args, int timeout_s = 300) { return run_cli(args, "", timeout_s); }
#endif

}  // namespace attnprof::testing
