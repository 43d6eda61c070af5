// The textbook formula, one ATen op per step. masked_fill (out of place) copies
// the whole score matrix first: the DtoD Memcpy the trace shows.
#include <ATen/ATen.h>

#include <limits>

#include "variants/factories.h"
#include "variants/score_matrix.h"

namespace attnprof {
namespace {

class Naive : public ScoreMatrixVariant {
 public:
  std::string name() const override { return "naive"; }
  std::string description() const override {
    return "matmul, * scale, out-of-place masked_fill, softmax, matmul (note the DtoD Memcpy)";
  }
  MemoryFamily memory_family() const override { return MemoryFamily::materialised_scores_naive; }
  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    at::Tensor scores = at::matmul(q, at_query_heads(k).transpose(-2, -1)) * scale_tensor_;
    if (mask_.defined()) scores = scores.masked_fill(mask_, -std::numeric_limits<double>::infinity());
    return at::matmul(at::softmax(scores, -1), at_query_heads(v));
  }
};

}  // namespace

std::unique_ptr<Variant> make_naive() { return std::make_unique<Naive>(); }

}  // namespace attnprof
