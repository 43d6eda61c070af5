// Predicts the peak device memory of one step of a problem's pass before
// running it, so a run or a sweep point can be skipped when it cannot fit and
// say how much it would have needed. Pure arithmetic, no LibTorch.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>

#include "attnprof/memory_family.h"
#include "attnprof/problem.h"

namespace attnprof::report {

// Bytes, split by when they are allocated. peak_bytes is what the CUDA caching
// allocator's max_memory_allocated reports over one step when q, k, v (and a
// variant's prepared causal mask) were allocated before it: it counts them.
struct MemoryPrediction {
  uint64_t resident_bytes = 0;  // q, k, v (+ their grads' inputs) and the prepared mask
  uint64_t working_bytes = 0;   // temporaries alive together at the peak
  uint64_t output_bytes = 0;    // out, lse; for a backward also dq, dk, dv
  uint64_t overhead_bytes = 0;  // fitted residual, see memory_predictor.cpp
  uint64_t peak_bytes = 0;      // the sum of the above
};

// The product of non-negative factors; std::nullopt when a factor is negative
// or the product overflows uint64_t.
std::optional<uint64_t> checked_product(std::initializer_list<int64_t> factors);

// B*Hq*Sq*Skv*element_bytes: one score-matrix tensor. std::nullopt on overflow.
std::optional<uint64_t> score_matrix_bytes(const Problem& p, int64_t element_bytes);

// std::nullopt when any term overflows uint64_t (treat as "does not fit").
// A paged problem adds its two page pools to the resident bytes and, for a
// variant that gathers the pages (`gathers_pages`), the gathered copies.
std::optional<MemoryPrediction> predict_memory(const Problem& p, MemoryFamily family, bool gathers_pages = true);

}  // namespace attnprof::report
