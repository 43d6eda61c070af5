// ring-<inner>: context-parallel attention across the ranks of this run's
// process group (distributed/ring_attention.h), one variant per inner kernel.
// Every rank runs the variant on the same full inputs (one seed) and holds its
// own shard of each input set, cut once outside the measured forward, as a
// context-parallel model holds its sequence shard; forward() returns this
// rank's output shard [B, Hq, seq / world, D] in the layout's local order.
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "attnprof/variant.h"
#include "distributed/inner.h"
#include "distributed/process_group.h"
#include "distributed/ring_attention.h"
#include "variants/context_parallel.h"
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
    if (const std::string why = context_parallel::no_group_reason(name()); !why.empty()) return Support::no(why);
    const int world = ring::current_group()->world_size();
    if (const std::string why = ring::ring_refusal(p, world); !why.empty()) return Support::no(name() + ": " + why);
    // The inner must run the largest block a rank computes: its own shard, square.
    Problem block = p;
    block.seq_q = block.seq_kv = p.seq_q / world;
    return context_parallel::inner_supports(name(), spec_.inner_variant, p, block);
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
  const ring::Shards& shards_for(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
    return cache_.get(q, k, v, [this](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      return ring::cut_shards(layout_, rank_, q, k, v);
    });
  }

  const ring::InnerSpec& spec_;
  ring::Layout layout_;
  int rank_ = 0;
  std::string backend_;
  std::unique_ptr<ring::Exchange> exchange_;
  std::unique_ptr<ring::RingAttention> ring_;
  context_parallel::PartCache<ring::Shards> cache_;
};

std::unique_ptr<Variant> make_ring(const char* ring_variant) {
  return std::make_unique<Ring>(*ring::find_inner(ring_variant));
}

}  // namespace

std::unique_ptr<Variant> make_ring_sdpa_flash() { return make_ring("ring-sdpa-flash"); }
std::unique_ptr<Variant> make_ring_custom_flash() { return make_ring("ring-custom-flash"); }
std::unique_ptr<Variant> make_ring_custom_flash_sm90() { return make_ring("ring-custom-flash-sm90"); }

}  // namespace attnprof
