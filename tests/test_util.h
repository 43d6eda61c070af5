// Temp-dir helpers for tests that link LibTorch. They use POSIX calls because the
// LibTorch wheel exports its own std::filesystem symbols, which interpose on
// libstdc++'s and crashed std::filesystem::remove_all in these binaries.
#pragma once

#include <ftw.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>
#include <vector>

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

}  // namespace attnprof::testing
