// custom-flash-sm90: attnprof's Hopper attention forward (warp-specialised,
// TMA + wgmma; src/kernels/flash_sm90), one persistent kernel per forward,
// called through the dispatcher as attnprof::flash_attention_sm90 (decode
// shapes run the portable split-KV kernel there: decode_route.h); fp8 inputs
// through attnprof::flash_attention_sm90_fp8 (e4m3 wgmma).
#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "attnprof/problem.h"
#include "attnprof/variant.h"
#include "kernels/flash_attention/api.h"
#include "kernels/flash_attention/flash_fwd_plan.h"
#include "kernels/flash_sm90/api.h"
#include "kernels/flash_sm90/decode_route.h"
#include "kernels/flash_sm90/flash_sm90_traits.h"
#include "kernels/operators/signatures.h"
#include "variants/custom_op_variant.h"
#include "variants/flash_backward_facts.h"
#include "variants/factories.h"

namespace attnprof {
namespace {

// One named configuration in words, from the traits it builds (the element
// type only sets the element size: any type of that size gives the same shape).
template <typename Config, typename Element = uint16_t>
std::string describe_config() {
  using T = flash_sm90::FwdTraits<Config, Element>;
  return std::string(T::kName) + ", " + std::to_string(T::kThreads) + "-thread blocks (" +
         std::to_string(T::kConsumerWarpgroups) +
         " consumer warpgroups, " + std::to_string(T::kProducerRegs) + "/" + std::to_string(T::kConsumerRegs) +
         " registers per producer/consumer thread by setmaxnreg), tiles of " + std::to_string(T::kBlockM) +
         " query rows x " + std::to_string(T::kBlockN) + " keys, " + std::to_string(T::kStages) +
         "-stage K/V ring, " + std::to_string(T::kQStages) + (T::kQStages == 1 ? " Q buffer" : " Q buffers") +
         " (Q·Kᵀ reads Q from " + (T::kQInRegs ? "registers" : "shared memory") + "), " +
         (T::kHalfFirstBlock ? "the first key block " + std::to_string(T::kBlockN / 2) +
                                   " keys wide for a warpgroup that sees none of the rest (the causal diagonal), "
                             : "") +
         (T::kIntMax ? "each key block's row max on the scores' bits as integers (VIMNMX3), " : "") +
         (T::kTransposeV ? "Vᵀ written by " + std::to_string(T::kTransposeWarps) + " producer warps from " +
                               std::to_string(T::kVsStages) + " staging buffers of " + std::to_string(T::kVColKeys) +
                               " keys, "
                         : "") +
         std::to_string(T::kSmemBytes / 1024) + " KiB shared memory";
}

// Per head dim of the operator's configurations: the general one, then where
// a short-causal one takes over, e.g. "head_dim 64: <general>; causal with 129
// to 2047 query rows <short causal>".
std::string describe_configs() {
  std::string out;
  for (int d : kernels::head_dims(flash_sm90::Sm90FwdConfigs{})) {
    std::string general, short_causal, varlen;
    kernels::for_each_config(flash_sm90::Sm90FwdConfigs{}, [&](auto c) {
      using C = decltype(c);
      if (C::kHeadDim != d) return;
      if (C::kVarlen) varlen += "; a packed variable-length batch " + describe_config<C>();
      else if (!C::kShortCausal) general = describe_config<C>();
      else
        short_causal += "; causal with " + std::to_string(64 * C::kConsumerWarpgroups + 1) + " to " +
                        std::to_string(flash_sm90::kShortCausalRows - 1) + " query rows " + describe_config<C>();
    });
    out += (out.empty() ? "" : " | ") + ("head_dim " + std::to_string(d) + ": ") + general + short_causal + varlen;
  }
  return out;
}

class CustomFlashSm90 final : public CustomOpVariant {
 public:
  std::string name() const override { return "custom-flash-sm90"; }
  std::string description() const override {
    return "attnprof's Hopper attention kernel: TMA loads on mbarriers, a producer warpgroup and two "
           "or three consumer warpgroups (wgmma, ping-pong), online softmax overlapped with the GEMMs (1 kernel; "
           "decode shapes run custom-flash's split-KV kernel, 1 or 2)";
  }

