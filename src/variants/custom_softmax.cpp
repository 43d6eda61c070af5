// custom-softmax: the unfused sandwich with one hand-written kernel in the
// middle. at::matmul (Q·Kᵀ) → attnprof::scaled_masked_softmax (scale, causal
// mask and softmax in one pass over each score row) → at::matmul (P·V):
// 3 kernels per forward against inplace's 5.
#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

#include <cmath>
#include <memory>
#include <string>

#include "attnprof/problem.h"
#include "attnprof/variant.h"
#include "variants/factories.h"

namespace attnprof {
namespace {

class CustomSoftmax final : public Variant {
 public:
  std::string name() const override { return "custom-softmax"; }
  std::string description() const override {
    return "matmul Q·Kᵀ, then attnprof's fused scale+mask+softmax CUDA kernel, then matmul ·V "
           "(3 kernels)";
  }
  report::MemoryFamily memory_family() const override {
    return report::MemoryFamily::materialised_scores_inplace;
  }

  Support supports(const Problem& p) const override {
#ifndef ATTNPROF_HAVE_CUDA_KERNELS
    (void)p;
    return Support::no("custom-softmax needs attnprof built with the CUDA kernels (this build has none: no CUDA toolkit at configure time)");
#else
    if (!p.on_cuda()) {
      return Support::no("custom-softmax needs a CUDA device (this run is on " + p.device + ")");
    }
    auto op = c10::Dispatcher::singleton().findSchema({"attnprof::scaled_masked_softmax", ""});
    if (!op || !op->hasKernelForDispatchKey(c10::DispatchKey::CUDA)) {
      return Support::no("custom-softmax: attnprof::scaled_masked_softmax has no CUDA kernel registered");
    }
    return Support::yes();
#endif
  }

  void prepare(const Problem& p, const at::Tensor& q, const at::Tensor& k,
               const at::Tensor& v) override {
    (void)q, (void)k, (void)v;
    scale_ = p.softmax_scale();
    causal_ = p.causal;
    prepared_ = true;
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    static auto op = c10::Dispatcher::singleton()
                         .findSchemaOrThrow("attnprof::scaled_masked_softmax", "")
                         .typed<at::Tensor(const at::Tensor&, double, bool)>();
    const double scale = prepared_ ? scale_ : 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    at::Tensor scores = at::matmul(q, k.transpose(-2, -1));
    at::Tensor probs = op.call(scores, scale, causal_);
    return at::matmul(probs, v);
  }

 private:
  double scale_ = 1.0;
  bool causal_ = true;
  bool prepared_ = false;
};

}  // namespace

std::unique_ptr<Variant> make_custom_softmax() { return std::make_unique<CustomSoftmax>(); }

}  // namespace attnprof
