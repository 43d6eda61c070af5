// Ring attention, rank by rank: how much of each forward's device time was
// computation, how much communication (NCCL kernels), and how much of the
// communication nothing hid (no computation running on any stream at the
// time). Computed from the kernel intervals of a rank's own Kineto trace;
// rank 0 gathers every rank's figures into one table and the speed-up over
// the same attention on one GPU. Pure functions, no LibTorch.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "attnprof/problem.h"
#include "attnprof/report/kineto_trace.h"
#include "attnprof/report/table_data.h"
#include "attnprof/run_record.h"

namespace attnprof::report {

// A half-open time interval in nanoseconds.
struct Interval {
  int64_t begin = 0, end = 0;
};
// Length of the union.
int64_t union_ns(std::vector<Interval> v);
// Length of the union of `v` not covered by the union of `cover`.
int64_t uncovered_ns(std::vector<Interval> v, std::vector<Interval> cover);

// NCCL's device kernels ("ncclDevKernel_SendRecv(...)", "ncclKernel_AllReduce_...").
bool is_communication_kernel(std::string_view name);

// Per forward (attn_fwd scope), averaged over the forwards of a trace.
struct OverlapFigures {
  int forwards = 0;
  double compute_us = 0;       // union of the device work that is not communication
  double comm_us = 0;          // union of the communication kernels
  double exposed_comm_us = 0;  // communication while no computation ran
  double span_us = 0;          // first device work's start to the last one's end
  // Share of communication hidden behind computation; nullopt without communication.
  std::optional<double> overlap_pct() const;
};
// nullopt when the trace has no forward with device work (a CPU run).
std::optional<OverlapFigures> overlap_figures(const KinetoTrace& trace);

// One rank's ring run, as rank 0 receives it.
struct RankFigures {
  int rank = 0;
  std::string device;       // "cuda:1"
  std::string device_name;  // "NVIDIA H200"
  std::string status = "ok";
  std::string reason;
  std::optional<double> forward_us;  // unprofiled median per forward (CUDA events; steady clock on CPU)
  std::optional<OverlapFigures> overlap;
};
nlohmann::json rank_figures_json(const RankFigures& f);
// Throws std::invalid_argument naming the field when `j` is not what
// rank_figures_json writes.
RankFigures rank_figures_from_json(const nlohmann::json& j);

struct RingSummary {
  std::string variant;      // "ring-custom-flash"
  std::string inner;        // "custom-flash"
  std::string scheme = "ring";  // "ring" or "ulysses": how the ranks share the attention
  Problem problem;          // the full problem (device: rank 0's)
  int world = 0;
  std::vector<RankFigures> ranks;  // by rank
  // The same attention on one GPU over the full sequence (its unprofiled median).
  std::optional<double> single_gpu_us;
  std::string single_gpu_source;  // "custom-flash on cuda:0" or a summary file; why not, when absent

  // The slowest rank's median: the ring finishes when its last rank does.
  std::optional<double> ring_forward_us() const;
  std::optional<double> speedup() const;     // single_gpu_us / ring_forward_us
  std::optional<double> efficiency() const;  // speedup / world
};

// One row per rank: forward, compute, communication, exposed communication
// (us and % of the forward), overlap %, status.
Table ring_table(const RingSummary& s);
// "ring-custom-flash | 1x16x65536x128 bf16 causal fwd | 2 ranks (NVIDIA H200)" then the
// speed-up line, or why there is none.
std::string ring_headline(const RingSummary& s);
nlohmann::json ring_summary_json(const RingSummary& s);

// Writes out_dir/<variant>/<stem>.ring.{txt,md,csv,json} (the table, headed by
// the headline) and <stem>.ring.summary.json as one set, and removes the
// files of ranks at or past `s.world` (an earlier run with more ranks);
// returns the paths. Throws io::FileError.
std::vector<std::string> write_ring_report(const RingSummary& s, const std::string& out_dir);

// Several multi-GPU variants of one run, one row each, so ring and Ulysses read
// side by side: scheme, inner, ranks, forward (the slowest rank's), one GPU,
// speed-up, parallel efficiency, and the largest share of a rank's forward
// that its communication left exposed.
Table context_parallel_table(const std::vector<RingSummary>& runs);
// out_dir/compare/<stem>.context_parallel.{txt,md,csv,json} of one problem's
// runs as one set; returns the paths. Throws io::FileError.
std::vector<std::string> write_context_parallel_table(const std::vector<RingSummary>& runs,
                                                      const std::string& out_dir);

// Every file a ring run of `variant` over `world` ranks writes under out_dir:
// each rank's table, summary and trace (both compressions), and the ring files.
std::vector<std::string> ring_run_outputs(const std::string& out_dir, const std::string& variant, const Problem& p,
                                          int world);

// --ring-baseline FILE, read and checked before a ring run starts: a regular
// file holding a complete summary of the same problem (shape, dtype, mask)
// with unprofiled timing. Throws io::FileError naming the file and what is
// wrong (missing, a directory or FIFO, not a summary, another problem, no timing).
RunRecord load_ring_baseline(const std::string& path, const Problem& p);

}  // namespace attnprof::report
