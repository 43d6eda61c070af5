// Wall time of device work between two points of the host program: CUDA events
// on the problem's GPU (so only GPU time between them counts, without waiting
// for the host), the steady clock after a device synchronise on the CPU.
#pragma once

#include <memory>

#include "attnprof/problem.h"

namespace attnprof {

class EventTimer {
 public:
  explicit EventTimer(const Problem& p);
  ~EventTimer();
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;

  void start();
  // Microseconds since start(); waits for the work queued in between.
  double stop_us();
  // "cuda_event" or "steady_clock", as the summary records it.
  const char* clock() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace attnprof
