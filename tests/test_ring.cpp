// Ring attention: the sharding maps and block classification against brute
// force, the launcher variables, the log-sum-exp merge against full softmax,
// the ring loop in one process (every rank in turn, a local transport), the
// real loop across two processes (gloo on CPU; NCCL on two GPUs where there
// are two), and the CLI end to end (two CPU ranks, refusals, usage errors).
#include <ATen/ATen.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <limits>
#include <map>
#include <numeric>
#include <random>

#include "attnprof/device.h"
#include "attnprof/io/files.h"
#include "attnprof/variant.h"
#include "distributed/inner.h"
#include "distributed/launcher.h"
#include "distributed/layout.h"
#include "distributed/rank_env.h"
#include "distributed/ring_attention.h"
#include "distributed/ulysses.h"
#include "test_util.h"
#include "trace_test_util.h"
#include "variants/torch_problem.h"

using namespace attnprof;
using namespace attnprof::ring;
namespace tu = attnprof::testing;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- layout -----------------------------------------------------------------

TEST(RingLayout, ShardsArePermutationsOfTheSequence) {
  for (int world = 1; world <= 6; ++world) {
    for (bool causal : {true, false}) {
      SCOPED_TRACE("world " + std::to_string(world) + (causal ? " causal" : " full"));
      const Layout l{world, 2 * int64_t(world) * 7, causal};
      std::vector<int64_t> all;
      for (int r = 0; r < world; ++r) {
        const auto rows = l.global_rows(r);
        EXPECT_EQ(int64_t(rows.size()), l.local_len());
        all.insert(all.end(), rows.begin(), rows.end());
      }
      std::sort(all.begin(), all.end());
      std::vector<int64_t> expect(l.seq);
      std::iota(expect.begin(), expect.end(), 0);
      EXPECT_EQ(all, expect);
    }
  }
  const Layout z{4, 80, true};  // chunks of 10; rank 1 holds chunks 1 and 6
  EXPECT_EQ(z.chunks_of(1), (std::vector<int64_t>{1, 6}));
  EXPECT_EQ(z.global_row(1, 0), 10);
  EXPECT_EQ(z.global_row(1, 9), 19);
  EXPECT_EQ(z.global_row(1, 10), 60);
  EXPECT_EQ(z.global_row(3, 19), 49);
  EXPECT_EQ(z.source_at_step(0, 1), 3);
  EXPECT_EQ(z.source_at_step(2, 3), 3);
}

// Each (rank, source) block is what classify() says, checked against the
// global positions: which local queries see which of the shard's keys.
TEST(RingLayout, BlockKindsMatchBruteForceVisibilityAndBalanceWork) {
  for (int world = 1; world <= 6; ++world) {
    for (bool causal : {true, false}) {
      SCOPED_TRACE("world " + std::to_string(world) + (causal ? " causal" : " full"));
      const Layout l{world, 2 * int64_t(world) * 3, causal};
      const int64_t n = l.local_len(), c = l.chunk_len();
      int64_t all_pairs = 0;
      std::vector<int64_t> per_rank(world, 0);
      for (int r = 0; r < world; ++r) {
        const auto q = l.global_rows(r);
        for (int step = 0; step < world; ++step) {
          const int src = l.source_at_step(r, step);
          const auto k = l.global_rows(src);
          const BlockKind kind = l.classify(r, src);
          EXPECT_EQ(step == 0, src == r);
          for (int64_t i = 0; i < n; ++i) {
            for (int64_t j = 0; j < n; ++j) {
              const bool visible = !causal || k[j] <= q[i];
              bool claimed = false;
              switch (kind) {
                case BlockKind::causal_diagonal: claimed = j <= i; break;
                case BlockKind::full: claimed = true; break;
                case BlockKind::all_q_front_kv: claimed = j < c; break;
                case BlockKind::back_q_all_kv: claimed = i >= c; break;
              }
              ASSERT_EQ(claimed, visible) << "rank " << r << " source " << src << " " << block_kind_name(kind)
                                          << " local query " << i << " key " << j;
            }
          }
          per_rank[r] += block_pairs(l, kind);
        }
        all_pairs += per_rank[r];
      }
      // Every visible query-key pair is computed exactly once ...
      EXPECT_EQ(all_pairs, causal ? l.seq * (l.seq + 1) / 2 : l.seq * l.seq);
      // ... and zigzag gives every rank the same work (the diagonals' n/2 apart).
      const auto [lo, hi] = std::minmax_element(per_rank.begin(), per_rank.end());
      EXPECT_EQ(*lo, *hi);
    }
  }
  EXPECT_THROW(Layout({2, 8, true}).classify(2, 0), std::out_of_range);
}

TEST(RingLayout, UnevenSequencesAreRefusedWithTheReason) {
  EXPECT_EQ(sharding_problem(1024, 4, true), "");
  EXPECT_EQ(sharding_problem(1000, 4, false), "");
  EXPECT_EQ(sharding_problem(1000, 3, true), "seq 1000 is not a multiple of 2 x 3 = 6 (zigzag chunks for causal attention)");
  EXPECT_EQ(sharding_problem(1001, 2, false), "seq 1001 is not a multiple of 2 (one shard per rank)");
}

// ---- launcher variables -----------------------------------------------------

std::optional<RankEnv> env_of(const std::map<std::string, std::string>& vars) {
  return rank_env_from([&](const char* name) -> const char* {
    const auto it = vars.find(name);
    return it == vars.end() ? nullptr : it->second.c_str();
  });
}

