// Vᵀ as the Hopper fp8 forward reads it (FwdParams::vt).
#pragma once

#include <ATen/core/Tensor.h>

namespace attnprof::flash_sm90 {

// v [B, Hkv, S, D] (e4m3, or any 1-byte type) to [B, Hkv, D, S'] bytes
// (kByte), S' = S rounded up to kFp8KeyGroup with zeros past S, each group's
// logical column k holding key fp8_vt_key(k) of the group, on v's device. A
// contiguous CUDA v with D a multiple of 16 up to 256 goes through one pass of
// attnprof's own kernel (fp8_vt_kernel.cu) on the current stream; anything
// else through fp8_vt_reference.
at::Tensor fp8_vt(const at::Tensor& v);

// The same by ATen copies of a permuted view (one copy, two when S is not a
// multiple of the group; no e4m3 arithmetic), on any device: what the host
// tests check against fp8_layout.h, and the GPU tests hold the kernel to.
at::Tensor fp8_vt_reference(const at::Tensor& v);

}  // namespace attnprof::flash_sm90
