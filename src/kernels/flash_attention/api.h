// LibTorch boundary of the portable flash family (attnprof::flash_attention
// and attnprof::flash_attention_backward): what it supports, the forward's
// plan for the variant's facts, and the backward's checks and workspaces,
// which the Hopper backward shares (flash_sm90/api.cpp).
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <optional>
#include <string>

#include "kernels/common/attention_params.h"
#include "kernels/common/boundary.h"
#include "kernels/flash_attention/flash_bwd_params.h"
#include "kernels/flash_attention/flash_fwd_plan.h"
#include "kernels/flash_attention/flash_params.h"

namespace attnprof::flash {

// Why the portable kernels cannot run `query` here (a phrase the caller puts
// after its own name), or nothing: bf16 or fp16, head_dim 64 or 128, a CUDA
// device they have machine code for (compute capability 8.x or 9.0), a build
// with the CUDA kernels. The operators, the autograd backward's choice and the
// custom-flash variant all ask this.
std::optional<std::string> unsupported(const kernels::KernelQuery& query);

#ifdef ATTNPROF_HAVE_CUDA_KERNELS
// The plan attnprof::flash_attention runs for q and k on their device (for
// the variant's facts).
FwdPlan plan_for(const at::Tensor& q, const at::Tensor& k, bool causal);

// The portable forward on `call` (kernels::prepare_forward, inputs checked by
// the calling operator `op`) following `plan` (plan_for's), on q's device,
// guarded by the caller: the Hopper operator's decode path (flash_sm90/decode_route.h).
void run_planned_forward(const char* op, const kernels::FwdCall& call, const at::Tensor& q, const at::Tensor& k,
                         const FwdPlan& plan);

// p (p.plan set, inputs checked by the calling operator `op`) on another
// family's kernels for the plan: the size and grid limits, the key splits'
// workspace, then run(p) on the current stream of q's device (guarded by the
// caller): the Hopper fp8 operator's decode route (flash_sm90/decode_route.h).
void run_planned_forward(const char* op, FwdParams& p, const at::Tensor& q, void (*run)(const FwdParams&, CUstream_st*));

// The backward of both flash families, from the saved forward: gradients,
// workspaces and the plain params of the launch layers.
struct FlashBwdCall {
  at::Tensor dq, dk, dv;            // the gradients, shaped and laid out like q, k, v
  at::Tensor dq_accum, row_stats;   // workspaces (flash_bwd_params.h), alive until the launches are queued
  BwdParams params;                 // filled when !trivial
  bool trivial = false;             // nothing attends or nothing to attend to: the gradients are zeros
};

// Checks the operands of `op` (all defined, CUDA, contiguous, on q's device,
// one dtype, shapes consistent, scale finite and positive), asks `supports`
// (the family's unsupported()) and runs `more_checks` (an operator's own,
// e.g. the layout its tensor maps need), and only then allocates the
// gradients and workspaces on q's device. The caller guards that device for
// the launches.
FlashBwdCall prepare_flash_bwd(const char* op, const at::Tensor& grad_out, const at::Tensor& q, const at::Tensor& k,
                               const at::Tensor& v, const at::Tensor& out, const at::Tensor& lse, bool causal,
                               double scale,
                               const std::function<std::optional<std::string>(const kernels::KernelQuery&)>& supports,
                               const std::function<void()>& more_checks = {});

// A packed variable-length forward (attnprof::flash_attention_varlen and the
// Hopper family's attnprof::flash_attention_sm90_varlen): the outputs and the
// params of its launch.
struct VarlenCall {
  at::Tensor out;  // like q: [total_q, heads_q, head_dim]
  at::Tensor lse;  // [heads_q, total_q] float32
  // Filled when !done; seqlen_q/_k: the longest a sequence may be, max_seqlen_q/_k
  // capped at the packed rows (no sequence inside the tensors is longer).
  kernels::AttentionParams params;
  const int* cu_seqlens_q = nullptr;
  const int* cu_seqlens_k = nullptr;
  int total_q = 0, total_k = 0;
  int window = 0;     // the kernel's window (kernels::checked_window: 0 where it hides nothing)
  bool done = false;  // nothing to launch: out and lse are allocated, empty or unspecified
};

// Checks the operands of `op` (q [total_q, heads_q, head_dim], k and v
// [total_k, heads_kv, head_dim], int32 offsets [batch + 1] from 0,
// non-decreasing, ending at the packed rows, no sequence longer than its
// max_seqlen: the offsets are copied to the host once per version of the
// tensor, not during graph capture), asks `supports` (the family's
// unsupported()), runs `more_checks` (the family's index limits and
// refusals, given the longest a query and a key sequence may be, the
// max_seqlens capped at the packed rows, and the kernel's window), then
// allocates the outputs. The caller guards q's device for the launch.
VarlenCall prepare_varlen(const char* op, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                          const at::Tensor& cu_seqlens_q, const at::Tensor& cu_seqlens_k, int64_t max_seqlen_q,
                          int64_t max_seqlen_k, bool causal, double scale, int64_t window,
                          const std::function<std::optional<std::string>(const kernels::KernelQuery&)>& supports,
                          const std::function<void(int64_t longest_q, int64_t longest_k, int window)>& more_checks = {});

// Either family's forward params (flash::FwdParams, flash_sm90::FwdParams)
// for a prepared packed call: the shared ones, the offsets and the totals.
template <typename Params>
Params packed_params(const VarlenCall& call) {
  Params p;
  static_cast<kernels::AttentionParams&>(p) = call.params;
  p.cu_seqlens_q = call.cu_seqlens_q;
  p.cu_seqlens_k = call.cu_seqlens_k;
  p.total_q = call.total_q;
  p.total_k = call.total_k;
  return p;
}
#endif

}  // namespace attnprof::flash
