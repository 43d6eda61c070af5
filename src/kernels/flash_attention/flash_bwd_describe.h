// The backward kernels of the flash operators in words, for a variant's facts
// when it runs a backward pass: read from the same named configurations and
// tile traits the kernels are built with (host-only: plain constexpr structs).
// The main kernel is the portable one (flash_bwd_kernel) or, where it applies
// (kernels/operators/backward_choice.h), the Hopper one (flash_sm90::flash_bwd_sm90_kernel);
// the preprocessing and dQ conversion are the same for both.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "kernels/flash_attention/flash_bwd_kernel_traits.h"
#include "kernels/flash_sm90/flash_bwd_sm90_traits.h"

namespace attnprof::flash {

namespace detail {
// "head_dim 64 (sm90_bwd_hdim64): 128 keys x 128 query rows per step, 256
// threads, 165 KiB shared memory" for the configuration of `list` of that head dim.
template <template <typename, typename> class TraitsOf, typename List>
std::string describe_bwd_tiles(List list, int head_dim) {
  std::string s = "no kernel for head_dim " + std::to_string(head_dim);
  kernels::for_each_config(list, [&](auto c) {
    using T = TraitsOf<decltype(c), uint16_t>;
    if (T::kHeadDim != head_dim) return;
    int threads = 0;
    if constexpr (std::is_same_v<List, flash_sm90::Sm90BwdConfigs>) threads = T::kThreads;
    else threads = T::kNThreads;
    s = "head_dim " + std::to_string(head_dim) + " (" + T::kName + "): " + std::to_string(T::kBlockN) + " keys x " +
        std::to_string(T::kBlockM) + " query rows per step, " + std::to_string(threads) + " threads, " +
        std::to_string(T::kSmemBytes / 1024) + " KiB shared memory";
  });
  return s;
}
}  // namespace detail

// "flash_bwd_preprocess_kernel (rowsum dO*O), <main kernel> (...), flash_bwd_convert_dq_kernel"
inline std::string describe_bwd(int head_dim, bool hopper) {
  const std::string main =
      hopper ? "attnprof::flash_sm90::flash_bwd_sm90_kernel (Hopper: TMA loads, wgmma; one block of two "
               "warpgroups per key block of a KV head, " + std::string("walking the query blocks of its group: ") +
                   "dK and dV in registers, dQ added to an fp32 buffer by TMA reductions; " +
                   detail::describe_bwd_tiles<flash_sm90::BwdTraits>(flash_sm90::Sm90BwdConfigs{}, head_dim) + ")"
             : "flash_bwd_kernel (one block per key block of a KV head, walking the query blocks of its group: dK "
               "and dV in registers, dQ added to an fp32 buffer; " + detail::describe_bwd_tiles<BwdKernelTraits>(BwdConfigs{}, head_dim) + ")";
  return "attnprof::flash::flash_bwd_preprocess_kernel (D = rowsum(dO * O)), " + main +
         ", flash_bwd_convert_dq_kernel (fp32 dQ to the input dtype)";
}

}  // namespace attnprof::flash
