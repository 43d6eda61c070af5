#include "distributed/rank_run.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "attnprof/report/kineto_trace.h"
#include "attnprof/report/run_files.h"
#include "attnprof/variant.h"
#include "distributed/inner.h"

namespace attnprof::ring {

void fix_auto_counts(MeasureOptions& m, bool cuda) {
  if (m.schedule.warmup_iters == kAutoIters) m.schedule.warmup_iters = kRingWarmupIters;
  if (m.timing_iters == kAutoIters) m.timing_iters = cuda ? kRingTimingItersCuda : kRingTimingItersCpu;
}

Baseline single_gpu_baseline(const BaselineChoice& choice, const std::string& inner, const Problem& p,
                             MeasureOptions measure, report::RunFileOptions files) {
  if (choice.source == "off") return {std::nullopt, "--ring-baseline off"};
  if (choice.record) return {choice.record->timing->median_us, choice.record->variant + ", " + choice.source};
  files.stem_suffix.clear();
  measure.trace_metadata.clear();
  measure.startup_ms.reset();  // process start-up belongs to the ring run's first variant
  Measurement m = run_variant(inner, p, measure);
  if (!m.record.ok()) return {std::nullopt, inner + " " + status_name(m.record.status) + ": " + m.record.reason};
  try {
    report::write_run_files(m.record, m.trace_json, files);
  } catch (const io::FileError& e) {
    return {std::nullopt, e.what()};
  }
  if (!m.record.timing) return {std::nullopt, inner + " ran without unprofiled timing (--timing-iters 0)"};
  return {m.record.timing->median_us, inner + " on " + p.device};
}

report::RankFigures rank_figures(const RunRecord& r, const std::string& trace_json, int rank) {
  report::RankFigures f;
  f.rank = rank;
  f.device = r.problem.device;
  f.device_name = r.env.device_name;
  if (r.timing) f.forward_us = r.timing->median_us;
  try {
    f.overlap = report::overlap_figures(report::parse_kineto_trace(trace_json, r.variant));
  } catch (const report::TraceError& e) {
    f.reason = e.what();
  }
  return f;
}

void add_overlap_facts(RunRecord& r, const report::RankFigures& f) {
  if (!f.overlap) return;
  const report::OverlapFigures& o = *f.overlap;
  r.facts.emplace_back("ring compute per forward (us)", fmt::format("{:.1f}", o.compute_us));
  r.facts.emplace_back("ring communication per forward (us)", fmt::format("{:.1f}", o.comm_us));
  r.facts.emplace_back("ring exposed communication per forward (us)", fmt::format("{:.1f}", o.exposed_comm_us));
  if (const auto pct = o.overlap_pct()) r.facts.emplace_back("ring overlap (%)", fmt::format("{:.1f}", *pct));
}

namespace {

// Every rank's figures, by rank, as rank 0 reads them back; one it cannot
// read stands in its row as "unreadable".
std::vector<report::RankFigures> read_rank_figures(const std::vector<std::string>& texts) {
  std::vector<report::RankFigures> ranks;
  for (const std::string& text : texts) {
    try {
      ranks.push_back(report::rank_figures_from_json(nlohmann::json::parse(text)));
    } catch (const std::exception& e) {
      report::RankFigures bad;
      bad.rank = static_cast<int>(ranks.size());
      bad.status = "unreadable";
      bad.reason = e.what();
      ranks.push_back(bad);
    }
  }
  return ranks;
}

}  // namespace

RankRunResult run_rank_units(ProcessGroup& group, const std::vector<std::string>& names, const Problem& p,
                             RankRunOptions opt, const RankObserver& observer) {
  const int rank = group.rank(), world = group.world_size();
  const bool lead = rank == 0;
  auto key = [&](size_t i) { return fmt::format("run{}/{}", i, names[i]); };
  opt.run.signal_excuses_run_files_error = false;
  RankRunResult res;
  std::vector<bool> refused(names.size(), false);
  report::RankFigures figures;  // the unit being run: this rank's, for rank 0

  std::vector<RunUnit> units;
  for (const std::string& n : names) units.push_back({n, p, std::nullopt});
  UnitObserver run;
  // Skipped everywhere when any rank's variant refuses: the first reason by rank.
  run.decide = [&](size_t i, const RunUnit& u) -> std::optional<RunRecord> {
    const Support mine = make_variant(u.variant)->supports(p);
    std::string refusal;
    for (const std::string& why : group.all_gather_strings(key(i) + "/supports", mine.ok ? "" : mine.reason))
      if (refusal.empty()) refusal = why;
    if (refusal.empty()) return std::nullopt;
    refused[i] = true;
    RunRecord r;
    r.status = Status::skipped;
    r.reason = refusal;
    return r;
  };
  run.begin = [&](size_t i, const RunUnit& u) {
    if (!u.decided && observer.begin) observer.begin(i, u.variant);
  };
  run.measured = [&](size_t, RunRecord& r, const std::string& trace_json) {
    // A rank computes 1/world of the forward: its rate is that share over its
    // unprofiled time (the profiled CUDA time also sums the NCCL kernels,
    // which run beside the computation).
    if (r.timing && r.timing->median_us > 0) r.tflops = p.flops() / world / r.timing->median_us / 1e6;
    r.facts.emplace_back("TFLOP/s basis", "this rank's share (1/" + std::to_string(world) +
                                              " of the forward's FLOPs) over its unprofiled median");
    figures = rank_figures(r, trace_json, rank);
    add_overlap_facts(r, figures);
  };
  run.done = [&](size_t i, const UnitOutcome& u) {
    const RunRecord& r = u.record;
    if (refused[i]) {
      ++res.refused;
      if (observer.refused) observer.refused(i, r.variant, r.reason);
      return true;
    }
    if (!r.ok()) {
      res.left_at = r;
      return false;
    }
    const auto all = group.all_gather_strings(
        key(i) + "/figures",
        report::rank_figures_json(figures).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    if (observer.ran) observer.ran(i, r);
    if (!lead) return true;
    report::RingSummary sum;
    sum.variant = r.variant;
    const InnerSpec& spec = *find_inner(r.variant);
    sum.inner = spec.inner_variant;
    sum.scheme = spec.scheme;
    sum.problem = p;
    sum.world = world;
    sum.ranks = read_rank_figures(all);
    const Baseline base = single_gpu_baseline(opt.baseline, sum.inner, p, opt.run.measure, opt.run.files);
    sum.single_gpu_us = base.us;
    sum.single_gpu_source = base.source;
    const std::vector<std::string> files = report::write_ring_report(sum, opt.run.files.out_dir);
    if (observer.summary) observer.summary(i, sum, files);
    res.summaries.push_back(sum);
    return true;
  };
  res.run = run_units(units, opt.run, run);
  if (lead && res.summaries.size() > 1 && !res.left_at && !interrupt_signal())
    res.context_parallel_files = report::write_context_parallel_table(res.summaries, opt.run.files.out_dir);
  return res;
}

}  // namespace attnprof::ring
