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

// The tensor instructions a kernel executed, from the counters: Hopper's
// wgmma (sm__inst_executed_pipe_tensor_op_gmma), the warp-level mma.sync
// family (tensor FLOPs without wgmma), or neither (tensor_family_of).
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
  // sm__inst_executed_pipe_tensor_op_hmma.sum: HMMA-pipe instructions, wgmma
  // and conversions included (H200), so not a sign of mma.sync by itself.
  std::optional<double> hmma_inst;
  // Executed tensor FLOPs: the sum of the sm__ops_path_tensor_op_{hgmma,hmma}_src_*_dst_*
  // counters (a bf16 8192^3 cuBLAS GEMM counted 1.016x its 2·M·N·K on the H200).
  std::optional<double> tensor_flops;
  std::optional<double> achieved_occupancy_pct;  // sm__warps_active.avg.pct_of_peak_sustained_active
  std::optional<double> l2_hit_rate_pct;      // lts__t_sector_hit_rate.pct
  // Executed FP32/FP16 CUDA-core FLOPs (sm__sass_thread_inst_executed_op_{ffma x2, fadd, fmul,
  // hfma x2, hadd, hmul}_pred_on.sum): what would put FP32 GEMMs and elementwise kernels on the
  // roofline. The CUPTI route leaves it empty: those are SASS (instrumented) metrics, and with
  // them the H200 needed 13 replays of the step per scope; FP32 GEMMs use analytic FLOPs instead.
  std::optional<double> cuda_core_flops;
};

