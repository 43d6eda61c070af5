// One rank of the multi-process ring test (tests/test_ring.cpp starts the
// ranks with the launcher): joins the process group (gloo on CPU, NCCL on
// CUDA), runs ring attention over a shape matrix on fresh random inputs,
// gathers the output shards and compares the whole output with the float64
// reference: relative Frobenius error <= 2x that of the plain same-dtype
// formula (and <= 1e-2), every element finite. The registered ring-* variant
// is what runs (prepare, forward), except for the "math" inner, which has no
// variant and runs RingAttention directly. Rank 0 writes one line per case to
// --report and the process exits 1 when any case failed.
//
// With --scheme ulysses the ulysses-* variants run instead (the "math" inner:
// UlyssesAttention over the group's all-to-all directly).
//
//   ring_worker --device cpu|cuda [--scheme ring|ulysses] --inner math,sdpa-flash --report FILE
#include <ATen/ATen.h>
#include <fmt/format.h>

#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attnprof/io/files.h"
#include "attnprof/variant.h"
#include "distributed/inner.h"
#include "distributed/layout.h"
#include "distributed/process_group.h"
#include "distributed/ring_attention.h"
#include "distributed/ulysses.h"
#include "variants/torch_problem.h"

using namespace attnprof;

namespace {

struct Shape {
  int64_t b, hq, hkv, s, d;
};
// seq 200 gives zigzag chunks of 50 (not a tile multiple); 96 shards over 2,
// 3 and 4 ranks; head dims 64 and 128; grouped-query heads for the inners
// that take them; 12 and 24 heads split over 2, 3 and 4 ranks (Ulysses splits
// heads). A shape that does not shard over the world is skipped.
const Shape kShapes[] = {{1, 2, 2, 64, 64},  {2, 3, 3, 200, 64}, {1, 2, 2, 256, 128},
                         {1, 4, 2, 128, 64}, {1, 2, 2, 96, 64},  {1, 12, 12, 48, 64},
                         {2, 24, 12, 96, 64}, {1, 12, 12, 72, 128}};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= s.size()) {
    const size_t comma = std::min(s.find(',', start), s.size());
    if (comma > start) out.push_back(s.substr(start, comma - start));
    start = comma + 1;
  }
  return out;
}

// The textbook formula in the inputs' own dtype: the error a plain implementation makes.
at::Tensor plain_attention(const Problem& p, const Inputs& in) {
  at::Tensor scores =
      at::matmul(in.q, expand_kv_heads(in.k, p.heads_q).transpose(-2, -1)) * p.softmax_scale();
  if (const at::Tensor mask = hidden_keys_mask(p, scores.options()); mask.defined())
    scores = scores.masked_fill(mask, -std::numeric_limits<double>::infinity());
  return at::matmul(at::softmax(scores, -1), expand_kv_heads(in.v, p.heads_q));
}

}  // namespace

