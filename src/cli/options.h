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
  bool causal = true;
  uint64_t seed = 0;
  std::string out = "traces";
  bool no_gzip = false;
  std::string sort_by;
  int row_limit = 15;
  int warmup_iters = 3, wait = 1, warmup = 1, active = 3;
  bool list_variants = false;
  int timing_iters = -1;
  bool kernels = false;
  std::optional<double> startup_ms;  // measured in main()
  std::optional<double> peak_tflops;  // --peak-tflops, for the at-a-glance table
};

// The problem, schedule and output flags (everything but --variant and the shape).
void add_run_options(CLI::App& app, CliOptions& o);
// --batch --heads --seq --head-dim --dtype
void add_shape_options(CLI::App& app, CliOptions& o);
// "must be a positive number, got 0" (CLI::PositiveNumber prints DBL_MAX in full).
CLI::Validator positive_number();
// --variant (comma lists, repeatable) into o.variants
void add_variant_option(CLI::App& app, CliOptions& o);

// Upper limits of the size and schedule flags (README, "Errors and exit codes").
inline constexpr int64_t kMaxBatch = 1 << 20, kMaxHeads = 1 << 16, kMaxSeq = 1 << 22, kMaxHeadDim = 1 << 12;
inline constexpr int kMaxIters = 1000000;  // --warmup-iters, --timing-iters (untraced)
inline constexpr int kMaxSteps = 10000;    // --wait, --warmup, --active (profiler schedule steps)

std::string join(const std::vector<std::string>& v, const char* sep = ", ");
// "invalid --dtype 'bf61' (valid: bf16, fp16, fp32; did you mean 'bf16'?)"
std::string invalid_choice(const std::string& flag, const std::string& value, const std::vector<std::string>& valid);
std::vector<std::string> expand_variants(const std::vector<std::string>& requested);
void check_positive(const char* flag, int64_t v, int64_t max);
Problem build_problem(const CliOptions& o);
SessionOptions build_session(const CliOptions& o);
// A subcommand registers its options on `app` and returns what to run when the
// user chose it. Actions return an exit code; they never call exit().
struct Subcommand {
  CLI::App* app = nullptr;
  std::function<int()> action;
};
Subcommand add_sweep_command(CLI::App& app);    // cli/sweep_command.cpp
Subcommand add_compare_command(CLI::App& app);  // cli/compare_command.cpp

int run_profile(const CliOptions& o);
int list_variants(const CliOptions& o);

}  // namespace attnprof::cli