// One kernel launch of the counted step, in launch order within its scope.
struct KernelCounters {
  std::string scope;   // attn_fwd / attn_bwd
  std::string kernel;  // demangled name, as the trace names it
  int index = 0;       // launch order within the scope's step (kernels; memcpy/memset have no counters)
  CounterValues values;
  // Launch shape, for the theoretical occupancy (from the trace's launch facts).
  int grid[3] = {0, 0, 0};
  int block[3] = {0, 0, 0};
  int registers_per_thread = 0;
  int64_t shared_memory_bytes = 0;
  std::optional<double> theoretical_occupancy_pct;
  std::string occupancy_limiter;  // what bounds it: "registers", "shared memory", "warps", "blocks"
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
  // e4m3 x e4m3 -> bf16 through at::_scaled_mm (cuBLASLt, fast accumulate, as
  // wgmma accumulates); absent where the GPU has no fp8 tensor cores.
  std::optional<double> gemm_fp8_tflops;
  double copy_gbps = 0;         // device-to-device copy, bytes read + written per second / 1e9
  std::optional<double> spec_bf16_tflops;  // datasheet, for comparison
  std::optional<double> spec_dram_gbps;
  std::string measured_at;  // ISO 8601 UTC
  int64_t gemm_n = 0;       // the calibration GEMMs' size (n x n x n)
  double copy_bytes = 0;    // the calibration copy's buffer size
  std::string source;       // "measured" (this run) or "cached" (read from cache_file)
  std::string cache_file;   // where it is cached; empty when it could not be
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
std::optional<CounterPass::State> parse_counter_state(const std::string& s);
std::optional<TensorFamily> parse_tensor_family(const std::string& s);

// --- what the report layer derives from the counters -------------------------

// One GPU's limits for the occupancy formula: cudaDeviceProp's fields, and the
// allocation rules of the CUDA occupancy calculator (cuda_occupancy.h) for
// its compute capability (device_limits_for fills those).
struct DeviceLimits {
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int sm_count = 0;
  int warp_size = 32;
  int max_threads_per_block = 1024;
  int max_threads_per_sm = 2048;
  int max_blocks_per_sm = 32;
  int regs_per_sm = 65536;
  int regs_per_block = 65536;
  int max_regs_per_thread = 255;
  int reg_alloc_unit = 256;  // a warp's registers are allocated in units of this many
  int sub_partitions = 4;    // each SM sub-partition (warp scheduler) holds 1/4 of the registers
  int64_t smem_per_sm = 0;              // sharedMemPerMultiprocessor
  int64_t smem_per_block_optin = 0;     // sharedMemPerBlockOptin
  int64_t smem_reserved_per_block = 0;  // reservedSharedMemPerBlock (1 KB from sm_80 on)
  int smem_alloc_unit = 128;
};

// The calculator's allocation units for a compute capability: registers in
// units of 256 per warp on every GPU since sm_30; shared memory in units of
// 256 bytes up to sm_7x and 128 from sm_80; 4 sub-partitions (2 on sm_60).
// Sets the fields of `l` the device properties do not give.
void apply_allocation_rules(DeviceLimits& l);

enum class OccupancyLimiter { registers, shared_memory, warps, blocks };
const char* occupancy_limiter_name(OccupancyLimiter l);  // "registers", "shared memory", "warps", "blocks"

struct Occupancy {
  int blocks_per_sm = 0;  // resident blocks per SM; 0: the launch cannot run on this device
  int warps_per_sm = 0;
  double theoretical_pct = 0;  // warps_per_sm / max warps per SM
  OccupancyLimiter limiter = OccupancyLimiter::warps;  // the smallest limit (ties: warps, registers, shared memory, blocks)
  int by_registers = 0, by_shared_memory = 0, by_warps = 0, by_blocks = 0;  // blocks per SM each allows
  // What CUPTI's "est. achieved occupancy" models: the theoretical blocks,
  // but no more than grid blocks / SMs, times the block's threads.
  double grid_limited_pct = 0;
};

// The CUDA occupancy calculator's formula (cudaOccMaxActiveBlocksPerMultiprocessor,
// default carve-out, shared memory opted in as far as the launch needs): for a
// block of `block_threads` threads, `registers_per_thread` registers and
// `shared_memory_bytes` (static + dynamic) per block, on a grid of
// `grid_blocks`. nullopt when the limits or the block are not known (a
// memcpy or memset, a zero-sized device).
std::optional<Occupancy> occupancy(const DeviceLimits& limits, int64_t block_threads, int registers_per_thread,
                                   int64_t shared_memory_bytes, int64_t grid_blocks);

// The tensor instructions of a kernel from its counters: wgmma when any
// gmma instruction ran, else mma.sync when any hmma ran, else none; nullopt
// when neither was counted.
std::optional<TensorFamily> tensor_family_of(const CounterValues& v);

// The verdict of one kernel. A figure of at least kBoundThresholdPct makes it
// bound by that unit: DRAM (its achieved bandwidth against the measured copy
// ceiling), the tensor pipe (cycles active), or the SM (sm__throughput, only
// when the tensor pipe is under the threshold: SM throughput counts the tensor
// pipe too, so a tensor-bound kernel also reads high there). Of those that
// reach it the highest decides (ties: memory, tensor, compute). Below it on
// every figure, with DRAM and the tensor pipe both counted, it is latency-bound;
// otherwise there is no verdict.
inline constexpr double kBoundThresholdPct = 60.0;
enum class Bound { memory, tensor, compute, latency, unknown };
const char* bound_name(Bound b);  // "memory-bound", "tensor-bound", "compute-bound", "latency-bound", "unknown"
std::optional<Bound> parse_bound(const std::string& s);

struct Verdict {
  Bound bound = Bound::unknown;
  double pct = 0;    // the figure that decided (memory: DRAM %, tensor: pipe %, compute: SM %)
  std::string text;  // "memory-bound: 91% of DRAM peak", "tensor-bound: pipe 76% active",
                     // "compute-bound: SM 72% busy", "latency-bound: none above 60% (DRAM 12%, pipe 3%, SM 20%)"
};
Verdict verdict(std::optional<double> dram_pct, std::optional<double> tensor_pipe_pct, std::optional<double> sm_pct);

// Everything shown for one kernel, derived from its counters and the ceilings.
struct KernelFigures {
  std::optional<double> dram_bytes;  // read + written
  std::optional<double> dram_gbps;   // dram_bytes / duration
  // % of the DRAM ceiling: the measured copy ceiling when there is one, else
  // the hardware's own dram__throughput % of peak.
  std::optional<double> dram_pct;
  bool dram_pct_of_measured_ceiling = false;
  std::optional<double> flops;  // executed (tensor + CUDA-core) FLOPs when counted, else analytic
  bool flops_analytic = false;
  std::optional<double> tflops;         // flops / duration
  std::optional<double> flop_per_byte;  // flops / dram_bytes: the roofline's x
  std::optional<TensorFamily> tensor_family;
  Verdict verdict;
};
KernelFigures kernel_figures(const KernelCounters& k, const std::optional<DeviceCeilings>& ceilings);

// The measured ceiling for a dtype's matrix products: the bf16 or fp16 GEMM,
// or the fp32 one ("bf16", "fp16", "fp32"); nullopt when not measured.
std::optional<double> gemm_ceiling_tflops(const DeviceCeilings& c, const std::string& dtype);


}  // namespace attnprof::report
