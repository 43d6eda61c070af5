#include "cli/output.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "attnprof/io/text.h"

namespace attnprof::cli {

namespace {
int g_stdout_errno = 0;  // first failure of standard output; 0 while it works

// All of `s` to `fd`; the errno of the failure, or 0.
int write_all(int fd, std::string_view s) noexcept {
  while (!s.empty()) {
    const ssize_t n = ::write(fd, s.data(), s.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    s.remove_prefix(static_cast<size_t>(n));
  }
  return 0;
}

void line_to_stderr(std::string_view prefix, std::string_view text) noexcept {
  try {
    std::string line = std::string(prefix) + io::visible(text) + "\n";
    (void)write_all(STDERR_FILENO, line);
  } catch (...) {
    // Out of memory while reporting: nothing more can be said.
  }
}
}  // namespace

void init_streams() noexcept {
  ::signal(SIGPIPE, SIG_IGN);
  ::signal(SIGXFSZ, SIG_IGN);
  for (int fd = 0; fd <= 2; ++fd) {
    if (::fcntl(fd, F_GETFD) != -1 || errno != EBADF) continue;
    const int null = ::open("/dev/null", fd == 0 ? O_RDONLY : O_WRONLY);
    if (null >= 0 && null != fd) {
      ::dup2(null, fd);
      ::close(null);
    }
    if (fd == STDOUT_FILENO) g_stdout_errno = EBADF;
  }
}

void out(std::string_view text) noexcept {
  if (g_stdout_errno != 0) return;
  try {
    g_stdout_errno = write_all(STDOUT_FILENO, io::visible(text, /*keep_line_breaks=*/true));
  } catch (...) {
    g_stdout_errno = ENOMEM;
  }
}

void error(std::string_view message) noexcept { line_to_stderr("attnprof: error: ", message); }

void note(std::string_view line) noexcept { line_to_stderr("", line); }

std::string stdout_lost() noexcept {
  if (g_stdout_errno == 0) return {};
  try {
    return std::strerror(g_stdout_errno);
  } catch (...) {
    return "error";
  }
}

}  // namespace attnprof::cli
