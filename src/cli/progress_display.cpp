#include "cli/progress_display.h"

#include <fmt/format.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "attnprof/report/progress_text.h"

namespace attnprof::cli {

namespace {
std::optional<double> env_seconds(const char* name) {
  const char* v = std::getenv(name);
  if (!v) return std::nullopt;
  char* end = nullptr;
  const double seconds = std::strtod(v, &end);
  if (end == v || *end != '\0') return std::nullopt;
  return seconds;
}
}  // namespace

ProgressSettings progress_settings(bool quiet) {
  ProgressSettings s;
  const char* term = std::getenv("TERM");
  if (quiet) s.mode = ProgressMode::off;
  else if (::isatty(STDERR_FILENO) && !(term && std::strcmp(term, "dumb") == 0)) s.mode = ProgressMode::in_place;
  else s.mode = ProgressMode::lines;
  if (const auto interval = env_seconds("ATTNPROF_PROGRESS_INTERVAL"); interval && *interval > 0.0 && *interval <= 5.0) {
    s.line_interval_s = *interval;
    s.heartbeat_s = 2.0 * *interval;
  }
  if (const auto threshold = env_seconds("ATTNPROF_ESTIMATE_THRESHOLD"); threshold && *threshold >= 0.0)
    s.estimate_threshold_s = *threshold;
  return s;
}

namespace {
std::FILE* private_stderr(std::FILE* out, ProgressMode mode) {
  if (out != stderr || mode == ProgressMode::off) return nullptr;
  std::fflush(stderr);
  const int fd = ::fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) return nullptr;
  std::FILE* f = ::fdopen(fd, "w");
  if (!f) ::close(fd);
  return f;
}
}  // namespace

ProgressDisplay::ProgressDisplay(ProgressSettings settings, size_t units, double elapsed_before_s, std::FILE* out)
    : settings_(settings),
      units_(units),
      owned_(private_stderr(out, settings.mode)),
      out_(owned_ ? owned_ : out),
      run_start_(Clock::now() - std::chrono::duration_cast<Clock::duration>(
                                    std::chrono::duration<double>(std::max(0.0, elapsed_before_s)))) {
  last_output_ = run_start_;
  if (settings_.mode == ProgressMode::off) return;
  // Signals stay with the main thread: its handler asks the run to stop at
  // the next step; this thread only draws, and never after finish().
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, &old);
  timer_ = std::thread(&ProgressDisplay::timer_loop, this);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

ProgressDisplay::~ProgressDisplay() {
  finish();
  if (owned_) std::fclose(owned_);
}

double ProgressDisplay::since(Clock::time_point t) const {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

void ProgressDisplay::begin(size_t index, ProgressUnit unit) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (stop_) return;
  index_ = index;
  unit_ = std::move(unit);
  unit_start_ = Clock::now();
  last_ = RunProgress{};
  estimated_ = false;
  timed_units_ = 0;
  active_ = true;
  if (units_ > 1) {  // the header, then (in place) the unit's line below it
    const double per_unit = finished_units_ ? finished_units_s_ / double(finished_units_) : -1.0;
    const double left = per_unit >= 0.0 ? per_unit * double(units_ - index) : -1.0;
    print_line(report::header_text(index, units_, unit_.header, since(run_start_), left));
  } else if (settings_.mode == ProgressMode::in_place) {
    show();
  }
}

ProgressCallback ProgressDisplay::callback() {
  if (settings_.mode == ProgressMode::off) return {};
  return [this](const RunProgress& p) { on_progress(p); };
}

void ProgressDisplay::on_progress(const RunProgress& p) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active_) return;
  const bool new_phase = p.phase != last_.phase;
  last_ = p;
  if (p.last_unit_seconds >= 0.0) ++timed_units_;
  maybe_estimate();
  // A terminal line costs nothing to redraw, but 10 a second is enough to read.
  const double min_gap = settings_.mode == ProgressMode::in_place ? (new_phase ? 0.0 : 0.1) : settings_.line_interval_s;
  if (since(last_output_) >= min_gap) show();
}

void ProgressDisplay::writing() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active_) return;
  last_ = RunProgress{RunPhase::writing, 0, 0, -1.0};
  if (settings_.mode == ProgressMode::in_place || since(last_output_) >= settings_.line_interval_s) show();
}

void ProgressDisplay::end() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (!active_) return;
  active_ = false;
  finished_units_s_ += since(unit_start_);
  ++finished_units_;
  clear_line();
}

void ProgressDisplay::finish() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
    active_ = false;
    clear_line();
  }
  wake_.notify_all();
  if (timer_.joinable()) timer_.join();
}

