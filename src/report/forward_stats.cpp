#include "attnprof/forward_stats.h"

#include <algorithm>
#include <unordered_set>

namespace attnprof {

namespace {
void collect_subtree(const std::vector<FunctionEvent>& fes, int root, std::unordered_set<uint64_t>& ids) {
  std::vector<int> stack = {root};
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    ids.insert(fes[i].event.correlation_id);
    for (int c : fes[i].children) stack.push_back(c);
  }
}
}  // namespace

ForwardStats forward_stats(const std::vector<FunctionEvent>& fes, const std::string& scope) {
  ForwardStats st;
  double cpu_ns = 0, device_ns = 0;
  int64_t device_work = 0;
  bool first = true;
  for (int i = 0; i < static_cast<int>(fes.size()); ++i) {
    const FunctionEvent& f = fes[i];
    if (f.key != scope || f.event.device != EventDevice::Cpu || f.event.is_async) continue;
    ++st.forwards;
    cpu_ns += double(f.cpu_time_total_ns);
    device_ns += double(f.device_time_total_ns);
    std::unordered_set<uint64_t> ops;
    collect_subtree(fes, i, ops);
    // fes is sorted by start time, so this walks device work in execution order.
    for (const FunctionEvent& d : fes) {
      if (!is_device_work(d.event) || !ops.count(d.event.linked_correlation_id)) continue;
      ++device_work;
      if (!first) continue;
      st.first_forward.push_back({d.event.name, d.event.correlation_id, double(duration_ns(d.event)) / 1000.0});
      auto it = std::find_if(st.kernels.begin(), st.kernels.end(),
                             [&](const ForwardStats::Kernel& k) { return k.name == d.event.name; });
      if (it == st.kernels.end()) it = st.kernels.insert(st.kernels.end(), {d.event.name, 0, 0.0});
      it->count += 1;
      it->total_us += double(duration_ns(d.event)) / 1000.0;
    }
    first = false;
  }
  if (st.forwards > 0) {
    st.cpu_time_avg_us = cpu_ns / 1000.0 / double(st.forwards);
    st.device_time_avg_us = device_ns / 1000.0 / double(st.forwards);
    st.kernels_per_forward = double(device_work) / double(st.forwards);
  }
  return st;
}

std::optional<double> achieved_tflops(double flops, double time_us) {
  if (!(time_us > 0.0)) return std::nullopt;
  return flops / (time_us * 1e-6) / 1e12;
}

}  // namespace attnprof
