// Predicts the peak device memory of one attention forward before running it,
// so a sweep can skip shapes whose score matrix cannot fit and say how much it
// would have needed. Pure arithmetic, no LibTorch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

namespace attnprof::report {

// How a variant family holds memory during a forward.
enum class MemoryFamily {
  materialised_scores_naive,    // matmul, * scale, masked_fill (copy), softmax, matmul
  materialised_scores_inplace,  // same with masked_fill_ in place
  sdpa_math_fp32,               // SDPA math backend on CUDA: computes in fp32
  fused,                        // flash / mem-efficient / cuDNN / our kernels
};

struct AttentionShape {
  int64_t batch = 0;
  int64_t heads = 0;
  int64_t seq = 0;
  int64_t head_dim = 0;
  int64_t element_bytes = 2;  // of q, k, v and out
  bool causal = true;
};

// Bytes, split by when they are allocated. peak_bytes is what the CUDA caching
// allocator's max_memory_allocated reports over one forward when q, k, v (and a
// variant's prepared causal mask) were allocated before it: it counts them.
struct ForwardMemoryPrediction {
  uint64_t resident_bytes = 0;  // q, k, v and the variant's prepared mask
  uint64_t working_bytes = 0;   // temporaries alive together at the peak
  uint64_t output_bytes = 0;    // out (and the log-sum-exp of fused kernels)
  uint64_t overhead_bytes = 0;  // fitted residual, see memory_predictor.cpp
  uint64_t peak_bytes = 0;      // the sum of the above
};

// The product of non-negative factors; std::nullopt when a factor is negative
// or the product overflows uint64_t.
std::optional<uint64_t> checked_product(std::initializer_list<int64_t> factors);

// B*H*S*S*element_bytes: one score-matrix tensor. std::nullopt on overflow.
std::optional<uint64_t> score_matrix_bytes(const AttentionShape& shape, int64_t element_bytes);

// std::nullopt when any term overflows uint64_t (treat as "does not fit").
std::optional<ForwardMemoryPrediction> predict_forward_memory(const AttentionShape& shape,
                                                              MemoryFamily family);

}  // namespace attnprof::report
