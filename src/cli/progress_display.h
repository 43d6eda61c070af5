// Progress on stderr for a run of one or more units (variants, or sweep
// points): what runs, its phase, the time elapsed and an estimate of what is
// left, and once per unit, after its first timed step, an early estimate when
// the run will be long. On a terminal one line is redrawn in place (carriage
// return, clear to end of line) and cleared before anything else is printed;
// otherwise plain lines, at most one per interval from the run's events and
// at least one per heartbeat from a timer thread, so a single slow step still
// shows life. The measuring code only calls the callback; the words come from
// report/progress_text.h.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

#include "attnprof/problem.h"
#include "attnprof/progress.h"
#include "attnprof/report/run_plan.h"

namespace attnprof::cli {

enum class ProgressMode { off, lines, in_place };

struct ProgressSettings {
  ProgressMode mode = ProgressMode::lines;
  double line_interval_s = 5.0;  // plain lines: at most one per interval from events
  double heartbeat_s = 10.0;     // ...and at least one per heartbeat (the promise is 15 s)
  double estimate_threshold_s = report::kEstimateThresholdSeconds;
};
// --quiet: off; stderr a terminal: in place; else plain lines. Two environment
// variables, meant for tests, make the timing short and deterministic:
// ATTNPROF_PROGRESS_INTERVAL (seconds, up to 5) sets the line interval, the
// heartbeat being twice it; ATTNPROF_ESTIMATE_THRESHOLD (seconds, >= 0) the
// run time above which the early estimate is printed.
ProgressSettings progress_settings(bool quiet);

struct ProgressUnit {
  std::string name;    // "naive"; "naive 8x16x1024x64 bf16" for a sweep point
  std::string header;  // after "[i/n] " when the run has several units
  std::string span;    // what the early estimate's total covers: "in all", "for this variant", ...
  Problem problem;
  report::PlanRequest plan;      // what a suggested smaller problem would run
  bool suggest_smaller = false;  // the early estimate names a smaller problem
};

class ProgressDisplay {
 public:
  // `units` of work; `elapsed_before_s` passed before the display existed
  // (process start-up), counted in the run's elapsed time. Given stderr, it
  // writes through its own copy of the descriptor, which keeps reaching the
  // terminal while the profiler's window holds fd 2 (StderrCapture).
  ProgressDisplay(ProgressSettings settings, size_t units, double elapsed_before_s = 0.0, std::FILE* out = stderr);
  ~ProgressDisplay();
  ProgressDisplay(const ProgressDisplay&) = delete;
  ProgressDisplay& operator=(const ProgressDisplay&) = delete;

  // Unit `index` starts; with several units its header line is printed.
  void begin(size_t index, ProgressUnit unit);
  // For MeasureOptions::progress; valid while the display lives.
  ProgressCallback callback();
  // The unit's files are being written.
  void writing();
  // The unit is done: the in-place line is cleared, nothing more is drawn
  // until the next begin(). Call it before printing anything.
  void end();
  // Stops the timer thread; nothing is written afterwards. The destructor calls it.
  void finish();

 private:
  using Clock = std::chrono::steady_clock;
  double since(Clock::time_point t) const;
  void on_progress(const RunProgress& p);
  void maybe_estimate();
  std::string line_text() const;
  double unit_left_s() const;
  double run_left_s(double unit_left) const;
  void show();                           // the current line, in place or as a plain line
  void print_line(const std::string& s);  // a permanent line
  void clear_line();
  void timer_loop();

  const ProgressSettings settings_;
  const size_t units_;
  std::FILE* const owned_;  // the private copy of stderr, or nullptr
  std::FILE* const out_;
  const Clock::time_point run_start_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::thread timer_;
  bool stop_ = false;

  bool active_ = false;
  size_t index_ = 0;
  ProgressUnit unit_;
  Clock::time_point unit_start_;
  RunProgress last_;
  bool estimated_ = false;
  int timed_units_ = 0;  // units of this unit's run whose wall time was reported
  bool line_shown_ = false;  // in place: our text is on the line now
  Clock::time_point last_output_;
  double finished_units_s_ = 0.0;
  size_t finished_units_ = 0;
};

}  // namespace attnprof::cli
