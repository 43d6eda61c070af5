// custom-flash-sm90: attnprof's Hopper attention forward (warp-specialised,
// TMA + wgmma; src/kernels/flash_sm90), one persistent kernel per forward,
// called through the dispatcher as attnprof::flash_attention_sm90.
#include <ATen/ATen.h>
#ifdef ATTNPROF_HAVE_SM90_KERNELS
#include <ATen/cuda/CUDAContext.h>

#include "kernels/flash_sm90/hopper_support.h"
#endif

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "attnprof/problem.h"
#include "attnprof/variant.h"
#include "kernels/flash_sm90/flash_sm90_traits.h"
#include "kernels/ops_signatures.h"
#include "variants/custom_op_variant.h"
#include "variants/flash_backward_facts.h"
#include "variants/factories.h"
#include "variants/torch_problem.h"

namespace attnprof {
namespace {

// The configuration one (head dim, mask) runs, in words, from its named
// configuration and the traits it builds (Element only sets the element size:
// any 16-bit type gives the same shape).
template <int kHeadDim, bool kShortCausal>
std::string describe_config() {
  using C = flash_sm90::FwdConfig<kHeadDim, uint16_t, kShortCausal>;
  using T = typename C::Traits;
  return std::string(C::Config::kName) + ", " + std::to_string(T::kThreads) + "-thread blocks (" +
         std::to_string(T::kConsumerWarpgroups) +
         " consumer warpgroups, " + std::to_string(T::kProducerRegs) + "/" + std::to_string(T::kConsumerRegs) +
         " registers per producer/consumer thread by setmaxnreg), tiles of " + std::to_string(T::kBlockM) +
         " query rows x " + std::to_string(T::kBlockN) + " keys, " + std::to_string(T::kStages) +
         "-stage K/V ring, " + std::to_string(T::kQStages) + (T::kQStages == 1 ? " Q buffer" : " Q buffers") +
         " (Q·Kᵀ reads Q from " + (T::kQInRegs ? "registers" : "shared memory") + "), " +
         (T::kHalfFirstBlock ? "the first key block " + std::to_string(T::kBlockN / 2) +
                                   " keys wide for a warpgroup that sees none of the rest (the causal diagonal), "
                             : "") +
         std::to_string(T::kSmemBytes / 1024) + " KiB shared memory";
}

template <int kHeadDim>
std::string describe_head_dim() {
  const std::string short_causal = describe_config<kHeadDim, true>(), other = describe_config<kHeadDim, false>();
  const std::string d = "head_dim " + std::to_string(kHeadDim) + ": ";
  using Short = typename flash_sm90::FwdConfig<kHeadDim, uint16_t, true>::Traits;
  return short_causal == other ? d + other
                               : d + other + "; causal with " + std::to_string(Short::kBlockM + 1) + " to " +
                                     std::to_string(flash_sm90::kShortCausalRows - 1) + " query rows " +
                                     short_causal;
}

class CustomFlashSm90 final : public CustomOpVariant {
 public:
  std::string name() const override { return "custom-flash-sm90"; }
  std::string description() const override {
    return "attnprof's Hopper attention kernel: TMA loads on mbarriers, a producer warpgroup and two "
           "or three consumer warpgroups (wgmma, ping-pong), online softmax overlapped with the GEMMs (1 kernel)";
  }

  Support supports(const Problem& p) const override {
#if defined(ATTNPROF_HAVE_CUDA_KERNELS) && !defined(ATTNPROF_HAVE_SM90_KERNELS)
    return Support::no(name() + " needs attnprof built with its sm_90a kernels (this build has none: "
                                "configured with ATTNPROF_SM90_KERNELS=OFF)");
#endif
    const Support base = operator_support("attnprof::flash_attention_sm90", p);
    if (!base.ok) return base;
#ifdef ATTNPROF_HAVE_SM90_KERNELS
    const at::Device dev = torch_device(p);
    if (const auto why = flash_sm90::device_unsupported(dev.has_index() ? dev.index() : at::cuda::current_device()))
      return Support::no(name() + " " + *why);
#endif
    if (p.dtype == DType::FP32)
      return Support::no(name() + " supports bf16 and fp16, not fp32 (wgmma takes 16-bit inputs here)");
    if (p.head_dim != 64 && p.head_dim != 128)
      return Support::no(name() + " supports head_dim 64 and 128, not " + std::to_string(p.head_dim));
    return Support::yes();
  }

  void prepare(const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    CustomOpVariant::prepare(p, q, k, v);
    hopper_bwd_ = flash_backward_is_hopper(q, k, v);
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    static auto op = ops::op_handle<ops::FlashAttentionFn>("attnprof::flash_attention_sm90");
    return std::get<0>(op.call(q, k, v, causal_, scale_));
  }

  std::vector<Fact> facts() const override {
    std::vector<Fact> f = {
        {"kernel", "attnprof::flash_sm90::flash_fwd_sm90_kernel (persistent, one block per SM: 1 producer "
                   "warpgroup issuing TMA loads, consumer warpgroups of 64 query rows on wgmma; causal tiles "
                   "longest first within L2-sized sections of heads, from a per-stream counter the kernel resets; "
                   "tiles of one cost (no mask, or one query block per head) in whole rounds, the last partial "
                   "round cut along the keys into a range per SM and merged by log-sum-exp in the kernel; "
                   "programmatic dependent launch: its blocks set up in the previous kernel's tail)"},
        {"tiles", describe_head_dim<64>() + " | " + describe_head_dim<128>()}};
    // Its backward is custom-flash's (the same autograd node, ops_autograd.cpp).
    if (pass_ != Pass::fwd) f.push_back({"backward kernels", flash::describe_bwd(head_dim_, hopper_bwd_)});
    return f;
  }

 private:
  bool hopper_bwd_ = false;
};

}  // namespace

std::unique_ptr<Variant> make_custom_flash_sm90() { return std::make_unique<CustomFlashSm90>(); }

}  // namespace attnprof
