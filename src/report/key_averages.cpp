#include "attnprof/report/key_averages.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <tuple>
#include <unordered_map>

namespace attnprof {

int64_t duration_ns(const TraceEvent& e) { return e.end_ns - e.start_ns; }

bool is_device_work(const TraceEvent& e) {
  return e.device == EventDevice::Cuda && !e.is_user_annotation;
}

namespace {

constexpr const char* kMemoryEventName = "[memory]";
constexpr const char* kOutOfMemoryEventName = "[OutOfMemory]";

// Utility ops Python's _filter_name drops before aggregation.
bool filtered_out(const std::string& name) {
  static const char* const kNames[] = {
      kMemoryEventName,
      kOutOfMemoryEventName,
      "profiler::_record_function_enter",
      "profiler::_record_function_enter_new",
      "profiler::_record_function_exit",
      "aten::is_leaf",
      "aten::output_nr",
      "aten::_version",
  };
  for (const char* n : kNames)
    if (name == n) return true;
  return false;
}

std::string rewrite_name(const std::string& name) {
  if (name.rfind("ProfilerStep#", 0) == 0) return "ProfilerStep*";
  return name;
}

bool is_sync_cpu(const FunctionEvent& f) {
  return f.event.device == EventDevice::Cpu && !f.event.is_async;
}

void link_cpu_children(std::vector<FunctionEvent>& fes) {
  // Per thread, a stack of open intervals; events arrive sorted by (start, -end),
  // so each event's parent is the innermost open interval that contains it.
  std::unordered_map<uint64_t, std::vector<int>> open_by_thread;
  for (int i = 0; i < static_cast<int>(fes.size()); ++i) {
    FunctionEvent& ev = fes[i];
    if (!is_sync_cpu(ev)) continue;
    auto& open = open_by_thread[ev.event.thread];
    while (!open.empty()) {
      FunctionEvent& parent = fes[open.back()];
      if (ev.event.start_ns >= parent.event.end_ns || ev.event.end_ns > parent.event.end_ns) {
        open.pop_back();
      } else {
        parent.children.push_back(i);
        ev.parent = open.back();
        break;
      }
    }
    open.push_back(i);
  }
}

// Python's EventList._remove_dup_nodes, including its choice that the parent
// takes over the child's kernels (its own, if any, are dropped).
void remove_dup_nodes(std::vector<FunctionEvent>& fes) {
  std::vector<bool> removed(fes.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t i = 0; i < fes.size(); ++i) {
      FunctionEvent& e = fes[i];
      if (removed[i] || e.parent < 0) continue;
      FunctionEvent& parent = fes[e.parent];
      if (parent.key != e.key || parent.children.size() != 1) continue;
      parent.children = e.children;
      parent.kernels = e.kernels;
      for (int c : e.children) fes[c].parent = e.parent;
      removed[i] = true;
      changed = true;
    }
  }
  // Compact, remapping every index.
  std::vector<int> new_index(fes.size(), -1);
  std::vector<FunctionEvent> kept;
  kept.reserve(fes.size());
  for (size_t i = 0; i < fes.size(); ++i)
    if (!removed[i]) {
      new_index[i] = static_cast<int>(kept.size());
      kept.push_back(std::move(fes[i]));
    }
  auto remap = [&](std::vector<int>& v) {
    for (int& x : v) x = new_index[x];
  };
  for (FunctionEvent& f : kept) {
    if (f.parent >= 0) f.parent = new_index[f.parent];
    remap(f.children);
    remap(f.kernels);
  }
  fes = std::move(kept);
}

void compute_totals(std::vector<FunctionEvent>& fes, bool use_device) {
  // Children always sort after their parent, so a reverse sweep sees them first.
  for (int i = static_cast<int>(fes.size()) - 1; i >= 0; --i) {
    FunctionEvent& f = fes[i];
    const bool cpu = f.event.device == EventDevice::Cpu;
    f.kernel_time_ns = 0;
    for (int k : f.kernels) f.kernel_time_ns += duration_ns(fes[k].event);
    f.cpu_time_total_ns = cpu ? duration_ns(f.event) : 0;
    int64_t children_cpu = 0, children_device = 0;
    for (int c : f.children) {
      children_cpu += fes[c].cpu_time_total_ns;
      children_device += fes[c].device_time_total_ns;
    }
    f.self_cpu_time_total_ns = (f.event.is_async || !cpu) ? 0 : f.cpu_time_total_ns - children_cpu;
    int64_t children_cpu_mem = 0, children_device_mem = 0;
    for (int c : f.children) {
      children_cpu_mem += fes[c].cpu_memory_usage;
      children_device_mem += fes[c].device_memory_usage;
    }
    const bool own = cpu && !f.event.is_async;
    f.self_cpu_memory_usage = own ? f.cpu_memory_usage - children_cpu_mem : 0;
    f.self_device_memory_usage = own ? f.device_memory_usage - children_device_mem : 0;
    if (f.event.is_async || !use_device) {
      f.device_time_total_ns = f.self_device_time_total_ns = 0;
    } else if (cpu) {
      f.device_time_total_ns = f.kernel_time_ns + children_device;
      f.self_device_time_total_ns = f.device_time_total_ns - children_device;
    } else {
      f.device_time_total_ns = f.self_device_time_total_ns = duration_ns(f.event);
    }
  }
}

}  // namespace

