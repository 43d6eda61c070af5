#include "distributed/inner.h"

#include <ATen/ATen.h>

#include <stdexcept>
#include <tuple>

#include "distributed/process_group.h"
#include "distributed/ulysses.h"
#include "kernels/operators/signatures.h"

namespace attnprof::ring {

const std::vector<InnerSpec>& inner_specs() {
  static const char* kSdpaFlash =
      "aten::_scaled_dot_product_flash_attention (CPU: _scaled_dot_product_flash_attention_for_cpu), its logsumexp "
      "output";
  static const std::vector<InnerSpec> specs = {
      {"ring-sdpa-flash", "ring", "sdpa-flash", kSdpaFlash},
      {"ring-custom-flash", "ring", "custom-flash", "attnprof::flash_attention (out, lse)"},
      {"ring-custom-flash-sm90", "ring", "custom-flash-sm90", "attnprof::flash_attention_sm90 (out, lse)"},
      {"ulysses-sdpa-flash", "ulysses", "sdpa-flash", kSdpaFlash},
      {"ulysses-custom-flash", "ulysses", "custom-flash", "attnprof::flash_attention (out, lse)"},
      {"ulysses-custom-flash-sm90", "ulysses", "custom-flash-sm90", "attnprof::flash_attention_sm90 (out, lse)"},
  };
  return specs;
}

const InnerSpec* find_inner(const std::string& variant) {
  for (const InnerSpec& s : inner_specs())
    if (variant == s.variant) return &s;
  return nullptr;
}

std::string scheme_refusal(const std::string& variant, const Problem& p, int world) {
  const InnerSpec* spec = find_inner(variant);
  if (!spec) return "";
  return std::string(spec->scheme) == "ulysses" ? ulysses::refusal(p, world) : ring_refusal(p, world);
}

namespace {

// attnprof's flash operators, without a window: (q, k, v, causal, scale) -> (out, lse).
BlockAttention operator_block(const char* op) {
  auto handle = ops::flash_forward_op(op);
  return [handle](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal, double scale) {
    auto [out, lse] = handle.call(q, k, v, causal, scale);
    return BlockResult{out, lse};
  };
}

BlockResult sdpa_flash_block(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, bool causal,
                             double scale) {
  if (q.is_cuda()) {
    auto r = at::_scaled_dot_product_flash_attention(q, k, v, 0.0, causal, /*return_debug_mask=*/false, scale);
    return {std::get<0>(r), std::get<1>(r)};
  }
  auto [out, lse] = at::_scaled_dot_product_flash_attention_for_cpu(q, k, v, 0.0, causal, std::nullopt, scale);
  return {out, lse};
}

}  // namespace

BlockAttention block_attention(const std::string& inner_variant) {
  if (inner_variant == "custom-flash") return operator_block("attnprof::flash_attention");
  if (inner_variant == "custom-flash-sm90") return operator_block("attnprof::flash_attention_sm90");
  if (inner_variant == "sdpa-flash") return sdpa_flash_block;
  if (inner_variant == "math") return math_block;
  throw std::invalid_argument("ring: no block attention for '" + inner_variant + "'");
}

}  // namespace attnprof::ring
