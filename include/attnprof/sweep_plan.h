// A sweep's axes expanded into its points, in the order they run; counted
// before anything is built (a typo in a list can ask for more points than
// memory holds). Turning a point into a Problem is the caller's: it checks
// each as the single-run flags are; a point that is not a valid problem is
// reported under its fallback_problem.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "attnprof/problem.h"

namespace attnprof {

struct SweepAxes {
  std::vector<int64_t> seq, head_dim, batch, heads;
  std::vector<int64_t> kv_heads, seq_q, seq_kv;  // empty: as heads, as seq
  std::vector<std::string> dtype, variant, pass;
};

struct SweepPoint {
  std::string variant, dtype, pass;
  int64_t batch = 0, heads = 0, kv_heads = 0;  // kv_heads 0: as heads
  int64_t head_dim = 0, seq_q = 0, seq_kv = 0;
};

// (seq_q, seq_kv) pairs: seq moves both; seq_kv with seq_q crosses them
// (seq_q alone pairs each query length with itself, as seq does).
std::vector<std::pair<int64_t, int64_t>> sequence_pairs(const SweepAxes& a);
// "2 variant x 2 seq x ... x 1 pass"
std::string sweep_axes_text(const SweepAxes& a);
// The number of points; nullopt past 2^64.
std::optional<uint64_t> sweep_point_count(const SweepAxes& a);
std::vector<SweepPoint> sweep_points(const SweepAxes& a);
// The point's fields as a Problem, unchecked (kv-heads that do not divide
// heads, more queries than keys under the causal mask): what a point that is
// not a valid problem is skipped and reported under. The device is left to
// the caller; an unknown dtype or pass reads as bf16 or fwd.
Problem fallback_problem(const SweepPoint& sp, bool causal);

}  // namespace attnprof
