#include "distributed/layout.h"

#include <stdexcept>

namespace attnprof::ring {

const char* block_kind_name(BlockKind k) {
  switch (k) {
    case BlockKind::causal_diagonal: return "causal diagonal";
    case BlockKind::full: return "full";
    case BlockKind::all_q_front_kv: return "all queries x first key chunk";
    case BlockKind::back_q_all_kv: return "second query chunk x all keys";
  }
  return "?";
}

std::vector<int64_t> Layout::chunks_of(int rank) const {
  if (!zigzag()) return {rank};
  return {rank, 2 * int64_t(world) - 1 - rank};
}

int64_t Layout::global_row(int rank, int64_t local) const {
  const int64_t c = chunk_len();
  return chunks_of(rank)[local / c] * c + local % c;
}

std::vector<int64_t> Layout::global_rows(int rank) const {
  std::vector<int64_t> rows(local_len());
  for (int64_t i = 0; i < local_len(); ++i) rows[i] = global_row(rank, i);
  return rows;
}

// Zigzag, rank r, shard of src: local queries are chunks r < 2N-1-r; the
// shard's keys are chunks src < 2N-1-src. Chunks are ordered, so a block is
// fully visible, fully hidden, or (src == r) the causal diagonal:
//   src < r: key chunk src precedes both query chunks; key chunk 2N-1-src
//            follows both (2N-1-src > 2N-1-r > r).
//   src > r: both key chunks follow query chunk r (src > r, 2N-1-src >= N > r)
//            and precede query chunk 2N-1-r (src < N <= 2N-1-r, 2N-1-src < 2N-1-r).
BlockKind Layout::classify(int rank, int src) const {
  if (rank < 0 || rank >= world || src < 0 || src >= world)
    throw std::out_of_range("ring::Layout::classify: rank " + std::to_string(rank) + " or source " +
                            std::to_string(src) + " outside world " + std::to_string(world));
  if (!causal) return BlockKind::full;
  if (src == rank) return BlockKind::causal_diagonal;
  return src < rank ? BlockKind::all_q_front_kv : BlockKind::back_q_all_kv;
}

std::string sharding_problem(int64_t seq, int world, bool causal) {
  if (world < 1) return "world size " + std::to_string(world) + " is not positive";
  const int64_t parts = causal ? 2 * int64_t(world) : world;
  if (seq % parts == 0) return "";
  if (causal)
    return "seq " + std::to_string(seq) + " is not a multiple of 2 x " + std::to_string(world) + " = " +
           std::to_string(parts) + " (zigzag chunks for causal attention)";
  return "seq " + std::to_string(seq) + " is not a multiple of " + std::to_string(world) + " (one shard per rank)";
}

int64_t block_pairs(const Layout& l, BlockKind kind) {
  const int64_t n = l.local_len(), c = l.chunk_len();
  switch (kind) {
    case BlockKind::causal_diagonal: return n * (n + 1) / 2;
    case BlockKind::full: return n * n;
    case BlockKind::all_q_front_kv: return n * c;
    case BlockKind::back_q_all_kv: return c * n;
  }
  return 0;
}

}  // namespace attnprof::ring