std::vector<FunctionEvent> build_function_events(const std::vector<TraceEvent>& events,
                                                 bool use_device, bool profile_memory) {
  // Memory records by time, each marked once some CPU event's span held it.
  std::vector<const TraceEvent*> memory;
  for (const TraceEvent& e : events)
    if (profile_memory && e.name == kMemoryEventName) memory.push_back(&e);
  std::stable_sort(memory.begin(), memory.end(),
                   [](const TraceEvent* a, const TraceEvent* b) { return a->start_ns < b->start_ns; });
  std::vector<bool> held(memory.size(), false);
  auto add_memory = [](FunctionEvent& f, const TraceEvent& m) {
    (m.device == EventDevice::Cuda ? f.device_memory_usage : f.cpu_memory_usage) += m.nbytes;
  };

  std::vector<FunctionEvent> fes;
  fes.reserve(events.size());
  for (const TraceEvent& e : events) {
    if (filtered_out(e.name)) continue;
    FunctionEvent f;
    f.event = e;
    f.key = rewrite_name(e.name);
    if (e.device == EventDevice::Cpu && !memory.empty()) {
      auto first = std::lower_bound(memory.begin(), memory.end(), e.start_ns,
                                    [](const TraceEvent* m, int64_t t) { return m->start_ns < t; });
      for (auto it = first; it != memory.end() && (*it)->start_ns <= e.end_ns; ++it) {
        add_memory(f, **it);
        held[size_t(it - memory.begin())] = true;
      }
    }
    fes.push_back(std::move(f));
  }
  // Records inside no event, and every out-of-memory record, are events of
  // their own: zero-length CPU events at their time (Python's
  // createFunctionEventForMemoryEvents).
  auto own_event = [&](const TraceEvent& m) {
    FunctionEvent f;
    f.event = m;
    f.event.device = EventDevice::Cpu;
    f.event.end_ns = f.event.start_ns;
    f.event.correlation_id = f.event.linked_correlation_id = 0;
    f.event.is_async = f.event.is_user_annotation = false;
    f.key = f.event.name;
    add_memory(f, m);
    fes.push_back(std::move(f));
  };
  for (size_t i = 0; i < memory.size(); ++i)
    if (!held[i]) own_event(*memory[i]);
  for (const TraceEvent& e : events)
    if (profile_memory && e.name == kOutOfMemoryEventName) own_event(e);

  // Python sorts before attributing; the order of each op's kernels follows.
  std::stable_sort(fes.begin(), fes.end(), [](const FunctionEvent& a, const FunctionEvent& b) {
    return std::make_tuple(a.event.start_ns, -a.event.end_ns) <
           std::make_tuple(b.event.start_ns, -b.event.end_ns);
  });
  // Device work (and the runtime call that launched it) points at its CPU op
  // through the linked correlation id. Only front-end ops (no linked id) own
  // work: runtime calls' own ids are CUPTI's and can equal an op's id.
  std::unordered_map<uint64_t, std::vector<int>> linked;
  for (int i = 0; i < static_cast<int>(fes.size()); ++i)
    if (fes[i].event.linked_correlation_id > 0) linked[fes[i].event.linked_correlation_id].push_back(i);
  for (FunctionEvent& op : fes) {
    if (op.event.linked_correlation_id != 0 || !is_sync_cpu(op)) continue;
    auto it = linked.find(op.event.correlation_id);
    if (it == linked.end()) continue;
    for (int j : it->second) {
      FunctionEvent& other = fes[j];
      if (other.event.device == EventDevice::Cuda)
        op.kernels.push_back(j);
      else  // a runtime call: it belongs on the launching op's thread
        other.event.thread = op.event.thread;
    }
  }
  link_cpu_children(fes);
  remove_dup_nodes(fes);
  compute_totals(fes, use_device);
  return fes;
}

