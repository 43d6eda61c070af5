// What the context-parallel variants (ring-*, ulysses-*) share: the refusal
// when no process group exists, the inner kernel's support of the part a
// rank computes, and the cut of each input set into this rank's part, made
// once per set outside the measured forward.
#pragma once

#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <memory>
#include <string>
#include <vector>

#include "attnprof/variant.h"

namespace attnprof::context_parallel {

// "" when this run has a process group, else how to start `variant` with one.
std::string no_group_reason(const std::string& variant);

// Whether `inner_variant` runs `part` (what one rank computes), with `variant`'s
// name on the reason; also refuses grouped-query heads for sdpa-flash, whose
// ATen kernel takes as many key/value heads as query heads.
Support inner_supports(const std::string& variant, const std::string& inner_variant, const Problem& full,
                       const Problem& part);

// This rank's part of each input set, cut on first sight. Inputs are compared
// by identity; the runner's timing rotates at most 64 sets.
template <class Part>
class PartCache {
 public:
  template <class Cut>
  const Part& get(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, Cut cut) {
    for (const Entry& e : entries_)
      if (e.q.is_same(q) && e.k.is_same(k) && e.v.is_same(v)) return e.part;
    if (entries_.size() >= 65) entries_.erase(entries_.begin());
    c10::NoGradGuard no_grad;
    entries_.push_back({q, k, v, cut(q, k, v)});
    return entries_.back().part;
  }

 private:
  struct Entry {
    at::Tensor q, k, v;
    Part part;
  };
  std::vector<Entry> entries_;
};

}  // namespace attnprof::context_parallel
