// Everything the CLI prints goes through here. Writes never throw (fmt::print
// throws on a failed write, and a throw while reporting an error aborted the
// process) and never raise SIGPIPE (it is ignored): a closed, full or broken
// standard output is recorded and printing stops, while the run goes on to
// write its files; main() then exits with exit_code::kStdout. A closed or
// full standard error is only ever lost, never fatal.
#pragma once

#include <fmt/format.h>

#include <string>
#include <string_view>

namespace attnprof::cli {

// First thing in main(): ignores SIGPIPE and SIGXFSZ (a write past `ulimit -f`
// then fails with EFBIG instead of killing the process), and puts /dev/null
// on a closed descriptor 0, 1 or 2 so no file the run opens can land there
// (a closed stdout still counts as lost output).
void init_streams() noexcept;

// Standard output, as is except for terminal controls (io::visible with line
// breaks kept): tables, headlines, file lists.
void out(std::string_view text) noexcept;
template <class... Args>
void outf(fmt::format_string<Args...> f, Args&&... args) noexcept {
  try {
    out(fmt::format(f, std::forward<Args>(args)...));
  } catch (...) {
  }
}

// Standard error, one line per call: "attnprof: error: <message>" (error) or
// the line as given (note: progress, skip reasons). Line breaks and terminal
// controls inside become visible escapes, so a line is always one line.
void error(std::string_view message) noexcept;
void note(std::string_view line) noexcept;
template <class... Args>
void notef(fmt::format_string<Args...> f, Args&&... args) noexcept {
  try {
    note(fmt::format(f, std::forward<Args>(args)...));
  } catch (...) {
  }
}

// The reason standard output was lost ("No space left on device", "Broken
// pipe", "Bad file descriptor"), empty while it works.
std::string stdout_lost() noexcept;

}  // namespace attnprof::cli
