#include "attnprof/report/summary.h"

#include <fmt/format.h>

namespace attnprof::report {

using nlohmann::json;

json problem_json(const Problem& p) {
  return json{{"batch", p.batch},   {"heads", p.heads},           {"seq", p.seq},
              {"head_dim", p.head_dim}, {"dtype", dtype_name(p.dtype)}, {"causal", p.causal},
              {"device", p.device}, {"seed", p.seed},            {"flops", p.flops()}};
}

json op_row_json(const OpStats& s) {
  return json{{"name", s.name},
              {"device", s.device == EventDevice::Cuda ? "cuda" : "cpu"},
              {"is_user_annotation", s.is_user_annotation},
              {"count", s.count},
              {"self_cpu_time_total_us", double(s.self_cpu_time_total_ns) / 1000.0},
              {"cpu_time_total_us", double(s.cpu_time_total_ns) / 1000.0},
              {"cpu_time_avg_us", s.cpu_time_avg_ns() / 1000.0},
              {"self_cuda_time_total_us", double(s.self_device_time_total_ns) / 1000.0},
              {"cuda_time_total_us", double(s.device_time_total_ns) / 1000.0},
              {"cuda_time_avg_us", s.device_time_avg_ns() / 1000.0}};
}

namespace {
json optional_number(const std::optional<double>& v) { return v ? json(*v) : json(nullptr); }

json launch_json(const KernelLaunch& k) {
  return json{{"name", k.name},
              {"launch_api", k.launch_api},
              {"grid", {k.grid[0], k.grid[1], k.grid[2]}},
              {"block", {k.block[0], k.block[1], k.block[2]}},
              {"registers_per_thread", k.registers_per_thread},
              {"shared_memory_bytes", k.shared_memory_bytes},
              {"est_occupancy_pct", optional_number(k.est_occupancy_pct)},
              {"time_us", k.time_us}};
}

json timing_json(const std::optional<EventTiming>& t) {
  if (!t) return nullptr;
  return json{{"clock", t->clock},       {"reps", t->reps},         {"iters_per_rep", t->iters_per_rep},
              {"input_sets", t->input_sets}, {"median_us", t->median_us}, {"min_us", t->min_us},
              {"max_us", t->max_us}};
}

}  // namespace

json summary_json(const RunRecord& r) {
  json facts = json::object();
  for (const auto& [k, v] : r.facts) facts[k] = v;
  json kernels = json::array();
  for (const auto& k : r.forward.kernels)
    kernels.push_back({{"name", k.name}, {"count", k.count}, {"time_us", k.total_us}});
  json rows = json::array();
  for (const OpStats& s : r.rows) rows.push_back(op_row_json(s));
  json phases = json::array();
  for (const auto& [name, ms] : r.phases_ms) phases.push_back({{"phase", name}, {"ms", ms}});
  json launches = json::array();
  for (const KernelLaunch& k : r.launches) launches.push_back(launch_json(k));
  const bool cuda = r.problem.on_cuda();
  return json{
      {"schema_version", kSummarySchemaVersion},
      {"tool", "attnprof"},
      {"variant", r.variant},
      {"description", r.description},
      {"status", r.status},
      {"reason", r.reason},
      {"problem", problem_json(r.problem)},
      {"environment",
       {{"torch_version", r.env.torch_version},
        {"device_name", r.env.device_name},
        {"cuda_runtime", r.env.cuda_runtime},
        {"attnprof_version", r.env.attnprof_version}}},
      {"schedule",
       {{"warmup_iters", r.schedule.warmup_iters},
        {"wait", r.schedule.wait},
        {"warmup", r.schedule.warmup},
        {"active", r.schedule.active}}},
      {"facts", facts},
      {"warnings", r.warnings},
      {"headline",
       {{"forwards_profiled", r.forward.forwards},
        {"forward_cuda_time_avg_us", cuda ? json(r.forward.device_time_avg_us) : json(nullptr)},
        {"forward_cpu_time_avg_us", r.forward.cpu_time_avg_us},
        {"kernels_per_forward", cuda ? json(r.forward.kernels_per_forward) : json(nullptr)},
        {"kernels", kernels},
        {"tflops", optional_number(r.tflops)},
        {"tflops_basis", cuda ? "forward CUDA time" : "forward CPU time"},
        {"peak_memory_bytes", optional_number(r.peak_memory_bytes)},
        {cuda ? "gpu_time_median_us" : "cpu_time_median_us", r.timing ? json(r.timing->median_us) : json(nullptr)},
        {"profiler_overhead", optional_number(r.profiler_overhead)},
        {"output_finite", r.output_finite}}},
      {"timing", timing_json(r.timing)},
      {"launches", launches},
      {"phases_ms", phases},
      {"files", {{"trace", r.trace_file}, {"table", r.table_file}, {"summary", r.summary_file}}},
      {"ops", rows},
  };
}

std::string format_bytes(double bytes) {
  const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 4) {
    bytes /= 1024.0;
    ++u;
  }
  return u == 0 ? fmt::format("{:.0f} B", bytes) : fmt::format("{:.2f} {}", bytes, units[u]);
}

std::string headline_text(const RunRecord& r) {
  const ForwardStats& f = r.forward;
  std::string out = fmt::format("{} | {} {} {} | {}\n", r.variant, r.problem.shape_string(),
                                dtype_name(r.problem.dtype), r.problem.causal ? "causal" : "non-causal",
                                r.problem.device);
  if (r.problem.on_cuda()) {
    out += fmt::format("  forward CUDA time avg : {}\n", format_time_us(f.device_time_avg_us));
    out += fmt::format("  forward CPU time avg  : {}\n", format_time_us(f.cpu_time_avg_us));
    out += fmt::format("  kernels per forward   : {:g}\n", f.kernels_per_forward);
    for (const auto& k : f.kernels) {
      std::string name = k.name.size() > 90 ? k.name.substr(0, 87) + "..." : k.name;
      out += fmt::format("    {:>3} x {:>10}  {}\n", k.count, format_time_us(k.total_us / double(k.count)), name);
    }
  } else {
    out += fmt::format("  forward CPU time avg  : {}\n", format_time_us(f.cpu_time_avg_us));
  }
  if (r.timing) {
    out += fmt::format("  unprofiled median     : {} ({}, {} reps x {} forwards, min {}, max {}{})\n",
                       format_time_us(r.timing->median_us), r.problem.on_cuda() ? "CUDA events" : "steady clock",
                       r.timing->reps, r.timing->iters_per_rep, format_time_us(r.timing->min_us),
                       format_time_us(r.timing->max_us),
                       r.timing->input_sets > 1 ? fmt::format(", {} input sets rotated", r.timing->input_sets) : "");
    if (r.profiler_overhead) out += fmt::format("  profiled / unprofiled : {:.3f}\n", *r.profiler_overhead);
  }
  if (!r.output_finite) out += "  WARNING               : the output contains NaN or Inf\n";
  if (r.tflops)
    out += fmt::format("  achieved TFLOP/s      : {:.3g}{}\n", *r.tflops,
                       r.problem.causal ? " (causal: half the score matrix counted)" : "");
  if (r.peak_memory_bytes)
    out += fmt::format("  peak device memory    : {} (one forward, above the inputs)\n",
                       format_bytes(*r.peak_memory_bytes));
  for (const auto& [k, v] : r.facts) out += fmt::format("  {:<22}: {}\n", k, v);
  return out;
}

}  // namespace attnprof::report