TEST(RingEnv, ReadsTorchrunAndSlurmVariables) {
  EXPECT_FALSE(env_of({}).has_value());
  EXPECT_FALSE(env_of({{"SLURM_PROCID", "0"}}).has_value()) << "Slurm alone, without a rendezvous address";
  const auto t = env_of({{"RANK", "3"}, {"WORLD_SIZE", "8"}, {"LOCAL_RANK", "1"}, {"MASTER_ADDR", "node7"},
                         {"MASTER_PORT", "29500"}, {"TORCHELASTIC_USE_AGENT_STORE", "True"},
                         {"TORCHELASTIC_RESTART_COUNT", "2"}});
  ASSERT_TRUE(t.has_value());
  EXPECT_EQ(t->rank, 3);
  EXPECT_EQ(t->world_size, 8);
  EXPECT_EQ(t->local_rank, 1);
  EXPECT_EQ(t->master_addr, "node7");
  EXPECT_EQ(t->master_port, 29500);
  EXPECT_TRUE(t->agent_store);
  EXPECT_EQ(t->restart_count, 2);
  const auto s = env_of({{"SLURM_PROCID", "5"}, {"SLURM_NTASKS", "6"}, {"SLURM_LOCALID", "1"},
                         {"MASTER_ADDR", "10.0.0.1"}, {"MASTER_PORT", "1234"}});
  ASSERT_TRUE(s.has_value());
  EXPECT_EQ(s->rank, 5);
  EXPECT_EQ(s->local_rank, 1);
  EXPECT_EQ(s->launcher, "Slurm");
  EXPECT_FALSE(s->agent_store);
}

TEST(RingEnv, MalformedVariablesSayWhich) {
  const std::map<std::string, std::string> ok = {
      {"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29500"}};
  const std::vector<std::pair<std::map<std::string, std::string>, std::string>> cases = {
      {{{"RANK", "0"}}, "RANK is set but WORLD_SIZE is not"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "x"}}, "MASTER_PORT is not"},
      {{{"RANK", "two"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "x"}, {"MASTER_PORT", "1"}}, "RANK='two' is not an integer"},
      {{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "x"}, {"MASTER_PORT", "1"}}, "RANK=2 is out of range (0 to 1)"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "x"}, {"MASTER_PORT", "70000"}}, "MASTER_PORT=70000"},
      {{{"RANK", "0"}, {"WORLD_SIZE", "0"}, {"MASTER_ADDR", "x"}, {"MASTER_PORT", "1"}}, "WORLD_SIZE=0"},
  };
  EXPECT_NO_THROW(env_of(ok));
  for (const auto& [vars, message] : cases) {
    try {
      env_of(vars);
      ADD_FAILURE() << "accepted: " << message;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(message), std::string::npos) << e.what();
    }
  }
}

// ---- merge ------------------------------------------------------------------

// Attention of q over the keys of `cols` only, through math_block.
BlockResult block_over(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& cols,
                       double scale) {
  return math_block(q, k.index_select(2, cols), v.index_select(2, cols), false, scale);
}

TEST(RingMerge, PartialsMergedInAnyOrderEqualFullSoftmax) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  at::manual_seed(seed);
  std::mt19937 rng(seed);
  const double scale = 0.3;
  // Scores spread wide (x4): a naive exp would overflow fp32 where the merge must not.
  const at::Tensor q = at::randn({2, 3, 17, 16}, at::kDouble) * 4, k = at::randn({2, 3, 40, 16}, at::kDouble) * 4,
                   v = at::randn({2, 3, 40, 16}, at::kDouble);
  const at::Tensor ref = at::matmul(at::softmax(at::matmul(q, k.transpose(-2, -1)) * scale, -1), v);
  for (int blocks : {2, 3, 5}) {
    std::vector<int64_t> perm(40);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), rng);  // blocks of arbitrary keys, in arbitrary order
    std::vector<at::Tensor> parts;
    for (int b = 0; b < blocks; ++b) {
      std::vector<int64_t> cols(perm.begin() + b * 40 / blocks, perm.begin() + (b + 1) * 40 / blocks);
      parts.push_back(at::tensor(cols, at::kLong));
    }
    for (at::ScalarType acc : {at::kFloat, at::kDouble}) {
      BlockResult first = block_over(q.to(acc), k.to(acc), v.to(acc), parts[0], scale);
      at::Tensor out = first.out, lse = first.lse;
      for (int b = 1; b < blocks; ++b) {
        const BlockResult r = block_over(q.to(acc), k.to(acc), v.to(acc), parts[b], scale);
        merge_block(out, lse, r.out, r.lse);
      }
      const double err = relative_frobenius_error(out, ref);
      EXPECT_LT(err, acc == at::kDouble ? 1e-12 : 2e-6) << blocks << " blocks";
      const at::Tensor ref_lse = at::logsumexp(at::matmul(q, k.transpose(-2, -1)) * scale, -1);
      EXPECT_LT(relative_frobenius_error(lse, ref_lse), acc == at::kDouble ? 1e-12 : 1e-6);
    }
  }
}

TEST(RingMerge, RowViewsAndQueriesThatSawNothing) {
  at::manual_seed(7);
  at::Tensor out = at::randn({1, 2, 6, 4}), lse = at::randn({1, 2, 6});
  const at::Tensor out0 = out.clone(), lse0 = lse.clone();
  // Merge into rows 2..5 only; rows 0..1 must not move.
  const at::Tensor b_out = at::randn({1, 2, 4, 4}), b_lse = at::randn({1, 2, 4});
  merge_block(out.narrow(2, 2, 4), lse.narrow(2, 2, 4), b_out, b_lse);
  EXPECT_TRUE(at::equal(out.narrow(2, 0, 2), out0.narrow(2, 0, 2)));
  const at::Tensor w = at::sigmoid(b_lse - lse0.narrow(2, 2, 4)).unsqueeze(-1);
  EXPECT_TRUE(at::allclose(out.narrow(2, 2, 4), out0.narrow(2, 2, 4) * (1 - w) + b_out * w, 1e-6, 1e-6));
  EXPECT_TRUE(at::allclose(lse.narrow(2, 2, 4), at::logaddexp(lse0.narrow(2, 2, 4), b_lse)));

  // A side that saw no key (lse -inf, output 0) contributes nothing; both: zeros, -inf.
  at::Tensor o = at::zeros({1, 1, 3, 2}), l = at::full({1, 1, 3}, -kInf);
  const at::Tensor seen = at::ones({1, 1, 3, 2}) * 5;
  at::Tensor seen_lse = at::zeros({1, 1, 3});
  seen_lse[0][0][2] = -kInf;
  merge_block(o, l, seen * at::tensor({1.0f, 1.0f, 0.0f}).view({1, 1, 3, 1}), seen_lse);
  EXPECT_TRUE(at::isfinite(o).all().item<bool>());
  EXPECT_TRUE(at::equal(o[0][0][0], seen[0][0][0]));
  EXPECT_TRUE(at::equal(o[0][0][2], at::zeros({2})));
  EXPECT_EQ(l[0][0][2].item<float>(), -std::numeric_limits<float>::infinity());
  merge_block(o, l, at::zeros({1, 1, 3, 2}), at::full({1, 1, 3}, -kInf));  // a block that hides every key
  EXPECT_TRUE(at::equal(o[0][0][0], seen[0][0][0]));
}