// After the unit's second timed step (its first when no other follows),
// once: say how long the run will take when that is long enough for the user
// to want a smaller problem.
void ProgressDisplay::maybe_estimate() {
  if (estimated_ || !(last_.step_seconds > 0.0)) return;
  // The first step carries one-off costs and is no pace to extrapolate: on
  // the H200 the naive forward's first step takes 0.2 s (CUDA context,
  // cuBLAS, kernel loading), the next ones 1 ms, so an estimate from it said
  // 19 min for a 6 s run; on the CPU with --wait 100 a first forward 30x the
  // rest said 4 min for a 7 s run. The second step's pace is the estimate's.
  if (timed_units_ < 2 && last_.steps_left > 0) return;
  estimated_ = true;
  const double left = unit_left_s();
  const double total = (units_ == 1 ? since(run_start_) : since(unit_start_)) + left;
  if (last_.steps_left <= 0 || total <= settings_.estimate_threshold_s) return;
  report::EstimateView e;
  e.name = unit_.name;
  e.device = unit_.problem.device;
  e.pass = unit_.problem.pass;
  e.step_s = last_.step_seconds;
  e.steps_left = last_.steps_left;
  e.total_s = total;
  e.span = unit_.span;
  e.basis = timed_units_ < 2 ? "first" : "second";
  if (unit_.suggest_smaller && total > report::kQuickLookSeconds)
    e.smaller = report::suggest_smaller(unit_.problem, unit_.plan, last_.step_seconds);
  print_line(report::estimate_text(e));
}

double ProgressDisplay::unit_left_s() const {
  if (last_.phase == RunPhase::writing) return 0.0;
  // The counter pass replays each kernel many times; no step time predicts it.
  if (last_.phase == RunPhase::counters || last_.phase == RunPhase::calibrating) return -1.0;
  return last_.step_seconds > 0.0 ? double(last_.steps_left) * last_.step_seconds : -1.0;
}

// This unit's rest, then the others at the pace of the finished ones (or of
// this one, predicted, before any finished).
double ProgressDisplay::run_left_s(double unit_left) const {
  if (units_ <= 1 || unit_left < 0.0) return -1.0;
  const double per_unit =
      finished_units_ ? finished_units_s_ / double(finished_units_) : since(unit_start_) + unit_left;
  return unit_left + per_unit * double(units_ - index_ - 1);
}

std::string ProgressDisplay::line_text() const {
  report::ProgressView v;
  v.label = units_ > 1 ? fmt::format("[{}/{}] {}", index_ + 1, units_, unit_.name) : unit_.name;
  v.phase = last_.phase;
  v.done = last_.done;
  v.total = last_.total;
  v.elapsed_s = since(unit_start_);
  v.left_s = unit_left_s();
  v.run_left_s = run_left_s(v.left_s);
  return report::progress_text(v);
}

void ProgressDisplay::show() {
  if (settings_.mode == ProgressMode::off) return;
  std::string text = line_text();
  if (settings_.mode == ProgressMode::in_place) {
    // Never wider than the terminal: a wrapped line cannot be redrawn in place.
    struct winsize ws {};
    const size_t width = ::ioctl(fileno(out_), TIOCGWINSZ, &ws) == 0 && ws.ws_col > 1 ? ws.ws_col : 80;
    if (text.size() >= width) text.resize(width - 1);
    std::fprintf(out_, "\r%s\x1b[K", text.c_str());
    line_shown_ = true;
  } else {
    std::fprintf(out_, "%s\n", text.c_str());
  }
  std::fflush(out_);
  last_output_ = Clock::now();
}

void ProgressDisplay::print_line(const std::string& s) {
  if (settings_.mode == ProgressMode::off) return;
  clear_line();
  std::fprintf(out_, "%s\n", s.c_str());
  std::fflush(out_);
  last_output_ = Clock::now();
  if (settings_.mode == ProgressMode::in_place && active_) show();
}

void ProgressDisplay::clear_line() {
  if (!line_shown_) return;
  std::fputs("\r\x1b[K", out_);
  std::fflush(out_);
  line_shown_ = false;
}

void ProgressDisplay::timer_loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  const bool in_place = settings_.mode == ProgressMode::in_place;
  // On a terminal the elapsed time ticks each second; plain lines come when
  // the run has been silent for a heartbeat.
  const double every = in_place ? 1.0 : settings_.heartbeat_s;
  const auto tick = std::chrono::duration<double>(std::min(0.25, every / 8.0));
  while (!stop_) {
    wake_.wait_for(lock, tick);
    if (!stop_ && active_ && since(last_output_) >= every) show();
  }
}

}  // namespace attnprof::cli