  Support supports(const Problem& p) const override {
    const bool fp8 = p.dtype == DType::FP8;
    const auto family = fp8 ? &flash_sm90::fp8_unsupported : &flash_sm90::unsupported;
#if defined(ATTNPROF_HAVE_CUDA_KERNELS) && !defined(ATTNPROF_HAVE_SM90_KERNELS)
    return family_support(family, p);  // the build has no sm_90a kernels: say so first
#endif
    const Support base = operator_support(fp8            ? "attnprof::flash_attention_sm90_fp8"
                                          : p.varlen()   ? "attnprof::flash_attention_sm90_varlen"
                                                         : "attnprof::flash_attention_sm90",
                                          p);
    return base.ok ? family_support(family, p) : base;
  }

  void prepare(const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    CustomOpVariant::prepare(p, q, k, v);
    hopper_bwd_ = flash_backward_is_hopper(q, k, v);
    varlen_ = p.varlen();
    is_bf16_ = p.dtype == DType::BF16;
    fp8_ = p.dtype == DType::FP8;
    // The path the operator takes (decode_route.h): decode shapes run the split-KV kernel (fp8: at its head dims).
    plan_ = {};
#ifdef ATTNPROF_HAVE_CUDA_KERNELS
    if (q.is_cuda() && !varlen_ && kernels::has_head_dim(flash::DecodeTiles{}, p.head_dim))
      plan_ = flash::plan_for(q, k, causal_);
#endif
  }

  bool takes_varlen() const override { return true; }
  bool reads_packed() const override { return true; }

  Fp8Path fp8_path() const override { return Fp8Path::e4m3; }
  at::Tensor forward_fp8(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Fp8Scales& s) override {
    static auto op = ops::op_handle<ops::FlashAttentionSm90Fp8Fn>("attnprof::flash_attention_sm90_fp8");
    return std::get<0>(op.call(q, k, v, s.q_descale, s.k_descale, s.v_descale, causal_, scale_));
  }

  at::Tensor forward_varlen(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const PackedBatch& packed) override {
    static auto op = ops::op_handle<ops::FlashAttentionVarlenFn>("attnprof::flash_attention_sm90_varlen");
    return std::get<0>(op.call(packed.q, packed.k, packed.v, packed.cu_seqlens_q, packed.cu_seqlens_k, packed.max_q,
                               packed.max_kv, causal_, scale_, 0));
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    static auto op = ops::op_handle<ops::FlashAttentionSm90Fn>("attnprof::flash_attention_sm90");
    return std::get<0>(op.call(q, k, v, causal_, scale_));
  }

