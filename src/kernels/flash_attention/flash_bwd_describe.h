// The backward kernels of the flash operators in words, for a variant's facts
// when it runs a backward pass: read from the same named configurations and
// tile traits the kernels are built with (host-only: plain constexpr structs).
// The main kernel is the portable one (flash_bwd_kernel) or, where it applies
// (kernels/flash_bwd_choice.h), the Hopper one (flash_sm90::flash_bwd_sm90_kernel);
// the preprocessing and dQ conversion are the same for both.
#pragma once

#include <cstdint>
#include <string>

#include "kernels/flash_attention/flash_bwd_kernel_traits.h"
#include "kernels/flash_sm90/flash_bwd_sm90_traits.h"

namespace attnprof::flash {

namespace detail {
template <int kHeadDim, bool kHopper>
std::string describe_bwd_tiles() {
  using PortableConfig = BwdConfig<kHeadDim, uint16_t>;
  using HopperConfig = flash_sm90::BwdConfig<kHeadDim, uint16_t>;
  using Portable = typename PortableConfig::Traits;
  using Hopper = typename HopperConfig::Traits;
  const std::string name = kHopper ? HopperConfig::Config::kName : PortableConfig::Config::kName;
  constexpr int kBlockN = kHopper ? Hopper::kBlockN : Portable::kBlockN;
  constexpr int kBlockM = kHopper ? Hopper::kBlockM : Portable::kBlockM;
  constexpr int kThreads = kHopper ? Hopper::kThreads : Portable::kNThreads;
  constexpr int kSmemBytes = kHopper ? Hopper::kSmemBytes : Portable::kSmemBytes;
  return "head_dim " + std::to_string(kHeadDim) + " (" + name + "): " + std::to_string(kBlockN) + " keys x " +
         std::to_string(kBlockM) + " query rows per step, " + std::to_string(kThreads) + " threads, " +
         std::to_string(kSmemBytes / 1024) + " KiB shared memory";
}

template <bool kHopper>
std::string describe_bwd_tiles(int head_dim) {
  return head_dim == 64    ? describe_bwd_tiles<64, kHopper>()
         : head_dim == 128 ? describe_bwd_tiles<128, kHopper>()
                           : "no kernel for head_dim " + std::to_string(head_dim);
}
}  // namespace detail

// "flash_bwd_preprocess_kernel (rowsum dO*O), <main kernel> (...), flash_bwd_convert_dq_kernel"
inline std::string describe_bwd(int head_dim, bool hopper) {
  const std::string main =
      hopper ? "attnprof::flash_sm90::flash_bwd_sm90_kernel (Hopper: TMA loads, wgmma; one block of two "
               "warpgroups per key block of a KV head, " + std::string("walking the query blocks of its group: ") +
                   "dK and dV in registers, dQ added to an fp32 buffer by TMA reductions; " +
                   detail::describe_bwd_tiles<true>(head_dim) + ")"
             : "flash_bwd_kernel (one block per key block of a KV head, walking the query blocks of its group: dK "
               "and dV in registers, dQ added to an fp32 buffer; " + detail::describe_bwd_tiles<false>(head_dim) + ")";
  return "attnprof::flash::flash_bwd_preprocess_kernel (D = rowsum(dO * O)), " + main +
         ", flash_bwd_convert_dq_kernel (fp32 dQ to the input dtype)";
}

}  // namespace attnprof::flash
