// One attention implementation behind the common interface. A new variant is
// one file under src/variants/ plus one line in src/variants/registry.cpp; the
// CLI, the tests and the reports only ever see it through the registry.
#pragma once

#include <ATen/core/Tensor.h>

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnprof/problem.h"
#include "attnprof/report/memory_predictor.h"

namespace attnprof {

// Whether a variant can run a problem here, and if not, a reason a person can act on.
struct Support {
  bool ok = true;
  std::string reason;
  static Support yes() { return {true, {}}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
};

// A fact a variant learned while preparing (e.g. which SDPA backend it got),
// reported in the summary and the headline.
struct Fact {
  std::string key;
  std::string value;
};

class Variant {
 public:
  virtual ~Variant() = default;
  virtual std::string name() const = 0;
  virtual std::string description() const = 0;
  // Cheap and side-effect free; may allocate small tensors on the device.
  virtual Support supports(const Problem& p) const = 0;
  // One-time set-up outside the timed/profiled region (masks, workspace...).
  virtual void prepare(const Problem& p, const at::Tensor& q, const at::Tensor& k,
                       const at::Tensor& v) {
    (void)p, (void)q, (void)k, (void)v;
  }
  // q, k, v: [batch, heads, seq, head_dim], contiguous, problem dtype and device.
  virtual at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) = 0;
  virtual std::vector<Fact> facts() const { return {}; }
  // How the forward's peak memory grows, so a run can be skipped before it
  // allocates what the device does not have. Fused kernels: O(S) per head.
  virtual report::MemoryFamily memory_family() const { return report::MemoryFamily::fused; }
};

using VariantFactory = std::unique_ptr<Variant> (*)();

struct VariantEntry {
  std::string name;
  VariantFactory make;
};

// In registration order, which is also the story order (slowest to fastest).
const std::vector<VariantEntry>& variant_registry();
std::vector<std::string> variant_names();
// nullptr if unknown.
std::unique_ptr<Variant> make_variant(const std::string& name);

}  // namespace attnprof
