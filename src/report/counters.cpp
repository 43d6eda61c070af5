#include "attnprof/report/counters.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cmath>

namespace attnprof::report {

const char* tensor_family_name(TensorFamily f) {
  switch (f) {
    case TensorFamily::none: return "none";
    case TensorFamily::mma_sync: return "mma.sync";
    case TensorFamily::wgmma: return "wgmma";
  }
  return "?";
}

std::optional<TensorFamily> parse_tensor_family(const std::string& s) {
  for (TensorFamily f : {TensorFamily::none, TensorFamily::mma_sync, TensorFamily::wgmma})
    if (s == tensor_family_name(f)) return f;
  return std::nullopt;
}

const char* counter_state_name(CounterPass::State s) {
  switch (s) {
    case CounterPass::State::collected: return "collected";
    case CounterPass::State::unavailable: return "unavailable";
    case CounterPass::State::failed: return "failed";
    case CounterPass::State::interrupted: return "interrupted";
  }
  return "?";
}

std::optional<CounterPass::State> parse_counter_state(const std::string& s) {
  using S = CounterPass::State;
  for (S x : {S::collected, S::unavailable, S::failed, S::interrupted})
    if (s == counter_state_name(x)) return x;
  return std::nullopt;
}

void apply_allocation_rules(DeviceLimits& l) {
  l.reg_alloc_unit = 256;
  l.max_regs_per_thread = 255;
  l.smem_alloc_unit = l.compute_major >= 8 ? 128 : 256;
  l.sub_partitions = l.compute_major == 6 && l.compute_minor == 0 ? 2 : 4;
}

const char* occupancy_limiter_name(OccupancyLimiter l) {
  switch (l) {
    case OccupancyLimiter::registers: return "registers";
    case OccupancyLimiter::shared_memory: return "shared memory";
    case OccupancyLimiter::warps: return "warps";
    case OccupancyLimiter::blocks: return "blocks";
  }
  return "?";
}

namespace {

int64_t round_up(int64_t v, int64_t unit) { return unit > 0 ? (v + unit - 1) / unit * unit : v; }

int clamp_int(int64_t v) { return static_cast<int>(std::min<int64_t>(v, INT_MAX)); }

// Blocks per SM the registers allow, as cudaOccMaxBlocksPerSMRegsLimit: a
// warp's registers are rounded up to the allocation unit and each
// sub-partition holds a quarter of the SM's; the per-block hardware check
// assumes the block's warps rounded up to the sub-partitions.
int blocks_by_registers(const DeviceLimits& l, int64_t warps_per_block, int regs_per_thread) {
  if (regs_per_thread <= 0) return INT_MAX;  // not reported: not a limit we can judge
  if (regs_per_thread > l.max_regs_per_thread) return 0;
  const int64_t per_warp = round_up(int64_t(regs_per_thread) * l.warp_size, l.reg_alloc_unit);
  const int64_t per_block = per_warp * warps_per_block;
  const int64_t assumed = per_warp * round_up(warps_per_block, std::max(1, l.sub_partitions));
  if (per_block > l.regs_per_block || assumed > l.regs_per_block) return 0;
  const int parts = std::max(1, l.sub_partitions);
  const int64_t warps_per_part = (int64_t(l.regs_per_sm) / parts) / per_warp;
  return clamp_int(warps_per_part * parts / warps_per_block);
}

// As cudaOccMaxBlocksPerSMSmemLimit: the block's bytes plus the driver's
// reserve, rounded up to the allocation unit, against the SM's capacity; a
// block past the opt-in maximum (plus the reserve) cannot launch.
int blocks_by_shared_memory(const DeviceLimits& l, int64_t smem_bytes) {
  const int64_t allocated = round_up(std::max<int64_t>(0, smem_bytes) + l.smem_reserved_per_block, l.smem_alloc_unit);
  if (allocated > l.smem_per_block_optin + l.smem_reserved_per_block) return 0;
  if (allocated == 0) return INT_MAX;
  return clamp_int(l.smem_per_sm / allocated);
}

}  // namespace

std::optional<Occupancy> occupancy(const DeviceLimits& l, int64_t block_threads, int registers_per_thread,
                                   int64_t shared_memory_bytes, int64_t grid_blocks) {
  if (block_threads <= 0 || l.warp_size <= 0 || l.max_threads_per_sm < l.warp_size || l.sm_count <= 0 ||
      l.max_blocks_per_sm <= 0 || l.smem_per_sm <= 0 || l.regs_per_sm <= 0)
    return std::nullopt;
  const int64_t warps_per_block = (block_threads + l.warp_size - 1) / l.warp_size;
  const int max_warps = l.max_threads_per_sm / l.warp_size;
  Occupancy o;
  o.by_warps = block_threads > l.max_threads_per_block ? 0 : clamp_int(max_warps / warps_per_block);
  o.by_blocks = l.max_blocks_per_sm;
  o.by_registers = blocks_by_registers(l, warps_per_block, registers_per_thread);
  o.by_shared_memory = blocks_by_shared_memory(l, shared_memory_bytes);
  // Ties name the block size first: a block that fills the SM's warps is not held back by registers.
  o.blocks_per_sm = o.by_warps;
  o.limiter = OccupancyLimiter::warps;
  for (const auto& [limit, why] : {std::pair{o.by_registers, OccupancyLimiter::registers},
                                   std::pair{o.by_shared_memory, OccupancyLimiter::shared_memory},
                                   std::pair{o.by_blocks, OccupancyLimiter::blocks}})
    if (limit < o.blocks_per_sm) o.blocks_per_sm = limit, o.limiter = why;
  o.warps_per_sm = clamp_int(int64_t(o.blocks_per_sm) * warps_per_block);
  o.theoretical_pct = 100.0 * o.warps_per_sm / max_warps;
  double blocks = o.blocks_per_sm;
  if (grid_blocks > 0) blocks = std::min(blocks, double(grid_blocks) / l.sm_count);
  o.grid_limited_pct = 100.0 * blocks * double(block_threads) / l.max_threads_per_sm;
  return o;
}

// wgmma has its own counter. The HMMA-pipe instruction count is no sign of
// mma.sync: on the H200 it includes every wgmma and also conversions (bf16 <->
// fp32 cast kernels count tens of thousands with no tensor FLOP), so mma.sync
// is tensor math (the ops_path FLOP counters) without wgmma; the HMMA count
// decides only where no FLOP counter exists.
std::optional<TensorFamily> tensor_family_of(const CounterValues& v) {
  if (v.gmma_inst.value_or(0.0) > 0.0) return TensorFamily::wgmma;
  if (v.tensor_flops) return *v.tensor_flops > 0.0 ? TensorFamily::mma_sync : TensorFamily::none;
  if (!v.gmma_inst && !v.hmma_inst) return std::nullopt;
  return v.hmma_inst.value_or(0.0) > 0.0 ? TensorFamily::mma_sync : TensorFamily::none;
}

const char* bound_name(Bound b) {
  switch (b) {
    case Bound::memory: return "memory-bound";
    case Bound::tensor: return "tensor-bound";
    case Bound::compute: return "compute-bound";
    case Bound::latency: return "latency-bound";
    case Bound::unknown: return "unknown";
  }
  return "?";
}

std::optional<Bound> parse_bound(const std::string& s) {
  for (Bound b : {Bound::memory, Bound::tensor, Bound::compute, Bound::latency, Bound::unknown})
    if (s == bound_name(b)) return b;
  return std::nullopt;
}

Verdict verdict(std::optional<double> dram_pct, std::optional<double> tensor_pct, std::optional<double> sm_pct) {
  const double t = kBoundThresholdPct;
  auto reaches = [t](const std::optional<double>& v) { return v && std::isfinite(*v) && *v >= t; };
  Verdict out;
  // In tie order: memory, tensor, compute; the highest figure that reaches the threshold decides.
  if (reaches(dram_pct)) out = {Bound::memory, *dram_pct, fmt::format("memory-bound: {:.0f}% of DRAM peak", *dram_pct)};
  if (reaches(tensor_pct) && (out.bound == Bound::unknown || *tensor_pct > out.pct))
    out = {Bound::tensor, *tensor_pct, fmt::format("tensor-bound: pipe {:.0f}% active", *tensor_pct)};
  if (!reaches(tensor_pct) && reaches(sm_pct) && (out.bound == Bound::unknown || *sm_pct > out.pct))
    out = {Bound::compute, *sm_pct, fmt::format("compute-bound: SM {:.0f}% busy", *sm_pct)};
  if (out.bound != Bound::unknown) return out;
  if (!dram_pct || !tensor_pct || !std::isfinite(*dram_pct) || !std::isfinite(*tensor_pct)) {
    out.text = "no verdict: DRAM bandwidth or tensor-pipe activity not counted";
    return out;
  }
  out.bound = Bound::latency;
  out.pct = std::max({*dram_pct, *tensor_pct, sm_pct.value_or(0.0)});
  std::string figures = fmt::format("DRAM {:.0f}%, pipe {:.0f}%", *dram_pct, *tensor_pct);
  if (sm_pct && std::isfinite(*sm_pct)) figures += fmt::format(", SM {:.0f}%", *sm_pct);
  out.text = fmt::format("latency-bound: none above {:.0f}% ({})", t, figures);
  return out;
}

std::optional<double> gemm_ceiling_tflops(const DeviceCeilings& c, const std::string& dtype) {
  const double v = dtype == "bf16" ? c.gemm_bf16_tflops : dtype == "fp16" ? c.gemm_fp16_tflops
                   : dtype == "fp32" ? c.gemm_fp32_tflops : dtype == "fp8" ? c.gemm_fp8_tflops.value_or(0.0) : 0.0;
  return v > 0.0 ? std::optional<double>(v) : std::nullopt;
}

KernelFigures kernel_figures(const KernelCounters& k, const std::optional<DeviceCeilings>& ceilings) {
  const CounterValues& v = k.values;
  KernelFigures f;
  const std::optional<double> dur = v.duration_ns && *v.duration_ns > 0.0 ? v.duration_ns : std::nullopt;
  if (v.dram_read_bytes && v.dram_write_bytes) f.dram_bytes = *v.dram_read_bytes + *v.dram_write_bytes;
  if (f.dram_bytes && dur) f.dram_gbps = *f.dram_bytes / *dur;  // bytes per ns = GB/s
  if (f.dram_gbps && ceilings && ceilings->copy_gbps > 0.0) {
    f.dram_pct = 100.0 * *f.dram_gbps / ceilings->copy_gbps;
    f.dram_pct_of_measured_ceiling = true;
  } else if (v.dram_throughput_pct) {
    f.dram_pct = v.dram_throughput_pct;
  }
  if (v.tensor_flops || v.cuda_core_flops) f.flops = v.tensor_flops.value_or(0.0) + v.cuda_core_flops.value_or(0.0);
  if ((!f.flops || *f.flops <= 0.0) && k.analytic_flops && *k.analytic_flops > 0.0) {
    f.flops = k.analytic_flops;
    f.flops_analytic = true;
  }
  if (f.flops && dur) f.tflops = *f.flops / *dur / 1e3;  // FLOP per ns = GFLOP/s
  if (f.flops && *f.flops > 0.0 && f.dram_bytes && *f.dram_bytes > 0.0) f.flop_per_byte = *f.flops / *f.dram_bytes;
  f.tensor_family = tensor_family_of(v);
  f.verdict = verdict(f.dram_pct, v.tensor_active_pct, v.sm_throughput_pct);
  return f;
}

}  // namespace attnprof::report
