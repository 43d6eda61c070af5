// Runtime values → template arguments, in one place (FlashAttention's
// static_switch.h, as functions instead of macros). Each switch calls `f` with
// a compile-time stand-in for the runtime value (an element type, an
// integral_constant, true_type / false_type, a configuration of a family's
// list), so only the listed values are instantiated, and returns what `f`
// returns. Host code of the launch layers.
//
//   dtype_switch(p.is_bf16, [&](auto element) {
//     head_dim_switch(BwdConfigs{}, p.head_dim, op, [&](auto config) {
//       bool_switch(p.causal, [&](auto causal) {
//         launch<Traits<decltype(config), decltype(element)>, decltype(causal)::value>(p);
//       });
//     });
//   });
#pragma once

#include <c10/util/Exception.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <string>
#include <type_traits>
#include <utility>

#include "kernels/common/config_list.h"

namespace attnprof::kernels {

// bf16 or fp16: f(__nv_bfloat16{}) or f(__half{}).
template <typename F>
decltype(auto) dtype_switch(bool is_bf16, F&& f) {
  if (is_bf16) return f(__nv_bfloat16{});
  return f(__half{});
}

// f(std::true_type{}) or f(std::false_type{}).
template <typename F>
decltype(auto) bool_switch(bool value, F&& f) {
  if (value) return f(std::true_type{});
  return f(std::false_type{});
}

namespace detail {
template <typename First, typename... Rest, typename Applies, typename F>
decltype(auto) config_switch(Applies& applies, const char* op, int head_dim, F&& f) {
  if constexpr (sizeof...(Rest) == 0) {
    TORCH_CHECK(applies(First{}), op, ": no kernel configuration for head_dim ", head_dim);
    return f(First{});
  } else {
    if (applies(First{})) return f(First{});
    return config_switch<Rest...>(applies, op, head_dim, std::forward<F>(f));
  }
}
}  // namespace detail

// f(Config{}) for the first configuration of `list` that applies(Config{})
// accepts (a family lists the special-purpose ones first); none: an error
// naming the operator `op` and the call's head_dim.
template <typename... Configs, typename Applies, typename F>
decltype(auto) config_switch(ConfigList<Configs...>, Applies&& applies, const char* op, int head_dim, F&& f) {
  return detail::config_switch<Configs...>(applies, op, head_dim, std::forward<F>(f));
}

// f(Config{}) for the first configuration of `list` of this head dim.
template <typename List, typename F>
decltype(auto) head_dim_switch(List list, int head_dim, const char* op, F&& f) {
  return config_switch(
      list, [head_dim](auto c) { return decltype(c)::kHeadDim == head_dim; }, op, head_dim, std::forward<F>(f));
}

}  // namespace attnprof::kernels
