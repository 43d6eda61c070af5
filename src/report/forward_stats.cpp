#include "attnprof/forward_stats.h"

#include <algorithm>

namespace attnprof {

namespace {
// Device work owned by the ops of the subtree at `root`, in execution order.
std::vector<int> subtree_kernels(const std::vector<FunctionEvent>& fes, int root) {
  std::vector<int> work, stack = {root};
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    for (int k : fes[i].kernels)
      if (is_device_work(fes[k].event)) work.push_back(k);
    for (int c : fes[i].children) stack.push_back(c);
  }
  std::sort(work.begin(), work.end());  // fes is sorted by start time
  return work;
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
    const std::vector<int> work = subtree_kernels(fes, i);
    device_work += static_cast<int64_t>(work.size());
    if (first) {
      for (int k : work) {
        const TraceEvent& d = fes[k].event;
        st.first_forward.push_back({d.name, d.correlation_id, double(duration_ns(d)) / 1000.0});
        auto it = std::find_if(st.kernels.begin(), st.kernels.end(),
                               [&](const ForwardStats::Kernel& kn) { return kn.name == d.name; });
        if (it == st.kernels.end()) it = st.kernels.insert(st.kernels.end(), {d.name, 0, 0.0});
        it->count += 1;
        it->total_us += double(duration_ns(d)) / 1000.0;
      }
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
