// custom-flash: attnprof's own fused attention forward (FlashAttention-2 style,
// mma.sync m16n8k16 + cp.async; src/kernels/flash_attention), called through
// the dispatcher as attnprof::flash_attention: one kernel, or two when the
// keys are split (decode, small grids); the facts say which.
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "attnprof/problem.h"
#include "attnprof/variant.h"
#include "kernels/flash_attention/api.h"
#include "kernels/flash_attention/flash_fwd_plan.h"
#include "kernels/operators/signatures.h"
#include "variants/custom_op_variant.h"
#include "variants/flash_backward_facts.h"
#include "variants/factories.h"

namespace attnprof {
namespace {

class CustomFlash final : public CustomOpVariant {
 public:
  std::string name() const override { return "custom-flash"; }
  std::string description() const override {
    return "attnprof's fused attention CUDA kernel: Q tile on chip, K/V streamed through shared "
           "memory (cp.async), mma.sync tensor cores, online softmax (1 kernel; 2 when the keys are split)";
  }

  Support supports(const Problem& p) const override {
    const Support base = operator_support(p.paged()    ? "attnprof::flash_attention_paged"
                                          : p.varlen() ? "attnprof::flash_attention_varlen"
                                                       : "attnprof::flash_attention",
                                          p);
    if (!base.ok) return base;
    if (p.paged() && (p.page_size & (p.page_size - 1)) != 0)
      return Support::no(name() + " reads pages whose size is a power of two (it finds a key's page by shift and "
                                  "mask), not " + std::to_string(p.page_size));
    return family_support(&flash::unsupported, p);
  }

  void prepare(const Problem& p, const at::Tensor& q, const at::Tensor& k,
               const at::Tensor& v) override {
    CustomOpVariant::prepare(p, q, k, v);
    is_bf16_ = p.dtype == DType::BF16;
    page_size_ = p.page_size;
    hopper_bwd_ = window_ == 0 && flash_backward_is_hopper(q, k, v);  // the Hopper backward has no window
    // The path forward() runs: a packed batch always the prefill kernel, unsplit.
    plan_ = {};
#ifdef ATTNPROF_HAVE_CUDA_KERNELS
    if (q.is_cuda() && !p.varlen()) plan_ = flash::plan_for(q, k, causal_);
#endif
    if (p.varlen()) plan_.path = flash::FwdPath::kPrefillPacked;
  }

  bool takes_window() const override { return true; }
  bool takes_varlen() const override { return true; }
  bool reads_pages() const override { return true; }
  bool reads_packed() const override { return true; }

  at::Tensor forward_varlen(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                            const PackedBatch& packed) override {
    static auto op = ops::op_handle<ops::FlashAttentionVarlenFn>("attnprof::flash_attention_varlen");
    return std::get<0>(op.call(packed.q, packed.k, packed.v, packed.cu_seqlens_q, packed.cu_seqlens_k, packed.max_q,
                               packed.max_kv, causal_, scale_, window_));
  }

  at::Tensor forward_paged(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                           const at::Tensor& block_table, int64_t seq_kv) override {
    static auto op = ops::op_handle<ops::FlashAttentionPagedFn>("attnprof::flash_attention_paged");
    return std::get<0>(op.call(q, k_cache, v_cache, block_table, seq_kv, causal_, scale_, window_));
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    static auto op = ops::op_handle<ops::FlashAttentionFn>("attnprof::flash_attention");
    return std::get<0>(op.call(q, k, v, causal_, scale_, window_));
  }

  std::vector<Fact> facts() const override {
    std::vector<Fact> f = {{"kernel", flash::describe_fwd(head_dim_, is_bf16_, plan_) +
                                          (page_size_ > 0 ? ", K/V rows read through the block table (" +
                                                                std::to_string(page_size_) + "-token pages)"
                                                          : std::string())}};
    if (window_ > 0)
      f.push_back({"sliding window", std::to_string(window_) + " keys in the kernel: key tiles outside every row's "
                                     "window skipped, the window's edge masked per score"});
    if (pass_ != Pass::fwd) f.push_back({"backward kernels", flash::describe_bwd(head_dim_, hopper_bwd_)});
    return f;
  }

 private:
  bool is_bf16_ = true;
  bool hopper_bwd_ = false;
  int64_t page_size_ = 0;
  flash::FwdPlan plan_;
};

}  // namespace

std::unique_ptr<Variant> make_custom_flash() { return std::make_unique<CustomFlash>(); }

}  // namespace attnprof
