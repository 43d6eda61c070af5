// Host side of the forward's plan (flash_fwd_plan.h).
#include "kernels/flash_attention/flash_fwd_plan.h"

#include <string>

#include "kernels/flash_attention/flash_kernel_traits.h"

namespace attnprof::flash {
namespace {

template <typename Tile>
std::string describe_prefill_tile() {
  using T = FwdKernelTraits<Tile, short>;  // 16-bit element: what the geometry needs
  std::string s = "BLOCK_M " + std::to_string(T::kBlockM) + " (" + std::to_string(T::kNWarps) +
                  " warps x " + std::to_string(T::kMTiles) + " m16 tiles), BLOCK_N " +
                  std::to_string(T::kBlockN) + ", " + std::to_string(T::kStages) +
                  "-stage cp.async K/V ring, " + std::to_string(T::kSmemBytes / 1024) +
                  " KB shared memory, Q " + (T::kQInRegs ? "held in registers" : "re-read from shared memory") +
                  ", ";
  s += T::kRescaleSlack < 0 ? std::string("O rescaled whenever a row max grows")
                            : "stale-max rescale (slack 2^" + std::to_string(T::kRescaleSlack) + ")";
  return s;
}

std::string describe_prefill(int head_dim) {
  switch (head_dim) {
    case 64: return describe_prefill_tile<DefaultFwdTile<64>::Tile>();
    case 128: return describe_prefill_tile<DefaultFwdTile<128>::Tile>();
    default: return "no kernel for head_dim " + std::to_string(head_dim);
  }
}

}  // namespace

std::string describe_fwd(int head_dim, bool is_bf16, const FwdPlan& plan) {
  const std::string instance =
      std::string("<") + (is_bf16 ? "bf16" : "fp16") + ", d" + std::to_string(head_dim) + ">";
  switch (plan.path) {
    case FwdPath::kPrefill:
      return "attnprof::flash::flash_fwd_kernel" + instance +
             " (mma.sync m16n8k16, 1 kernel): " + describe_prefill(head_dim);
  }
  return "unknown path";
}

}  // namespace attnprof::flash