// ---- the ring loop in one process ---------------------------------------------

// Every rank's shard is here; a step "receives" the shard its previous rank held.
class LocalExchange final : public Exchange {
 public:
  LocalExchange(int rank, const Layout& l, const std::vector<Shards>& all) : rank_(rank), l_(l), all_(all) {}
  int rank() const override { return rank_; }
  int world() const override { return l_.world; }
  std::function<void()> start(const at::Tensor& send, const at::Tensor& recv, int step) override {
    if (step == 0) EXPECT_TRUE(send.is_same(all_[rank_].kv)) << "step 0 sends the own shard";
    recv.copy_(all_[l_.source_at_step(rank_, step + 1)].kv);
    return [] {};
  }

 private:
  int rank_;
  Layout l_;
  const std::vector<Shards>& all_;
};

double plain_error(const Problem& p, const Inputs& in, const at::Tensor& ref) {
  at::Tensor s = at::matmul(in.q, expand_kv_heads(in.k, p.heads_q).transpose(-2, -1)) * p.softmax_scale();
  if (const at::Tensor m = hidden_keys_mask(p, s.options()); m.defined()) s = s.masked_fill(m, -kInf);
  return relative_frobenius_error(at::matmul(at::softmax(s, -1), expand_kv_heads(in.v, p.heads_q)), ref);
}

TEST(RingAttention, OneProcessRingMatchesTheFloat64Reference) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  at::manual_seed(seed);
  int ran = 0;
  for (const char* inner : {"math", "sdpa-flash"}) {
    for (DType dtype : {DType::FP32, DType::BF16}) {
      for (int world : {1, 2, 3, 4}) {
        for (bool causal : {true, false}) {
          Problem p;
          p.batch = 2, p.heads_q = 4, p.heads_kv = std::string(inner) == "math" ? 2 : 4;
          p.seq_q = p.seq_kv = 24 * world, p.head_dim = 32, p.dtype = dtype;
          p.mask = causal ? Mask::causal_bottom_right : Mask::none;
          SCOPED_TRACE(std::string(inner) + " world " + std::to_string(world) + " " + p.shape_string() + " " +
                       p.config_string());
          const Inputs in = random_inputs(p);
          const Layout l{world, p.seq_q, causal};
          std::vector<Shards> shards;
          for (int r = 0; r < world; ++r) shards.push_back(cut_shards(l, r, in.q, in.k, in.v));
          std::vector<at::Tensor> outs;
          for (int r = 0; r < world; ++r) {
            LocalExchange ex(r, l, shards);
            RingAttention ring(l, ex, block_attention(inner), p.softmax_scale());
            outs.push_back(ring.forward(shards[r]));
            EXPECT_TRUE(at::equal(outs.back(), ring.forward(shards[r]))) << "a second forward gives the same";
          }
          const at::Tensor out = unshard(l, outs);
          ASSERT_EQ(out.sizes(), in.q.sizes());
          ASSERT_EQ(out.scalar_type(), in.q.scalar_type());
          ASSERT_TRUE(at::isfinite(out).all().item<bool>());
          const at::Tensor ref = reference_attention(p, in);
          const double err = relative_frobenius_error(out, ref), plain = plain_error(p, in, ref);
          EXPECT_LE(err, std::max(2 * plain, dtype == DType::FP32 ? 2e-6 : 0.0)) << "plain " << plain;
          EXPECT_LE(err, dtype == DType::FP32 ? 1e-5 : 1e-2);
          ++ran;
        }
      }
    }
  }
  EXPECT_EQ(ran, 32);
}

// Ulysses in one process: each rank's messages built with the same packing
// the variant uses, the all-to-all done by hand (rank r receives part r of
// every rank's message, in rank order), the inner run per rank.
TEST(Ulysses, OneProcessAllToAllsMatchTheFloat64Reference) {
  const uint64_t seed = std::random_device{}();
  SCOPED_TRACE("seed " + std::to_string(seed));
  at::manual_seed(seed);
  auto exchange = [](const std::vector<at::Tensor>& sends, int r) {
    std::vector<at::Tensor> parts;
    for (const at::Tensor& s : sends) parts.push_back(s[r]);
    return at::stack(parts);
  };
  int ran = 0;
  for (DType dtype : {DType::FP32, DType::BF16}) {
    for (int world : {1, 2, 3, 4}) {
      for (bool causal : {true, false}) {
        for (int64_t heads_kv : {12, 6}) {  // 24 query heads: groups of 2 and 4
          if (heads_kv % world) continue;
          Problem p;
          p.batch = 2, p.heads_q = 24, p.heads_kv = heads_kv, p.seq_q = p.seq_kv = 12 * world, p.head_dim = 32;
          p.dtype = dtype;
          p.mask = causal ? Mask::causal_bottom_right : Mask::none;
          SCOPED_TRACE("world " + std::to_string(world) + " " + p.shape_string() + " " + p.config_string());
          const Inputs in = random_inputs(p);
          const int64_t l = p.seq_q / world;
          std::vector<at::Tensor> sends;
          for (int r = 0; r < world; ++r)
            sends.push_back(ulysses::pack_heads(in.q.narrow(2, r * l, l), in.k.narrow(2, r * l, l),
                                                in.v.narrow(2, r * l, l), world));
          std::vector<at::Tensor> out_sends;
          for (int r = 0; r < world; ++r) {
            const ulysses::HeadShard h = ulysses::unpack_heads(exchange(sends, r), p.heads_q, p.heads_kv, world);
            ASSERT_EQ(h.q.size(1), p.heads_q / world);
            ASSERT_EQ(h.k.size(2), p.seq_q);
            // Rank r's heads over the whole sequence are the inputs' heads r Hq/W onwards.
            EXPECT_TRUE(at::equal(h.q, in.q.narrow(1, r * p.heads_q / world, p.heads_q / world)));
            EXPECT_TRUE(at::equal(h.v, in.v.narrow(1, r * p.heads_kv / world, p.heads_kv / world)));
            const BlockResult b = math_block(h.q.contiguous(), h.k.contiguous(), h.v.contiguous(), causal,
                                             p.softmax_scale());
            out_sends.push_back(ulysses::pack_sequence(b.out, world));
          }
          std::vector<at::Tensor> locals;
          for (int r = 0; r < world; ++r) locals.push_back(ulysses::unpack_sequence(exchange(out_sends, r)));
          const at::Tensor out = at::cat(locals, 2);
          ASSERT_EQ(out.sizes(), in.q.sizes());
          const at::Tensor ref = reference_attention(p, in);
          const double err = relative_frobenius_error(out, ref), plain = plain_error(p, in, ref);
          EXPECT_LE(err, std::max(2 * plain, dtype == DType::FP32 ? 2e-6 : 0.0)) << "plain " << plain;
          ++ran;
        }
      }
    }
  }
  EXPECT_EQ(ran, 28);
}

