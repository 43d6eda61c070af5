// Shared set-up of the variants that materialise the [S, S] score matrix:
// the softmax scale and a bool causal mask built once, outside the forward.
#pragma once

#include <ATen/ATen.h>

#include "attnprof/variant.h"

namespace attnprof {

class ScoreMatrixVariant : public Variant {
 public:
  Support supports(const Problem&) const override { return Support::yes(); }
  void prepare(const Problem& p, const at::Tensor& q, const at::Tensor&, const at::Tensor&) override {
    scale_ = p.softmax_scale();
    mask_ = p.causal ? at::ones({p.seq, p.seq}, q.options().dtype(at::kBool)).triu(1) : at::Tensor();
  }

 protected:
  double scale_ = 1.0;
  at::Tensor mask_;  // undefined when not causal
};

}  // namespace attnprof
