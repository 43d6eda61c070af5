// Which forward path runs for a shape, and the words that say so. Host code
// only, no LibTorch and no CUDA headers: the variant's facts use it in every
// build.
#pragma once

#include <string>

namespace attnprof::flash {

enum class FwdPath {
  kPrefill,  // flash_fwd_kernel: query blocks × (batch, head)
};

struct FwdPlan {
  FwdPath path = FwdPath::kPrefill;
};

// The path and tile configuration in words, from the traits, e.g.
// "flash_fwd_kernel<bf16, d128>: BLOCK_M 128 (4 warps x 2 m16 tiles), ...".
std::string describe_fwd(int head_dim, bool is_bf16, const FwdPlan& plan);

}  // namespace attnprof::flash
