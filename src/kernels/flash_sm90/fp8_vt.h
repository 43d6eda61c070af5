// Vᵀ as the Hopper fp8 forward reads it (FwdParams::vt): LibTorch only, no
// CUDA, so the host tests check the key order against fp8_layout.h.
#pragma once

#include <ATen/core/Tensor.h>

namespace attnprof::flash_sm90 {

// v [B, Hkv, S, D] (e4m3, or any 1-byte type) to [B, Hkv, D, S'] bytes
// (kByte), S' = S rounded up to kFp8KeyGroup with zeros past S, each group's
// logical column k holding key fp8_vt_key(k) of the group. One copy (two
// when S is not a multiple of the group), on v's device; the copy needs no
// e4m3 arithmetic.
at::Tensor fp8_vt(const at::Tensor& v);

}  // namespace attnprof::flash_sm90
