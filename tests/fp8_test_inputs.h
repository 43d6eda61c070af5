// fp8 problems and their outlier-heavy inputs, shared by the fp8 tests
// (test_fp8.cpp, test_flash_sm90_fp8.cpp).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>
#include <string>

#include "attnprof/problem.h"
#include "variants/fp8.h"
#include "variants/torch_problem.h"

namespace attnprof::testing {

inline Problem fp8_problem(int64_t b, int64_t hq, int64_t hkv, int64_t sq, int64_t skv, int64_t d, bool causal,
                           const std::string& device = "cpu") {
  Problem p;
  p.batch = b, p.heads_q = hq, p.heads_kv = hkv, p.seq_q = sq, p.seq_kv = skv, p.head_dim = d;
  p.dtype = DType::FP8;
  p.mask = causal ? Mask::causal_bottom_right : Mask::none;
  p.device = device;
  return p;
}

// Draws to pool for an error check of p: enough that the output has at least
// kPooledRows query rows. A relative error over a few rows is a poor
// estimate: on outlier-heavy inputs a row's softmax is nearly one-hot, and
// the plain implementation's error on it may happen to be almost nil (P of
// the top key rounds to itself), so the ratio to it swings. At 1x3/1x1/300xD
// (3 rows) four pooled draws put sdpa-auto's dequantising path at 2.35x
// plain bf16 (seed 1383582858, replayed) and one draw the head_dim-256 fp8
// kernel at 2.08x plain FP8; pooled over 192 rows the same seed passes.
constexpr int64_t kPooledRows = 192;
inline int draws_for_rows(const Problem& p) {
  const int64_t rows = p.batch * p.heads_q * p.seq_q;
  return static_cast<int>(rows >= kPooledRows ? 1 : (kPooledRows + rows - 1) / rows);
}

// bf16 q, k, v with a few channels 50 times the rest (the outliers of LLM
// activations that per-head scales must cover), quantised (q and k rotated
// first under Problem::fp8_rotated, the matrix drawn after them, as
// random_inputs does): standard normal, then channels 3 and d/2 of q and k
// scaled by 50.
inline Inputs outlier_inputs(const Problem& p) {
  const auto opt = at::TensorOptions().dtype(at::kFloat).device(torch_device(p));
  at::Tensor q = at::randn({p.batch, p.heads_q, p.seq_q, p.head_dim}, opt);
  at::Tensor k = at::randn({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, opt);
  const at::Tensor v = at::randn({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, opt);
  for (const int64_t c : {int64_t{3}, p.head_dim / 2}) q.select(3, c).mul_(50.0), k.select(3, c).mul_(50.0);
  // With channels this large the scores would be one-hot; a smaller scale keeps the softmax spread.
  q.mul_(0.05);
  const at::Tensor rotation = p.fp8_rotated ? random_orthogonal(p.head_dim, torch_device(p)) : at::Tensor();
  return fp8_inputs(q.to(at::kBFloat16), k.to(at::kBFloat16), v.to(at::kBFloat16), rotation);
}

}  // namespace attnprof::testing