  std::vector<Fact> facts() const override {
    std::vector<Fact> f;
    // The decode path (decode_route.h): few query rows per KV head would leave the Hopper kernel's tiles,
    // 64 rows of one query head per consumer warpgroup, nearly empty.
    const std::string decode_why = "decode path (" + std::to_string(plan_.group * plan_.seqlen_q) +
                                   " query rows per KV head, at most " +
                                   std::to_string(flash_sm90::kDecodeMaxRowsPerKvHead) +
                                   ": the Hopper kernel's tiles, 64 rows of one query head per consumer warpgroup, "
                                   "would be nearly empty): ";
    if (fp8_ && flash_sm90::runs_fp8_split_kv_decode(plan_, head_dim_)) {
      f.push_back({"kernel", decode_why + flash::describe_fwd(head_dim_, is_bf16_, plan_, /*e4m3=*/true) +
                                 "; no Vᵀ pass (attnprof::flash_attention_sm90_fp8's decode route)"});
    } else if (fp8_) {
      // Where V is transposed (Vᵀ, keys contiguous, as 8-bit wgmma reads its B operand), per head dim.
      std::string in_kernel, by_pass, split, p_bits, p_rounded;
      kernels::for_each_config(flash_sm90::Sm90FwdFp8Configs{}, [&](auto c) {
        const auto add = [](std::string& dims, int d) { dims += (dims.empty() ? "" : ", ") + std::to_string(d); };
        add(decltype(c)::kTransposeV ? in_kernel : by_pass, decltype(c)::kHeadDim);
        add(decltype(c)::kPBits ? p_bits : p_rounded, decltype(c)::kHeadDim);
        if (decltype(c)::kTailSplit) add(split, decltype(c)::kHeadDim);
      });
      // How P (scaled by 2^8) becomes e4m3, per head dim (softmax_sm90.cuh).
      std::string p_e4m3 = "P scaled by 2^8 as e4m3 in registers";
      if (!p_bits.empty())
        p_e4m3 += " (at head_dim " + p_bits +
                  " its bytes straight from the scores, linear in the exponent: within 8% of exp2, no exponential";
      if (!p_rounded.empty())
        p_e4m3 += std::string(p_bits.empty() ? " (at head_dim " : "; at head_dim ") + p_rounded + " exp2 rounded";
      p_e4m3 += ")";
      std::string vt = "V transposed (Vᵀ, keys contiguous, as 8-bit wgmma reads its B operand)";
      if (!in_kernel.empty())
        vt += " at head_dim " + in_kernel +
              " inside the kernel, by producer warps from V as TMA stages it (the tiles fact says how many)";
      if (!by_pass.empty())
        vt += std::string(in_kernel.empty() ? "" : ";") + " at head_dim " + by_pass +
              " first by attnprof::flash_sm90::fp8_vt_kernel (one read and one write of V), inside the measured "
              "forward and in the trace";
      f.push_back({"kernel", "attnprof::flash_sm90::flash_fwd_sm90_kernel on e4m3 inputs "
                             "(attnprof::flash_attention_sm90_fp8): Q·Kᵀ and P·V on e4m3 wgmma (k32) with fp32 "
                             "accumulators, " +
                             p_e4m3 +
                             ", q's and k's descales folded into the softmax scale and v's into the output's "
                             "normalisation, bf16 output; " +
                             vt +
                             (split.empty() ? std::string()
                                            : "; at head_dim " + split +
                                                  " tiles of one cost (no mask, or one query block per head) in whole "
                                                  "rounds, the last partial round cut along the keys into a range per "
                                                  "SM and merged by log-sum-exp in the kernel")});
      std::string tiles;
      kernels::for_each_config(flash_sm90::Sm90FwdFp8Configs{}, [&](auto c) {
        tiles += (tiles.empty() ? "" : " | ") + ("head_dim " + std::to_string(decltype(c)::kHeadDim) + ": ") +
                 describe_config<decltype(c), uint8_t>();
      });
      f.push_back({"tiles", tiles});
    } else if (flash_sm90::runs_split_kv_decode(plan_)) {
      f.push_back({"kernel", decode_why + flash::describe_fwd(head_dim_, is_bf16_, plan_)});
    } else {
      f.push_back({"kernel", "attnprof::flash_sm90::flash_fwd_sm90_kernel (persistent, one block per SM: 1 producer "
                             "warpgroup issuing TMA loads, consumer warpgroups of 64 query rows on wgmma; causal tiles "
                             "longest first within L2-sized sections of heads, from a per-stream counter the kernel "
                             "resets; tiles of one cost (no mask, or one query block per head) in whole rounds, the "
                             "last partial round cut along the keys into a range per SM and merged by log-sum-exp in "
                             "the kernel; programmatic dependent launch: its blocks set up in the previous kernel's "
                             "tail)"});
      f.push_back({"tiles", describe_configs()});
    }
    if (varlen_)
      f.push_back({"variable-length call",
                   "attnprof::flash_attention_sm90_varlen on the packed batch (cu_seqlens): TMA reads each "
                   "sequence's rows from the packed tensors (keys past a sequence masked), its tiles numbered "
                   "sequence by sequence, the last query block first, all taken from the tile counter"});
    // Its backward is custom-flash's (the same autograd node, kernels/operators/autograd.cpp).
    if (pass_ != Pass::fwd) f.push_back({"backward kernels", flash::describe_bwd(head_dim_, hopper_bwd_)});
    return f;
  }

 private:
  bool hopper_bwd_ = false;
  bool varlen_ = false;
  bool is_bf16_ = true;
  bool fp8_ = false;
  flash::FwdPlan plan_;
};

}  // namespace

std::unique_ptr<Variant> make_custom_flash_sm90() { return std::make_unique<CustomFlashSm90>(); }

}  // namespace attnprof
