// A kernel family's named configurations as a type list: the one place that
// says which configurations the family is built with. The launch layer picks
// one per call from it (config_switch, static_switch.h), the family's
// supports() and the variant's facts read their head dims and values from it,
// and CMake reads the list's line to compile one object per configuration and
// dtype (cmake/KernelFamily.cmake). Plain C++: host code of every build
// includes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnprof::kernels {

template <typename... Configs>
struct ConfigList {};

// f(Config{}) for every configuration of the list, in order.
template <typename... Configs, typename F>
void for_each_config(ConfigList<Configs...>, F&& f) {
  (f(Configs{}), ...);
}

// The distinct head dims of the list, in order of first appearance.
template <typename... Configs>
std::vector<int> head_dims(ConfigList<Configs...> list) {
  std::vector<int> dims;
  for_each_config(list, [&](auto c) {
    const int d = decltype(c)::kHeadDim;
    for (int seen : dims)
      if (seen == d) return;
    dims.push_back(d);
  });
  return dims;
}

template <typename... Configs>
bool has_head_dim(ConfigList<Configs...> list, int64_t head_dim) {
  for (int d : head_dims(list))
    if (d == head_dim) return true;
  return false;
}

// "64 and 128", "64, 96 and 128": the head dims for a reason.
template <typename... Configs>
std::string head_dims_phrase(ConfigList<Configs...> list) {
  const std::vector<int> dims = head_dims(list);
  std::string s;
  for (size_t i = 0; i < dims.size(); ++i)
    s += (i == 0 ? "" : i + 1 == dims.size() ? " and " : ", ") + std::to_string(dims[i]);
  return s;
}

}  // namespace attnprof::kernels
