// The summary's field list: one function per block, written once and walked
// by two visitors, the writer (summary.cpp: RunRecord -> JSON) and the reader
// (summary_read.cpp: JSON -> RunRecord, every field validated). `R` is
// `const RunRecord` for the writer and `RunRecord` for the reader.
//
// A visitor V provides, for a field `key` of the current object:
//   v.integer(key, int_ref, lo, hi)          v.number(key, double_ref, lo, hi)
//   v.optional_number(key, optional_ref, lo, hi)  (null when absent)
//   v.later_optional_number(key, optional_ref, lo, hi)  (null or absent)
//   v.ns_as_us(key, int64_ns_ref)            microseconds in JSON, ns inside
//   v.string(key, ref)   v.boolean(key, ref)   v.flag(key, ref) (a boolean, false when absent)
//   v.integer_or_zero(key, ref, lo, hi)     (0 when absent)
//   v.enumeration(key, ref, name_fn, parse_fn, "the valid names")
//   v.object(key, fn)    v.optional_object(key, optional_ref, fn(elem))
//   v.later_optional_object(key, optional_ref, fn(elem))  (null or absent)
//   v.array(key, vector_ref, fn(elem))       v.string_list(key, ref)
//   v.string_map(key, vector_of_pairs_ref)   v.int_triple(key, int[3] ref, lo, hi)
//   v.int_list(key, vector<int64_t> ref, lo, hi, max_size)  (empty when absent)
//   v.derived(key, fn)   written from the record, ignored by the reader
#pragma once

#include <cstdint>
#include <limits>

#include "attnprof/report/counters.h"
#include "attnprof/report/summary.h"
#include "attnprof/run_record.h"

