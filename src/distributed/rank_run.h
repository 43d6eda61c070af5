// One rank's part of a multi-GPU run (ring-*, ulysses-*), as data: the
// variants every rank can run, agreed through the store before each one,
// measured with their files written by run_units() (<stem>.rank<k>.*); then
// each rank's figures gathered to rank 0, which adds the single-GPU baseline
// and writes the variant's ring files (<stem>.ring.*). Nothing is printed
// here: the caller sees each variant through RankObserver.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "attnprof/problem.h"
#include "attnprof/report/ring_report.h"
#include "attnprof/run_record.h"
#include "attnprof/run_units.h"
#include "attnprof/session.h"
#include "distributed/process_group.h"

namespace attnprof::ring {

// `auto` iteration counts in a ring run: the GPU default of the single-process
// auto warm-up, and timing counts that keep a 131072-token forward (~100 ms on
// two H200s) to about a second.
inline constexpr int kRingWarmupIters = 3;
inline constexpr int kRingTimingItersCuda = 10;
inline constexpr int kRingTimingItersCpu = 3;

// Every ring step is a collective. Counts each rank decides from its own step
// times (auto) can differ under load, and a rank then waits forever for a
// transfer its peer never starts: a ring run replaces `auto` by fixed counts.
void fix_auto_counts(MeasureOptions& m, bool cuda);

// The speed-up's denominator: the same attention on one GPU, full sequence.
struct BaselineChoice {
  std::string source = "auto";      // "auto" (rank 0 runs the inner variant), "off", or a summary file's path
  std::optional<RunRecord> record;  // that file's summary, read and checked before the run
};
struct Baseline {
  std::optional<double> us;
  std::string source;  // where it came from, or why there is none
};
// "auto" runs `inner` on `p` with the ring run's options (no rank suffix, no
// distributedInfo) and writes its files as a single-GPU run's.
Baseline single_gpu_baseline(const BaselineChoice& choice, const std::string& inner, const Problem& p,
                             MeasureOptions measure, report::RunFileOptions files);

// This rank's figures for rank 0: its unprofiled forward time, and from its
// trace the overlap of computation and communication (the reason instead
// when the trace cannot be read).
report::RankFigures rank_figures(const RunRecord& r, const std::string& trace_json, int rank);
// The overlap figures as facts of the rank's own summary.
void add_overlap_facts(RunRecord& r, const report::RankFigures& f);

struct RankRunOptions {
  // measure: the ring counts fixed (fix_auto_counts), distributedInfo in the
  // trace metadata; files: stem_suffix ".rank<k>". A FileError writing a
  // variant's files is thrown also after a signal (the rank exits 4).
  RunUnitsOptions run;
  BaselineChoice baseline;  // rank 0's
};

// What the caller prints, as the run goes. Called on every rank; only rank 0
// gets `summary`.
struct RankObserver {
  std::function<void(size_t index, const std::string& variant)> begin;  // every rank agreed: it runs now
  // Some rank's variant refused the problem (the first reason by rank): skipped on every rank.
  std::function<void(size_t index, const std::string& variant, const std::string& refusal)> refused;
  // This rank's record, its files written and every rank's figures gathered.
  std::function<void(size_t index, const RunRecord&)> ran;
  // Rank 0: the variant's ring summary, its files written (the first one the table).
  std::function<void(size_t index, const report::RingSummary&, const std::vector<std::string>& files)> summary;
};

struct RankRunResult {
  RunUnitsResult run;  // every variant reached, refused ones as skipped; the interrupted one
  size_t refused = 0;
  // The variant this rank could not run (failed, or skipped once tried): it
  // leaves at once, as its peers would wait for it in the next transfer.
  std::optional<RunRecord> left_at;
  std::vector<report::RingSummary> summaries;  // rank 0: each variant's, in order
  // Rank 0, more than one summary and no signal: the side-by-side table's files.
  std::vector<std::string> context_parallel_files;
};

// Runs `names` on `p` in `group`. Every decision that changes which
// collectives run is taken by all ranks together (through the store), so no
// rank waits for a peer that chose otherwise. Stops at a signal (before the
// next variant, or with the interrupted one), and at the first variant this
// rank could not run. Throws io::FileError when this rank's files or rank 0's
// ring files cannot be written, attnprof::Interrupted when a signal stops a
// wait for the peers, std::runtime_error when the store times out.
RankRunResult run_rank_units(ProcessGroup& group, const std::vector<std::string>& names, const Problem& p,
                             RankRunOptions opt, const RankObserver& observer);

}  // namespace attnprof::ring
