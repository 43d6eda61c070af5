// Host side of the forward's plan (flash_fwd_plan.h).
#include "kernels/flash_attention/flash_fwd_plan.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/flash_attention/flash_kernel_traits.h"

namespace attnprof::flash {
namespace {

// Geometry the planner needs from a tile configuration.
struct TileFacts {
  int block_m = 0, block_n = 0, blocks_per_sm = 0;
};

template <typename Tile>
TileFacts prefill_facts() {
  using T = FwdKernelTraits<Tile, short>;  // a 16-bit element: all the geometry needs
  return {T::kBlockM, T::kBlockN, Tile::kBlocksPerSm};
}
template <typename Tile>
TileFacts decode_facts() {
  using T = DecodeKernelTraits<Tile, short>;
  return {T::kBlockM, T::kBlockN, Tile::kBlocksPerSm};
}

// The path's tile for a head dim (the boundary admits only the lists' head dims).
TileFacts tile_facts(FwdPath path, int64_t head_dim) {
  TileFacts facts;
  auto pick = [&](auto tile, auto of) {
    if (decltype(tile)::kHeadDim == head_dim) facts = of(tile);
  };
  if (path == FwdPath::kDecode)
    kernels::for_each_config(DecodeTiles{}, [&](auto t) { pick(t, [](auto x) { return decode_facts<decltype(x)>(); }); });
  else
    kernels::for_each_config(FwdTiles{}, [&](auto t) { pick(t, [](auto x) { return prefill_facts<decltype(x)>(); }); });
  return facts;
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// How `s` splits of `n_tiles` key tiles run: ⌈n_tiles / s⌉ tiles each, which
// leaves no empty split and can mean fewer than s (1 <= s; never more than n_tiles).
int splits_as_run(int64_t n_tiles, int64_t s) {
  return static_cast<int>(ceil_div(n_tiles, ceil_div(n_tiles, std::max<int64_t>(s, 1))));
}

// Splits of the keys for `blocks` blocks of `n_tiles` key tiles each on
// `slots` resident-block slots. A grid that fills ~0.8 of a wave keeps its
// keys whole (a split costs a combine pass); otherwise the fewest splits whose
// wave efficiency (blocks / slots over the waves it takes) is >= `share` of
// the best, with at least kMinTilesPerSplit tiles each (the ring's prologue
// and the merge are per block). A count is judged as it runs: s splits of
// ⌈n_tiles / s⌉ tiles leave no empty split, which can mean fewer than s.
int choose_splits(int64_t blocks, int64_t slots, int64_t n_tiles, double share) {
  constexpr int kMaxSplits = 128;
  constexpr int64_t kMinTilesPerSplit = 4;
  if (blocks * 5 >= slots * 4) return 1;
  const int max_splits =
      static_cast<int>(std::clamp<int64_t>(n_tiles / kMinTilesPerSplit, 1, kMaxSplits));
  auto efficiency = [&](int s) {
    const double waves = static_cast<double>(blocks * splits_as_run(n_tiles, s)) / static_cast<double>(slots);
    return waves / std::ceil(waves);
  };
  double best = 0;
  for (int s = 1; s <= max_splits; ++s) best = std::max(best, efficiency(s));
  for (int s = 1; s <= max_splits; ++s)
    if (efficiency(s) >= share * best) return splits_as_run(n_tiles, s);
  return 1;
}

template <typename Tile>
std::string describe_prefill_tile() {
  using T = FwdKernelTraits<Tile, short>;
  std::string s = "BLOCK_M " + std::to_string(T::kBlockM) + " (" + std::to_string(T::kNWarps) +
                  " warps x " + std::to_string(T::kMTiles) + " m16 tiles), BLOCK_N " +
                  std::to_string(T::kBlockN) + ", " + std::to_string(T::kStages) +
                  "-stage cp.async K/V ring, " + std::to_string(T::kSmemBytes / 1024) +
                  " KB shared memory, Q " +
                  (T::kQInRegs ? "held in registers" : "re-read from shared memory") + ", ";
  s += T::kRescaleSlack < 0 ? std::string("O rescaled whenever a row max grows")
                            : "stale-max rescale (slack 2^" + std::to_string(T::kRescaleSlack) + ")";
  return s;
}

template <typename Tile, typename Element = short>
std::string describe_decode_tile() {
  using T = DecodeKernelTraits<Tile, Element>;
  return "BLOCK_N " + std::to_string(T::kBlockN) + " (" + std::to_string(T::kNWarps) + " warps x " +
         std::to_string(T::kWarpKeys) + " keys, merged in shared memory), " +
         std::to_string(T::kStages) + "-stage cp.async K/V ring, " +
         std::to_string(T::kSmemBytes / 1024) + " KB shared memory";
}

std::string count(int n, const std::string& one, const std::string& many) {
  return std::to_string(n) + " " + (n == 1 ? one : many);
}

}  // namespace

FwdPlan plan_fwd(const FwdShape& s, int num_sms) {
  FwdPlan plan;
  const int64_t group = s.heads_kv > 0 ? s.heads_q / s.heads_kv : 1;
  const TileFacts prefill = tile_facts(FwdPath::kPrefill, s.head_dim);
  const TileFacts decode = tile_facts(FwdPath::kDecode, s.head_dim);
  // A head dim without this family's tiles (the Hopper fp8 operator's 256) has no plan: one
  // prefill split, which no caller runs (they check the head dim first).
  if (prefill.block_m == 0 || decode.block_m == 0) return plan;
  const int64_t prefill_blocks_per_group = group * ceil_div(s.seqlen_q, prefill.block_m);
  const int64_t decode_tiles = ceil_div(group * s.seqlen_q, decode.block_m);
  constexpr int64_t kMaxRowTiles = 65535;  // grid.z of the decode kernel
  plan.path = decode_tiles <= kDecodeTilesPerPrefillBlock * prefill_blocks_per_group && decode_tiles <= kMaxRowTiles
                  ? FwdPath::kDecode
                  : FwdPath::kPrefill;
  const TileFacts tile = plan.path == FwdPath::kDecode ? decode : prefill;
  int64_t blocks = 0;
  if (plan.path == FwdPath::kDecode) {
    plan.group = static_cast<int>(group);
    plan.seqlen_q = static_cast<int>(s.seqlen_q);
    plan.row_tiles = static_cast<int>(std::min(decode_tiles, kMaxRowTiles + 1));  // the boundary rejects > limit
    blocks = s.batch * s.heads_kv * plan.row_tiles;
  } else {
    blocks = s.batch * s.heads_q * ceil_div(s.seqlen_q, tile.block_m);
  }
  const int64_t n_tiles = std::max<int64_t>(1, ceil_div(s.seqlen_k, tile.block_n));
  const int64_t slots = static_cast<int64_t>(std::max(num_sms, 1)) * tile.blocks_per_sm;
  // choose_splits returns a count as it runs (splits_as_run): every split non-empty, all keys covered.
  plan.num_splits = choose_splits(blocks, slots, n_tiles,
                                  plan.path == FwdPath::kDecode ? kDecodeSplitShareOfBest : kPrefillSplitShareOfBest);
  plan.keys_per_split = static_cast<int>(ceil_div(n_tiles, plan.num_splits) * tile.block_n);
  return plan;
}

std::string describe_fwd(int head_dim, bool is_bf16, const FwdPlan& plan, bool e4m3) {
  std::string tile;  // the path's tile configuration in words
  if (e4m3) {
    if (plan.path == FwdPath::kDecode)
      kernels::for_each_config(DecodeFp8Tiles{}, [&](auto t) {
        if (decltype(t)::kHeadDim == head_dim)
          tile = describe_decode_tile<decltype(t), E4m3>() +
                 ", K and V tiles kept e4m3 and widened to fp16 in registers for mma.sync (P fp16, fp32 "
                 "accumulators), the descales applied to the scores and to O";
      });
    if (tile.empty()) return "no e4m3 kernel of this family for head_dim " + std::to_string(head_dim);
  } else if (plan.path == FwdPath::kDecode)
    kernels::for_each_config(DecodeTiles{}, [&](auto t) {
      if (decltype(t)::kHeadDim == head_dim) tile = describe_decode_tile<decltype(t)>();
    });
  else if (plan.path == FwdPath::kPrefillPacked)
    kernels::for_each_config(VarlenTiles{}, [&](auto t) {
      if (decltype(t)::kHeadDim == head_dim) tile = describe_prefill_tile<decltype(t)>();
    });
  else
    kernels::for_each_config(FwdTiles{}, [&](auto t) {
      if (decltype(t)::kHeadDim == head_dim) tile = describe_prefill_tile<decltype(t)>();
    });
  if (tile.empty()) return "no kernel for head_dim " + std::to_string(head_dim);
  const std::string d = ", d" + std::to_string(head_dim) + ">";
  const std::string instance = std::string("<") + (e4m3 ? "e4m3" : is_bf16 ? "bf16" : "fp16") + d;
  const std::string out_instance = std::string("<") + (e4m3 || is_bf16 ? "bf16" : "fp16") + d;  // e4m3 in, bf16 out
  const std::string splits =
      plan.num_splits > 1
          ? ", keys in " + count(plan.num_splits, "split", "splits") + " of " +
                std::to_string(plan.keys_per_split) + " merged by attnprof::flash::flash_combine_kernel" +
                out_instance
          : std::string();
  if (plan.path == FwdPath::kDecode) {
    return "split-KV decode, attnprof::flash::flash_fwd_splitkv_kernel" + instance + ": " +
           count(plan.group, "query head", "query heads") + " x " +
           count(plan.seqlen_q, "query", "queries") +
           " per KV group packed in " + count(plan.row_tiles, "m16 tile", "m16 tiles") + splits + "; " + tile;
  }
  if (plan.path == FwdPath::kPrefillPacked)
    return "prefill of a packed variable-length batch, attnprof::flash::flash_fwd_kernel" + instance +
           " (one sequence per block row, offsets from cu_seqlens); " + tile;
  return "prefill, attnprof::flash::flash_fwd_kernel" + instance + splits + "; " + tile;
}

}  // namespace attnprof::flash
