// ulysses-<inner>: head-parallel context parallelism (distributed/ulysses.h)
// across the ranks of this run's process group, one variant per inner kernel.
// As for the ring, every rank runs the variant on the same full inputs (one
// seed) and holds its contiguous sequence shard of each input set, cut once
// outside the measured forward; forward() returns this rank's output shard
// [B, Hq, seq / world, D], rows rank * seq / world onwards.
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "attnprof/variant.h"
#include "distributed/inner.h"
#include "distributed/process_group.h"
#include "distributed/ulysses.h"
#include "variants/context_parallel.h"
#include "variants/factories.h"

namespace attnprof {
namespace {

class Ulysses final : public Variant {
 public:
  explicit Ulysses(const ring::InnerSpec& spec) : spec_(spec) {}

  std::string name() const override { return spec_.variant; }
  std::string description() const override {
    return std::string("Ulysses attention across GPUs (context parallel, heads split): an all-to-all turns sequence "
                       "shards into whole sequences of 1/N of the heads, ") +
           spec_.inner_variant + " computes them, the inverse all-to-all returns each rank's sequence shard";
  }

  Support supports(const Problem& p) const override {
    if (const std::string why = context_parallel::no_group_reason(name()); !why.empty()) return Support::no(why);
    const int world = ring::current_group()->world_size();
    if (const std::string why = ulysses::refusal(p, world); !why.empty()) return Support::no(name() + ": " + why);
    // The inner runs the whole sequence of 1/world of the heads.
    Problem part = p;
    part.heads_q = p.heads_q / world;
    part.heads_kv = p.heads_kv / world;
    return context_parallel::inner_supports(name(), spec_.inner_variant, p, part);
  }

  void prepare(const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    ring::ProcessGroup* g = ring::current_group();
    TORCH_CHECK(g, name(), ": no process group (supports() refuses this run)");
    world_ = g->world_size();
    rank_ = g->rank();
    backend_ = g->backend_name();
    local_ = p.seq_q / world_;
    heads_q_ = p.heads_q;
    heads_kv_ = p.heads_kv;
    attention_ = std::make_unique<ulysses::UlyssesAttention>(
        world_, p.heads_q, p.heads_kv, [g](const at::Tensor& send, at::Tensor& received) { g->all_to_all(send, received); },
        ring::block_attention(spec_.inner_variant), p.causal(), p.softmax_scale());
    (void)shards_for(q, k, v);
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    const Shard& s = shards_for(q, k, v);
    return attention_->forward(s.q, s.k, s.v);
  }

  std::vector<Fact> facts() const override {
    return {{"rank", std::to_string(rank_) + " of " + std::to_string(world_)},
            {"sharding", "contiguous: rank " + std::to_string(rank_) + " holds rows " + std::to_string(rank_ * local_) +
                             ".." + std::to_string((rank_ + 1) * local_ - 1) + "; computes query heads " +
                             std::to_string(rank_ * heads_q_ / world_) + ".." +
                             std::to_string((rank_ + 1) * heads_q_ / world_ - 1) + " (key/value heads " +
                             std::to_string(rank_ * heads_kv_ / world_) + ".." +
                             std::to_string((rank_ + 1) * heads_kv_ / world_ - 1) + ") over the whole sequence"},
            {"transport", backend_ + " all-to-all, twice per forward (q, k, v in one message; the output back)"},
            {"inner", std::string(spec_.inner_variant) + ": " + spec_.call}};
  }

 private:
  struct Shard {
    at::Tensor q, k, v;
  };
  const Shard& shards_for(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return cache_.get(q, k, v, [this](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      const int64_t first = rank_ * local_;
      return Shard{q.narrow(2, first, local_).contiguous(), k.narrow(2, first, local_).contiguous(),
                   v.narrow(2, first, local_).contiguous()};
    });
  }

  const ring::InnerSpec& spec_;
  int world_ = 1, rank_ = 0;
  int64_t local_ = 0, heads_q_ = 0, heads_kv_ = 0;
  std::string backend_;
  std::unique_ptr<ulysses::UlyssesAttention> attention_;
  context_parallel::PartCache<Shard> cache_;
};

std::unique_ptr<Variant> make_ulysses(const char* variant) {
  return std::make_unique<Ulysses>(*ring::find_inner(variant));
}

}  // namespace

std::unique_ptr<Variant> make_ulysses_sdpa_flash() { return make_ulysses("ulysses-sdpa-flash"); }
std::unique_ptr<Variant> make_ulysses_custom_flash() { return make_ulysses("ulysses-custom-flash"); }
std::unique_ptr<Variant> make_ulysses_custom_flash_sm90() { return make_ulysses("ulysses-custom-flash-sm90"); }

}  // namespace attnprof