namespace attnprof::report::schema {

constexpr int64_t kMaxDim = int64_t(1) << 40;
constexpr int64_t kMaxCount = int64_t(1) << 50;
constexpr double kMaxUs = 1e15;
constexpr int kMaxInt = std::numeric_limits<int>::max();

template <class V, class P>
void problem_fields(V& v, P& p) {
  v.integer("batch", p.batch, 1, kMaxDim);
  v.integer("heads_q", p.heads_q, 1, kMaxDim);
  v.integer("heads_kv", p.heads_kv, 1, kMaxDim);
  v.integer("seq_q", p.seq_q, 1, kMaxDim);
  v.integer("seq_kv", p.seq_kv, 1, kMaxDim);
  v.integer("head_dim", p.head_dim, 1, kMaxDim);
  v.enumeration("dtype", p.dtype, dtype_name, parse_dtype, "bf16, fp16, fp32 or fp8");
  v.enumeration("mask", p.mask, mask_name, parse_mask, "full, causal or causal-top-left");
  v.enumeration("pass", p.pass, pass_name, parse_pass, "fwd, bwd or fwd+bwd");
  v.integer_or_zero("window", p.window, 0, kMaxDim);  // 0: none (and in files from before the window)
  v.integer_or_zero("page_size", p.page_size, 0, kMaxPageSize);  // 0: contiguous K/V (and in older files)
  v.int_list("seqlens", p.seqlens, 1, kMaxDim, size_t(kMaxSeqlens));  // []: equal lengths (and in older files)
  v.flag("varlen_padded", p.varlen_padded);  // --varlen-layout padded (false in older files)
  v.flag("fp8_rotated", p.fp8_rotated);      // --fp8-rotate (false in older files)
  v.string("device", p.device);
  v.integer("seed", p.seed, int64_t{0}, std::numeric_limits<int64_t>::max());
  v.derived("flops", [&] { return p.flops(); });
}

template <class V, class K>
void kernel_fields(V& v, K& k) {
  v.string("name", k.name);
  v.number("count_per_call", k.count_per_call, 0.0, double(kMaxCount));
  v.number("time_avg_us", k.time_avg_us, 0.0, kMaxUs);
  v.number("time_min_us", k.time_min_us, 0.0, kMaxUs);
  v.number("time_max_us", k.time_max_us, 0.0, kMaxUs);
}

template <class V, class S>
void scope_fields(V& v, S& s) {
  v.string("scope", s.scope);
  v.integer("calls", s.calls, int64_t{0}, kMaxCount);
  v.number("cpu_time_avg_us", s.cpu_time_avg_us, 0.0, kMaxUs);
  v.number("cuda_time_avg_us", s.device_time_avg_us, 0.0, kMaxUs);
  v.number("cuda_time_min_us", s.device_time_min_us, 0.0, kMaxUs);
  v.number("cuda_time_max_us", s.device_time_max_us, 0.0, kMaxUs);
  v.number("kernels_per_call", s.kernels_per_call, 0.0, double(kMaxCount));
  v.array("kernels", s.kernels, [&](auto& k) { kernel_fields(v, k); });
}

template <class V, class L>
void launch_fields(V& v, L& k) {
  v.string("name", k.name);
  v.string("launch_api", k.launch_api);
  v.int_triple("grid", k.grid, 0, kMaxInt);
  v.int_triple("block", k.block, 0, kMaxInt);
  v.integer("registers_per_thread", k.registers_per_thread, 0, 1 << 20);
  v.integer("shared_memory_bytes", k.shared_memory_bytes, int64_t{0}, int64_t(1) << 40);
  v.optional_number("est_occupancy_pct", k.est_occupancy_pct, 0.0, 100.0);
  v.number("time_us", k.time_us, 0.0, kMaxUs);
  v.optional_number("theoretical_occupancy_pct", k.theoretical_occupancy_pct, 0.0, 100.0);
  v.string("occupancy_limiter", k.occupancy_limiter);
  v.optional_number("grid_occupancy_pct", k.grid_occupancy_pct, 0.0, 100.0);
}

constexpr double kMaxBytes = 1e18;
constexpr double kMaxPct = 1000.0;  // measured shares can pass 100 a little (sampling); garbage far more

template <class V, class L>
void device_limits_fields(V& v, L& l) {
  v.string("name", l.name);
  v.integer("compute_major", l.compute_major, 0, 1000);
  v.integer("compute_minor", l.compute_minor, 0, 1000);
  v.integer("sm_count", l.sm_count, 0, 1 << 20);
  v.integer("warp_size", l.warp_size, 1, 1024);
  v.integer("max_threads_per_block", l.max_threads_per_block, 0, kMaxInt);
  v.integer("max_threads_per_sm", l.max_threads_per_sm, 0, kMaxInt);
  v.integer("max_blocks_per_sm", l.max_blocks_per_sm, 0, kMaxInt);
  v.integer("regs_per_sm", l.regs_per_sm, 0, kMaxInt);
  v.integer("regs_per_block", l.regs_per_block, 0, kMaxInt);
  v.integer("max_regs_per_thread", l.max_regs_per_thread, 0, kMaxInt);
  v.integer("reg_alloc_unit", l.reg_alloc_unit, 1, kMaxInt);
  v.integer("sub_partitions", l.sub_partitions, 1, 1024);
  v.integer("smem_per_sm", l.smem_per_sm, int64_t{0}, int64_t(1) << 40);
  v.integer("smem_per_block_optin", l.smem_per_block_optin, int64_t{0}, int64_t(1) << 40);
  v.integer("smem_reserved_per_block", l.smem_reserved_per_block, int64_t{0}, int64_t(1) << 40);
  v.integer("smem_alloc_unit", l.smem_alloc_unit, 1, kMaxInt);
}

// Also the calibration cache's field list (report/ceilings_cache.h).
template <class V, class C>
void ceilings_fields(V& v, C& c) {
  v.string("device", c.device);
  v.string("driver", c.driver);
  v.number("sm_clock_mhz", c.sm_clock_mhz, 0.0, 1e6);
  v.number("mem_clock_mhz", c.mem_clock_mhz, 0.0, 1e6);
  v.number("gemm_bf16_tflops", c.gemm_bf16_tflops, 0.0, 1e6);
  v.number("gemm_fp16_tflops", c.gemm_fp16_tflops, 0.0, 1e6);
  v.number("gemm_fp32_tflops", c.gemm_fp32_tflops, 0.0, 1e6);
  v.later_optional_number("gemm_fp8_tflops", c.gemm_fp8_tflops, 0.0, 1e6);  // absent before it was measured
  v.number("copy_gbps", c.copy_gbps, 0.0, 1e8);
  v.optional_number("spec_bf16_tflops", c.spec_bf16_tflops, 0.0, 1e6);
  v.optional_number("spec_dram_gbps", c.spec_dram_gbps, 0.0, 1e8);
  v.string("measured_at", c.measured_at);
  v.integer("gemm_n", c.gemm_n, int64_t{0}, int64_t(1) << 20);
  v.number("copy_bytes", c.copy_bytes, 0.0, kMaxBytes);
}

template <class V, class X>
void counter_value_fields(V& v, X& x) {
  v.optional_number("duration_ns", x.duration_ns, 0.0, kMaxBytes);
  v.optional_number("sm_clock_hz", x.sm_clock_hz, 0.0, 1e12);
  v.optional_number("dram_read_bytes", x.dram_read_bytes, 0.0, kMaxBytes);
  v.optional_number("dram_write_bytes", x.dram_write_bytes, 0.0, kMaxBytes);
  v.optional_number("dram_throughput_pct", x.dram_throughput_pct, 0.0, kMaxPct);
  v.optional_number("sm_throughput_pct", x.sm_throughput_pct, 0.0, kMaxPct);
  v.optional_number("tensor_active_pct", x.tensor_active_pct, 0.0, kMaxPct);
  v.optional_number("gmma_inst", x.gmma_inst, 0.0, 1e21);
  v.optional_number("hmma_inst", x.hmma_inst, 0.0, 1e21);
  v.optional_number("tensor_flops", x.tensor_flops, 0.0, 1e24);
  v.optional_number("cuda_core_flops", x.cuda_core_flops, 0.0, 1e24);
  v.optional_number("achieved_occupancy_pct", x.achieved_occupancy_pct, 0.0, kMaxPct);
  v.optional_number("l2_hit_rate_pct", x.l2_hit_rate_pct, 0.0, kMaxPct);
}

// The figures derived from a kernel's counters and the ceilings: written for
// people and scripts, recomputed (not read) when the summary is read back.
inline nlohmann::json kernel_figures_json(const KernelFigures& f) {
  auto num = [](const std::optional<double>& x) { return x ? nlohmann::json(*x) : nlohmann::json(nullptr); };
  return {{"dram_bytes", num(f.dram_bytes)},
          {"dram_gbps", num(f.dram_gbps)},
          {"dram_pct", num(f.dram_pct)},
          {"dram_pct_of", f.dram_pct ? (f.dram_pct_of_measured_ceiling ? "measured copy ceiling" : "hardware peak")
                                     : ""},
          {"flops", num(f.flops)},
          {"flops_basis", f.flops ? (f.flops_analytic ? "analytic" : "counted") : ""},
          {"tflops", num(f.tflops)},
          {"flop_per_byte", num(f.flop_per_byte)},
          {"tensor_family", f.tensor_family ? nlohmann::json(tensor_family_name(*f.tensor_family)) : nlohmann::json()},
          {"bound", bound_name(f.verdict.bound)},
          {"verdict", f.verdict.text}};
}

template <class V, class K, class C>
void counter_kernel_fields(V& v, K& k, const C& ceilings) {
  v.string("scope", k.scope);
  v.string("kernel", k.kernel);
  v.integer("index", k.index, 0, kMaxInt);
  v.object("values", [&] { counter_value_fields(v, k.values); });
  v.int_triple("grid", k.grid, 0, kMaxInt);
  v.int_triple("block", k.block, 0, kMaxInt);
  v.integer("registers_per_thread", k.registers_per_thread, 0, 1 << 20);
  v.integer("shared_memory_bytes", k.shared_memory_bytes, int64_t{0}, int64_t(1) << 40);
  v.optional_number("theoretical_occupancy_pct", k.theoretical_occupancy_pct, 0.0, 100.0);
  v.string("occupancy_limiter", k.occupancy_limiter);
  v.optional_number("analytic_flops", k.analytic_flops, 0.0, 1e24);
  v.derived("derived", [&] { return kernel_figures_json(kernel_figures(k, ceilings)); });
}

template <class V, class P>
void counters_fields(V& v, P& c) {
  v.enumeration("state", c.state, counter_state_name, parse_counter_state,
                "collected, unavailable, failed or interrupted");
  v.string("route", c.route);
  v.string("reason", c.reason);
  v.number("wall_s", c.wall_s, 0.0, 1e9);
  v.array("phases_ms", c.phases_ms, [&](auto& ph) {
    v.string("phase", ph.first);
    v.number("ms", ph.second, 0.0, 1e15);
  });
  v.optional_object("ceilings", c.ceilings, [&](auto& x) { ceilings_fields(v, x); });
  v.array("kernels", c.kernels, [&](auto& k) { counter_kernel_fields(v, k, c.ceilings); });
}

template <class V, class T>
void timing_fields(V& v, T& t) {
  v.string("clock", t.clock);
  v.integer("reps", t.reps, 0, 1 << 30);
  v.integer("iters_per_rep", t.iters_per_rep, 0, 1 << 30);
  v.integer("input_sets", t.input_sets, 1, 1 << 20);
  v.number("median_us", t.median_us, 0.0, kMaxUs);
  v.number("min_us", t.min_us, 0.0, kMaxUs);
  v.number("max_us", t.max_us, 0.0, kMaxUs);
}

template <class V, class O>
void op_fields(V& v, O& s, bool profile_memory) {
  v.string("name", s.name);
  v.enumeration(
      "device", s.device, [](EventDevice d) { return d == EventDevice::Cuda ? "cuda" : "cpu"; },
      [](const std::string& x) -> std::optional<EventDevice> {
        if (x == "cpu") return EventDevice::Cpu;
        if (x == "cuda") return EventDevice::Cuda;
        return std::nullopt;
      },
      "\"cpu\" or \"cuda\"");
  v.boolean("is_user_annotation", s.is_user_annotation);
  v.integer("count", s.count, int64_t{0}, kMaxCount);
  v.ns_as_us("self_cpu_time_total_us", s.self_cpu_time_total_ns);
  v.ns_as_us("cpu_time_total_us", s.cpu_time_total_ns);
  v.derived("cpu_time_avg_us", [&] { return s.cpu_time_avg_ns() / 1000.0; });
  v.ns_as_us("self_cuda_time_total_us", s.self_device_time_total_ns);
  v.ns_as_us("cuda_time_total_us", s.device_time_total_ns);
  v.derived("cuda_time_avg_us", [&] { return s.device_time_avg_ns() / 1000.0; });
  if (!profile_memory) return;  // the columns of Python's profile_memory table, in bytes
  constexpr int64_t kMaxBytes = int64_t(1) << 62;
  v.integer_or_zero("cpu_memory_usage_bytes", s.cpu_memory_usage, -kMaxBytes, kMaxBytes);
  v.integer_or_zero("self_cpu_memory_usage_bytes", s.self_cpu_memory_usage, -kMaxBytes, kMaxBytes);
  v.integer_or_zero("cuda_memory_usage_bytes", s.device_memory_usage, -kMaxBytes, kMaxBytes);
  v.integer_or_zero("self_cuda_memory_usage_bytes", s.self_device_memory_usage, -kMaxBytes, kMaxBytes);
}

template <class V, class R>
void summary_fields(V& v, R& r) {
  v.derived("schema_version", [] { return kSummarySchemaVersion; });
  v.derived("tool", [] { return "attnprof"; });
  v.string("variant", r.variant);
  v.string("description", r.description);
  v.enumeration("status", r.status, status_name, parse_status, "ok, skipped, failed or interrupted");
  v.string("reason", r.reason);
  v.object("problem", [&] { problem_fields(v, r.problem); });
  v.object("environment", [&] {
    v.string("torch_version", r.env.torch_version);
    v.string("device_name", r.env.device_name);
    v.string("cuda_runtime", r.env.cuda_runtime);
    v.string("attnprof_version", r.env.attnprof_version);
  });
  v.object("schedule", [&] {
    v.integer("warmup_iters", r.schedule.warmup_iters, 0, 1 << 30);
    v.integer("wait", r.schedule.wait, 0, 1 << 30);
    v.integer("warmup", r.schedule.warmup, 0, 1 << 30);
    v.integer("active", r.schedule.active, 0, 1 << 30);
    v.flag("record_shapes", r.profiler.record_shapes);
    v.flag("profile_memory", r.profiler.profile_memory);
    v.flag("with_stack", r.profiler.with_stack);
  });
  v.string_map("facts", r.facts);
  v.string_list("warnings", r.warnings);
  v.object("headline", [&] {
    v.array("scopes", r.scopes, [&](auto& s) { scope_fields(v, s); });
    v.optional_number("tflops", r.tflops, 0.0, 1e18);
    v.derived("tflops_basis", [&] {
      return std::string(r.problem.on_cuda() ? "CUDA time" : "CPU time") + " of one " + pass_name(r.problem.pass) +
             " step; " + (r.problem.pass == Pass::fwd ? "" : "backward = 2.5x forward FLOPs; ") +
             (r.problem.causal() ? "causal counts the visible part of the score matrix" : "full score matrix");
    });
    v.optional_number("peak_memory_bytes", r.peak_memory_bytes, 0.0, 1e18);
    v.derived(r.problem.on_cuda() ? "gpu_time_median_us" : "cpu_time_median_us",
              [&]() -> std::optional<double> {
                if (!r.timing) return std::nullopt;
                return r.timing->median_us;
              });
    v.optional_number("profiler_overhead", r.profiler_overhead, 0.0, 1e18);
    v.boolean("output_finite", r.output_finite);
    v.later_optional_object("accuracy", r.accuracy, [&](auto& a) {  // absent in files from before it
      v.number("rel_error_vs_fp64", a.rel_error, 0.0, 1e300);
      v.integer("rows_compared", a.rows, int64_t{1}, kMaxCount);
      v.integer("rows_total", a.total_rows, int64_t{1}, kMaxCount);
      v.optional_number("input_quantisation_error", a.input_quantisation_error, 0.0, 1e300);
    });
  });
  v.optional_object("timing", r.timing, [&](auto& t) { timing_fields(v, t); });
  v.array("launches", r.launches, [&](auto& k) { launch_fields(v, k); });
  v.optional_object("device_limits", r.device_limits, [&](auto& l) { device_limits_fields(v, l); });
  v.optional_object("counters", r.counters, [&](auto& c) { counters_fields(v, c); });
  v.array("phases_ms", r.phases_ms, [&](auto& ph) {
    v.string("phase", ph.first);
    v.number("ms", ph.second, 0.0, 1e15);
  });
  v.object("files", [&] {
    v.string("trace", r.trace_file);
    v.string("table", r.table_file);
    v.string("summary", r.summary_file);
    v.string("roofline", r.roofline_file);
  });
  v.array("ops", r.rows, [&](auto& s) { op_fields(v, s, r.profiler.profile_memory); });
}

}  // namespace attnprof::report::schema