int main(int argc, char** argv) {
  std::string device_kind = "cpu", inners = "math", report, scheme = "ring";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--device") device_kind = argv[i + 1];
    else if (flag == "--inner") inners = argv[i + 1];
    else if (flag == "--report") report = argv[i + 1];
    else if (flag == "--scheme") scheme = argv[i + 1];
  }
  const auto env = ring::rank_env_from_process();
  if (!env) {
    std::fprintf(stderr, "ring_worker: no RANK/WORLD_SIZE: start it with a launcher\n");
    return 2;
  }
  const std::string device = device_kind == "cuda" ? "cuda:" + std::to_string(env->local_rank) : "cpu";
  try {
    ring::JoinOptions join;
    join.op_timeout = join.rendezvous_timeout = std::chrono::minutes(5);
    ring::set_current_group(ring::ProcessGroup::join(*env, device, join));
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ring_worker: %s\n", e.what());
    return 1;
  }
  ring::ProcessGroup& g = *ring::current_group();
  // A fresh seed each run, the same on every rank (rank 0's).
  const std::string seed_text = g.all_gather_strings("seed", std::to_string(std::random_device{}()))[0];
  const uint64_t seed = std::stoull(seed_text);
  const std::unique_ptr<ring::Exchange> exchange = g.ring_exchange();
  const std::vector<DType> dtypes =
      device_kind == "cuda" ? std::vector<DType>{DType::BF16, DType::FP16} : std::vector<DType>{DType::FP32, DType::BF16};

  std::string lines =
      fmt::format("seed {} world {} backend {} scheme {}\n", seed, g.world_size(), g.backend_name(), scheme);
  int failed = 0, ran = 0, case_index = 0;
  for (const std::string& inner : split(inners)) {
    for (DType dtype : dtypes) {
      for (const Shape& sh : kShapes) {
        for (bool causal : {true, false}) {
          Problem p;
          p.batch = sh.b, p.heads_q = sh.hq, p.heads_kv = sh.hkv, p.seq_q = p.seq_kv = sh.s, p.head_dim = sh.d;
          p.dtype = dtype;
          p.mask = causal ? Mask::causal_bottom_right : Mask::none;
          p.device = device;
          const std::string what = fmt::format("{} {} {}", inner, p.shape_string(), p.config_string());
          const bool head_parallel = scheme == "ulysses";
          if (const std::string uneven = head_parallel ? ulysses::refusal(p, g.world_size())
                                                 : ring::sharding_problem(p.seq_q, g.world_size(), causal);
              !uneven.empty()) {
            lines += fmt::format("skip {}: {}\n", what, uneven);
            continue;
          }
          std::unique_ptr<Variant> variant;
          if (inner != "math") {
            variant = make_variant(scheme + "-" + inner);
            const Support s = variant ? variant->supports(p) : Support::no("no variant " + scheme + "-" + inner);
            if (!s.ok) {
              lines += fmt::format("skip {}: {}\n", what, s.reason);
              continue;
            }
          }
          // Inputs drawn on the CPU from one seed: the same on every rank and device.
          at::manual_seed(seed + static_cast<uint64_t>(case_index++));
          const auto cpu = at::TensorOptions().dtype(scalar_type(dtype));
          Inputs in{at::randn({p.batch, p.heads_q, p.seq_q, p.head_dim}, cpu).to(device),
                    at::randn({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, cpu).to(device),
                    at::randn({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, cpu).to(device),
                    {}};
          // Ulysses shards contiguously: the ring's layout without zigzag.
          const ring::Layout layout{g.world_size(), p.seq_q, causal && !head_parallel};
          at::Tensor local;
          if (variant) {
            variant->prepare(p, in.q, in.k, in.v);
            local = variant->forward(in.q, in.k, in.v);
          } else if (head_parallel) {
            const int64_t l = p.seq_q / g.world_size(), first = g.rank() * l;
            ulysses::UlyssesAttention attention(
                g.world_size(), p.heads_q, p.heads_kv,
                [&g](const at::Tensor& send, at::Tensor& received) { g.all_to_all(send, received); },
                ring::block_attention("math"), causal, p.softmax_scale());
            local = attention.forward(in.q.narrow(2, first, l).contiguous(), in.k.narrow(2, first, l).contiguous(),
                                      in.v.narrow(2, first, l).contiguous());
          } else {
            ring::RingAttention attention(layout, *exchange, ring::block_attention("math"), p.softmax_scale());
            local = attention.forward(ring::cut_shards(layout, g.rank(), in.q, in.k, in.v));
          }
          const at::Tensor out = ring::unshard(layout, g.all_gather(local));
          const at::Tensor ref = reference_attention(p, in);
          const double err = relative_frobenius_error(out, ref);
          const double plain = relative_frobenius_error(plain_attention(p, in), ref);
          const bool finite = at::isfinite(out).all().item<bool>();
          // fp32: rounding alone separates the ring from the plain formula.
          const double bound = std::min(std::max(2.0 * plain, dtype == DType::FP32 ? 2e-6 : 0.0),
                                        dtype == DType::FP32 ? 1e-5 : 1e-2);
          const bool ok = finite && out.sizes() == in.q.sizes() && err <= bound;
          failed += !ok;
          ++ran;
          lines += fmt::format("{} {}: error {:.3g}, plain {:.3g}, bound {:.3g}{}\n", ok ? "ok  " : "FAIL", what, err,
                               plain, bound, finite ? "" : ", non-finite output");
        }
      }
    }
  }
  lines += fmt::format("{} cases, {} failed\n", ran, failed);
  if (g.rank() == 0 && !report.empty()) io::write_file_atomic(report, lines);
  g.leave();
  ring::set_current_group(nullptr);
  return failed || ran == 0 ? 1 : 0;
}