TEST(Ulysses, RefusalsNameTheNumbers) {
  Problem p;
  p.batch = 1, p.heads_q = 16, p.heads_kv = 2, p.seq_q = p.seq_kv = 96, p.head_dim = 64;
  p.device = "cpu";
  EXPECT_EQ(ulysses::refusal(p, 2), "");
  EXPECT_NE(ulysses::refusal(p, 4).find("heads_kv 2 is not a multiple of the 4 ranks"), std::string::npos);
  p.heads_kv = 16;
  EXPECT_NE(ulysses::refusal(p, 3).find("heads 16 is not a multiple of the 3 ranks"), std::string::npos);
  p.seq_q = p.seq_kv = 98;
  EXPECT_NE(ulysses::refusal(p, 4).find("seq 98 is not a multiple of the 4 ranks"), std::string::npos);
  p.seq_q = p.seq_kv = 96;
  EXPECT_NE(ulysses::refusal(p, 1).find("needs at least 2 ranks, got 1"), std::string::npos);
  p.pass = Pass::bwd;
  EXPECT_NE(ulysses::refusal(p, 2).find("forward only"), std::string::npos);
  EXPECT_THROW(ulysses::UlyssesAttention(3, 16, 16, nullptr, math_block, true, 1.0), std::invalid_argument);
}

TEST(RingAttention, UnshardInvertsCutShards) {
  for (bool causal : {true, false}) {
    const Layout l{3, 18, causal};
    const at::Tensor x = at::arange(2 * 18 * 4, at::kFloat).view({1, 2, 18, 4});
    std::vector<at::Tensor> qs;
    for (int r = 0; r < 3; ++r) qs.push_back(cut_shards(l, r, x, x.narrow(1, 0, 1), x.narrow(1, 0, 1)).q);
    EXPECT_TRUE(at::equal(unshard(l, qs), x));
    EXPECT_THROW(unshard(l, {qs[0]}), std::invalid_argument);
  }
}

// ---- the real loop across processes -------------------------------------------

