// The default command: profile one or more variants and print their tables.
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <optional>

#include "attnprof/device.h"
#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "attnprof/io/text.h"
#include "attnprof/report/at_a_glance.h"
#include "attnprof/report/roofline_svg.h"
#include "attnprof/report/run_files.h"
#include "attnprof/report/table_data.h"
#include "attnprof/report/trace_comparison.h"
#include "attnprof/run_units.h"
#include "attnprof/session.h"
#include "attnprof/variant.h"
#include "cli/exit_codes.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/printers.h"
#include "cli/progress_display.h"

namespace attnprof::cli {

int list_variants(const CliOptions& o) {
  Problem p = build_problem(o);
  outf("Variants for {} {} on {}:\n", p.shape_string(), p.config_string(), p.device);
  for (const auto& e : variant_registry()) {
    auto v = e.make();
    const Support s = v->supports(p);
    outf("  {:<15} {}\n  {:<15} {}\n", e.name, v->description(), "",
         s.ok ? "runs here" : "cannot run here: " + s.reason);
  }
  if (const int sig = interrupt_signal()) return 128 + sig;
  return exit_code::kOk;
}

namespace {

// Stages the merged Perfetto trace and the one-call-per-variant picture of a
// multi-variant run (compare/<stem>.trace.json.gz, .timeline.svg) into the
// compare/ set, from every run that finished (one is enough: its picture is
// one row). Runs without a readable trace are left out with a note; when none
// is left the earlier pair is removed with the set, so compare/ never mixes
// runs. Returns the lines to print.
std::string stage_comparison_trace(io::StagedFiles& compare_set, const std::vector<RunRecord>& records,
                                   const std::string& out_dir) {
  std::vector<report::RunTraceFile> runs;
  for (const RunRecord& r : records)
    if (r.ok() && !r.trace_file.empty())
      runs.push_back({r.variant, "", unit_headline(r), io::join_path(out_dir, r.trace_file), unit_scope(r.problem),
                      r.counters ? &*r.counters : nullptr});
  const std::string stem = records.front().problem.file_stem();
  try {
    const auto files = report::stage_trace_comparison(compare_set, runs, out_dir, stem, comparison_title(records));
    std::string text;
    for (const std::string& n : files.notes) text += fmt::format("  note: {}\n", n);
    return text + fmt::format("  merged trace: {}\n  timeline: {}\n", io::visible(files.trace_path),
                              io::visible(files.timeline_path));
  } catch (const report::TraceError& e) {
    report::remove_trace_comparison_at_publish(compare_set, out_dir, stem);
    return fmt::format("  note: no merged trace: {}\n", e.what());
  }
}

// Every requested variant refused before anything runs: one line, exit 3.
std::optional<std::string> nothing_can_run(const std::vector<std::string>& names, const Problem& p) {
  std::vector<std::string> reasons;
  for (const std::string& n : names) {
    const Support s = make_variant(n)->supports(p);
    if (s.ok) return std::nullopt;
    reasons.push_back(n + ": " + s.reason);
  }
  // Which variants would run the problem's dtype, when it is fp8 (few do).
  std::string hint;
  if (p.dtype == DType::FP8) {
    std::vector<std::string> fp8;
    for (const auto& e : variant_registry())
      if (e.make()->supports(p).ok) fp8.push_back(e.name);
    hint = fp8.empty() ? "; no variant runs fp8 here" : "; --variant " + join(fp8, ",") + " runs fp8 here";
  }
  if (names.size() == 1)
    return fmt::format("{} cannot run here: {}{}", names.front(), reasons.front().substr(names.front().size() + 2), hint);
  return fmt::format("none of the {} variants can run here ({}){}", names.size(), join(reasons, "; "), hint);
}

}  // namespace

int run_profile(const CliOptions& o) {
  const std::vector<std::string> names = expand_variants(o.variants);
  const Problem p = build_problem(o);
  RunSettings s = build_settings(o);
  // Without a GPU, Kineto logs "gpuGetDeviceCount failed" as an ERROR on every run
  // (and copies it into the trace); it is expected there, so keep it quiet unless
  // the user chose a log level.
  if (!cuda_available()) ::setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
  if (o.device == "auto" && !p.on_cuda()) note("note: no CUDA device found; running on CPU (CUDA-only variants are skipped)");
  io::OutputDir out_dir(s.files.out_dir, is_own_output_path);  // throws FileError (exit 4) or DirBusy (exit 6)
  if (const auto why = nothing_can_run(names, p)) {
    note("attnprof: " + *why);
    return exit_code::kUnsupported;
  }

  const TableOptions table = s.table_for(p);
  CounterNotes counter_notes;
  std::vector<std::string> skipped_lines;
  // Progress on stderr; end() clears it before anything else is printed.
  ProgressDisplay progress(progress_settings(o.quiet), names.size(), o.startup_ms.value_or(0.0) / 1e3);
  s.measure.progress = progress.callback();
  std::vector<RunUnit> units;
  for (const std::string& n : names) units.push_back({n, p, std::nullopt});
  UnitObserver observer;
  observer.begin = [&](size_t i, const RunUnit& u) {
    progress.begin(i, {u.variant, run_label(u.variant, p), names.size() > 1 ? "for this variant" : "in all", p,
                       {s.measure.schedule, s.measure.timing_iters, p.on_cuda(), 0}, names.size() == 1});
  };
  observer.writing = [&] { progress.writing(); };
  observer.end = [&] { progress.end(); };
  observer.done = [&](size_t, const UnitOutcome& u) {
    const RunRecord& r = u.record;
    if (r.status == Status::skipped) {
      if (names.size() == 1) return true;  // one line and exit 3, below
      skipped_lines.push_back(fmt::format("  {}: {}", r.variant, r.reason));
      notef("  {} skipped: {}", r.variant, r.reason);  // named: under --quiet no progress line says which
    } else if (r.status == Status::failed) {
      notef("attnprof: {} failed: {}", r.variant, r.reason);
    } else {
      out(run_text(r, table, o.kernels, s.files.out_dir));
      if (const std::string line = counter_notes.line_for(r); !line.empty()) note(line);
    }
    return true;
  };
  RunUnitsResult run = run_units(units, {s.measure, s.files, /*write_interrupted_summary=*/true}, observer);
  const std::vector<RunRecord>& records = run.records;  // every variant's outcome, for the at-a-glance table
  if (names.size() == 1 && !records.empty() && records.front().status == Status::skipped) {
    notef("attnprof: {} cannot run here: {}", records.front().variant, records.front().reason);
    return exit_code::kUnsupported;
  }
  const int failed = run.failed, skipped = run.skipped;
  const std::string interrupted_marker = run.interrupted ? interrupted_left(*run.interrupted) : "";
  int sig = interrupt_signal();
  const bool complete = !sig || (records.size() == names.size() && records.back().status != Status::interrupted);
  const bool any_ok = std::any_of(records.begin(), records.end(), [](const RunRecord& r) { return r.ok(); });
  if (!skipped_lines.empty()) outf("\nSkipped ({}):\n{}\n", skipped, join(skipped_lines, "\n"));
  std::string compare_error;  // compare/ could not be written after a signal
  if (records.size() > 1) {
    report::AtAGlanceOptions glance{o.peak_tflops, {}};
    if (const auto base = variants_tagged(VariantTag::baseline); !base.empty()) glance.baseline = base.front();
    std::vector<std::string> files;
    std::string comparison;
    // compare/ is one set: at-a-glance tables, merged trace and timeline. An
    // interrupted run, or one in which no variant ran, never replaces a
    // complete earlier one.
    if (complete && any_ok) {
      try {
        io::StagedFiles compare_set;
        files = report::stage_at_a_glance(compare_set, records, s.files.out_dir, glance);
        comparison = stage_comparison_trace(compare_set, records, s.files.out_dir);
        const std::string roofline = io::join_path(io::join_path(s.files.out_dir, "compare"),
                                                   records.front().problem.file_stem() + ".roofline.svg");
        if (report::stage_roofline(compare_set, records, roofline)) comparison += "  roofline: " + io::visible(roofline) + "\n";
        compare_set.publish();  // FileError: exit 4
      } catch (const io::FileError& e) {
        if (!interrupt_signal()) throw;
        files.clear(), comparison.clear();
        compare_error = std::string("; compare/ could not be written: ") + e.what();
      }
    }
    outf("\nAt a glance: {}\n{}", report::at_a_glance_header(records, glance),
         report::to_text(report::at_a_glance_table(records, glance)));
    if (!files.empty()) outf("  files: {} (+ .csv, .md, .json)\n", io::visible(files.front()));
    if (complete && !any_ok) out("  compare/ not written: no variant ran\n");
    out(comparison);
  }
  sig = interrupt_signal();
  if (sig) {
    note("attnprof: " + interrupted_line(sig, names, records, interrupted_marker) + compare_error);
    return 128 + sig;
  }
  if (failed || counter_notes.failed) return exit_code::kRunFailed;
  // Every variant skipped once it was tried (predicted memory, out of memory).
  if (!any_ok && skipped) {
    notef("attnprof: none of the {} variants ran (each was skipped, reasons above)", names.size());
    return exit_code::kUnsupported;
  }
  return exit_code::kOk;
}

}  // namespace attnprof::cli