std::vector<OpStats> key_averages(const std::vector<FunctionEvent>& events) {
  std::vector<OpStats> rows;
  std::map<std::tuple<std::string, int, bool>, size_t> index;
  for (const FunctionEvent& f : events) {
    auto key = std::make_tuple(f.key, static_cast<int>(f.event.device), f.event.is_user_annotation);
    auto [it, inserted] = index.emplace(key, rows.size());
    if (inserted) {
      OpStats s;
      s.name = f.key;
      s.device = f.event.device;
      s.is_user_annotation = f.event.is_user_annotation;
      s.is_async = f.event.is_async;
      rows.push_back(std::move(s));
    }
    OpStats& s = rows[it->second];
    s.count += 1;
    s.cpu_time_total_ns += f.cpu_time_total_ns;
    s.self_cpu_time_total_ns += f.self_cpu_time_total_ns;
    s.device_time_total_ns += f.device_time_total_ns;
    s.self_device_time_total_ns += f.self_device_time_total_ns;
    s.cpu_memory_usage += f.cpu_memory_usage;
    s.self_cpu_memory_usage += f.self_cpu_memory_usage;
    s.device_memory_usage += f.device_memory_usage;
    s.self_device_memory_usage += f.self_device_memory_usage;
  }
  return rows;
}

namespace {
struct SortKeyName {
  SortKey key;
  const char* name;
};
// Python's names; "cuda" is read as "device" there, so both spellings work.
constexpr SortKeyName kSortKeys[] = {
    {SortKey::CpuTime, "cpu_time"},
    {SortKey::CudaTime, "cuda_time"},
    {SortKey::CpuTimeTotal, "cpu_time_total"},
    {SortKey::CudaTimeTotal, "cuda_time_total"},
    {SortKey::SelfCpuTimeTotal, "self_cpu_time_total"},
    {SortKey::SelfCudaTimeTotal, "self_cuda_time_total"},
    {SortKey::Count, "count"},
    {SortKey::CpuMemoryUsage, "cpu_memory_usage"},
    {SortKey::SelfCpuMemoryUsage, "self_cpu_memory_usage"},
    {SortKey::CudaMemoryUsage, "cuda_memory_usage"},
    {SortKey::SelfCudaMemoryUsage, "self_cuda_memory_usage"},
};
}  // namespace

std::optional<SortKey> parse_sort_key(const std::string& s) {
  std::string n = s;
  const auto pos = n.find("device");
  if (pos != std::string::npos) n.replace(pos, 6, "cuda");
  for (const auto& k : kSortKeys)
    if (n == k.name) return k.key;
  return std::nullopt;
}

const std::vector<std::string>& sort_key_names() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> v;
    for (const auto& k : kSortKeys) v.emplace_back(k.name);
    return v;
  }();
  return names;
}

const char* sort_key_name(SortKey key) {
  for (const auto& k : kSortKeys)
    if (k.key == key) return k.name;
  return "?";
}

namespace {
double sort_value(const OpStats& s, SortKey key) {
  switch (key) {
    case SortKey::CpuTime: return s.cpu_time_avg_ns();
    case SortKey::CudaTime: return s.device_time_avg_ns();
    case SortKey::CpuTimeTotal: return double(s.cpu_time_total_ns);
    case SortKey::CudaTimeTotal: return double(s.device_time_total_ns);
    case SortKey::SelfCpuTimeTotal: return double(s.self_cpu_time_total_ns);
    case SortKey::SelfCudaTimeTotal: return double(s.self_device_time_total_ns);
    case SortKey::Count: return double(s.count);
    case SortKey::CpuMemoryUsage: return double(s.cpu_memory_usage);
    case SortKey::SelfCpuMemoryUsage: return double(s.self_cpu_memory_usage);
    case SortKey::CudaMemoryUsage: return double(s.device_memory_usage);
    case SortKey::SelfCudaMemoryUsage: return double(s.self_device_memory_usage);
  }
  return 0.0;
}
}  // namespace

std::vector<OpStats> sort_rows(std::vector<OpStats> rows, SortKey key) {
  std::stable_sort(rows.begin(), rows.end(), [key](const OpStats& a, const OpStats& b) {
    return sort_value(a, key) > sort_value(b, key);
  });
  return rows;
}

}  // namespace attnprof
