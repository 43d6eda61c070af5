// custom-softmax: the unfused sandwich with one hand-written kernel in the
// middle. at::matmul (Q·Kᵀ) → attnprof::scaled_masked_softmax (scale, causal
// mask and softmax in one pass over each score row) → at::matmul (P·V):
// 3 kernels per forward against inplace's 5.
#include <ATen/ATen.h>

#include <memory>
#include <string>

#include "attnprof/problem.h"
#include "attnprof/variant.h"
#include "kernels/operators/signatures.h"
#include "variants/custom_op_variant.h"
#include "variants/factories.h"
#include "variants/fp8.h"
#include "variants/torch_problem.h"

namespace attnprof {
namespace {

class CustomSoftmax final : public CustomOpVariant {
 public:
  std::string name() const override { return "custom-softmax"; }
  std::string description() const override {
    return "matmul Q·Kᵀ, then attnprof's fused scale+mask+softmax CUDA kernel, then matmul ·V "
           "(3 kernels)";
  }
  MemoryFamily memory_family() const override { return MemoryFamily::materialised_scores_inplace; }

  void prepare(const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    CustomOpVariant::prepare(p, q, k, v);
    heads_q_ = p.heads_q;
  }

  Support supports(const Problem& p) const override {
    return operator_support("attnprof::scaled_masked_softmax", p);
  }

  // The scores come from PyTorch's at::matmul before our kernel sees them.
  Support fp8_support(const std::string&, const Problem& p) const override {
    return fp8_refusal(name(), p, score_matmul_probe);
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    static auto op = ops::op_handle<ops::ScaledMaskedSoftmaxFn>("attnprof::scaled_masked_softmax");
    at::Tensor scores = at::matmul(q, expand_kv_heads(k, heads_q_).transpose(-2, -1));
    at::Tensor probs = op.call(scores, scale_, causal_);
    return at::matmul(probs, expand_kv_heads(v, heads_q_));
  }

 private:
  int64_t heads_q_ = 0;
};

}  // namespace

std::unique_ptr<Variant> make_custom_softmax() { return std::make_unique<CustomSoftmax>(); }

}  // namespace attnprof
