// The default command: profile one or more variants and print their tables.
#include <fmt/format.h>

#include <cstdio>
#include <cstdlib>

#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "attnprof/report/at_a_glance.h"
#include "attnprof/report/launch_facts.h"
#include "attnprof/report/table_data.h"
#include "attnprof/report/summary.h"
#include "attnprof/runner.h"
#include "attnprof/session.h"
#include "attnprof/variant.h"
#include "cli/exit_codes.h"
#include "cli/options.h"

namespace attnprof::cli {

int list_variants(const CliOptions& o) {
  Problem p = build_problem(o);
  fmt::print("Variants for {} {} {} on {}:\n", p.shape_string(), dtype_name(p.dtype),
             p.causal ? "causal" : "non-causal", p.device);
  for (const auto& e : variant_registry()) {
    auto v = e.make();
    const Support s = v->supports(p);
    fmt::print("  {:<15} {}\n  {:<15} {}\n", e.name, v->description(), "",
               s.ok ? "runs here" : "cannot run here: " + s.reason);
  }
  return exit_code::kOk;
}

int run_profile(const CliOptions& o) {
  const std::vector<std::string> names = expand_variants(o.variants);
  const Problem p = build_problem(o);
  SessionOptions s = build_session(o);
  // Without a GPU, Kineto logs "gpuGetDeviceCount failed" as an ERROR on every run
  // (and copies it into the trace); it is expected there, so keep it quiet unless
  // the user chose a log level.
  if (!cuda_available()) ::setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
  if (o.device == "auto" && !p.on_cuda())
    fmt::print(stderr, "note: no CUDA device found; running on CPU (CUDA-only variants are skipped)\n");
  try {
    io::ensure_writable_dir(s.out_dir);
  } catch (const io::FileError& e) {
    fmt::print(stderr, "attnprof: error: {}\n", e.what());
    return exit_code::kOutput;
  }

  install_interrupt_handlers();
  int failed = 0, skipped = 0;
  std::vector<std::string> skipped_lines;
  std::vector<RunRecord> records;  // every variant's outcome, for the at-a-glance table
  for (size_t i = 0; i < names.size() && !interrupt_signal(); ++i) {
    if (names.size() > 1) {  // progress; a single variant's errors stay one line
      fmt::print(stderr, "[{}/{}] {} ({} {} on {})\n", i + 1, names.size(), names[i], p.shape_string(),
                 dtype_name(p.dtype), p.device);
      std::fflush(stderr);
    }
    VariantOutcome out;
    try {
      out = run_variant(names[i], p, s);
    } catch (const io::FileError& e) {
      fmt::print(stderr, "attnprof: error: {}\n", e.what());
      return exit_code::kOutput;
    }
    s.startup_ms.reset();  // process start-up belongs to the first variant only
    records.push_back(out.record);
    const RunRecord& r = out.record;
    if (r.status == "interrupted") {
      fmt::print(stderr, "attnprof: interrupted during {}; finished variants keep their files; {} marks it\n",
                 r.variant, io::join_path(s.out_dir, r.summary_file));
      break;
    }
    if (r.status == "skipped") {
      ++skipped;
      if (names.size() == 1) {
        fmt::print(stderr, "attnprof: {} cannot run here: {}\n", r.variant, r.reason);
        return exit_code::kUnsupported;
      }
      skipped_lines.push_back(fmt::format("  {}: {}", r.variant, r.reason));
      fmt::print(stderr, "  skipped: {}\n", r.reason);
      continue;
    }
    if (r.status == "failed") {
      ++failed;
      fmt::print(stderr, "attnprof: {} failed: {}\n", r.variant, r.reason);
      continue;
    }
    fmt::print("\n{}\n{}", out.table, report::headline_text(r));
    if (o.kernels && !r.launches.empty()) fmt::print("\n{}", report::format_launch_table(r.launches));
    fmt::print("  files: {}/{{{}, {}, {}}}\n", s.out_dir, r.trace_file, r.table_file, r.summary_file);
    std::fflush(stdout);
  }
  if (!skipped_lines.empty()) fmt::print("\nSkipped ({}):\n{}\n", skipped, join(skipped_lines, "\n"));
  if (records.size() > 1) {
    const report::AtAGlanceOptions glance{o.peak_tflops};
    try {
      const auto files = report::write_at_a_glance(records, s.out_dir, glance);
      fmt::print("\nAt a glance: {}\n{}", report::at_a_glance_header(records, glance),
                 report::to_text(report::at_a_glance_table(records, glance)));
      if (!files.empty()) fmt::print("  files: {} (+ .csv, .md, .json)\n", files.front());
    } catch (const io::FileError& e) {
      fmt::print(stderr, "attnprof: error: {}\n", e.what());
      return exit_code::kOutput;
    }
  }
  if (const int sig = interrupt_signal()) return 128 + sig;  // 130 for SIGINT, 143 for SIGTERM
  return failed ? exit_code::kRunFailed : exit_code::kOk;
}

}  // namespace attnprof::cli
