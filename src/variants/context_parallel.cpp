#include "variants/context_parallel.h"

#include "distributed/process_group.h"

namespace attnprof::context_parallel {

std::string no_group_reason(const std::string& variant) {
  if (ring::current_group()) return "";
  return variant + " runs one process per GPU: start it with --nproc N (N >= 2 GPUs of this host) "
                   "or under torchrun/Slurm (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)";
}

Support inner_supports(const std::string& variant, const std::string& inner_variant, const Problem& full,
                       const Problem& part) {
  if (full.dtype == DType::FP8)
    return Support::no(variant + " has no fp8 path: its ranks exchange and merge bf16 or fp16 K/V shards and "
                                 "partial outputs");
  if (inner_variant == "sdpa-flash" && full.heads_kv != full.heads_q)
    return Support::no(variant + ": aten::_scaled_dot_product_flash_attention takes as many key/value heads as "
                                 "query heads (no grouped-query attention)");
  const std::unique_ptr<Variant> inner = make_variant(inner_variant);
  if (!inner) return Support::no(variant + ": " + inner_variant + " is not in this build");
  if (const Support s = inner->supports(part); !s.ok)
    return Support::no(variant + " (inner " + inner_variant + "): " + s.reason);
  return Support::yes();
}

}  // namespace attnprof::context_parallel