// Runs `nproc` ring_worker ranks; returns the rank-0 report, or fails.
std::string run_workers(int nproc, const std::string& device, const std::string& inners,
                        const std::string& scheme = "ring") {
  const std::string dir = tu::make_temp_dir("ring_worker");
  const std::string report = dir + "/report.txt";
  LaunchSpec s;
  s.exe = ATTNPROF_RING_WORKER;
  s.argv = {"ring_worker", "--device", device, "--scheme", scheme, "--inner", inners, "--report", report};
  s.nproc = nproc;
  s.env = {{"NCCL_NVLS_ENABLE", "0"}, {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"}, {"NVSHMEM_DISABLE_NVLS", "1"}};
  const LaunchResult r = launch_ranks(s);
  const std::string text = tu::path_exists(report) ? io::read_file(report) : "(no report)";
  std::cout << text;
  for (const RankOutcome& o : r.ranks)
    EXPECT_TRUE(o.ok()) << "rank " << o.rank << ": " << o.how() << ": " << o.last_line;
  tu::remove_tree(dir);
  return text;
}

TEST(RingGloo, TwoCpuProcessesMatchTheReference) {
  const std::string report = run_workers(2, "cpu", "math,sdpa-flash");
  EXPECT_NE(report.find("backend gloo"), std::string::npos);
  EXPECT_NE(report.find(" 0 failed"), std::string::npos);
  EXPECT_EQ(report.find("FAIL"), std::string::npos);
}

// Cases that ran (not skipped for sharding) in a worker report.
int cases_run(const std::string& report) {
  const size_t at = report.rfind(" cases, ");
  if (at == std::string::npos) return 0;
  const size_t start = report.rfind('\n', at);
  return std::stoi(report.substr(start == std::string::npos ? 0 : start + 1, at));
}

TEST(RingGloo, ThreeAndFourCpuProcessesMatchTheReference) {
  for (int nproc : {3, 4}) {
    SCOPED_TRACE(std::to_string(nproc) + " ranks");
    const std::string report = run_workers(nproc, "cpu", "math");
    EXPECT_NE(report.find("world " + std::to_string(nproc) + " backend gloo"), std::string::npos);
    EXPECT_GE(cases_run(report), 8);
    EXPECT_NE(report.find(" 0 failed"), std::string::npos);
    EXPECT_EQ(report.find("FAIL"), std::string::npos);
  }
}

TEST(UlyssesGloo, TwoThreeAndFourCpuProcessesMatchTheReference) {
  for (int nproc : {2, 3, 4}) {
    SCOPED_TRACE(std::to_string(nproc) + " ranks");
    const std::string report = run_workers(nproc, "cpu", nproc == 2 ? "math,sdpa-flash" : "math", "ulysses");
    EXPECT_NE(report.find("backend gloo scheme ulysses"), std::string::npos);
    // 12- and 24-head shapes split over 2, 3 and 4 ranks, causal and not, two dtypes.
    EXPECT_GE(cases_run(report), 12);
    EXPECT_NE(report.find(" 0 failed"), std::string::npos);
    EXPECT_EQ(report.find("FAIL"), std::string::npos);
  }
}

TEST(RingNccl, TwoGpusMatchTheReference) {
  if (cuda_device_count() < 2)
    GTEST_SKIP() << "needs 2 CUDA devices (this machine has " << cuda_device_count()
                 << "): the NCCL ring runs on the two-GPU host";
  const std::string report = run_workers(2, "cuda", "custom-flash,sdpa-flash,custom-flash-sm90");
  EXPECT_NE(report.find("backend nccl"), std::string::npos);
  EXPECT_NE(report.find("ok   custom-flash"), std::string::npos) << "custom-flash must run on the GPUs";
  EXPECT_NE(report.find("ok   sdpa-flash"), std::string::npos);
  EXPECT_EQ(report.find("FAIL"), std::string::npos);
}

// ---- the CLI ------------------------------------------------------------------

TEST(RingCli, TwoCpuRanksWriteRankFilesAndTheRingTable) {
  const std::string d = tu::make_temp_dir("ring_cli");
  // `all` with --nproc: the multi-GPU variants only; the CUDA-only ones are
  // skipped on every rank with their reason, ring-sdpa-flash runs.
  const auto r = tu::run_cli("--variant all --nproc 2 --device cpu --batch 1 --heads 2 --seq 128 --head-dim 32 "
                                  "--warmup-iters 1 --wait 0 --warmup 1 --active 2 --timing-iters 1 --out " + d);
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.err.find("skipped ring-custom-flash: "), std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("naive"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("Ring, rank by rank: ring-sdpa-flash | 1x2x128x32 bf16 causal | 2 ranks"), std::string::npos)
      << r.out;
  const std::string stem = d + "/ring-sdpa-flash/1_2_128_32_bf16_causal";
  for (int rank = 0; rank < 2; ++rank) {
    const std::string k = ".rank" + std::to_string(rank);
    // The ranks' traces share one folder, which HTA reads as one two-rank job.
    const nlohmann::json trace = tu::load_json(stem + "/1_2_128_32_bf16_causal" + k + ".pt.trace.json.gz");
    EXPECT_EQ(trace.at("distributedInfo").at("rank"), rank);
    EXPECT_EQ(trace.at("distributedInfo").at("world_size"), 2);
    EXPECT_EQ(trace.at("distributedInfo").at("backend"), "gloo");
    bool step1 = false;
    for (const auto& e : trace.at("traceEvents")) step1 = step1 || e.value("name", "") == "ring_step_1";
    EXPECT_TRUE(step1) << "the ring steps are user scopes";
    const nlohmann::json summary = tu::load_json(stem + k + ".summary.json");
    EXPECT_EQ(summary.at("facts").at("rank"), std::to_string(rank) + " of 2");
    EXPECT_TRUE(tu::path_exists(stem + k + ".txt"));
  }
  const nlohmann::json ring = tu::load_json(stem + ".ring.summary.json");
  EXPECT_EQ(ring.at("world_size"), 2);
  ASSERT_EQ(ring.at("ranks").size(), 2u);
  EXPECT_GT(ring.at("ranks")[1].at("forward_us").get<double>(), 0);
  EXPECT_GT(ring.at("single_gpu_us").get<double>(), 0) << "rank 0 ran sdpa-flash on the full sequence";
  EXPECT_TRUE(tu::path_exists(d + "/sdpa-flash/1_2_128_32_bf16_causal.summary.json"));
  // Ulysses ran beside it (2 heads over 2 ranks): its all-to-alls are user
  // scopes, and the two schemes share one side-by-side table.
  const nlohmann::json u = tu::load_json(d + "/ulysses-sdpa-flash/1_2_128_32_bf16_causal/1_2_128_32_bf16_causal.rank1.pt.trace.json.gz");
  bool a2a = false;
  for (const auto& e : u.at("traceEvents")) a2a = a2a || e.value("name", "") == "ulysses_a2a_qkv";
  EXPECT_TRUE(a2a);
  EXPECT_NE(r.out.find("Ulysses, rank by rank: ulysses-sdpa-flash"), std::string::npos) << r.out;
  const nlohmann::json side = tu::load_json(d + "/compare/1_2_128_32_bf16_causal.context_parallel.json");
  ASSERT_EQ(side.size(), 2u) << side.dump();
  EXPECT_EQ(side[0].at("variant"), "ring-sdpa-flash");
  EXPECT_EQ(side[0].at("scheme"), "ring");
  EXPECT_EQ(side[1].at("scheme"), "ulysses");
  EXPECT_GT(side[1].at("forward_us").get<double>(), 0);
  EXPECT_NE(r.out.find("Context parallel, side by side:"), std::string::npos) << r.out;
  tu::remove_tree(d);
}

// A stop signal in the middle of a multi-rank run: one line at most, no temp
// left behind, also when the launcher has to kill a rank that did not stop.
TEST(RingCli, AStopSignalMidRunLeavesNoTempsAndAtMostOneLine) {
  for (const char* variant : {"ring-sdpa-flash", "ulysses-sdpa-flash"}) {
    SCOPED_TRACE(variant);
    const std::string d = tu::make_temp_dir("ring_stop");
    // `timeout` sends SIGTERM to the launcher after 6 s, long before the timing ends.
    const auto r = tu::run_cli(std::string("--variant ") + variant + " --nproc 2 --device cpu --batch 1 --heads 4 "
                                   "--seq 512 --head-dim 64 --timing-iters 100000 --quiet --out " + d, 6);
    EXPECT_EQ(r.rc, 124) << "ended by the signal: " << r.err;
    EXPECT_LE(tu::count_lines(r.err), 1) << r.err;
    EXPECT_NE(r.err.find("SIGTERM"), std::string::npos) << r.err;
    for (const std::string& f : tu::list_tree(d)) EXPECT_EQ(f.find(".tmp."), std::string::npos) << f;
    tu::remove_tree(d);
  }
}

// Auto iteration counts are fixed in a ring run (every step is a collective:
// counts each rank sized from its own step times differed under load and one
// rank waited forever), --quiet holds for `all`, and the launcher holds the
// output directory's lock for its ranks.
TEST(RingCli, AutoCountsAreTheSameOnEveryRankAndTheOutputIsLocked) {
  const std::string d = tu::make_temp_dir("ring_auto");
  const std::string run = "--variant all --nproc 2 --device cpu --batch 1 --heads 2 --seq 64 --head-dim 32 --quiet --out " + d;
  auto r = tu::run_cli(run, 120);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_EQ(r.err.find("[1/"), std::string::npos) << "--quiet: no headers\n" << r.err;
  for (int rank = 0; rank < 2; ++rank) {
    const nlohmann::json s =
        tu::load_json(d + "/ring-sdpa-flash/1_2_64_32_bf16_causal.rank" + std::to_string(rank) + ".summary.json");
    EXPECT_EQ(s.at("schedule").at("warmup_iters"), 3) << rank;
    EXPECT_EQ(s.at("timing").at("reps").get<int>() * s.at("timing").at("iters_per_rep").get<int>(), 3) << rank;
  }
  {
    attnprof::io::DirLock held(d);  // another run holds --out
    r = tu::run_cli(run, 120);
    EXPECT_EQ(r.rc, 6) << r.err;
    EXPECT_NE(r.err.find("is in use by another attnprof run"), std::string::npos) << r.err;
    EXPECT_EQ(tu::count_lines(r.err), 1) << r.err;
  }
  tu::remove_tree(d);
}

TEST(RingCli, RefusalsAndUsageErrorsAreOneLine) {
  const std::string d = tu::make_temp_dir("ring_cli_err");
  const std::string base = "--batch 1 --heads 2 --head-dim 32 --out " + d + " --device ";
  std::string multi_gpu_list;  // every multi-GPU variant of the registry, in its order
  for (const std::string& n : variants_tagged(VariantTag::multi_gpu))
    multi_gpu_list += (multi_gpu_list.empty() ? "" : ", ") + n;
  struct Case {
    std::string args;
    int rc;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"cpu --variant ring-sdpa-flash --seq 128", 3, "start it with --nproc N"},
      {"cpu --variant ring-sdpa-flash --nproc 1 --seq 128", 3, "needs at least 2 ranks, got 1"},
      {"cpu --variant ring-sdpa-flash --nproc 2 --seq 130", 3, "seq 130 is not a multiple of 2 x 2 = 4"},
      {"cpu --variant ring-sdpa-flash --nproc 2 --seq 128 --pass bwd", 3, "forward only"},
      {"cpu --variant all --nproc 1 --seq 128", 3, multi_gpu_list + " cannot run here"},
      {"cpu --variant ring-custom-flash --nproc 2 --seq 128", 3, "ring-custom-flash (inner custom-flash): "},
      {"cpu --variant ulysses-sdpa-flash --nproc 3 --seq 96", 3,
       "ulysses-sdpa-flash cannot run here: heads 2 is not a multiple of the 3 ranks"},
      {"cpu --variant ulysses-sdpa-flash --nproc 1 --seq 96", 3, "needs at least 2 ranks, got 1"},
      {"cpu --variant ulysses-sdpa-flash --nproc 2 --seq 96 --pass bwd", 3, "forward only"},
      {"cpu --variant ulysses-sdpa-flash --nproc 2 --seq-q 32 --seq-kv 64", 3,
       "ulysses-sdpa-flash cannot run here: Ulysses attention shards one sequence"},
      // Each scheme refuses for its own reason, each named with its variant.
      {"cpu --variant ring-sdpa-flash,ulysses-sdpa-flash --nproc 2 --seq 129", 3,
       "ring-sdpa-flash: seq 129 is not a multiple of 2 x 2 = 4 (zigzag chunks for causal attention); "
       "ulysses-sdpa-flash: seq 129 is not a multiple of the 2 ranks"},
      {"cpu --variant naive --nproc 2 --seq 128", 2, "naive runs on one GPU: run it without --nproc"},
      {"cpu --variant ring-sdpa-flash --nproc 0 --seq 128", 2, "--nproc must be 1 to 1024, got 0"},
      {"cuda:1 --variant ring-sdpa-flash --nproc 2 --seq 128", 2, "each rank its own GPU"},
      {"cpu --variant ring-sdpa-flash --seq 128 --nproc 3 ; RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT=1", 2,
       "--nproc 3 disagrees with the launcher's world size 2"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    std::string args = base + c.args;
    const size_t semi = args.find(" ; ");
    const std::string env = semi == std::string::npos ? "" : args.substr(semi + 3) + " ";
    if (semi != std::string::npos) args = args.substr(0, semi);
    const auto r = tu::run_cli(args, env);
    EXPECT_EQ(r.rc, c.rc) << r.err;
    EXPECT_NE(r.err.find(c.message), std::string::npos) << r.err;
    EXPECT_EQ(tu::count_lines(r.err), 1) << r.err;
  }
  {
    // The launcher holds no variant to the ring's sharding: Ulysses splits heads, so seq 130 over 2 ranks runs.
    const auto r = tu::run_cli(base + "cpu --variant ulysses-sdpa-flash --nproc 2 --seq 130 --warmup-iters 1 --wait 0 "
                                      "--warmup 1 --active 1 --timing-iters 1");
    EXPECT_EQ(r.rc, 0) << r.err;
  }
  if (cuda_device_count() >= 1) {
    // A sequence that shards over the ranks asked for (2N zigzag chunks), so
    // the GPU count is what refuses it (on the 2-GPU host seq 128 over 3 ranks
    // was refused for its sharding first).
    const int n = cuda_device_count() + 1;
    const auto r = tu::run_cli("--variant ring-custom-flash --device cuda --seq " +
                               std::to_string(128 * n) + " --nproc " + std::to_string(n) + " --out " + d);
    EXPECT_EQ(r.rc, 3) << r.err;
    EXPECT_NE(r.err.find("GPUs; this host has " + std::to_string(cuda_device_count())), std::string::npos) << r.err;
  }
  tu::remove_tree(d);
}


// ---- the rendezvous: every way a launcher-started rank can wait ends --------

// One rank, started as a launcher would (RANK, WORLD_SIZE, MASTER_*), stderr on a pipe.
struct LoneRank {
  pid_t pid = -1;
  int err_fd = -1;
  std::string out_dir;
  std::string err;
  int status = 0;
  double seconds = 0;  // start to end
};

LoneRank start_rank(const std::vector<std::string>& env, const std::string& extra = "") {
  int fds[2];
  if (::pipe(fds) != 0) return {};
  LoneRank r;
  r.out_dir = tu::make_temp_dir("rendezvous");
  r.pid = ::fork();
  if (r.pid == 0) {
    ::dup2(fds[1], STDERR_FILENO);
    const int null = ::open("/dev/null", O_RDWR);
    ::dup2(null, STDOUT_FILENO);
    ::dup2(null, STDIN_FILENO);
    ::close(fds[0]);
    for (const std::string& e : env) ::putenv(const_cast<char*>(e.c_str()));
    const std::string cmd = std::string("exec '") + ATTNPROF_EXE +
                            "' --device cpu --variant ring-sdpa-flash --batch 1 --heads 2 --seq 64 --head-dim 32 "
                            "--warmup-iters 1 --timing-iters 1 --quiet --out '" + r.out_dir + "' " + extra;
    ::execl("/bin/sh", "sh", "-c", cmd.c_str(), static_cast<char*>(nullptr));
    _exit(127);
  }
  ::close(fds[1]);
  r.err_fd = fds[0];
  return r;
}

// Reads stderr until `needle` (or the end); true when it came.
bool read_until(LoneRank& r, const std::string& needle) {
  char buf[4096];
  while (r.err.find(needle) == std::string::npos) {
    const ssize_t n = ::read(r.err_fd, buf, sizeof buf);
    if (n <= 0) return false;
    r.err.append(buf, size_t(n));
  }
  return true;
}

// Reads stderr to the end and reaps the rank; nothing may be left in its --out.
void finish_rank(LoneRank& r, std::chrono::steady_clock::time_point t0) {
  char buf[4096];
  for (ssize_t n; (n = ::read(r.err_fd, buf, sizeof buf)) > 0;) r.err.append(buf, size_t(n));
  ::close(r.err_fd);
  ::waitpid(r.pid, &r.status, 0);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ(tu::list_tree(r.out_dir).size(), 1u) << "a rank that did not meet wrote nothing";
  tu::remove_tree(r.out_dir);
}

std::vector<std::string> launcher_env(int rank, const std::string& addr, int port) {
  return {"RANK=" + std::to_string(rank), "WORLD_SIZE=2", "LOCAL_RANK=" + std::to_string(rank), "MASTER_ADDR=" + addr,
          "MASTER_PORT=" + std::to_string(port)};
}

// c10d's own retry warnings carry C++ stack traces; none may reach stderr.
void expect_no_raw_c10d(const std::string& err) {
  for (const char* raw : {"[W", "[c10d]", "Exception raised from", "frame #", "TCPStore"})
    EXPECT_EQ(err.find(raw), std::string::npos) << raw << " in:\n" << err;
}

// No peer (rank 0 alone, rank 1 alone): the rank says once what it waits
// for, and SIGTERM / SIGINT end it at once with 128 + n (before, it waited
// in TCPStore for 60 minutes and ignored both).
TEST(RingRendezvous, AWaitingRankSaysWhatItWaitsForAndStopsAtASignal) {
  for (const auto& [rank, sig] : {std::pair{0, SIGTERM}, std::pair{1, SIGINT}}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const int port = free_tcp_port();
    LoneRank r = start_rank(launcher_env(rank, "127.0.0.1", port), "--rendezvous-timeout 8");
    ASSERT_TRUE(read_until(r, "giving up after 8 s (--rendezvous-timeout)")) << r.err;
    EXPECT_NE(r.err.find(rank == 0 ? "attnprof: rank 0 is waiting for 1 more of 2 ranks at 127.0.0.1:"
                                   : "attnprof: rank 1 is waiting for rank 0 to serve the rendezvous at 127.0.0.1:"),
              std::string::npos)
        << r.err;
    // Timed from the signal (0.07 s on this CPU machine), not from the start: the line
    // comes half the timeout into the wait, so from the start the margin was the rank's
    // start-up, which ran past it on the GPU machine with 14 tests at once (8.3, 9.6 s).
    // Ignored, the signal would leave the rank to its timeout about 4 s after the line.
    const auto t0 = std::chrono::steady_clock::now();
    ::kill(r.pid, sig);
    finish_rank(r, t0);
    ASSERT_TRUE(WIFEXITED(r.status)) << r.err;
    EXPECT_EQ(WEXITSTATUS(r.status), 128 + sig) << r.err;
    EXPECT_LT(r.seconds, 3.0) << "the signal, not the 8-second timeout, ended it";
    EXPECT_NE(r.err.find(std::string("interrupted by ") + (sig == SIGTERM ? "SIGTERM" : "SIGINT") +
                         " during the rendezvous"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(tu::count_lines(r.err), 2) << r.err;
    expect_no_raw_c10d(r.err);
  }
}

// A run every scheme refuses (here a paged KV cache) ends each rank before
// the rendezvous, exit 3 with one line: a lone rank under torchrun used to
// wait out the timeout and end with 7.
TEST(RingRendezvous, ARunEverySchemeRefusesEndsBeforeTheRendezvous) {
  for (const int rank : {0, 1}) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    const auto t0 = std::chrono::steady_clock::now();
    LoneRank r = start_rank(launcher_env(rank, "127.0.0.1", free_tcp_port()), "--rendezvous-timeout 20 --page-size 16");
    finish_rank(r, t0);
    ASSERT_TRUE(WIFEXITED(r.status)) << r.err;
    EXPECT_EQ(WEXITSTATUS(r.status), 3) << r.err;
    EXPECT_LT(r.seconds, 15.0) << "decided before the rendezvous";
    EXPECT_NE(r.err.find("attnprof: rank " + std::to_string(rank) + ": ring-sdpa-flash cannot run here: no paged KV "
                         "cache"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(tu::count_lines(r.err), 1) << r.err;
  }
}

// Each way the ranks cannot meet gives up after --rendezvous-timeout with one
// line and exit 7: no rank 0, no peer for rank 0, an unresolvable host, a
// port another process holds, something there that is not a store, a peer
// that died before it joined.
TEST(RingRendezvous, EveryWayOfNotMeetingEndsAfterTheTimeoutWithOneLine) {
  // A listener that is not a rendezvous store (it accepts, and says nothing).
  const int busy = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET, a.sin_addr.s_addr = htonl(INADDR_LOOPBACK), a.sin_port = 0;
  socklen_t len = sizeof a;
  ASSERT_EQ(::bind(busy, reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  ASSERT_EQ(::listen(busy, 8), 0);
  ASSERT_EQ(::getsockname(busy, reinterpret_cast<sockaddr*>(&a), &len), 0);
  const int busy_port = ntohs(a.sin_port);
  struct Way {
    const char* what;
    std::vector<std::string> env;
    std::string says;
  };
  const std::vector<Way> ways = {
      {"no rank 0", launcher_env(1, "127.0.0.1", free_tcp_port()),
       "rank 1 gave up after 2 s (--rendezvous-timeout) waiting for rank 0 to serve the rendezvous at 127.0.0.1:"},
      {"no peer", launcher_env(0, "127.0.0.1", free_tcp_port()),
       "rank 0 gave up after 2 s (--rendezvous-timeout) waiting for 1 more of 2 ranks at 127.0.0.1:"},
      {"unresolvable MASTER_ADDR", launcher_env(1, "no-such-host.invalid", 29500),
       "rank 1: cannot resolve MASTER_ADDR 'no-such-host.invalid'"},
      {"port in use", launcher_env(0, "127.0.0.1", busy_port),
       "rank 0: cannot serve the rendezvous on port " + std::to_string(busy_port) + " (MASTER_PORT): the port is in use"},
      {"not a store", launcher_env(1, "127.0.0.1", busy_port),
       "which accepted the connection but does not answer as a rendezvous store"},
  };
  for (const Way& w : ways) {
    SCOPED_TRACE(w.what);
    const auto t0 = std::chrono::steady_clock::now();
    LoneRank r = start_rank(w.env, "--rendezvous-timeout 2");
    finish_rank(r, t0);
    ASSERT_TRUE(WIFEXITED(r.status)) << r.err;
    EXPECT_EQ(WEXITSTATUS(r.status), 7) << r.err;
    const std::vector<std::string> lines = tu::split_lines(r.err);
    ASSERT_FALSE(lines.empty());
    EXPECT_NE(lines.back().find(w.says), std::string::npos) << r.err;
    // At most the one "is waiting for" line (said at half the timeout) before it.
    EXPECT_LE(lines.size(), 2u) << r.err;
    EXPECT_LT(r.seconds, 30.0) << r.err;
    expect_no_raw_c10d(r.err);
  }
  ::close(busy);

  // A peer that dies before it joins: rank 0 gives up in time.
  const int port = free_tcp_port();
  const auto t0 = std::chrono::steady_clock::now();
  LoneRank lead = start_rank(launcher_env(0, "127.0.0.1", port), "--rendezvous-timeout 3");
  LoneRank peer = start_rank(launcher_env(1, "127.0.0.1", port), "--rendezvous-timeout 3");
  ::kill(peer.pid, SIGKILL);
  finish_rank(peer, t0);
  finish_rank(lead, t0);
  ASSERT_TRUE(WIFEXITED(lead.status)) << lead.err;
  EXPECT_EQ(WEXITSTATUS(lead.status), 7) << lead.err;
  EXPECT_NE(lead.err.find("rank 0 gave up after 3 s (--rendezvous-timeout)"), std::string::npos) << lead.err;
  expect_no_raw_c10d(lead.err);
}

// A ring run of fewer ranks than the last one into the same folder removes
// the extra ranks' files: HTA would read them as ranks of this run.
TEST(RingCli, FewerRanksThanLastTimeLeaveNoExtraRankFiles) {
  const std::string d = tu::make_temp_dir("ring_fewer");
  const std::string run = "--variant ring-sdpa-flash --nproc 2 --device cpu --batch 1 --heads 2 --seq 64 --head-dim 32 "
                          "--warmup-iters 1 --timing-iters 1 --quiet --out " + d;
  ASSERT_EQ(tu::run_cli(run, 120).rc, 0);
  const std::string stem = "1_2_64_32_bf16_causal", dir = d + "/ring-sdpa-flash/";
  // What a 3-rank run would have left.
  for (const std::string& f : {dir + stem + ".rank2.summary.json", dir + stem + ".rank2.txt",
                               dir + stem + "/" + stem + ".rank2.pt.trace.json.gz"})
    io::write_file_atomic(f, "an earlier run's");
  io::write_file_atomic(dir + stem + ".rank2.notes", "the user's");
  const auto r = tu::run_cli(run, 120);
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_FALSE(tu::path_exists(dir + stem + ".rank2.summary.json"));
  EXPECT_FALSE(tu::path_exists(dir + stem + ".rank2.txt"));
  EXPECT_FALSE(tu::path_exists(dir + stem + "/" + stem + ".rank2.pt.trace.json.gz"));
  EXPECT_TRUE(tu::path_exists(dir + stem + ".rank2.notes")) << "not attnprof's: kept";
  EXPECT_TRUE(tu::path_exists(dir + stem + ".rank1.summary.json"));
  tu::remove_tree(d);
}

}  // namespace
