// The attention a ring runs on each block: any fused kernel that also returns
// the log-sum-exp of each query's scores (what merging partial outputs needs).
#pragma once

#include <string>
#include <vector>

#include "distributed/ring_attention.h"

namespace attnprof::ring {

struct InnerSpec {
  const char* ring_variant;   // "ring-custom-flash": the registered multi-GPU variant
  const char* inner_variant;  // "custom-flash": the same attention on one GPU (the baseline)
  const char* call;           // what computes a block, for facts and descriptions
};

// Every inner the registry has a ring variant for, in registry order.
const std::vector<InnerSpec>& inner_specs();
const InnerSpec* find_inner(const std::string& ring_variant);

// The block function of `inner_variant` ("custom-flash", "custom-flash-sm90",
// "sdpa-flash") or "math" (math_block). Throws std::invalid_argument for
// another name, c10::Error when the operator is not registered.
BlockAttention block_attention(const std::string& inner_variant);

}  // namespace attnprof::ring
