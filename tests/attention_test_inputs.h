// Inputs shared by the attention kernel tests (test_custom_kernels.cpp,
// test_flash_sm90.cpp).
#pragma once

#include <ATen/ATen.h>

#include <cstdint>

namespace attnprof::testing {

struct Qkv {
  at::Tensor q, k, v;
};

// Scores that climb (direction 1) or fall (-1) steadily along the keys,
// about ±23 in log2 units with softmax scale 1: q's first column is 4 and k's
// runs linearly from -4·direction to 4·direction, over small noise. The row max
// then moves at every key block, which random inputs never do (their row max
// settles within a few blocks). [b, h, s, d] CUDA tensors of `dtype`.
// q has sq rows, k and v sk (decode: a few queries against many keys).
inline Qkv drifting_max_inputs(int64_t b, int64_t h, int64_t sq, int64_t sk, int64_t d, at::ScalarType dtype,
                               double direction) {
  const auto opts = at::TensorOptions().device(at::kCUDA).dtype(at::kFloat);
  at::Tensor q = at::randn({b, h, sq, d}, opts) * 0.1;
  at::Tensor k = at::randn({b, h, sk, d}, opts) * 0.1;
  q.select(-1, 0).fill_(4.0);
  k.select(-1, 0).copy_(at::linspace(-4.0 * direction, 4.0 * direction, sk, opts));
  return {q.to(dtype), k.to(dtype), at::randn({b, h, sk, d}, opts.dtype(dtype))};
}
inline Qkv drifting_max_inputs(int64_t b, int64_t h, int64_t s, int64_t d, at::ScalarType dtype, double direction) {
  return drifting_max_inputs(b, h, s, s, d, dtype, direction);
}

}  // namespace attnprof::testing
