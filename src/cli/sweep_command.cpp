// `attnprof sweep`: every combination of the axes, one run_variant each, with
// points that cannot fit skipped before they are tried; then the sweep table
// and plots (report/sweep.h).
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <memory>

#include "attnprof/device.h"
#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "attnprof/report/progress_text.h"
#include "attnprof/report/run_files.h"
#include "attnprof/report/sweep.h"
#include "attnprof/report/table_data.h"
#include "attnprof/session.h"
#include "attnprof/variant.h"
#include "cli/exit_codes.h"
#include "cli/options.h"
#include "cli/progress_display.h"

namespace attnprof::cli {
namespace {

struct SweepOptions {
  CliOptions run;  // device, causal, seed, out, schedule
  std::vector<int64_t> seq, head_dim, batch, heads;
  std::vector<int64_t> kv_heads, seq_q, seq_kv;  // empty: as --heads, as --seq
  std::vector<std::string> dtype, variant, pass;
  bool seq_given = false;
};

// (seq_q, seq_kv) pairs: --seq moves both; --seq-kv with --seq-q crosses them
// (--seq-q alone pairs each query length with itself... as --seq does).
std::vector<std::pair<int64_t, int64_t>> sequence_pairs(const SweepOptions& o) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  if (o.seq_q.empty() && o.seq_kv.empty()) {
    for (int64_t s : o.seq) pairs.emplace_back(s, s);
    return pairs;
  }
  const std::vector<int64_t>& kv = o.seq_kv.empty() ? o.seq : o.seq_kv;
  for (int64_t k : kv) {
    if (o.seq_q.empty()) pairs.emplace_back(k, k);
    for (int64_t q : o.seq_q) pairs.emplace_back(q, k);
  }
  return pairs;
}

struct Point {
  std::string variant;
  Problem problem;
  RunRecord record;  // status ok / skipped / failed
};

int run_sweep(SweepOptions& o) {
  o.variant = expand_variants(o.variant);
  for (const auto& [flag, values] : {std::pair<const char*, const std::vector<int64_t>*>{"--seq", &o.seq},
                                     {"--head-dim", &o.head_dim}, {"--batch", &o.batch}, {"--heads", &o.heads}})
    if (values->empty()) throw UsageError(fmt::format("{} needs at least one value", flag));
  for (const std::string& d : o.dtype)
    if (!parse_dtype(d)) throw UsageError(invalid_choice("--dtype", d, dtype_names()));
  for (const std::string& ps : o.pass)
    if (!parse_pass(ps)) throw UsageError(invalid_choice("--pass", ps, pass_names()));
  if (o.seq_given && (!o.seq_q.empty() || !o.seq_kv.empty()))
    throw UsageError("sweep: give --seq, or --seq-q / --seq-kv, not both");
  // Every point validated (sizes, device) before the first one runs. A point
  // that is not a valid problem (kv-heads not dividing heads, more queries
  // than keys under the causal mask) is skipped with the reason, unless no
  // point is valid: then the axes are wrong and that is a usage error.
  const auto seqs = sequence_pairs(o);
  const std::vector<int64_t> no_kv_heads = {0};  // 0: as --heads
  std::vector<Point> points;
  size_t invalid = 0;
  std::string first_invalid;
  for (const std::string& ps : o.pass)
    for (const std::string& dt : o.dtype)
      for (int64_t b : o.batch)
        for (int64_t h : o.heads)
          for (int64_t hkv : o.kv_heads.empty() ? no_kv_heads : o.kv_heads)
            for (int64_t d : o.head_dim)
              for (const std::string& v : o.variant)
                for (const auto& [sq, skv] : seqs) {
                  CliOptions c = o.run;
                  c.dtype = dt, c.batch = b, c.heads = h, c.head_dim = d, c.pass = ps;
                  c.seq = skv, c.seq_q = sq, c.seq_kv = skv;
                  if (hkv > 0) c.kv_heads = hkv;
                  Point pt{v, {}, {}};
                  try {
                    pt.problem = build_problem(c);
                  } catch (const UsageError& e) {
                    if (std::string(e.what()).rfind("--device", 0) == 0) throw;
                    if (first_invalid.empty()) first_invalid = e.what();
                    ++invalid;
                    pt.problem.batch = b, pt.problem.heads_q = h, pt.problem.heads_kv = hkv > 0 ? hkv : h;
                    pt.problem.seq_q = sq, pt.problem.seq_kv = skv, pt.problem.head_dim = d;
                    pt.problem.dtype = parse_dtype(dt).value_or(DType::BF16);
                    pt.problem.pass = parse_pass(ps).value_or(Pass::fwd);
                    pt.problem.mask = o.run.causal ? Mask::causal_bottom_right : Mask::none;
                    pt.record.status = Status::skipped;
                    pt.record.reason = std::string("not a valid problem: ") + e.what();
                  }
                  points.push_back(std::move(pt));
                }
  if (invalid == points.size()) throw UsageError(first_invalid);
  std::string device;
  for (const Point& pt : points)
    if (pt.record.status != Status::skipped) device = pt.problem.device;
  for (Point& pt : points)
    if (pt.record.status == Status::skipped) pt.problem.device = device;
  RunSettings settings = build_settings(o.run);
  const size_t n = points.size();
  fmt::print("sweep: {} configurations ({} variant x {} seq x {} head_dim x {} batch x {} heads x {} kv-heads x {} "
             "dtype x {} pass) on {}{}\n",
             n, o.variant.size(), seqs.size(), o.head_dim.size(), o.batch.size(), o.heads.size(),
             std::max<size_t>(1, o.kv_heads.size()), o.dtype.size(), o.pass.size(), device,
             invalid ? fmt::format("; {} are not valid problems and will be skipped", invalid) : "");
  std::fflush(stdout);
  if (!cuda_available()) ::setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
  const std::string sweep_dir = io::join_path(o.run.out, "sweep");
  try {
    io::ensure_writable_dir(sweep_dir);
  } catch (const io::FileError& e) {
    fmt::print(stderr, "attnprof: error: {}\n", e.what());
    return exit_code::kOutput;
  }

  const auto start = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(); };
  install_interrupt_handlers();
  // Progress on stderr, one header line per point; end() clears it before anything else is printed.
  ProgressDisplay progress(progress_settings(o.run.quiet), n);
  settings.measure.progress = progress.callback();
  int ok = 0, skipped = 0, failed = 0;
  size_t attempted = 0;
  for (size_t i = 0; i < n && !interrupt_signal(); ++i, attempted = i) {
    Point& pt = points[i];
    const Problem& p = pt.problem;
    const std::string name = fmt::format("{} {} {}{}", pt.variant, p.shape_string(), dtype_name(p.dtype),
                                         p.pass == Pass::fwd ? "" : std::string(" ") + pass_name(p.pass));
    progress.begin(i, {name, name, "for this point", p,
                       {settings.measure.schedule, settings.measure.timing_iters, p.on_cuda(), 0}, false});
    RunRecord& r = pt.record;
    r.variant = pt.variant;
    r.problem = p;
    if (r.status == Status::skipped) {  // not a valid problem: said when the axes were read
      progress.end();
      ++skipped;
      fmt::print(stderr, "  skipped: {}\n", r.reason);
      continue;
    }
    try {
      // Support, the memory prediction and out-of-memory all come back as a skip.
      Measurement m = run_variant(pt.variant, p, settings.measure);
      settings.measure.startup_ms.reset();
      r = std::move(m.record);
      if (r.ok()) {
        progress.writing();
        report::write_run_files(r, m.trace_json, settings.files);
      }
      progress.end();
    } catch (const io::FileError& e) {
      progress.end();
      fmt::print(stderr, "attnprof: error: {}\n", e.what());
      return exit_code::kOutput;
    }
    if (r.status == Status::interrupted) {
      attempted = i + 1;
      fmt::print(stderr, "attnprof: sweep interrupted during point {}/{}; writing what finished\n", i + 1, n);
      break;
    }
    if (r.ok()) ++ok;
    else if (r.status == Status::skipped) ++skipped, fmt::print(stderr, "  skipped: {}\n", r.reason);
    else ++failed, fmt::print(stderr, "  failed: {}\n", r.reason);
  }

