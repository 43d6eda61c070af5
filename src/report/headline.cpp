#include "attnprof/report/headline.h"

#include <fmt/format.h>

#include "attnprof/report/key_averages_table.h"
#include "attnprof/report/table_data.h"

namespace attnprof::report {
namespace {
// "forward" for attn_fwd, "backward" for attn_bwd: the scope in the words the
// headline uses.
std::string scope_word(const std::string& scope) {
  if (scope == kForwardScope) return "forward";
  if (scope == kBackwardScope) return "backward";
  return scope;
}

std::string label(const std::string& text) { return fmt::format("  {:<22}: ", text); }
}  // namespace

std::string headline_text(const RunRecord& r) {
  const Problem& p = r.problem;
  std::string out = fmt::format("{} | {} {} | {}\n", r.variant, p.shape_string(), p.config_string(), p.device);
  for (const ScopeStats& s : r.scopes) {
    const std::string w = scope_word(s.scope);
    if (p.on_cuda()) {
      out += label(w + " CUDA time avg") + format_time_us(s.device_time_avg_us) + "\n";
      out += label(w + " CPU time avg") + format_time_us(s.cpu_time_avg_us) + "\n";
      out += label("kernels per " + w) + fmt::format("{:g}", s.kernels_per_call) + "\n";
      for (const KernelStats& k : s.kernels) {
        const std::string name = k.name.size() > 90 ? k.name.substr(0, 87) + "..." : k.name;
        const double per_launch = k.count_per_call > 0 ? k.time_avg_us / k.count_per_call : 0.0;
        out += fmt::format("    {:>3g} x {:>10}  {}\n", k.count_per_call, format_time_us(per_launch), name);
      }
    } else {
      out += label(w + " CPU time avg") + format_time_us(s.cpu_time_avg_us) + "\n";
    }
  }
  if (r.timing) {
    out += label("unprofiled median") +
           fmt::format("{} ({}, {} reps x {} {}s, min {}, max {}{})\n", format_time_us(r.timing->median_us),
                       p.on_cuda() ? "CUDA events" : "steady clock", r.timing->reps, r.timing->iters_per_rep,
                       p.pass == Pass::fwd ? "forward" : "step", format_time_us(r.timing->min_us),
                       format_time_us(r.timing->max_us),
                       r.timing->input_sets > 1 ? fmt::format(", {} input sets rotated", r.timing->input_sets) : "");
    if (r.profiler_overhead) out += label("profiled / unprofiled") + fmt::format("{:.3f}\n", *r.profiler_overhead);
  }
  if (!r.output_finite) out += label("WARNING") + "the output contains NaN or Inf\n";
  if (const auto& a = r.accuracy) {
    out += label("error vs fp64") +
           fmt::format("{:.3g} (relative Frobenius, {})", a->rel_error,
                       a->rows == a->total_rows ? fmt::format("all {} query rows", a->total_rows)
                                                : fmt::format("{} of {} query rows", a->rows, a->total_rows));
    if (a->input_quantisation_error)
      out += fmt::format("; quantising the inputs{} moves the fp64 output by {:.3g}",
                         p.fp8_rotated ? " (q and k rotated first)" : "", *a->input_quantisation_error);
    out += "\n";
  }
  if (r.tflops) {
    std::string basis;
    if (p.pass != Pass::fwd) basis += "backward = 2.5x forward FLOPs";
    if (p.windowed())
      basis += std::string(basis.empty() ? "" : "; ") +
               fmt::format("window {}: only the pairs inside it counted", p.window);
    else if (p.causal())
      basis += std::string(basis.empty() ? "" : "; ") +
               (p.seq_q == p.seq_kv ? "causal: half the score matrix counted"
                                    : "causal: the visible part of the score matrix counted");
    out += label("achieved TFLOP/s") + fmt::format("{:.3g}{}\n", *r.tflops, basis.empty() ? "" : " (" + basis + ")");
  }
  if (r.peak_memory_bytes)
    out += label("peak device memory") +
           fmt::format("{} (one {}, above the inputs)\n", format_bytes(*r.peak_memory_bytes),
                       p.pass == Pass::fwd ? "forward" : "step");
  for (const auto& [k, v] : r.facts) out += label(k) + v + "\n";
  return out;
}

}  // namespace attnprof::report
