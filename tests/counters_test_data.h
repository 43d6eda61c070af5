// Recorded counter data for the report tests: the runs of
// tests/data/counters/constructed_8x16x1024x64_bf16_causal.json (counter
// values CONSTRUCTED by hand, kernel names and launch shapes from an H200
// trace) as RunRecords, completed by the report layer as run_variant does,
// and the H200's device limits from tests/data/counters/h200_launches_8x16x1024x64.json.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "attnprof/io/files.h"
#include "attnprof/report/at_a_glance.h"
#include "attnprof/report/counter_report.h"
#include "attnprof/run_record.h"

namespace attnprof::testing {

inline nlohmann::json read_test_json(const std::string& relative) {
  return nlohmann::json::parse(io::read_file(std::string(ATTNPROF_SOURCE_DIR) + "/tests/data/counters/" + relative));
}

// Kineto's deviceProperties of the H200 trace, and what cudaDeviceProp adds
// on compute capability 9.0: 32 blocks per SM, 1 KB reserved per block.
inline report::DeviceLimits h200_limits() {
  const nlohmann::json d = read_test_json("h200_launches_8x16x1024x64.json")["deviceProperties"];
  report::DeviceLimits l;
  l.name = d["name"];
  l.compute_major = d["computeMajor"], l.compute_minor = d["computeMinor"];
  l.sm_count = d["numSms"];
  l.warp_size = d["warpSize"];
  l.max_threads_per_block = d["maxThreadsPerBlock"];
  l.max_threads_per_sm = d["maxThreadsPerMultiprocessor"];
  l.regs_per_sm = d["regsPerMultiprocessor"];
  l.regs_per_block = d["regsPerBlock"];
  l.smem_per_sm = d["sharedMemPerMultiprocessor"];
  l.smem_per_block_optin = d["sharedMemPerBlockOptin"];
  l.max_blocks_per_sm = 32;
  l.smem_reserved_per_block = 1024;
  report::apply_allocation_rules(l);
  return l;
}

inline std::optional<double> optional_number(const nlohmann::json& o, const char* key) {
  const auto it = o.find(key);
  return it != o.end() && it->is_number() ? std::optional<double>(it->get<double>()) : std::nullopt;
}

inline report::DeviceCeilings constructed_ceilings() {
  const nlohmann::json c = read_test_json("constructed_8x16x1024x64_bf16_causal.json")["ceilings"];
  report::DeviceCeilings d;
  d.device = c["device"], d.driver = c["driver"], d.measured_at = c["measured_at"];
  d.sm_clock_mhz = c["sm_clock_mhz"], d.mem_clock_mhz = c["mem_clock_mhz"];
  d.gemm_bf16_tflops = c["gemm_bf16_tflops"], d.gemm_fp16_tflops = c["gemm_fp16_tflops"];
  d.gemm_fp32_tflops = c["gemm_fp32_tflops"], d.copy_gbps = c["copy_gbps"];
  d.gemm_n = c["gemm_n"], d.copy_bytes = c["copy_bytes"];
  d.source = "measured";
  d.spec_bf16_tflops = report::lookup_peak_tflops(d.device, DType::BF16)->tflops;  // as the calibration fills them
  d.spec_dram_gbps = report::lookup_spec_dram_gbps(d.device);
  return d;
}

// One RunRecord per run of the constructed file, as run_variant leaves it
// with --counters: launches with their occupancy, the counter pass completed.
inline std::vector<RunRecord> constructed_runs(bool with_ceilings = true) {
  const nlohmann::json j = read_test_json("constructed_8x16x1024x64_bf16_causal.json");
  std::vector<RunRecord> out;
  for (const nlohmann::json& run : j["runs"]) {
    RunRecord r;
    r.variant = run["variant"];
    r.problem.batch = 8, r.problem.heads_q = r.problem.heads_kv = 16, r.problem.head_dim = 64;
    r.problem.seq_q = r.problem.seq_kv = 1024;
    r.problem.dtype = DType::BF16;
    r.problem.device = "cuda:0";
    r.env.device_name = j["device_name"];
    r.device_limits = h200_limits();
    ScopeStats s;
    s.scope = kForwardScope;
    s.calls = 3;
    report::CounterPass pass;
    pass.state = report::CounterPass::State::collected;
    pass.route = "test data";
    pass.wall_s = 1.5;
    if (with_ceilings) pass.ceilings = constructed_ceilings();
    for (const nlohmann::json& k : run["kernels"]) {
      const nlohmann::json& l = k["launch"];
      KernelLaunch launch;
      launch.name = k["kernel"];
      launch.launch_api = "cudaLaunchKernel";
      for (int d = 0; d < 3; ++d) launch.grid[d] = l["grid"][d], launch.block[d] = l["block"][d];
      launch.registers_per_thread = l["registers_per_thread"];
      launch.shared_memory_bytes = l["shared_memory_bytes"];
      const nlohmann::json& v = k["values"];
      launch.time_us = v["duration_ns"].get<double>() / 1000.0;
      r.launches.push_back(launch);
      s.first_call.push_back({launch.name, uint64_t(r.launches.size()), launch.time_us});
      s.kernels.push_back({launch.name, 1.0, launch.time_us, launch.time_us, launch.time_us});
      s.kernels_per_call += 1.0;
      s.device_time_avg_us += launch.time_us;
      report::KernelCounters c;
      c.scope = k["scope"];
      c.kernel = k["kernel"];
      c.index = k["index"];
      report::CounterValues& x = c.values;
      x.duration_ns = optional_number(v, "duration_ns");
      x.sm_clock_hz = optional_number(v, "sm_clock_hz");
      x.dram_read_bytes = optional_number(v, "dram_read_bytes");
      x.dram_write_bytes = optional_number(v, "dram_write_bytes");
      x.dram_throughput_pct = optional_number(v, "dram_throughput_pct");
      x.sm_throughput_pct = optional_number(v, "sm_throughput_pct");
      x.tensor_active_pct = optional_number(v, "tensor_active_pct");
      x.gmma_inst = optional_number(v, "gmma_inst");
      x.hmma_inst = optional_number(v, "hmma_inst");
      x.tensor_flops = optional_number(v, "tensor_flops");
      x.cuda_core_flops = optional_number(v, "cuda_core_flops");
      x.achieved_occupancy_pct = optional_number(v, "achieved_occupancy_pct");
      pass.kernels.push_back(std::move(c));
    }
    s.device_time_min_us = s.device_time_max_us = s.device_time_avg_us;
    r.scopes = {s};
    r.tflops = r.problem.flops() / (s.device_time_avg_us * 1e-6) / 1e12;
    report::fill_launch_occupancy(r.launches, *r.device_limits);
    report::complete_counters(pass, r);
    r.counters = std::move(pass);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace attnprof::testing
