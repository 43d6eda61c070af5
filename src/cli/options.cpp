#include "cli/options.h"

#include <fmt/format.h>

#include <algorithm>

#include "attnprof/key_averages.h"
#include "attnprof/runner.h"
#include "attnprof/variant.h"

namespace attnprof::cli {

void add_shape_options(CLI::App& app, CliOptions& o) {
  app.add_option("--dtype", o.dtype, "bf16, fp16 or fp32")->capture_default_str();
  app.add_option("--batch", o.batch, "Batch size")->capture_default_str();
  app.add_option("--heads", o.heads, "Attention heads")->capture_default_str();
  app.add_option("--seq", o.seq, "Sequence length")->capture_default_str();
  app.add_option("--head-dim", o.head_dim, "Head dimension")->capture_default_str();
}

void add_run_options(CLI::App& app, CliOptions& o) {
  app.add_option("--timing-iters", o.timing_iters,
                 "Forwards timed without the profiler (CUDA events; steady clock on CPU); "
                 "default 100 on CUDA, 3 on CPU; 0 = skip");
  app.add_flag("--kernels", o.kernels, "Also print each kernel's launch API, grid, block, registers, "
               "shared memory and estimated occupancy");
  app.add_option("--device", o.device, "auto, cpu, cuda or cuda:N (auto: CUDA if present, else CPU)")->capture_default_str();
  app.add_flag("--causal,!--no-causal", o.causal, "Causal mask (default) or none");
  app.add_option("--seed", o.seed, "Seed for the random inputs")->capture_default_str();
  app.add_option("--out", o.out, "Output directory")->capture_default_str();
  app.add_flag("--no-gzip", o.no_gzip, "Write the trace as plain .json instead of .json.gz");
  app.add_option("--sort-by", o.sort_by,
                 "Table sort key: cuda_time_total (default on CUDA), cpu_time_total (default on CPU), "
                 "self_cuda_time_total, self_cpu_time_total, cuda_time, cpu_time, count");
  app.add_option("--row-limit", o.row_limit, "Table rows to show (0 = all)")->capture_default_str();
  app.add_option("--warmup-iters", o.warmup_iters, "Untraced forwards before the profiler starts")->capture_default_str();
  app.add_option("--wait", o.wait, "Profiler schedule: steps run before the profiler is prepared")->capture_default_str();
  app.add_option("--warmup", o.warmup, "Profiler schedule: steps traced and thrown away (Kineto warm-up)")->capture_default_str();
  app.add_option("--active", o.active, "Profiler schedule: steps recorded")->capture_default_str();
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string s;
  for (size_t i = 0; i < v.size(); ++i) s += (i ? sep : "") + v[i];
  return s;
}

namespace {
size_t edit_distance(const std::string& a, const std::string& b) {
  std::vector<size_t> prev(b.size() + 1), cur(b.size() + 1);
  for (size_t j = 0; j <= b.size(); ++j) prev[j] = j;
  for (size_t i = 1; i <= a.size(); ++i) {
    cur[0] = i;
    for (size_t j = 1; j <= b.size(); ++j)
      cur[j] = std::min({prev[j] + 1, cur[j - 1] + 1, prev[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1)});
    std::swap(prev, cur);
  }
  return prev[b.size()];
}

}  // namespace

// "unknown --dtype 'bf61' (valid: bf16, fp16, fp32; did you mean 'bf16'?)"
std::string invalid_choice(const std::string& flag, const std::string& value, const std::vector<std::string>& valid) {
  std::string best;
  size_t best_d = 3;  // suggest only close misspellings
  for (const auto& v : valid) {
    const size_t d = edit_distance(value, v);
    if (d < best_d) best_d = d, best = v;
  }
  std::string msg = fmt::format("invalid {} '{}' (valid: {}", flag, value, join(valid));
  if (!best.empty()) msg += fmt::format("; did you mean '{}'?", best);
  return msg + ")";
}

std::vector<std::string> expand_variants(const std::vector<std::string>& requested) {
  const std::vector<std::string> known = variant_names();
  std::vector<std::string> out;
  for (const std::string& v : requested) {
    if (v == "all") {
      for (const auto& k : known)
        if (std::find(out.begin(), out.end(), k) == out.end()) out.push_back(k);
      continue;
    }
    if (std::find(known.begin(), known.end(), v) == known.end()) {
      std::vector<std::string> valid = known;
      valid.emplace_back("all");
      throw UsageError(invalid_choice("--variant", v, valid));
    }
    if (std::find(out.begin(), out.end(), v) == out.end()) out.push_back(v);
  }
  if (out.empty()) throw UsageError("--variant needs at least one name (try --list-variants)");
  return out;
}

void check_positive(const char* flag, int64_t v, int64_t max) {
  if (v <= 0) throw UsageError(fmt::format("{} must be a positive integer, got {}", flag, v));
  if (v > max) throw UsageError(fmt::format("{} {} is too large (at most {})", flag, v, max));
}

Problem build_problem(const CliOptions& o) {
  Problem p;
  const auto dtype = parse_dtype(o.dtype);
  if (!dtype) throw UsageError(invalid_choice("--dtype", o.dtype, dtype_names()));
  check_positive("--batch", o.batch, 1 << 20);
  check_positive("--heads", o.heads, 1 << 16);
  check_positive("--seq", o.seq, 1 << 22);
  check_positive("--head-dim", o.head_dim, 1 << 12);
  p.batch = o.batch, p.heads = o.heads, p.seq = o.seq, p.head_dim = o.head_dim;
  p.dtype = *dtype;
  p.causal = o.causal;
  p.seed = o.seed;
  try {
    p.device = resolve_device(o.device);
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  return p;
}

SessionOptions build_session(const CliOptions& o) {
  SessionOptions s;
  s.out_dir = o.out;
  s.gzip = !o.no_gzip;
  if (!o.sort_by.empty()) {
    const auto key = parse_sort_key(o.sort_by);
    if (!key) throw UsageError(invalid_choice("--sort-by", o.sort_by, sort_key_names()));
    s.sort_by = key;
  }
  if (o.row_limit < 0) throw UsageError(fmt::format("--row-limit must be >= 0 (0 = all rows), got {}", o.row_limit));
  s.row_limit = o.row_limit;
  s.timing_iters = o.timing_iters;
  s.startup_ms = o.startup_ms;
  if (o.warmup_iters < 0 || o.wait < 0 || o.warmup < 0)
    throw UsageError("--warmup-iters, --wait and --warmup must be >= 0");
  if (o.active <= 0) throw UsageError(fmt::format("--active must be at least 1, got {}", o.active));
  s.schedule = {o.warmup_iters, o.wait, o.warmup, o.active};
  return s;
}

}  // namespace attnprof::cli
