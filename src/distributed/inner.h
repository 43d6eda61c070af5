// The attention a ring runs on each block: any fused kernel that also returns
// the log-sum-exp of each query's scores (what merging partial outputs needs).
#pragma once

#include <string>
#include <vector>

#include "attnprof/problem.h"
#include "distributed/ring_attention.h"

namespace attnprof::ring {

struct InnerSpec {
  const char* variant;        // "ring-custom-flash": the registered multi-GPU variant
  const char* scheme;         // "ring" (sequence shards passed round) or "ulysses" (heads split by all-to-all)
  const char* inner_variant;  // "custom-flash": the same attention on one GPU (the baseline)
  const char* call;           // what computes a block, for facts and descriptions
};

// Every multi-GPU variant of the registry and its inner, in registry order.
const std::vector<InnerSpec>& inner_specs();
const InnerSpec* find_inner(const std::string& variant);

// The checks of `variant`'s scheme that need neither the ranks nor the inner
// kernel (ring_refusal or ulysses::refusal); "" when they pass or when
// `variant` is not a multi-GPU variant.
std::string scheme_refusal(const std::string& variant, const Problem& p, int world);

// The block function of `inner_variant` ("custom-flash", "custom-flash-sm90",
// "sdpa-flash") or "math" (math_block). Throws std::invalid_argument for
// another name, c10::Error when the operator is not registered.
BlockAttention block_attention(const std::string& inner_variant);

}  // namespace attnprof::ring
