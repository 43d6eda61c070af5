// Which forward path runs for a shape, with how many key splits, and the
// words that say so. Host code only, no LibTorch and no CUDA headers: the
// variant's facts use it in every build.
#pragma once

#include <cstdint>
#include <string>

namespace attnprof::flash {

enum class FwdPath {
  // flash_fwd_kernel: blocks of query rows of one (batch, query head).
  kPrefill,
  // flash_fwd_splitkv_kernel: the query rows of all heads of one KV group
  // packed into m16 tiles, so each K/V byte is read once per group (per tile).
  kDecode,
  // flash_fwd_kernel on a packed variable-length batch (kVarlen, its own
  // tiles: VarlenTiles), one sequence per block row; never split. Set by
  // attnprof::flash_attention_varlen, not by the planner.
  kPrefillPacked,
};

struct FwdPlan {
  FwdPath path = FwdPath::kPrefill;
  // Key ranges per block row; > 1 adds flash_combine_kernel, which merges the
  // partial outputs by their log-sum-exps.
  int num_splits = 1;
  int keys_per_split = 0;  // a multiple of the path's BLOCK_N; covers all keys when 1 split
  // Decode: group · seqlen_q query rows per KV head, in row_tiles m16 tiles.
  int group = 1;
  int seqlen_q = 0;
  int row_tiles = 0;
};

struct FwdShape {
  int64_t batch = 0, heads_q = 0, heads_kv = 0, seqlen_q = 0, seqlen_k = 0, head_dim = 0;
  bool causal = false;
};

// The decode path runs when its m16 row tiles per KV head are at most this
// many times the prefill path's query blocks per KV head (group · ⌈seq_q / 128⌉).
// Measured on the H200 (8 x 32q/8kv x 8192 keys x 128,
// bf16, both paths forced): decode took 72.7 / 80.0 / 116.4 / 235.8 us at 1 / 2
// / 4 / 8 row tiles (seq_q 1..32; the first ones memory- and launch-bound),
// prefill 355-409 us for 4 query heads of 1 query block each: past the
// memory-bound start a decode tile costs ~30 us there, a prefill block ~89 us.
// At 128 rows per KV head decode was still 1.74x faster; with full prefill
// blocks (MHA, seq_q 128) the rule picks prefill from 4 decode tiles on.
constexpr int64_t kDecodeTilesPerPrefillBlock = 3;

// How full the split planner keeps the GPU: the fewest key splits whose wave
// efficiency (blocks over resident-block slots, in whole waves) is at least
// this share of the best count's. Prefill weighs a combine pass per split.
// Decode only reads K and V, and a slot left empty is bandwidth left unread:
// at 0.85 1x32q/8kv x 4 x 131072 x 128 took 29 splits (232 of 264 slots); 0.95,
// counts judged as they run, took 32 and ran 2.3% (bf16) / 4.5% (fp8) faster
// on the H100; 0.5-7.3% at 8 other re-planned shapes, but fp8 -1.2% at one
// with 4 blocks (docs/notes/flash_sm90_forward.md).
constexpr double kPrefillSplitShareOfBest = 0.85;
constexpr double kDecodeSplitShareOfBest = 0.95;

// The plan for `shape` on a GPU with `num_sms` SMs: the path by the rule
// above (and the decode grid's 65535 row-tile limit). Splits the keys when the
// grid alone would leave SMs idle (fewer blocks than ~0.8 of a wave of
// resident blocks), as few splits as reach the path's share above.
FwdPlan plan_fwd(const FwdShape& shape, int num_sms);

// The path and tile configuration in words, from the traits, e.g.
// "attnprof::flash::flash_fwd_kernel<bf16, d128> (...): BLOCK_M 128 (4 warps x 2 m16 tiles), ...";
// e4m3: the decode kernel on e4m3 inputs (DecodeFp8Tiles; the Hopper fp8 operator's decode route).
std::string describe_fwd(int head_dim, bool is_bf16, const FwdPlan& plan, bool e4m3 = false);

}  // namespace attnprof::flash
