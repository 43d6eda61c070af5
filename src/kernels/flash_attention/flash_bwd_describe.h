// The backward kernels of attnprof::flash_attention in words, for a variant's
// facts when it runs a backward pass: read from the same tile traits the
// kernels are built with (host-only: the traits are plain constexpr structs).
#pragma once

#include <cstdint>
#include <string>

#include "kernels/flash_attention/flash_bwd_kernel_traits.h"

namespace attnprof::flash {

namespace detail {
template <int kHeadDim>
std::string describe_bwd_tiles() {
  using T = typename BwdConfig<kHeadDim, uint16_t>::Traits;
  return "head_dim " + std::to_string(kHeadDim) + ": " + std::to_string(T::kBlockN) + " keys x " +
         std::to_string(T::kBlockM) + " query rows per step, " + std::to_string(T::kNThreads) + " threads, " +
         std::to_string(T::kSmemBytes / 1024) + " KiB shared memory";
}
}  // namespace detail

// "flash_bwd_preprocess_kernel (rowsum dO*O), flash_bwd_kernel (...), flash_bwd_convert_dq_kernel"
inline std::string describe_bwd(int head_dim) {
  std::string tiles = head_dim == 64    ? detail::describe_bwd_tiles<64>()
                      : head_dim == 128 ? detail::describe_bwd_tiles<128>()
                                        : "no kernel for head_dim " + std::to_string(head_dim);
  return "attnprof::flash::flash_bwd_preprocess_kernel (D = rowsum(dO * O)), flash_bwd_kernel (one block per "
         "key block of a KV head, walking the query blocks of its group: dK and dV in registers, dQ added "
         "to an fp32 buffer; " + tiles + "), flash_bwd_convert_dq_kernel (fp32 dQ to the input dtype)";
}

}  // namespace attnprof::flash
