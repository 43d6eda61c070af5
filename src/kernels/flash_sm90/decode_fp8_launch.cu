// The fp8 operator's decode route (decode_route.h): the portable family's
// split-KV kernel instantiated on e4m3 inputs (flash::DecodeFp8Tiles), and
// the combine kernel on its bf16 output. Here rather than in the portable
// family: the e4m3 conversion needs sm_89 or later, and only the Hopper
// operator calls it, so it is built for sm_90a alone.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include "kernels/common/static_switch.h"
#include "kernels/flash_attention/flash_fwd_launch_template.cuh"
#include "kernels/flash_attention/flash_kernel_traits.h"
#include "kernels/flash_attention/flash_params.h"
#include "kernels/flash_sm90/decode_route.h"

namespace attnprof::flash_sm90 {
namespace {

// Whether the 16-bit decode tiles (the planner's, flash::plan_fwd) have Tile's head dim with its
// BLOCK_N and blocks per SM: the plan the operator made is then one this tile runs.
template <typename Tile, typename... Tiles>
constexpr bool planned_alike(kernels::ConfigList<Tiles...>) {
  return ((Tiles::kHeadDim == Tile::kHeadDim) || ...) &&
         ((Tiles::kHeadDim != Tile::kHeadDim ||
           (Tiles::kBlockN == Tile::kBlockN && Tiles::kBlocksPerSm == Tile::kBlocksPerSm)) &&
          ...);
}

}  // namespace

void run_fp8_decode(const flash::FwdParams& p, CUstream_st* stream) {
  constexpr const char* op = "attnprof::flash_attention_sm90_fp8";
  TORCH_CHECK(p.is_fp8 && p.q_descale != nullptr && p.k_descale != nullptr && p.v_descale != nullptr &&
                  p.plan.path == flash::FwdPath::kDecode,
              op, ": the e4m3 decode route needs e4m3 inputs, their descales and a decode plan");
  TORCH_CHECK(p.plan.num_splits == 1 || (p.o_accum != nullptr && p.lse_accum != nullptr), op, ": ",
              p.plan.num_splits, " key splits need a workspace");
  kernels::head_dim_switch(flash::DecodeFp8Tiles{}, p.head_dim, op, [&](auto tile) {
    using Tile = decltype(tile);
    static_assert(planned_alike<Tile>(flash::DecodeTiles{}),
                  "an e4m3 decode tile must keep the 16-bit tile's BLOCK_N and blocks per SM (the planner's)");
    kernels::bool_switch(p.causal, [&](auto causal) {
      flash::launch_flash_fwd_splitkv<flash::DecodeKernelTraits<Tile, flash::E4m3>, decltype(causal)::value, false>(
          p, stream);
    });
    if (p.plan.num_splits > 1) flash::launch_flash_combine<__nv_bfloat16, Tile::kHeadDim>(p, stream);
  });
}

}  // namespace attnprof::flash_sm90
