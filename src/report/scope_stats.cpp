#include "attnprof/report/scope_stats.h"

#include <algorithm>
#include <limits>
#include <set>

namespace attnprof {

namespace {
// Device work owned by the ops of the subtree at `root` (a kernel two ops own, twice).
std::vector<int> subtree_kernels(const std::vector<FunctionEvent>& fes, int root) {
  std::vector<int> work, stack = {root};
  while (!stack.empty()) {
    const int i = stack.back();
    stack.pop_back();
    for (int k : fes[i].kernels)
      if (is_device_work(fes[k].event)) work.push_back(k);
    for (int c : fes[i].children) stack.push_back(c);
  }
  return work;
}

struct PerCall {
  std::vector<double> count, time_us;  // one entry per call
};
}  // namespace

// Top-level CPU ops of threads without the scope that run inside [start, end]:
// on CUDA, autograd runs a backward's nodes on its device thread while the
// calling thread waits inside attn_bwd, so the scope's kernels are launched
// from ops that are not its descendants (Python's key_averages shows such a
// record_function scope with 0 CUDA time; attnprof counts its work).
static std::vector<int> adopted_roots(const std::vector<FunctionEvent>& fes, const std::vector<int>& roots,
                               const std::set<uint64_t>& scope_threads, int64_t start, int64_t end) {
  std::vector<int> out;
  for (int r : roots) {
    const TraceEvent& e = fes[r].event;
    if (scope_threads.count(e.thread) || e.start_ns < start || e.end_ns > end) continue;
    out.push_back(r);
  }
  return out;
}

ScopeStats scope_stats(const std::vector<FunctionEvent>& fes, const std::string& scope) {
  ScopeStats st;
  std::vector<int> roots;  // other threads' top-level CPU ops
  std::set<uint64_t> scope_threads;
  for (int i = 0; i < static_cast<int>(fes.size()); ++i) {
    const FunctionEvent& f = fes[i];
    if (f.event.device != EventDevice::Cpu || f.event.is_async) continue;
    if (f.key == scope) scope_threads.insert(f.event.thread);
    if (f.parent < 0) roots.push_back(i);
  }
  st.scope = scope;
  double cpu_ns = 0, device_ns = 0;
  int64_t device_work = 0;
  std::vector<std::string> order;  // kernel names by first launch
  std::vector<PerCall> per_name;
  std::vector<double> call_device_us;
  for (int i = 0; i < static_cast<int>(fes.size()); ++i) {
    const FunctionEvent& f = fes[i];
    if (f.key != scope || f.event.device != EventDevice::Cpu || f.event.is_async) continue;
    const size_t call = static_cast<size_t>(st.calls++);
    cpu_ns += double(f.cpu_time_total_ns);
    std::vector<int> work = subtree_kernels(fes, i);
    for (int r : adopted_roots(fes, roots, scope_threads, f.event.start_ns, f.event.end_ns)) {
      const std::vector<int> more = subtree_kernels(fes, r);
      work.insert(work.end(), more.begin(), more.end());
    }
    // Each piece of work once: Python attributes a kernel to every op sharing
    // its launch's id, so a CUDA lazy load inside the op ("Lazy Function
    // Loading", cuDNN's ragged call on every call) owns it too, and the scope's
    // CUDA total counts it twice (6.4 ms kernel, 12.8 ms total, torch 2.11).
    std::sort(work.begin(), work.end());  // execution order: fes is sorted by start time
    work.erase(std::unique(work.begin(), work.end()), work.end());
    double call_device_ns = 0;
    for (int k : work) call_device_ns += double(duration_ns(fes[k].event));
    device_ns += call_device_ns;
    call_device_us.push_back(call_device_ns / 1000.0);
    for (PerCall& pc : per_name) pc.count.push_back(0.0), pc.time_us.push_back(0.0);
    device_work += static_cast<int64_t>(work.size());
    for (int k : work) {
      const TraceEvent& d = fes[k].event;
      const double us = double(duration_ns(d)) / 1000.0;
      if (call == 0) st.first_call.push_back({d.name, d.correlation_id, us});
      auto it = std::find(order.begin(), order.end(), d.name);
      if (it == order.end()) {
        order.push_back(d.name);
        per_name.push_back({std::vector<double>(call + 1, 0.0), std::vector<double>(call + 1, 0.0)});
        it = order.end() - 1;
      }
      PerCall& pc = per_name[static_cast<size_t>(it - order.begin())];
      pc.count[call] += 1.0;
      pc.time_us[call] += us;
    }
  }
  if (st.calls == 0) return st;
  const double n = double(st.calls);
  st.cpu_time_avg_us = cpu_ns / 1000.0 / n;
  st.device_time_avg_us = device_ns / 1000.0 / n;
  st.device_time_min_us = *std::min_element(call_device_us.begin(), call_device_us.end());
  st.device_time_max_us = *std::max_element(call_device_us.begin(), call_device_us.end());
  st.kernels_per_call = double(device_work) / n;
  for (size_t k = 0; k < order.size(); ++k) {
    const PerCall& pc = per_name[k];
    KernelStats ks;
    ks.name = order[k];
    double count = 0, time = 0;
    for (size_t c = 0; c < pc.time_us.size(); ++c) count += pc.count[c], time += pc.time_us[c];
    ks.count_per_call = count / n;
    ks.time_avg_us = time / n;
    ks.time_min_us = *std::min_element(pc.time_us.begin(), pc.time_us.end());
    ks.time_max_us = *std::max_element(pc.time_us.begin(), pc.time_us.end());
    st.kernels.push_back(std::move(ks));
  }
  return st;
}

std::optional<double> achieved_tflops(double flops, double time_us) {
  if (!(time_us > 0.0)) return std::nullopt;
  return flops / (time_us * 1e-6) / 1e12;
}

}  // namespace attnprof
