// `attnprof sweep`: every combination of the axes, one run_variant each, with
// points that cannot fit skipped before they are tried; then the sweep table
// and plots (report/sweep.h).
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>
#include <tuple>

#include "attnprof/device.h"
#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "attnprof/io/text.h"
#include "attnprof/report/progress_text.h"
#include "attnprof/report/run_files.h"
#include "attnprof/report/sweep.h"
#include "attnprof/report/table_data.h"
#include "attnprof/run_units.h"
#include "attnprof/session.h"
#include "attnprof/sweep_plan.h"
#include "attnprof/variant.h"
#include "cli/exit_codes.h"
#include "cli/options.h"
#include "cli/printers.h"
#include "cli/progress_display.h"
#include "cli/output.h"

namespace attnprof::cli {
namespace {

struct SweepOptions {
  CliOptions run;  // device, causal, seed, out, schedule
  SweepAxes axes;  // kv_heads, seq_q, seq_kv empty: as --heads, as --seq
  bool seq_given = false;
  int64_t max_points = kDefaultMaxPoints;
};

int run_sweep(SweepOptions& o) {
  o.axes.variant = expand_variants(o.axes.variant);
  for (const auto& [flag, values] : {std::pair<const char*, const std::vector<int64_t>*>{"--seq", &o.axes.seq},
                                     {"--head-dim", &o.axes.head_dim}, {"--batch", &o.axes.batch}, {"--heads", &o.axes.heads}})
    if (values->empty()) throw UsageError(fmt::format("{} needs at least one value", flag));
  // Each value on its own is checked as the single-run flag is (--seq 0 is a
  // usage error in a sweep too); only combinations that are not a problem
  // (--kv-heads not dividing --heads, more queries than keys under the causal
  // mask) are skipped point by point.
  for (const auto& [flag, values, max] :
       {std::tuple<const char*, const std::vector<int64_t>*, int64_t>{"--seq", &o.axes.seq, kMaxSeq},
        {"--seq-q", &o.axes.seq_q, kMaxSeq}, {"--seq-kv", &o.axes.seq_kv, kMaxSeq}, {"--head-dim", &o.axes.head_dim, kMaxHeadDim},
        {"--batch", &o.axes.batch, kMaxBatch}, {"--heads", &o.axes.heads, kMaxHeads}, {"--kv-heads", &o.axes.kv_heads, kMaxHeads}})
    for (int64_t v : *values) check_positive(flag, v, max);
  bool any_fp8 = false;
  for (const std::string& d : o.axes.dtype) any_fp8 = dtype_option(d) == DType::FP8 || any_fp8;
  if (o.run.fp8_rotate && !any_fp8)
    throw UsageError("sweep: --fp8-rotate rotates fp8 inputs before their quantisation: it needs fp8 among --dtype");
  for (const std::string& ps : o.axes.pass)
    if (!parse_pass(ps)) throw UsageError(invalid_choice("--pass", ps, pass_names()));
  if (o.seq_given && (!o.axes.seq_q.empty() || !o.axes.seq_kv.empty()))
    throw UsageError("sweep: give --seq, or --seq-q / --seq-kv, not both");
  // Every point validated (sizes, device) before the first one runs. A point
  // that is not a valid problem (kv-heads not dividing heads, more queries
  // than keys under the causal mask) is skipped with the reason, unless no
  // point is valid: then the axes are wrong and that is a usage error.
  const std::string axes = sweep_axes_text(o.axes);
  const std::optional<uint64_t> count = sweep_point_count(o.axes);
  if (!count || *count > uint64_t(o.max_points))
    throw UsageError(fmt::format("sweep: {} configurations ({}) exceed --max-points {}; narrow the axes or pass "
                                 "--max-points {}",
                                 count ? std::to_string(*count) : std::string("more than 2^64"), axes, o.max_points,
                                 count ? std::to_string(*count) : std::string("N")));
  std::vector<RunUnit> units;  // an invalid point's decided before it runs: skipped
  size_t invalid = 0;
  std::string first_invalid;
  for (const SweepPoint& sp : sweep_points(o.axes)) {
    CliOptions c = o.run;
    c.dtype = sp.dtype, c.batch = sp.batch, c.heads = sp.heads, c.head_dim = sp.head_dim, c.pass = sp.pass;
    c.fp8_rotate = o.run.fp8_rotate && dtype_option(sp.dtype) == DType::FP8;  // the fp8 points only
    c.seq = sp.seq_kv, c.seq_q = sp.seq_q, c.seq_kv = sp.seq_kv;
    if (sp.kv_heads > 0) c.kv_heads = sp.kv_heads;
    RunUnit u{sp.variant, {}, std::nullopt};
    try {
      u.problem = build_problem(c);
    } catch (const UsageError& e) {
      if (std::string(e.what()).rfind("--device", 0) == 0) throw;
      if (first_invalid.empty()) first_invalid = e.what();
      ++invalid;
      u.problem = fallback_problem(sp, /*causal=*/!o.run.no_causal_given);
      u.problem.window = o.run.window;
      u.problem.page_size = requested_page_size(o.run);
      u.decided.emplace();
      u.decided->status = Status::skipped;
      u.decided->reason = std::string("not a valid problem: ") + e.what();
    }
    units.push_back(std::move(u));
  }
  if (invalid == units.size()) throw UsageError(first_invalid);
  std::string device;
  for (const RunUnit& u : units)
    if (!u.decided) device = u.problem.device;
  for (RunUnit& u : units)
    if (u.decided) u.problem.device = device;
  RunSettings settings = build_settings(o.run);
  const size_t n = units.size();
  outf("sweep: {} configurations ({}) on {}{}\n", n, axes, device,
       invalid ? fmt::format("; {} are not valid problems and will be skipped", invalid) : "");
  if (!cuda_available()) ::setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
  io::OutputDir out_dir(o.run.out, is_own_output_path);  // throws FileError (exit 4) or DirBusy (exit 6)
  // No point can run here (every variant refuses every valid shape): one
  // line, exit 3, before anything runs.
  {
    std::vector<std::string> reasons;
    bool any = false;
    for (const RunUnit& u : units) {
      if (u.decided) continue;
      const Support sup = make_variant(u.variant)->supports(u.problem);
      if (sup.ok) {
        any = true;
        break;
      }
      const std::string why = u.variant + ": " + sup.reason;
      if (std::find(reasons.begin(), reasons.end(), why) == reasons.end()) reasons.push_back(why);
    }
    if (!any) {
      notef("attnprof: sweep: none of the {} points can run here ({})", n, join(reasons, "; "));
      return exit_code::kUnsupported;
    }
  }
  const std::string sweep_dir = io::join_path(o.run.out, "sweep");

  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  install_interrupt_handlers();
  // Progress on stderr, one header line per point; end() clears it before anything else is printed.
  ProgressDisplay progress(progress_settings(o.run.quiet), n);
  settings.measure.progress = progress.callback();
  CounterNotes counter_notes;
  UnitObserver observer;
  observer.begin = [&](size_t i, const RunUnit& u) {
    const Problem& p = u.problem;
    const std::string name = fmt::format("{} {} {}{}", u.variant, p.shape_string(), dtype_name(p.dtype),
                                         p.pass == Pass::fwd ? "" : std::string(" ") + pass_name(p.pass));
    progress.begin(i, {name, name, "for this point", p,
                       {settings.measure.schedule, settings.measure.timing_iters, p.on_cuda(), 0}, false});
  };
  observer.writing = [&] { progress.writing(); };
  observer.end = [&] { progress.end(); };
  observer.done = [&](size_t i, const UnitOutcome& u) {
    const RunRecord& r = u.record;
    // A point that is not a valid problem was said when the axes were read.
    if (!units[i].decided)
      if (const std::string line = counter_notes.line_for(r); !line.empty()) note(line);
    if (r.status == Status::skipped) notef("  skipped: {}", r.reason);
    else if (!r.ok()) notef("  failed: {}", r.reason);
    return true;
  };
  RunUnitsResult run = run_units(units, {settings.measure, settings.files, /*write_interrupted_summary=*/false}, observer);
  const int ok = run.ok, skipped = run.skipped, failed = run.failed;
  const size_t attempted = run.records.size();
  std::string write_error;  // files that could not be written after a signal
  if (run.interrupted && !run.interrupted->files_error.empty()) {
    run.records.back().reason = "its files could not be written: " + run.interrupted->files_error;
    write_error = "; point " + std::to_string(attempted) + "'s files could not be written: " + run.interrupted->files_error;
  }

  progress.finish();
  const int sig = interrupt_signal();
  const bool interrupted_point = run.interrupted.has_value();
  // An interrupted sweep reports the points it reached.
  const std::vector<RunRecord>& records = run.records;
  const report::Table table = report::sweep_table(records);
  // One set: tables and plots. An interrupted sweep never replaces a complete
  // one: what it reached goes to sweep/partial/.
  const std::string dir = sig ? io::join_path(sweep_dir, "partial") : sweep_dir;
  std::vector<std::string> files;
  // A sweep in which no point ran never replaces a complete one either.
  if (!records.empty() && (sig || ok > 0)) {
    try {
      io::StagedFiles sweep_set;
      sweep_set.make_dir(dir);
      files = report::stage_table_files(sweep_set, table, io::join_path(dir, "sweep"));
      for (const std::string& f : report::stage_sweep_plots(sweep_set, records, o.axes.variant, dir)) files.push_back(f);
      sweep_set.publish();  // FileError: exit 4
    } catch (const io::FileError& e) {
      if (!interrupt_signal()) throw;
      files.clear();
      write_error += std::string("; ") + dir + "/ could not be written: " + e.what();
    }
  }
  outf("\n{}\nsweep: {} ok, {} skipped, {} failed in {}\n", report::to_text(table), ok, skipped, failed,
       report::format_duration(elapsed()));
  if (!files.empty()) outf("files: {}\n", io::visible(join(files, ", ")));
  else if (!sig && ok == 0) out("sweep/ not written: no point ran\n");
  if (sig) {
    const size_t finished = attempted - (interrupted_point ? 1 : 0);
    notef("attnprof: sweep interrupted by {} {} point {}/{}: {} finished (their files written), {}{} not run; {}{}",
          signal_name(sig), interrupted_point ? "during" : "after", attempted, n, finished,
          interrupted_point ? "1 interrupted, " : "", n - attempted,
          records.empty() || files.empty()
              ? std::string("nothing written")
              : "the points reached are in " + dir + "/ (" + sweep_dir + "/ keeps the last complete sweep)",
          write_error);
    return 128 + sig;
  }
  // Skips are expected (that is what the predictor is for); a failure is not,
  // and neither is a sweep of which nothing could run here.
  if (failed || counter_notes.failed) return exit_code::kRunFailed;
  if (ok == 0) {
    notef("attnprof: sweep: none of the {} points could run here (each was skipped, reasons above)", n);
    return exit_code::kUnsupported;
  }
  return exit_code::kOk;
}

}  // namespace

Subcommand add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  const CliOptions defaults;
  o->axes.seq = {defaults.seq};
  o->axes.head_dim = {defaults.head_dim};
  o->axes.batch = {defaults.batch};
  o->axes.heads = {defaults.heads};
  o->axes.dtype = {defaults.dtype};
  o->axes.pass = {defaults.pass};
  o->axes.variant = variants_tagged(VariantTag::default_sweep);
  Subcommand s;
  s.app = app.add_subcommand("sweep",
                             "Sweep shapes, dtypes and variants (comma lists); write OUT/sweep/sweep.csv and SVG "
                             "plots of forward time and TFLOP/s vs seq");
  CLI::App& sub = *s.app;
  add_integer_list_option(sub, "--seq", o->axes.seq, "Sequence lengths (queries and keys), e.g. 512,1024,2048",
                          &o->seq_given);
  add_integer_list_option(sub, "--seq-q", o->axes.seq_q, "Query lengths, e.g. 1,16 for decode (crossed with --seq-kv)");
  add_integer_list_option(sub, "--seq-kv", o->axes.seq_kv, "Key/value lengths, e.g. 4096,32768 (the x axis of the plots)");
  add_integer_list_option(sub, "--kv-heads", o->axes.kv_heads, "Key/value head counts (default: as --heads)");
  add_name_list_option(sub, "--pass", o->axes.pass, "Passes: fwd, bwd, fwd+bwd");
  add_integer_list_option(sub, "--head-dim", o->axes.head_dim, "Head dimensions");
  add_integer_list_option(sub, "--batch", o->axes.batch, "Batch sizes");
  add_integer_list_option(sub, "--heads", o->axes.heads, "Head counts");
  add_name_list_option(sub, "--dtype", o->axes.dtype, "Dtypes: bf16, fp16, fp32, fp8");
  sub.add_flag("--fp8-rotate", o->run.fp8_rotate, std::string(kFp8RotateHelp) + " (the fp8 points only)");
  add_name_list_option(sub, "--variant", o->axes.variant, "Variants (comma list, or 'all')");
  sub.add_option("--window", o->run.window,
                 "A sliding window of N keys at every point (as the single run's --window; a point whose keys "
                 "it all covers runs causal); 0: none")
      ->check(decimal_integer(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  sub.add_option("--kv-layout", o->run.kv_layout, "contiguous, or paged: a paged KV cache at every point (forward "
                 "points only; as the single run's --kv-layout)")
      ->capture_default_str()
      ->each([o](const std::string&) { o->run.kv_layout_given = true; });
  sub.add_option("--page-size", o->run.page_size, "Tokens per page of a paged KV cache at every point (implies "
                 "--kv-layout paged)")
      ->check(decimal_integer(std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
  sub.add_option("--max-points", o->max_points,
                 "Refuse sweeps of more configurations than this (a typo in a list can ask for days)")
      ->capture_default_str()
      ->check(decimal_integer(1, std::numeric_limits<int64_t>::max()));
  add_run_options(sub, o->run);
  s.action = [o] { return run_sweep(*o); };
  return s;
}

}  // namespace attnprof::cli
