// Shared set-up of the variants that materialise the [Sq, Skv] score matrix:
// the softmax scale, the boolean mask built once outside the forward, and the
// grouped-query expansion of k and v to the query heads.
#pragma once

#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>

#include "attnprof/variant.h"
#include "variants/fp8.h"
#include "variants/torch_problem.h"

namespace attnprof {

class ScoreMatrixVariant : public Variant {
 public:
  Support supports(const Problem& p) const override {
    // The first op of the formula, at::matmul, on e4m3: PyTorch's answer.
    return p.dtype == DType::FP8 ? fp8_refusal(name(), p, score_matmul_probe) : Support::yes();
  }
  void prepare(const Problem& p, const at::Tensor& q, const at::Tensor&, const at::Tensor&) override {
    // A wrapped-number tensor, as Python's `scores * scale` passes it: C++'s
    // Tensor * double goes through mul.Scalar, which redispatches to mul.Tensor
    // and shows two nested aten::mul rows that Python's table does not have.
    scale_tensor_ = at::native::wrapped_scalar_tensor(p.softmax_scale());
    mask_ = hidden_keys_mask(p, q.options());
    heads_q_ = p.heads_q;
    window_ = p.effective_window();
  }
  std::vector<Fact> facts() const override {
    if (window_ == 0) return {};
    return {{"sliding window", std::to_string(window_) + " keys, in the boolean mask built before the measured "
                               "scope: every score is computed, those outside the window masked"}};
  }

 protected:
  // k or v at the query heads: under grouped-query attention a copy (the
  // repeat_interleave kernels the trace shows), the tensor itself otherwise.
  at::Tensor at_query_heads(const at::Tensor& kv) const { return expand_kv_heads(kv, heads_q_); }

  at::Tensor scale_tensor_;
  at::Tensor mask_;  // undefined without a causal mask
  int64_t heads_q_ = 0;
  int64_t window_ = 0;  // the problem's window where it hides keys, else 0
};

}  // namespace attnprof
