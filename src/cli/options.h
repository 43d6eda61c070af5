// Options shared by every subcommand, defined once, and their validation.
// Validation errors are UsageError: one line, exit code 2.
#pragma once

#include <CLI/CLI.hpp>

#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "attnprof/problem.h"
#include "attnprof/report/run_files.h"
#include "attnprof/session.h"

namespace attnprof::cli {

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct CliOptions {
  std::vector<std::string> variants = {"naive"};
  std::string dtype = "bf16";
  std::string device = "auto";
  int64_t batch = 8, heads = 16, seq = 1024, head_dim = 64;
  // Unset: as --heads, as --seq. Set by --kv-heads / --seq-q / --seq-kv or a --shape preset.
  std::optional<int64_t> kv_heads, seq_q, seq_kv;
  std::string pass = "fwd";
  int64_t window = 0;  // --window: a sliding window of that many keys (0: none)
  bool window_from_shape = false;  // the window is a --shape preset's (no --window after it)
  std::string kv_layout = "contiguous";  // --kv-layout: contiguous or paged
  std::optional<int64_t> page_size;      // --page-size (default for a paged cache: kDefaultPageSize)
  bool kv_layout_given = false;          // --kv-layout on the command line
  bool page_size_from_shape = false;     // the page size is a --shape preset's (no --page-size after it)
  std::string seqlens;                   // --seqlens: "L1,L2,..." or "mix:NxLO-HI" (empty: equal lengths)
  bool seqlens_given = false;            // --seqlens on the command line (an empty value is refused)
  std::string varlen_layout = "packed";  // --varlen-layout: packed (where a variant can) or padded
  bool varlen_layout_given = false;      // --varlen-layout on the command line
  bool fp8_rotate = false;               // --fp8-rotate: q and k rotated before their fp8 quantisation
  bool batch_given = false;              // --batch on the command line (a different count from --seqlens is refused)
  // --causal (the default) / --no-causal; both at once is refused.
  bool causal_given = false, no_causal_given = false;
  // Seen on the command line: an explicit --seq replaces a --shape preset's
  // seq_q/seq_kv, and --seq with both --seq-q and --seq-kv is refused (unused).
  bool seq_given = false, seq_q_given = false, seq_kv_given = false;
  uint64_t seed = 0;
  std::string out = "traces";
  bool no_gzip = false;
  std::string sort_by;
  int row_limit = 15;
  int warmup_iters = kAutoIters, wait = 1, warmup = 1, active = 3;  // kAutoIters: --warmup-iters auto
  bool list_variants = false;
  int timing_iters = kAutoIters;  // --timing-iters auto
  bool quiet = false;             // no progress or estimates on stderr
  bool kernels = false;
  bool counters = false;  // --counters: the hardware-counter pass and the measured ceilings
  ProfilerOptions profiler;  // --record-shapes, --profile-memory, --with-stack
  std::optional<double> startup_ms;  // measured in main()
  std::optional<double> peak_tflops;  // --peak-tflops, for the at-a-glance table
  std::optional<int> nproc;             // --nproc: rank processes of a multi-GPU run
  std::string ring_baseline = "auto";   // --ring-baseline
  std::optional<double> rendezvous_timeout_s;  // --rendezvous-timeout (default: ring::kDefaultRendezvousSeconds)
};

// The problem, schedule and output flags (everything but --variant and the shape).
void add_run_options(CLI::App& app, CliOptions& o);
// --shape (a preset, applied first) --batch --heads --kv-heads --seq --seq-q
// --seq-kv --head-dim --window --kv-layout --page-size --dtype --pass
void add_shape_options(CLI::App& app, CliOptions& o);

// A named shape of a model people profile; explicit flags override its fields.
struct ShapePreset {
  const char* name;
  const char* what;
  int64_t batch, heads, kv_heads, seq_q, seq_kv, head_dim;
  int64_t window = 0;  // the model's sliding window (0: none)
  int64_t page_size = 0;  // a paged KV cache of pages of that many tokens (0: contiguous)
  const char* seqlens = nullptr;  // a variable-length batch (--seqlens syntax; batch and seq_kv describe it)
};
const std::vector<ShapePreset>& shape_presets();
// "must be a positive number, got 0" (CLI::PositiveNumber prints DBL_MAX in full).
CLI::Validator positive_number();
// Decimal integers only (io::parse_decimal: no 010, 0x10, +5, 1e3, 5.0), within
// [lo, hi] of the option's type, the value named as typed.
CLI::Validator decimal_integer(int64_t lo, int64_t hi);
// A comma list of decimal integers ("512,1024,2048"), repeatable; empty items
// are dropped, none left is an error, and the next flag is never taken as a value.
// `given`, when set, becomes true once the option is seen.
void add_integer_list_option(CLI::App& app, const std::string& name, std::vector<int64_t>& out,
                             const std::string& help, bool* given = nullptr);
// The same for names ("naive,sdpa-flash").
void add_name_list_option(CLI::App& app, const std::string& name, std::vector<std::string>& out,
                          const std::string& help);
// --variant (comma lists, repeatable) into o.variants
void add_variant_option(CLI::App& app, CliOptions& o);

// Upper limits of the size and schedule flags (README, "Errors and exit codes").
inline constexpr int64_t kMaxBatch = 1 << 20, kMaxHeads = 1 << 16, kMaxSeq = 1 << 22, kMaxHeadDim = 1 << 12;
// --page-size: vLLM's default block size (at most kMaxPageSize, problem.h).
inline constexpr int64_t kDefaultPageSize = 16;
inline constexpr int kMaxIters = 1000000;  // --warmup-iters, --timing-iters (untraced)
inline constexpr int kMaxSteps = 10000;    // --wait, --warmup, --active (profiler schedule steps)
inline constexpr int64_t kDefaultMaxPoints = 1000;  // sweep: more needs --max-points

std::string join(const std::vector<std::string>& v, const char* sep = ", ");
// "invalid --dtype 'bf61' (valid: bf16, fp16, fp32; did you mean 'bf16'?)"
std::string invalid_choice(const std::string& flag, const std::string& value, const std::vector<std::string>& valid);
// 'all' means every single-process variant, or every multi-GPU one (tag
// multi_gpu) when `multi_gpu`: a plain `--variant all` never starts ranks.
std::vector<std::string> expand_variants(const std::vector<std::string>& requested, bool multi_gpu = false);
void check_positive(const char* flag, int64_t v, int64_t max);
// The page size the layout flags ask for, 0 for contiguous K/V, before
// build_problem checks it: --page-size alone implies paged; an explicit
// --kv-layout contiguous drops a preset's pages.
int64_t requested_page_size(const CliOptions& o);
// The lengths --seqlens names: a comma list of decimal lengths ("128,4096,77")
// or "mix:NxLO-HI", N lengths drawn uniformly from [LO, HI] by a generator
// seeded with `seed` (splitmix64: the same lengths on every machine). Each
// length 1..kMaxSeq, 1..kMaxSeqlens of them; anything else is a UsageError
// naming the value and the two forms.
std::vector<int64_t> parse_seqlens(const std::string& spec, uint64_t seed);
// A --dtype value (bf16, fp16, fp32, fp8 and their aliases); anything else a
// UsageError naming it (any e5m2 spelling: fp8 takes e4m3).
DType dtype_option(const std::string& value);
// --fp8-rotate's help (the single run's and the sweep's).
inline constexpr const char* kFp8RotateHelp =
    "With --dtype fp8: multiply q and k by one random orthogonal matrix (seeded) before their quantisation "
    "(FlashAttention-3's incoherent processing; the attention is unchanged, outlier channels spread out), "
    "outside the measured scope";
Problem build_problem(const CliOptions& o);

// How to measure and where to write: the schedule, timing and output flags.
struct RunSettings {
  MeasureOptions measure;
  report::RunFileOptions files;
  std::optional<SortKey> sort_by;  // default: cuda_time_total on CUDA, cpu_time_total on CPU
  // The table options for a problem (its device decides the default sort key).
  TableOptions table_for(const Problem& p) const;
};
RunSettings build_settings(const CliOptions& o);
// A subcommand registers its options on `app` and returns what to run when the
// user chose it. Actions return an exit code; they never call exit().
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> action;
};
Subcommand add_sweep_command(CLI::App& app);    // cli/sweep_command.cpp
Subcommand add_compare_command(CLI::App& app);  // cli/compare_command.cpp

int run_profile(const CliOptions& o);
// --nproc and --ring-baseline (cli/distributed_command.cpp).
void add_distributed_options(CLI::App& app, CliOptions& o);
// A multi-GPU run: this process launches the ranks (--nproc), or is one
// (RANK/WORLD_SIZE set by a launcher). nullopt for a single-process run.
std::optional<int> run_distributed(const CliOptions& o);
int list_variants(const CliOptions& o);

}  // namespace attnprof::cli
