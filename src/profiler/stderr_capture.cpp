#include "profiler/stderr_capture.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdio>

#include "attnprof/interrupt.h"

namespace attnprof {

StderrCapture::StderrCapture() {
  std::fflush(stderr);
  file_ = ::memfd_create("attnprof-stderr", MFD_CLOEXEC);
  if (file_ < 0) return;
  saved_ = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
  if (saved_ < 0 || ::dup2(file_, 2) < 0) {
    if (saved_ >= 0) ::close(saved_);
    saved_ = -1;
    ::close(file_);
    file_ = -1;
    return;
  }
  set_interrupt_message_fd(saved_);  // a second Ctrl-C's line still reaches the terminal
}

std::string StderrCapture::finish() {
  if (saved_ < 0) return text_;
  std::fflush(stderr);
  ::dup2(saved_, 2);
  set_interrupt_message_fd(2);
  ::close(saved_);
  saved_ = -1;
  char buf[4096];
  ssize_t n;
  for (off_t at = 0; (n = ::pread(file_, buf, sizeof buf, at)) > 0; at += n) text_.append(buf, static_cast<size_t>(n));
  ::close(file_);
  file_ = -1;
  return text_;
}

}  // namespace attnprof
