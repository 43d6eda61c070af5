#include "attnprof/report/progress_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace attnprof {

const char* run_phase_name(RunPhase p) {
  switch (p) {
    case RunPhase::setup: return "setting up";
    case RunPhase::warmup: return "warm-up";
    case RunPhase::profiling: return "profiled step";
    case RunPhase::timing: return "timing";
    case RunPhase::checking: return "NaN and error check";
    case RunPhase::counters: return "hardware counters";
    case RunPhase::calibrating: return "calibrating ceilings";
    case RunPhase::writing: return "writing files";
  }
  return "running";
}

namespace report {

std::string format_duration(double s) {
  if (!(s >= 0.0)) return "?";
  // Short CPU steps (a 48 ms forward) would all read "0.0 s".
  if (s < 0.00095) return fmt::format("{:.1f} ms", s * 1e3);
  if (s < 0.0995) return fmt::format("{:.0f} ms", s * 1e3);
  if (s < 9.95) return fmt::format("{:.1f} s", s);
  const long long whole = std::llround(s);
  if (whole < 60) return fmt::format("{} s", whole);
  if (whole < 3600) return fmt::format("{} min {:02} s", whole / 60, whole % 60);
  const long long minutes = std::llround(s / 60.0);
  return fmt::format("{} h {:02} min", minutes / 60, minutes % 60);
}

std::string phase_text(RunPhase phase, int done, int total) {
  const bool counted = phase == RunPhase::warmup || phase == RunPhase::profiling || phase == RunPhase::timing;
  if (!counted) return run_phase_name(phase);
  const int current = total > 0 ? std::min(done + 1, total) : done + 1;
  return total > 0 ? fmt::format("{} {} of {}", run_phase_name(phase), current, total)
                   : fmt::format("{} {}", run_phase_name(phase), current);
}

namespace {
std::string elapsed_and_left(double elapsed_s, double left_s) {
  std::string s = "elapsed " + format_duration(elapsed_s);
  if (left_s >= 0.0) s += ", about " + format_duration(left_s) + " left";
  return s;
}
}  // namespace

// Short, to fit a terminal line: "~" for "about".
std::string progress_text(const ProgressView& v) {
  std::string s = fmt::format("{}: {} | elapsed {}", v.label, phase_text(v.phase, v.done, v.total),
                              format_duration(v.elapsed_s));
  if (v.left_s >= 0.0) s += ", ~" + format_duration(v.left_s) + " left";
  if (v.run_left_s >= 0.0) s += " (run ~" + format_duration(v.run_left_s) + ")";
  return s;
}

std::string header_text(size_t index, size_t count, const std::string& label, double run_elapsed_s,
                        double run_left_s) {
  return fmt::format("[{}/{}] {} | {}", index + 1, count, label, elapsed_and_left(run_elapsed_s, run_left_s));
}

std::string estimate_text(const EstimateView& e) {
  const char* unit = e.pass == Pass::fwd ? "forward" : "step";
  std::string s = fmt::format("{} on {}: {} per {}, {} more {}{}, about {} {}", e.name, e.device,
                              format_duration(e.step_s), unit, e.steps_left, unit, e.steps_left == 1 ? "" : "s",
                              format_duration(e.total_s), e.span);
  if (e.smaller)
    s += fmt::format("; {} would take about {}", e.smaller->flags, format_duration(e.smaller->predicted_seconds));
  return s + fmt::format(" (estimate{} from the {} {}{})", e.smaller ? "s" : "", e.basis, unit,
                         e.smaller ? ", scaled by FLOPs" : "");
}

}  // namespace report
}  // namespace attnprof