  progress.finish();
  points.resize(attempted);  // an interrupted sweep reports the points it reached
  std::vector<RunRecord> records;
  for (const Point& pt : points) records.push_back(pt.record);
  const report::Table table = report::sweep_table(records);
  std::vector<std::string> files;
  try {
    files = report::write_table_files(table, io::join_path(sweep_dir, "sweep"));
    for (const std::string& f : report::write_sweep_plots(records, o.variant, sweep_dir)) files.push_back(f);
  } catch (const io::FileError& e) {
    fmt::print(stderr, "attnprof: error: {}\n", e.what());
    return exit_code::kOutput;
  }
  fmt::print("\n{}\nsweep: {} ok, {} skipped, {} failed in {}\n", report::to_text(table), ok, skipped, failed,
             report::format_duration(elapsed()));
  fmt::print("files: {}\n", join(files, ", "));
  if (const int sig = interrupt_signal()) return 128 + sig;
  // Skips are expected (that is what the predictor is for); a failure is not.
  return failed ? exit_code::kRunFailed : exit_code::kOk;
}

}  // namespace

Subcommand add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepOptions>();
  const CliOptions defaults;
  o->seq = {defaults.seq};
  o->head_dim = {defaults.head_dim};
  o->batch = {defaults.batch};
  o->heads = {defaults.heads};
  o->dtype = {defaults.dtype};
  o->pass = {defaults.pass};
  o->variant = variants_tagged(VariantTag::default_sweep);
  Subcommand s;
  s.app = app.add_subcommand("sweep",
                             "Sweep shapes, dtypes and variants (comma lists); write OUT/sweep/sweep.csv and SVG "
                             "plots of forward time and TFLOP/s vs seq");
  CLI::App& sub = *s.app;
  sub.add_option("--seq", o->seq, "Sequence lengths (queries and keys), e.g. 512,1024,2048")
      ->delimiter(',')
      ->capture_default_str()
      ->each([o](const std::string&) { o->seq_given = true; });
  sub.add_option("--seq-q", o->seq_q, "Query lengths, e.g. 1,16 for decode (crossed with --seq-kv)")->delimiter(',');
  sub.add_option("--seq-kv", o->seq_kv, "Key/value lengths, e.g. 4096,32768 (the x axis of the plots)")->delimiter(',');
  sub.add_option("--kv-heads", o->kv_heads, "Key/value head counts (default: as --heads)")->delimiter(',');
  sub.add_option("--pass", o->pass, "Passes: fwd, bwd, fwd+bwd")->delimiter(',')->capture_default_str();
  sub.add_option("--head-dim", o->head_dim, "Head dimensions")->delimiter(',')->capture_default_str();
  sub.add_option("--batch", o->batch, "Batch sizes")->delimiter(',')->capture_default_str();
  sub.add_option("--heads", o->heads, "Head counts")->delimiter(',')->capture_default_str();
  sub.add_option("--dtype", o->dtype, "Dtypes: bf16, fp16, fp32")->delimiter(',')->capture_default_str();
  sub.add_option("--variant", o->variant, "Variants (comma list, or 'all')")->delimiter(',')->capture_default_str();
  add_run_options(sub, o->run);
  s.action = [o] { return run_sweep(*o); };
  return s;
}

}  // namespace attnprof::cli
