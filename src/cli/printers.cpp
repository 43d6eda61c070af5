#include "cli/printers.h"

#include <fmt/format.h>

#include "attnprof/interrupt.h"
#include "attnprof/io/text.h"
#include "attnprof/report/counter_report.h"
#include "attnprof/report/headline.h"
#include "attnprof/report/launch_facts.h"
#include "attnprof/report/run_files.h"
#include "cli/options.h"

namespace attnprof::cli {

std::string run_text(const RunRecord& r, const TableOptions& table, bool kernels, const std::string& out_dir) {
  std::string out = "\n" + report::run_table_text(r, table) + "\n" + report::headline_text(r);
  if (kernels && !r.launches.empty()) out += "\n" + report::format_launch_table(r.launches);
  out += report::counters_text(r);
  // Paths with every control shown (\x0a too): one file list is one line.
  out += fmt::format("  files: {}/{{{}, {}, {}{}}}\n", io::visible(out_dir), io::visible(r.trace_file),
                     io::visible(r.table_file), io::visible(r.summary_file),
                     r.roofline_file.empty() ? "" : ", " + io::visible(r.roofline_file));
  return out;
}

std::string CounterNotes::line_for(const RunRecord& r) {
  if (!r.counters) return "";
  const std::string why = report::counters_note(*r.counters);
  if (why.empty()) return "";
  if (r.counters->state == report::CounterPass::State::failed) {
    failed = true;
    return fmt::format("attnprof: {}: {}", r.variant, why);
  }
  return seen_.insert(why).second ? "note: --counters: " + why : "";
}

std::string run_label(const std::string& variant, const Problem& p) {
  return fmt::format("{} ({} {} on {})", variant, p.shape_string(), p.config_string(), p.device);
}

namespace {
const char* unit_word(const Problem& p) {
  switch (p.pass) {
    case Pass::fwd: return "forward";
    case Pass::bwd: return "backward";
    case Pass::fwd_bwd: return "fwd+bwd step";
  }
  return "step";
}
}  // namespace

std::string unit_headline(const RunRecord& r) {
  const double us = r.cost_us();
  const std::string t = us < 100     ? fmt::format("{:.1f} µs", us)
                        : us < 10000 ? fmt::format("{:.0f} µs", us)
                                     : fmt::format("{:.1f} ms", us / 1000.0);
  return t + "/" + unit_word(r.problem);
}

std::string unit_scope(const Problem& p) { return p.pass == Pass::bwd ? kBackwardScope : kForwardScope; }

std::string comparison_title(const std::vector<RunRecord>& records) {
  if (records.empty()) return "attnprof";
  const Problem& p = records.front().problem;
  std::string device = p.device;
  for (const RunRecord& r : records)
    if (!r.env.device_name.empty()) {
      device += " (" + r.env.device_name + ")";
      break;
    }
  const char* unit = p.pass == Pass::bwd ? "backward" : "forward";
  return fmt::format("attnprof: one {} per variant, {} {} on {}", unit, p.shape_string(), p.config_string(), device);
}

std::string interrupted_line(int sig, const std::vector<std::string>& names, const std::vector<RunRecord>& records,
                             const std::string& marker) {
  std::vector<std::string> finished, not_run;
  const RunRecord* stopped = nullptr;
  for (const RunRecord& r : records) {
    if (r.status == Status::interrupted) stopped = &r;
    else finished.push_back(r.variant);
  }
  for (size_t i = records.size(); i < names.size(); ++i) not_run.push_back(names[i]);
  std::string line = fmt::format("interrupted by {}", signal_name(sig));
  if (stopped) {
    line += fmt::format(" during {}", stopped->variant);
    if (names.size() > 1) line += fmt::format(" ({}/{})", records.size(), names.size());
  } else if (records.empty()) {
    line += " before any variant ran";
  } else if (not_run.empty()) {
    line += " after every variant finished";
  }
  if (names.size() > 1 || !finished.empty())
    line += finished.empty() ? "; no variant finished" : "; finished (files written): " + join(finished);
  if (!not_run.empty()) line += "; not run: " + join(not_run);
  if (stopped) line += marker;
  if (names.size() > 1 && (stopped || !not_run.empty())) line += "; compare/ not written";
  return line;
}

std::string interrupted_left(const UnitOutcome& u) {
  if (!u.files_error.empty()) return "; its files could not be written: " + u.files_error;
  if (u.interrupted_summary.empty()) return "; its earlier complete summary is kept";
  return "; " + u.interrupted_summary + " marks it interrupted";
}

}  // namespace attnprof::cli
