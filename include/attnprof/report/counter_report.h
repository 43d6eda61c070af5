// The counter pass of a run, completed and shown: what the collector leaves
// to the report layer (each counted kernel's launch shape, theoretical
// occupancy and analytic FLOPs), the per-variant counters block, and the
// figures the at-a-glance table takes from a run's dominant kernel. Pure
// functions of a RunRecord; no LibTorch.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "attnprof/report/counters.h"
#include "attnprof/run_record.h"

namespace attnprof::report {

// Each launch's occupancy figures on a device with these limits.
void fill_launch_occupancy(std::vector<KernelLaunch>& launches, const DeviceLimits& limits);

// FLOPs of one call of `scope`: the forward's, or 2.5x it for attn_bwd.
double scope_flops(const Problem& p, const std::string& scope);

// The analytic FLOPs of one kernel where the hardware counts none (nullopt
// for kernels that do no matrix products, or whose work the name does not
// tell): a cuBLAS/CUTLASS GEMM of an unfused attention computes one batched
// [seq_q x head_dim] x [head_dim x seq_kv] product (or the same shape in the
// backward), 2*B*Hq*Sq*Skv*D, whatever the mask; a fused attention kernel
// (FlashAttention, cuDNN, CUTLASS fmha, attnprof's flash kernels) the
// scope's FLOPs, given to the longest such kernel of the scope.
// `longest_fused` says whether `k` is that kernel.
std::optional<double> analytic_kernel_flops(const Problem& p, const KernelCounters& k, bool longest_fused);

// Fills what the collector leaves to the report layer, for a record whose
// launch facts (and device limits) are set: each counted kernel's grid,
// block, registers and shared memory from the launch of the same scope and
// name, in launch order (the trace's first profiled step: the same kernels
// run in every step); its theoretical occupancy; and analytic FLOPs for
// kernels whose counted FLOPs are absent or zero.
void complete_counters(CounterPass& pass, const RunRecord& r);

// The counted kernel that took longest in the counter pass; nullptr when none.
const KernelCounters* dominant_counted_kernel(const CounterPass& pass);

// Why a counter pass collected nothing, in one line for the run's output ("" when
// it collected, or was interrupted: the interruption has its own line): "no
// hardware counters: <reason>". A permission refusal (ERR_NVGPUCTRPERM) also
// names the driver setting that allows it.
std::string counters_note(const CounterPass& pass);

// The counters block of a run's text output ("" without a counter pass): one
// line for a pass that collected nothing, else the ceilings and a table of
// every counted kernel with its verdict.
std::string counters_text(const RunRecord& r);

}  // namespace attnprof::report
