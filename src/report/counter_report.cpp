#include "attnprof/report/counter_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "attnprof/report/at_a_glance.h"
#include "attnprof/report/fingerprint.h"
#include "attnprof/report/kernel_names.h"
#include "attnprof/report/key_averages_table.h"
#include "attnprof/report/table_data.h"

namespace attnprof::report {
namespace {

bool contains(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

bool is_gemm(const std::string& name, KernelFamily f) {
  switch (f) {
    case KernelFamily::cublas_nvjet:
    case KernelFamily::cublas_xmma:
      return true;
    case KernelFamily::cublas_legacy:
    case KernelFamily::cutlass:
      return contains(name, "gemm") || contains(name, "Gemm");
    default:
      return false;
  }
}

// A kernel that computes attention itself (both matrix products inside).
bool is_fused_attention(const std::string& name, KernelFamily f) {
  switch (f) {
    case KernelFamily::flash_attention_2:
    case KernelFamily::cudnn_generated:
    case KernelFamily::cutlass_fmha:
      return true;
    case KernelFamily::attnprof:
      return contains(name, "flash_");  // not the scaled_masked_softmax kernels
    default:
      return false;
  }
}

bool counted_flops(const CounterValues& v) {
  return v.tensor_flops.value_or(0.0) + v.cuda_core_flops.value_or(0.0) > 0.0;
}

std::string pct_text(const std::optional<double>& v) { return v ? fmt::format("{:.0f}%", *v) : std::string("-"); }

std::string label(const std::string& text) { return fmt::format("  {:<22}: ", text); }

const char* scope_word(const std::string& scope) {
  return scope == kBackwardScope ? "backward" : scope == kForwardScope ? "forward" : "step";
}

}  // namespace

void fill_launch_occupancy(std::vector<KernelLaunch>& launches, const DeviceLimits& limits) {
  for (KernelLaunch& k : launches) {
    const int64_t threads = int64_t(k.block[0]) * std::max(1, k.block[1]) * std::max(1, k.block[2]);
    const int64_t blocks = int64_t(k.grid[0]) * std::max(1, k.grid[1]) * std::max(1, k.grid[2]);
    if (k.block[0] <= 0) continue;
    const auto o = occupancy(limits, threads, k.registers_per_thread, k.shared_memory_bytes, k.grid[0] > 0 ? blocks : 0);
    if (!o) continue;
    k.theoretical_occupancy_pct = o->theoretical_pct;
    k.occupancy_limiter = occupancy_limiter_name(o->limiter);
    k.grid_occupancy_pct = o->grid_limited_pct;
  }
}

double scope_flops(const Problem& p, const std::string& scope) {
  return p.forward_flops() * (scope == kBackwardScope ? pass_flop_factor(Pass::bwd) : 1.0);
}

std::optional<double> analytic_kernel_flops(const Problem& p, const KernelCounters& k, bool longest_fused) {
  const KernelFamily f = fingerprint_kernel(k.kernel).family;
  if (is_gemm(k.kernel, f))
    return 2.0 * double(p.batch) * double(p.heads_q) * double(p.seq_q) * double(p.seq_kv) * double(p.head_dim);
  if (is_fused_attention(k.kernel, f) && longest_fused) return scope_flops(p, k.scope);
  return std::nullopt;
}

void complete_counters(CounterPass& pass, const RunRecord& r) {
  // The launches of each scope's first call, as launch_facts laid them out.
  std::map<std::string, std::pair<size_t, size_t>> range;
  size_t offset = 0;
  for (const ScopeStats& s : r.scopes) {
    range[s.scope] = {offset, offset + s.first_call.size()};
    offset += s.first_call.size();
  }
  const bool have_launches = offset == r.launches.size() && !r.launches.empty();
  std::vector<KernelCounters*> order;
  for (KernelCounters& k : pass.kernels) order.push_back(&k);
  std::stable_sort(order.begin(), order.end(), [](const KernelCounters* a, const KernelCounters* b) {
    return a->scope == b->scope ? a->index < b->index : false;
  });
  std::vector<bool> used(r.launches.size(), false);
  std::map<std::string, size_t> cursor;
  for (KernelCounters* k : order) {
    const auto it = range.find(k->scope);
    if (!have_launches || it == range.end()) continue;
    const auto [begin, end] = it->second;
    size_t& from = cursor.try_emplace(k->scope, begin).first->second;
    // The next launch of that name after the last match; before it, if a
    // kernel ran in another order.
    std::optional<size_t> hit;
    for (size_t pass_no = 0; pass_no < 2 && !hit; ++pass_no)
      for (size_t i = pass_no == 0 ? from : begin; i < (pass_no == 0 ? end : from) && !hit; ++i)
        if (!used[i] && r.launches[i].name == k->kernel) hit = i;
    if (!hit) continue;
    used[*hit] = true;
    from = *hit + 1;
    const KernelLaunch& l = r.launches[*hit];
    std::copy(l.grid, l.grid + 3, k->grid);
    std::copy(l.block, l.block + 3, k->block);
    k->registers_per_thread = l.registers_per_thread;
    k->shared_memory_bytes = l.shared_memory_bytes;
    if (r.device_limits) {
      std::vector<KernelLaunch> one{l};
      fill_launch_occupancy(one, *r.device_limits);
      k->theoretical_occupancy_pct = one[0].theoretical_occupancy_pct;
      k->occupancy_limiter = one[0].occupancy_limiter;
    } else {
      k->theoretical_occupancy_pct = l.theoretical_occupancy_pct;
      k->occupancy_limiter = l.occupancy_limiter;
    }
  }
  // The longest fused attention kernel of each scope carries the scope's FLOPs.
  std::map<std::string, const KernelCounters*> longest;
  for (const KernelCounters& k : pass.kernels) {
    if (!is_fused_attention(k.kernel, fingerprint_kernel(k.kernel).family)) continue;
    const KernelCounters*& best = longest[k.scope];
    if (!best || k.values.duration_ns.value_or(0.0) > best->values.duration_ns.value_or(0.0)) best = &k;
  }
  for (KernelCounters& k : pass.kernels) {
    if (counted_flops(k.values)) continue;
    const auto l = longest.find(k.scope);
    k.analytic_flops = analytic_kernel_flops(r.problem, k, l != longest.end() && l->second == &k);
  }
}

const KernelCounters* dominant_counted_kernel(const CounterPass& pass) {
  const KernelCounters* best = nullptr;
  for (const KernelCounters& k : pass.kernels)
    if (k.values.duration_ns && (!best || *k.values.duration_ns > *best->values.duration_ns)) best = &k;
  return best;
}

std::string counters_note(const CounterPass& pass) {
  using S = CounterPass::State;
  if (pass.state == S::collected || pass.state == S::interrupted) return "";
  std::string line = (pass.state == S::failed ? "the counter pass failed: " : "no hardware counters: ") + pass.reason;
  const bool permission = contains(pass.reason, "ERR_NVGPUCTRPERM") || contains(pass.reason, "INSUFFICIENT_PRIVILEGES");
  if (permission && !contains(pass.reason, "NVreg_RestrictProfilingToAdminUsers"))
    line += "; the NVIDIA driver lets only root read GPU performance counters unless loaded with "
            "NVreg_RestrictProfilingToAdminUsers=0 (options nvidia in /etc/modprobe.d), or run as root";
  return line;
}

std::string counters_text(const RunRecord& r) {
  if (!r.counters) return "";
  const CounterPass& c = *r.counters;
  if (c.state != CounterPass::State::collected)
    return label("hardware counters") + fmt::format("{}: {}\n", counter_state_name(c.state), c.reason);
  std::vector<std::string> scopes;
  for (const KernelCounters& k : c.kernels)
    if (std::find(scopes.begin(), scopes.end(), k.scope) == scopes.end()) scopes.push_back(k.scope);
  std::string what;
  for (const std::string& s : scopes) what += (what.empty() ? "" : " and ") + std::string(scope_word(s));
  std::string out = label("hardware counters") +
                    fmt::format("{} kernel{} of one {} ({}; pass {:.1f} s)\n", c.kernels.size(),
                                c.kernels.size() == 1 ? "" : "s", what.empty() ? "step" : what, c.route, c.wall_s);
  if (c.ceilings) {
    const DeviceCeilings& d = *c.ceilings;
    auto spec = [](std::optional<double> v) { return v ? fmt::format(" (spec {:g})", *v) : std::string(); };
    const auto fp32 = lookup_peak_tflops(d.device, DType::FP32);
    out += label("ceilings (measured)") +
           fmt::format("bf16 GEMM {:.0f} TFLOP/s{}, fp16 {:.0f}, fp32 {:.1f}{}{}, DRAM copy {:.0f} GB/s{}\n",
                       d.gemm_bf16_tflops, spec(d.spec_bf16_tflops), d.gemm_fp16_tflops, d.gemm_fp32_tflops,
                       spec(fp32 ? std::optional<double>(fp32->tflops) : std::nullopt),
                       d.gemm_fp8_tflops ? fmt::format(", fp8 {:.0f}", *d.gemm_fp8_tflops) : "", d.copy_gbps,
                       spec(d.spec_dram_gbps));
    out += label("") + fmt::format("{} {} at SM {:.0f} MHz, memory {:.0f} MHz ({}, driver {}){}\n",
                                   d.source == "cached" ? "cached, measured" : "measured", d.measured_at,
                                   d.sm_clock_mhz, d.mem_clock_mhz, d.device, d.driver,
                                   d.cache_file.empty() ? "" : "; " + d.cache_file);
  }
  Table t;
  t.missing = "-";
  const bool several = scopes.size() > 1;
  t.columns = {text_column("#", "index"),         text_column("Kernel", "kernel"),
               text_column("Time", "time"),       text_column("Clock", "clock"),
               text_column("DRAM read", "dram_read"), text_column("DRAM write", "dram_write"),
               text_column("GB/s", "gbps"),       text_column("DRAM %", "dram_pct"),
               text_column("TFLOP/s", "tflops"),  text_column("Pipe %", "pipe_pct"),
               text_column("SM %", "sm_pct"),     text_column("Occupancy", "occupancy"),
               text_column("Tensor", "tensor"),   text_column("Verdict", "verdict")};
  bool analytic = false, hardware_dram = false;
  for (const KernelCounters& k : c.kernels) {
    const KernelFigures f = kernel_figures(k, c.ceilings);
    const CounterValues& v = k.values;
    analytic = analytic || f.flops_analytic;
    hardware_dram = hardware_dram || (f.dram_pct && !f.dram_pct_of_measured_ceiling);
    std::string occ = pct_text(v.achieved_occupancy_pct) + " / " + pct_text(k.theoretical_occupancy_pct);
    t.rows.push_back({
        several ? fmt::format("{} {}", k.scope == kBackwardScope ? "bwd" : "fwd", k.index + 1) : std::to_string(k.index + 1),
        short_kernel_name(k.kernel, 50),
        v.duration_ns ? format_time_us(*v.duration_ns / 1000.0) : "-",
        v.sm_clock_hz ? fmt::format("{:.0f} MHz", *v.sm_clock_hz / 1e6) : "-",
        v.dram_read_bytes ? format_bytes(*v.dram_read_bytes) : "-",
        v.dram_write_bytes ? format_bytes(*v.dram_write_bytes) : "-",
        f.dram_gbps ? fmt::format("{:.0f}", *f.dram_gbps) : "-",
        pct_text(f.dram_pct) + (f.dram_pct && !f.dram_pct_of_measured_ceiling ? "\u2020" : ""),
        f.tflops ? fmt::format("{:.3g}{}", *f.tflops, f.flops_analytic ? "*" : "") : "-",
        pct_text(v.tensor_active_pct),
        pct_text(v.sm_throughput_pct),
        occ,
        f.tensor_family ? tensor_family_name(*f.tensor_family) : "-",
        f.verdict.text,
    });
  }
  out += to_text(t);
  out += "  (Occupancy: achieved / theoretical. DRAM %: of the measured copy ceiling";
  out += hardware_dram ? "; \u2020 of the hardware's peak, no ceiling measured" : "";
  out += analytic ? ". * analytic FLOPs: the hardware counted none for this kernel" : "";
  out += ")\n";
  return out;
}

}  // namespace attnprof::report
