// How ring attention cuts one sequence across ranks, and what each rank
// computes against each key/value shard that passes it. Plain integers, no
// LibTorch: the index maps and the block classification are tested on their
// own, against brute-force visibility.
//
// Without a mask the sequence is cut into `world` contiguous shards. With the
// causal mask, contiguous shards would give the last rank world times the
// work of the first (it sees every key, the first only its own), so the
// sequence is cut into 2*world chunks and rank r holds chunks r and
// 2*world-1-r ("zigzag"): every rank then computes the same number of
// visible query-key pairs at every ring step.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnprof::ring {

// What a rank computes against the key/value shard that started on rank `src`.
enum class BlockKind {
  causal_diagonal,  // its own shard: causal attention on the local sequence (square)
  full,             // every local query against every key of the shard
  all_q_front_kv,   // zigzag, src < rank: every local query against the shard's first chunk only
  back_q_all_kv,    // zigzag, src > rank: the local second chunk of queries against the whole shard
};
const char* block_kind_name(BlockKind k);

struct Layout {
  int world = 1;
  int64_t seq = 0;  // the full sequence, queries and keys alike
  bool causal = false;

  bool zigzag() const { return causal; }
  int64_t local_len() const { return seq / world; }  // rows a rank holds
  int64_t chunk_len() const { return zigzag() ? seq / (2 * int64_t(world)) : local_len(); }
  // The global chunks `rank` holds, in local order ({r, 2N-1-r} or {r}).
  std::vector<int64_t> chunks_of(int rank) const;
  // Global row of the local row `local` on `rank`.
  int64_t global_row(int rank, int64_t local) const;
  // Global rows of every local row of `rank`, in local order.
  std::vector<int64_t> global_rows(int rank) const;
  // The shard `rank` holds at ring step `step` (0 = its own; then one hop per step
  // from the previous rank).
  int source_at_step(int rank, int step) const { return ((rank - step) % world + world) % world; }
  BlockKind classify(int rank, int src) const;
};

// "" when `seq` can be sharded over `world` ranks, else why not
// ("seq 1000 is not a multiple of 2 x 3 = 6 (zigzag chunks for causal attention)").
std::string sharding_problem(int64_t seq, int world, bool causal);

// Visible query-key pairs of one block of `kind` for a layout (work balance).
int64_t block_pairs(const Layout& l, BlockKind kind);

}  // namespace attnprof::ring
