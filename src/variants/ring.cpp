// ring-<inner>: context-parallel attention across the ranks of this run's
// process group (distributed/ring_attention.h), one variant per inner kernel.
// Every rank runs the variant on the same full inputs (one seed) and holds its
// own shard of each input set, cut once outside the measured forward, as a
// context-parallel model holds its sequence shard; forward() returns this
// rank's output shard [B, Hq, seq / world, D] in the layout's local order.
#include <ATen/ATen.h>
#include <c10/core/GradMode.h>

#include <memory>
#include <string>
#include <vector>

#include "attnprof/variant.h"
#include "distributed/inner.h"
#include "distributed/process_group.h"
#include "distributed/ring_attention.h"
#include "variants/factories.h"

namespace attnprof {
namespace {

class Ring final : public Variant {
 public:
  explicit Ring(const ring::InnerSpec& spec) : spec_(spec) {}

  std::string name() const override { return spec_.variant; }
  std::string description() const override {
    return std::string("ring attention across GPUs (context parallel): K/V shards passed round the ring with "
                       "NCCL send/recv while ") +
           spec_.inner_variant + " computes each block; partial outputs merged by log-sum-exp";
  }

  Support supports(const Problem& p) const override {
    ring::ProcessGroup* g = ring::current_group();
    if (!g)
      return Support::no(name() + " runs one process per GPU: start it with --nproc N (N >= 2 GPUs of this host) "
                                  "or under torchrun/Slurm (RANK, WORLD_SIZE, MASTER_ADDR, MASTER_PORT)");
    if (const std::string why = ring::ring_refusal(p, g->world_size()); !why.empty())
      return Support::no(name() + ": " + why);
    if (std::string(spec_.inner_variant) == "sdpa-flash" && p.heads_kv != p.heads_q)
      return Support::no(name() + ": aten::_scaled_dot_product_flash_attention takes as many key/value heads as "
                                  "query heads (no grouped-query attention)");
    // The inner must run the largest block a rank computes: its own shard, square.
    Problem block = p;
    block.seq_q = block.seq_kv = p.seq_q / g->world_size();
    const std::unique_ptr<Variant> inner = make_variant(spec_.inner_variant);
    if (!inner) return Support::no(name() + ": " + spec_.inner_variant + " is not in this build");
    if (const Support s = inner->supports(block); !s.ok) return Support::no(name() + " (inner " + spec_.inner_variant + "): " + s.reason);
    return Support::yes();
  }

  void prepare(const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    ring::ProcessGroup* g = ring::current_group();
    TORCH_CHECK(g, name(), ": no process group (supports() refuses this run)");
    layout_ = {g->world_size(), p.seq_q, p.causal()};
    rank_ = g->rank();
    backend_ = g->backend_name();
    exchange_ = g->ring_exchange();
    ring_ = std::make_unique<ring::RingAttention>(layout_, *exchange_, ring::block_attention(spec_.inner_variant),
                                                  p.softmax_scale());
    (void)shards_for(q, k, v);
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    return ring_->forward(shards_for(q, k, v));
  }

  std::vector<Fact> facts() const override {
    const int64_t c = layout_.chunk_len();
    std::string sharding =
        layout_.zigzag()
            ? "zigzag: " + std::to_string(2 * layout_.world) + " chunks of " + std::to_string(c) + ", rank " +
                  std::to_string(rank_) + " holds chunks " + std::to_string(layout_.chunks_of(rank_)[0]) + " and " +
                  std::to_string(layout_.chunks_of(rank_)[1])
            : "contiguous: rank " + std::to_string(rank_) + " holds rows " + std::to_string(rank_ * c) + ".." +
                  std::to_string((rank_ + 1) * c - 1);
    return {{"rank", std::to_string(rank_) + " of " + std::to_string(layout_.world)},
            {"sharding", sharding},
            {"transport", backend_ == "nccl" ? "NCCL send/recv in one group per ring step (ProcessGroupNCCL's stream)"
                                             : backend_ + " send/recv per ring step"},
            {"inner", std::string(spec_.inner_variant) + ": " + spec_.call}};
  }

 private:
  // The shards of one input set, cut on first sight. Inputs are compared by
  // identity; the runner's timing rotates at most 64 sets.
  const ring::Shards& shards_for(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    for (const Cached& c : cache_)
      if (c.q.is_same(q) && c.k.is_same(k) && c.v.is_same(v)) return c.shards;
    if (cache_.size() >= 65) cache_.erase(cache_.begin());
    c10::NoGradGuard no_grad;
    cache_.push_back({q, k, v, ring::cut_shards(layout_, rank_, q, k, v)});
    return cache_.back().shards;
  }

  struct Cached {
    at::Tensor q, k, v;
    ring::Shards shards;
  };
  const ring::InnerSpec& spec_;
  ring::Layout layout_;
  int rank_ = 0;
  std::string backend_;
  std::unique_ptr<ring::Exchange> exchange_;
  std::unique_ptr<ring::RingAttention> ring_;
  std::vector<Cached> cache_;
};

std::unique_ptr<Variant> make_ring(const char* ring_variant) {
  return std::make_unique<Ring>(*ring::find_inner(ring_variant));
}

}  // namespace

std::unique_ptr<Variant> make_ring_sdpa_flash() { return make_ring("ring-sdpa-flash"); }
std::unique_ptr<Variant> make_ring_custom_flash() { return make_ring("ring-custom-flash"); }
std::unique_ptr<Variant> make_ring_custom_flash_sm90() { return make_ring("ring-custom-flash-sm90"); }

}  // namespace attnprof
