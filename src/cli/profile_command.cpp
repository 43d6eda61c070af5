// The default command: profile one or more variants and print their tables.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "attnprof/device.h"
#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "attnprof/report/at_a_glance.h"
#include "attnprof/report/run_files.h"
#include "attnprof/report/table_data.h"
#include "attnprof/report/trace_comparison.h"
#include "attnprof/session.h"
#include "attnprof/variant.h"
#include "cli/exit_codes.h"
#include "cli/options.h"
#include "cli/printers.h"
#include "cli/progress_display.h"

namespace attnprof::cli {

int list_variants(const CliOptions& o) {
  Problem p = build_problem(o);
  fmt::print("Variants for {} {} on {}:\n", p.shape_string(), p.config_string(), p.device);
  for (const auto& e : variant_registry()) {
    auto v = e.make();
    const Support s = v->supports(p);
    fmt::print("  {:<15} {}\n  {:<15} {}\n", e.name, v->description(), "",
               s.ok ? "runs here" : "cannot run here: " + s.reason);
  }
  return exit_code::kOk;
}

namespace {
// The merged Perfetto trace and the one-call-per-variant picture of a
// multi-variant run (compare/<stem>.trace.json.gz, .timeline.svg). Runs
// without a readable trace are left out with a note; none left is a note too.
void write_comparison_trace(const std::vector<RunRecord>& records, const std::string& out_dir) {
  std::vector<report::RunTraceFile> runs;
  for (const RunRecord& r : records)
    if (r.ok() && !r.trace_file.empty())
      runs.push_back({r.variant, "", unit_headline(r), io::join_path(out_dir, r.trace_file), unit_scope(r.problem)});
  if (runs.size() < 2) return;
  const RunRecord& first = records.front();
  try {
    const auto files = report::write_trace_comparison(runs, out_dir, first.problem.file_stem(), comparison_title(records));
    for (const std::string& n : files.notes) fmt::print("  note: {}\n", n);
    fmt::print("  merged trace: {}\n  timeline: {}\n", files.trace_path, files.timeline_path);
  } catch (const report::TraceError& e) {
    fmt::print("  note: no merged trace: {}\n", e.what());
  }
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
  if (o.device == "auto" && !p.on_cuda())
    fmt::print(stderr, "note: no CUDA device found; running on CPU (CUDA-only variants are skipped)\n");
  try {
    io::ensure_writable_dir(s.files.out_dir);
  } catch (const io::FileError& e) {
    fmt::print(stderr, "attnprof: error: {}\n", e.what());
    return exit_code::kOutput;
  }

  install_interrupt_handlers();
  const TableOptions table = s.table_for(p);
  int failed = 0, skipped = 0;
  std::vector<std::string> skipped_lines;
  std::vector<RunRecord> records;  // every variant's outcome, for the at-a-glance table
  // Progress on stderr; end() clears it before anything else is printed.
  ProgressDisplay progress(progress_settings(o.quiet), names.size(), o.startup_ms.value_or(0.0) / 1e3);
  s.measure.progress = progress.callback();
  for (size_t i = 0; i < names.size() && !interrupt_signal(); ++i) {
    progress.begin(i, {names[i], run_label(names[i], p), names.size() > 1 ? "for this variant" : "in all", p,
                       {s.measure.schedule, s.measure.timing_iters, p.on_cuda(), 0}, names.size() == 1});
    Measurement m = run_variant(names[i], p, s.measure);
    s.measure.startup_ms.reset();  // process start-up belongs to the first variant only
    RunRecord& r = m.record;
    try {
      if (r.status == Status::ok) {
        progress.writing();
        report::write_run_files(r, m.trace_json, s.files);
      }
      progress.end();
      if (r.status == Status::interrupted) {
        const std::string path = report::write_interrupted_summary(r, s.files);
        fmt::print(stderr, "attnprof: interrupted during {}; finished variants keep their files; {}\n", r.variant,
                   path.empty() ? "the earlier complete summary of it is kept" : path + " marks it");
      }
    } catch (const io::FileError& e) {
      progress.end();
      fmt::print(stderr, "attnprof: error: {}\n", e.what());
      return exit_code::kOutput;
    }
    records.push_back(r);
    if (r.status == Status::interrupted) break;
    if (r.status == Status::skipped) {
      ++skipped;
      if (names.size() == 1) {
        fmt::print(stderr, "attnprof: {} cannot run here: {}\n", r.variant, r.reason);
        return exit_code::kUnsupported;
      }
      skipped_lines.push_back(fmt::format("  {}: {}", r.variant, r.reason));
      fmt::print(stderr, "  skipped: {}\n", r.reason);
      continue;
    }
    if (r.status == Status::failed) {
      ++failed;
      fmt::print(stderr, "attnprof: {} failed: {}\n", r.variant, r.reason);
      continue;
    }
    fmt::print("{}", run_text(r, table, o.kernels, s.files.out_dir));
    std::fflush(stdout);
  }
  if (!skipped_lines.empty()) fmt::print("\nSkipped ({}):\n{}\n", skipped, join(skipped_lines, "\n"));
  if (records.size() > 1) {
    report::AtAGlanceOptions glance{o.peak_tflops, {}};
    if (const auto base = variants_tagged(VariantTag::baseline); !base.empty()) glance.baseline = base.front();
    try {
      const auto files = report::write_at_a_glance(records, s.files.out_dir, glance);
      fmt::print("\nAt a glance: {}\n{}", report::at_a_glance_header(records, glance),
                 report::to_text(report::at_a_glance_table(records, glance)));
      if (!files.empty()) fmt::print("  files: {} (+ .csv, .md, .json)\n", files.front());
      write_comparison_trace(records, s.files.out_dir);
    } catch (const io::FileError& e) {
      fmt::print(stderr, "attnprof: error: {}\n", e.what());
      return exit_code::kOutput;
    }
  }
  if (const int sig = interrupt_signal()) return 128 + sig;  // 130 for SIGINT, 143 for SIGTERM
  return failed ? exit_code::kRunFailed : exit_code::kOk;
}

}  // namespace attnprof::cli
