// Shared set-up of the variants that materialise the [S, S] score matrix:
// the softmax scale and a bool causal mask built once, outside the forward.
#pragma once

#include <ATen/ATen.h>
#include <ATen/ScalarOps.h>

#include "attnprof/variant.h"

namespace attnprof {

class ScoreMatrixVariant : public Variant {
 public:
  Support supports(const Problem&) const override { return Support::yes(); }
  void prepare(const Problem& p, const at::Tensor& q, const at::Tensor&, const at::Tensor&) override {
    // A wrapped-number tensor, as Python's `scores * scale` passes it: C++'s
    // Tensor * double goes through mul.Scalar, which redispatches to mul.Tensor
    // and shows two nested aten::mul rows that Python's table does not have.
    scale_tensor_ = at::native::wrapped_scalar_tensor(p.softmax_scale());
    mask_ = p.causal ? at::ones({p.seq, p.seq}, q.options().dtype(at::kBool)).triu(1) : at::Tensor();
  }

 protected:
  at::Tensor scale_tensor_;
  at::Tensor mask_;  // undefined when not causal
};

}  // namespace attnprof
