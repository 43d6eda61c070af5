#include "attnprof/report/launch_facts.h"

#include <fmt/format.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <type_traits>
#include <unordered_map>

#include "attnprof/report/key_averages_table.h"
#include "attnprof/report/table_data.h"

namespace attnprof::report {

using nlohmann::json;

namespace {

const json* args_of(const json& e) {
  auto it = e.find("args");
  return it != e.end() && it->is_object() ? &*it : nullptr;
}

// The trace is untrusted input: a number that does not fit T (1e300 as an int,
// 2^64-1 as an int64) is "absent", not converted (that would be undefined
// behaviour for floats and a silently wrapped value for integers).
template <typename T>
std::optional<T> number_in_range(const json& v) {
  if constexpr (std::is_floating_point_v<T>) {
    if (v.is_number()) return v.get<double>();
  } else {
    using lim = std::numeric_limits<T>;
    if (v.is_number_unsigned()) {
      const uint64_t u = v.get<uint64_t>();
      if (u <= static_cast<uint64_t>(lim::max())) return static_cast<T>(u);
    } else if (v.is_number_integer()) {
      const int64_t i = v.get<int64_t>();
      if (i >= int64_t(lim::min()) && i <= int64_t(lim::max())) return static_cast<T>(i);
    } else if (v.is_number_float()) {
      // -min is a power of two, exactly representable; max is not (for int64).
      const double d = v.get<double>();
      if (d >= double(lim::min()) && d < -double(lim::min())) return static_cast<T>(d);
    }
  }
  return std::nullopt;
}

template <typename T>
T number_or(const json& args, const char* key, T fallback) {
  auto it = args.find(key);
  return it != args.end() ? number_in_range<T>(*it).value_or(fallback) : fallback;
}

void read_dim3(const json& args, const char* key, int out[3]) {
  auto it = args.find(key);
  if (it == args.end() || !it->is_array()) return;
  for (size_t i = 0; i < 3 && i < it->size(); ++i)
    if ((*it)[i].is_number_integer())
      if (const auto v = number_in_range<int>((*it)[i])) out[i] = *v;
}

// The formula's occupancy and what limits it; where the grid cannot fill the
// SMs at that occupancy, also what it does fill (CUPTI's estimate's model).
// CUPTI's own figure only where the formula had no device limits.
std::string occupancy_cell(const KernelLaunch& k) {
  if (k.theoretical_occupancy_pct) {
    std::string s = fmt::format("{:.0f}% ({})", *k.theoretical_occupancy_pct, k.occupancy_limiter);
    if (k.grid_occupancy_pct && *k.grid_occupancy_pct + 0.5 < *k.theoretical_occupancy_pct)
      s += fmt::format(", grid {:.0f}%", *k.grid_occupancy_pct);
    return s;
  }
  return k.est_occupancy_pct ? fmt::format("{:.0f}%", *k.est_occupancy_pct) : std::string("not measured");
}

}  // namespace

std::vector<KernelLaunch> launch_facts(const json& trace, const std::vector<ScopeStats::Launch>& work) {
  std::unordered_map<uint64_t, const json*> device_events;
  std::unordered_map<uint64_t, std::string> launchers;
  auto events = trace.find("traceEvents");
  if (events != trace.end() && events->is_array()) {
    for (const json& e : *events) {
      const json* args = args_of(e);
      if (!args || !e.contains("cat") || !e["cat"].is_string()) continue;
      const auto corr = number_or<int64_t>(*args, "correlation", -1);
      if (corr < 0) continue;
      const std::string cat = e["cat"].get<std::string>();
      if (cat == "kernel" || cat == "gpu_memcpy" || cat == "gpu_memset")
        device_events[static_cast<uint64_t>(corr)] = &e;
      else if ((cat == "cuda_runtime" || cat == "cuda_driver") && e.contains("name") && e["name"].is_string())
        launchers[static_cast<uint64_t>(corr)] = e["name"].get<std::string>();
    }
  }
  std::vector<KernelLaunch> out;
  for (const auto& w : work) {
    KernelLaunch k;
    k.name = w.name;
    k.time_us = w.time_us;
    if (auto l = launchers.find(w.correlation_id); l != launchers.end()) k.launch_api = l->second;
    if (auto d = device_events.find(w.correlation_id); d != device_events.end()) {
      const json& args = (*d->second)["args"];
      read_dim3(args, "grid", k.grid);
      read_dim3(args, "block", k.block);
      k.registers_per_thread = number_or<int>(args, "registers per thread", 0);
      k.shared_memory_bytes = number_or<int64_t>(args, "shared memory", 0);
      if (args.contains("est. achieved occupancy %")) {
        const double occ = number_or<double>(args, "est. achieved occupancy %", 0.0);
        // CUPTI reports 0 for launches it cannot model: driver-API launches such
        // as cuDNN's cuLaunchKernelEx, and (seen on the H200) our flash kernel,
        // launched with cudaLaunchKernel and >48 KB of dynamic shared memory. A
        // kernel that ran had some occupancy: 0 means "not measured".
        if (occ > 0.0) k.est_occupancy_pct = occ;
      }
    }
    out.push_back(std::move(k));
  }
  return out;
}

std::string format_launch_table(const std::vector<KernelLaunch>& launches) {
  Table t;
  // Display only (the summary's "launches" carry the numbers): cells are text.
  t.columns = {number_column("#", "index"),         text_column("Kernel", "kernel"),
               number_column("Time", "time"),       text_column("Launch API", "launch_api"),
               text_column("Grid", "grid"),         text_column("Block", "block"),
               number_column("Regs", "registers"),  number_column("Smem", "shared_memory"),
               number_column("Est. occupancy", "est_occupancy")};
  int i = 0;
  for (const KernelLaunch& k : launches) {
    const bool is_kernel = k.block[0] > 0;
    std::string name = k.name.size() > 60 ? k.name.substr(0, 57) + "..." : k.name;
    t.rows.push_back({
        std::to_string(++i), std::move(name), format_time_us(k.time_us), k.launch_api.empty() ? "?" : k.launch_api,
        is_kernel ? fmt::format("{}x{}x{}", k.grid[0], k.grid[1], k.grid[2]) : "-",
        is_kernel ? fmt::format("{}x{}x{}", k.block[0], k.block[1], k.block[2]) : "-",
        is_kernel ? std::to_string(k.registers_per_thread) : std::string("-"),
        is_kernel ? fmt::format("{} B", k.shared_memory_bytes) : std::string("-"),
        is_kernel ? occupancy_cell(k) : std::string("-"),
    });
  }
  return to_text(t);
}

}  // namespace attnprof::report
