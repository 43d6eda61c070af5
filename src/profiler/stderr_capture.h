// Sends file descriptor 2 to an in-memory file until finish(), which puts it
// back and returns what was written. Used while Kineto saves a trace: it
// reports a failed write only on stderr, and the run decides what the user
// sees. In memory because the disk may be what is full; a file rather than a
// pipe so no reader has to keep up. If it cannot be set up, stderr is left
// alone and finish() returns "".
#pragma once

#include <string>

namespace attnprof {

class StderrCapture {
 public:
  StderrCapture();
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;
  ~StderrCapture() { finish(); }

  std::string finish();

 private:
  int file_ = -1;
  int saved_ = -1;
  std::string text_;
};

}  // namespace attnprof
