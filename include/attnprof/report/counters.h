// Hardware counters of each kernel of one step, as data: what the counter pass
// (--counters) measured, and the device's measured ceilings it is judged
// against. The collector (src/profiler/counters_*.cpp, CUPTI range profiler)
// fills these; the report layer (verdicts, occupancy, roofline, tables) only
// reads them. LibTorch-free.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace attnprof::report {

// The tensor instructions a kernel executed, from the counters
// (sm__inst_executed_pipe_tensor_op_gmma / _hmma): Hopper's wgmma, the
// warp-level mma.sync family, or neither.
enum class TensorFamily { none, mma_sync, wgmma };
const char* tensor_family_name(TensorFamily f);  // "none", "mma.sync", "wgmma"

// One metric set per kernel launch, in the units the names say. Each value is
// nullopt where the hardware or the route did not provide it.
struct CounterValues {
  std::optional<double> duration_ns;          // gpu__time_duration.sum
  std::optional<double> sm_clock_hz;          // sm__cycles_elapsed.avg.per_second
  std::optional<double> dram_read_bytes;      // dram__bytes_read.sum
  std::optional<double> dram_write_bytes;     // dram__bytes_write.sum
  std::optional<double> dram_throughput_pct;  // dram__throughput.avg.pct_of_peak_sustained_elapsed
  std::optional<double> sm_throughput_pct;    // sm__throughput.avg.pct_of_peak_sustained_elapsed
  std::optional<double> tensor_active_pct;    // sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active
  std::optional<double> gmma_inst;            // sm__inst_executed_pipe_tensor_op_gmma.sum
  std::optional<double> hmma_inst;            // sm__inst_executed_pipe_tensor_op_hmma.sum
  std::optional<double> tensor_flops;         // executed tensor FLOPs (sum of the ops_path counters x2)
  std::optional<double> achieved_occupancy_pct;  // sm__warps_active.avg.pct_of_peak_sustained_active
  std::optional<double> l2_hit_rate_pct;      // lts__t_sector_hit_rate.pct
};

// One kernel launch of the counted step, in launch order within its scope.
struct KernelCounters {
  std::string scope;   // attn_fwd / attn_bwd
  std::string kernel;  // demangled name, as the trace names it
  int index = 0;       // launch order within the scope's step
  CounterValues values;
  // Launch shape, for the theoretical occupancy (from the trace's launch facts).
  int grid[3] = {0, 0, 0};
  int block[3] = {0, 0, 0};
  int registers_per_thread = 0;
  int64_t shared_memory_bytes = 0;
  std::optional<double> theoretical_occupancy_pct;
  // Analytic FLOPs attributed to this kernel where the hardware counts none
  // (e.g. FP32 CUDA-core GEMMs); labelled as analytic wherever shown.
  std::optional<double> analytic_flops;
};

// The ceilings of one device at the clocks it runs, measured once and cached
// (calibration), with the datasheet figures beside them.
struct DeviceCeilings {
  std::string device;      // "NVIDIA H200"
  std::string driver;      // "580.159.04"
  double sm_clock_mhz = 0;   // during the calibration GEMM
  double mem_clock_mhz = 0;
  double gemm_bf16_tflops = 0;  // dense 8192^3 bf16 GEMM, fp32 accumulate
  double gemm_fp16_tflops = 0;
  double gemm_fp32_tflops = 0;  // FP32 CUDA cores (TF32 off)
  double copy_gbps = 0;         // device-to-device copy, bytes read + written per second / 1e9
  std::optional<double> spec_bf16_tflops;  // datasheet, for comparison
  std::optional<double> spec_dram_gbps;
  std::string measured_at;  // ISO 8601 UTC
};

// The counter pass of one run.
struct CounterPass {
  enum class State { collected, unavailable, failed, interrupted };
  State state = State::unavailable;
  std::string route;   // "cupti-range-profiler"
  std::string reason;  // why not collected (one line)
  double wall_s = 0;   // the pass's own wall time, replays included
  // Where that time went, in order (ms): CUPTI set-up, each scope's replayed
  // kernels, evaluating the counters.
  std::vector<std::pair<std::string, double>> phases_ms;
  std::vector<KernelCounters> kernels;
  std::optional<DeviceCeilings> ceilings;
};
const char* counter_state_name(CounterPass::State s);  // "collected", "unavailable", "failed", "interrupted"

}  // namespace attnprof::report
