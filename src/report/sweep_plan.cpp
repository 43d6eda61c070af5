#include "attnprof/sweep_plan.h"

#include <fmt/format.h>

#include <algorithm>

namespace attnprof {

std::vector<std::pair<int64_t, int64_t>> sequence_pairs(const SweepAxes& a) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  if (a.seq_q.empty() && a.seq_kv.empty()) {
    for (int64_t s : a.seq) pairs.emplace_back(s, s);
    return pairs;
  }
  const std::vector<int64_t>& kv = a.seq_kv.empty() ? a.seq : a.seq_kv;
  for (int64_t k : kv) {
    if (a.seq_q.empty()) pairs.emplace_back(k, k);
    for (int64_t q : a.seq_q) pairs.emplace_back(q, k);
  }
  return pairs;
}

namespace {
std::vector<size_t> axis_sizes(const SweepAxes& a) {
  return {a.variant.size(), sequence_pairs(a).size(), a.head_dim.size(), a.batch.size(), a.heads.size(),
          std::max<size_t>(1, a.kv_heads.size()), a.dtype.size(), a.pass.size()};
}
}  // namespace

std::string sweep_axes_text(const SweepAxes& a) {
  const std::vector<size_t> k = axis_sizes(a);
  return fmt::format("{} variant x {} seq x {} head_dim x {} batch x {} heads x {} kv-heads x {} dtype x {} pass", k[0],
                     k[1], k[2], k[3], k[4], k[5], k[6], k[7]);
}

std::optional<uint64_t> sweep_point_count(const SweepAxes& a) {
  uint64_t count = 1;
  for (size_t k : axis_sizes(a))
    if (__builtin_mul_overflow(count, uint64_t(k), &count)) return std::nullopt;
  return count;
}

std::vector<SweepPoint> sweep_points(const SweepAxes& a) {
  const auto seqs = sequence_pairs(a);
  const std::vector<int64_t> no_kv_heads = {0};
  std::vector<SweepPoint> points;
  for (const std::string& ps : a.pass)
    for (const std::string& dt : a.dtype)
      for (int64_t b : a.batch)
        for (int64_t h : a.heads)
          for (int64_t hkv : a.kv_heads.empty() ? no_kv_heads : a.kv_heads)
            for (int64_t d : a.head_dim)
              for (const std::string& v : a.variant)
                for (const auto& [sq, skv] : seqs) points.push_back({v, dt, ps, b, h, hkv, d, sq, skv});
  return points;
}

Problem fallback_problem(const SweepPoint& sp, bool causal) {
  Problem p;
  p.batch = sp.batch, p.heads_q = sp.heads;
  p.heads_kv = sp.kv_heads > 0 ? sp.kv_heads : sp.heads;
  p.seq_q = sp.seq_q, p.seq_kv = sp.seq_kv, p.head_dim = sp.head_dim;
  p.dtype = parse_dtype(sp.dtype).value_or(DType::BF16);
  p.pass = parse_pass(sp.pass).value_or(Pass::fwd);
  p.mask = causal ? Mask::causal_bottom_right : Mask::none;
  return p;
}

}  // namespace attnprof
