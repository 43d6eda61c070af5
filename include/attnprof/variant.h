// One attention implementation behind the common interface. A new variant is
// one file under src/variants/ plus one line in src/variants/registry.cpp; the
// CLI, the tests and the reports only ever see it through the registry, and
// ask its tags rather than its name.
#pragma once

#include <ATen/core/Tensor.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "attnprof/memory_family.h"
#include "attnprof/problem.h"

namespace attnprof {

struct PackedBatch;  // variants/torch_problem.h
struct Fp8Scales;    // variants/torch_problem.h

// Whether a variant can run a problem here, and if not, a reason a person can act on.
struct Support {
  bool ok = true;
  std::string reason;
  static Support yes() { return {true, {}}; }
  static Support no(std::string why) { return {false, std::move(why)}; }
};

// How a variant runs fp8 inputs (DType::FP8): not at all, on e4m3 operands
// (an fp8 kernel, held to 2x the plain FP8 implementation's error), or
// dequantised to bf16 first (the reference path, held to 2x a plain bf16
// implementation of the dequantised inputs).
enum class Fp8Path { none, e4m3, dequantised };

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
  // Covers the problem's pass too: a variant without a backward says so here.
  virtual Support supports(const Problem& p) const = 0;
  // One-time set-up outside the timed/profiled region (masks, workspace...).
  virtual void prepare(const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    (void)p, (void)q, (void)k, (void)v;
  }
  // q: [batch, heads_q, seq_q, head_dim]; k, v: [batch, heads_kv, seq_kv,
  // head_dim]; contiguous, problem dtype and device. Returns [batch, heads_q,
  // seq_q, head_dim]. Differentiable where supports() accepts a backward pass:
  // the runner calls backward() on what it returns.
  virtual at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) = 0;
  // The forward of a paged problem (Problem::paged()): k_cache, v_cache
  // [pages, heads_kv, page_size, head_dim], block_table int32 [batch, pages
  // per sequence], seq_kv keys per sequence. By default the pages are
  // gathered into contiguous K/V, then forward(): inside the measured scope,
  // as a server without a paged kernel pays it. A variant with a paged kernel
  // overrides this and says so in reads_pages().
  virtual at::Tensor forward_paged(const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
                                   const at::Tensor& block_table, int64_t seq_kv);
  virtual bool reads_pages() const { return false; }
  // The forward of a variable-length batch (Problem::varlen()): q, k, v
  // padded to the longest sequence (zeros past each sequence's lengths) and
  // the same rows packed with their cu_seqlens. By default forward() on the
  // padded batch, the padding hidden by the variant's mask (hidden_keys_mask):
  // every padded score is computed, the waste a padded batch pays. A variant
  // with a variable-length kernel overrides this, returns packed rows [total_q,
  // Hq, D], and says so in reads_packed().
  virtual at::Tensor forward_varlen(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    const PackedBatch& packed);
  virtual bool reads_packed() const { return false; }
  // The forward of fp8 inputs (DType::FP8): q, k, v e4m3 [batch, heads, seq,
  // head_dim] and their per-(batch, head) descale factors; returns bf16. Only
  // a variant with an fp8 path overrides it; the others refuse fp8 problems
  // in supports() (variants/fp8.h says why, in PyTorch's words where PyTorch
  // refuses), and this default throws.
  virtual at::Tensor forward_fp8(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Fp8Scales& s);
  virtual Fp8Path fp8_path() const { return Fp8Path::none; }
  virtual std::vector<Fact> facts() const { return {}; }
  // How the variant holds memory, so a run can be skipped before it allocates
  // what the device does not have. Fused kernels: O(S) per head.
  virtual MemoryFamily memory_family() const { return MemoryFamily::fused; }
};

// What the CLI, sweeps and reports ask of a variant instead of its name.
enum class VariantTag : unsigned {
  baseline = 1u << 0,       // the reference the others' speed-up is measured against
  default_sweep = 1u << 1,  // in `attnprof sweep` when --variant is not given
  needs_sm90a = 1u << 2,    // Hopper-only kernels (built for sm_90a alone)
  multi_gpu = 1u << 3,      // runs across several GPUs
};
using VariantTags = unsigned;
constexpr VariantTags operator|(VariantTag a, VariantTag b) { return unsigned(a) | unsigned(b); }
constexpr VariantTags operator|(VariantTags a, VariantTag b) { return a | unsigned(b); }

using VariantFactory = std::unique_ptr<Variant> (*)();

struct VariantEntry {
  std::string name;
  VariantFactory make;
  VariantTags tags = 0;
  bool has(VariantTag t) const { return (tags & unsigned(t)) != 0; }
};

// In registration order, which is also the story order (slowest to fastest).
const std::vector<VariantEntry>& variant_registry();
std::vector<std::string> variant_names();
// The names carrying `tag`, in registry order.
std::vector<std::string> variants_tagged(VariantTag tag);
// nullptr if unknown.
const VariantEntry* find_variant(const std::string& name);

// Whether attnprof writes a file `name` in `rel_dir` of an output directory:
// the directory itself, a registered variant's folder (and its trace
// folders), compare/ or sweep/, and one of attnprof's own file names there
// (report::is_own_output). What io::OutputDir may clear dead temps for.
bool is_own_output_path(const std::string& rel_dir, const std::string& name);
std::unique_ptr<Variant> make_variant(const std::string& name);

}  // namespace attnprof
