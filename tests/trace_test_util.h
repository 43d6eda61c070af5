// Kineto traces for the report tests: the committed real ones (tests/data/traces:
// an H200 run of four variants at 1x2x128x64 bf16, and a CPU run of two at
// 1x2x64x32, as attnprof wrote them) and small synthetic ones built to order.
#pragma once

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

#include "attnprof/io/files.h"

namespace attnprof::testing {

inline const std::vector<std::string>& gpu_fixture_variants() {
  static const std::vector<std::string> v{"naive", "sdpa-math", "sdpa-cudnn", "sdpa-flash"};
  return v;
}
inline const std::vector<std::string>& cpu_fixture_variants() {
  static const std::vector<std::string> v{"naive", "sdpa-flash"};
  return v;
}
inline std::string gpu_fixture_dir() { return std::string(ATTNPROF_SOURCE_DIR) + "/tests/data/traces/h200_1x2x128x64"; }
inline std::string cpu_fixture_dir() { return std::string(ATTNPROF_SOURCE_DIR) + "/tests/data/traces/cpu_1x2x64x32"; }
inline std::string gpu_fixture(const std::string& variant, const std::string& ext = ".json.gz") {
  return gpu_fixture_dir() + "/" + variant + "/1_2_128_64_bf16" + ext;
}
inline std::string cpu_fixture(const std::string& variant, const std::string& ext = ".json.gz") {
  return cpu_fixture_dir() + "/" + variant + "/1_2_64_32_bf16" + ext;
}

// A JSON file, plain or gzip.
inline nlohmann::json load_json(const std::string& path) {
  std::string bytes = io::read_file(path);
  if (bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f) bytes = io::gzip_decompress(bytes);
  return nlohmann::json::parse(bytes);
}

// The kernels, memcpys and memsets attnprof counted in the first profiled
// forward (the summary's headline): an independent count of a forward's work.
inline int64_t summary_kernels_per_forward(const std::string& summary_path) {
  const nlohmann::json summary = load_json(summary_path);
  int64_t n = 0;
  for (const auto& k : summary.at("headline").at("kernels")) n += k.at("count").get<int64_t>();
  return n;
}

struct SynthWork {
  std::string name;
  double dur_us = 1.0;
  std::string cat = "kernel";  // or gpu_memcpy / gpu_memset
};

// A Kineto-shaped trace: per forward one ProfilerStep#N and one attn_fwd scope
// on CPU thread (pid 100, tid 100); per work item one cudaLaunchKernel inside
// attn_fwd and the device work on GPU 0 stream 7 after it, linked by
// correlation id and an "ac2g" flow pair; a gpu_user_annotation attn_fwd
// span around the forward's device work; then a cudaDeviceSynchronize with an
// unpaired flow start, as Kineto writes. Times in microseconds from `t0`.
inline nlohmann::json synthetic_trace(const std::vector<std::vector<SynthWork>>& forwards, double t0 = 1000.0) {
  using nlohmann::json;
  json events = json::array();
  int64_t corr = 500, ext = 1;
  double t = t0;
  for (size_t f = 0; f < forwards.size(); ++f) {
    const auto& work = forwards[f];
    const double fwd_start = t + 2.0;
    const double launches_end = fwd_start + 3.0 + 4.0 * static_cast<double>(work.size());
    const int64_t step_ext = ext++, fwd_ext = ext++;
    events.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "attn_fwd"}, {"pid", 100}, {"tid", 100},
                      {"ts", fwd_start}, {"dur", launches_end + 1.0 - fwd_start}, {"args", {{"External id", fwd_ext}}}});
    double device = launches_end;
    double first_device = -1, last_end = 0;
    for (size_t k = 0; k < work.size(); ++k) {
      const double launch = fwd_start + 3.0 + 4.0 * static_cast<double>(k);
      ++corr;
      events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaLaunchKernel"}, {"pid", 100}, {"tid", 100},
                        {"ts", launch}, {"dur", 3.0}, {"args", {{"External id", fwd_ext}, {"correlation", corr}}}});
      events.push_back({{"ph", "s"}, {"id", corr}, {"pid", 100}, {"tid", 100}, {"ts", launch}, {"cat", "ac2g"}, {"name", "ac2g"}});
      device = std::max(device, launch + 5.0);
      if (first_device < 0) first_device = device;
      events.push_back({{"ph", "X"}, {"cat", work[k].cat}, {"name", work[k].name}, {"pid", 0}, {"tid", 7}, {"ts", device},
                        {"dur", work[k].dur_us}, {"args", {{"External id", fwd_ext}, {"correlation", corr}, {"stream", 7}}}});
      events.push_back({{"ph", "f"}, {"id", corr}, {"pid", 0}, {"tid", 7}, {"ts", device}, {"cat", "ac2g"}, {"name", "ac2g"},
                        {"bp", "e"}});
      last_end = device + work[k].dur_us;
      device = last_end + 0.5;
    }
    if (first_device >= 0)
      events.push_back({{"ph", "X"}, {"cat", "gpu_user_annotation"}, {"name", "attn_fwd"}, {"pid", 0}, {"tid", 7},
                        {"ts", first_device}, {"dur", last_end - first_device}, {"args", {{"External id", fwd_ext}}}});
    const double sync = std::max(launches_end + 1.5, last_end + 0.5);
    events.push_back({{"ph", "X"}, {"cat", "cuda_runtime"}, {"name", "cudaDeviceSynchronize"}, {"pid", 100}, {"tid", 100},
                      {"ts", sync}, {"dur", 1.0}, {"args", {{"correlation", ++corr}}}});
    events.push_back({{"ph", "s"}, {"id", corr}, {"pid", 100}, {"tid", 100}, {"ts", sync}, {"cat", "ac2g"}, {"name", "ac2g"}});
    events.push_back({{"ph", "X"}, {"cat", "user_annotation"}, {"name", "ProfilerStep#" + std::to_string(f + 2)},
                      {"pid", 100}, {"tid", 100}, {"ts", t}, {"dur", sync + 2.0 - t}, {"args", {{"External id", step_ext}}}});
    t = sync + 10.0;
  }
  events.push_back({{"ph", "M"}, {"name", "process_name"}, {"pid", 100}, {"tid", 0}, {"ts", t0}, {"args", {{"name", "synthetic"}}}});
  events.push_back({{"ph", "X"}, {"cat", "Trace"}, {"name", "PyTorch Profiler (0)"}, {"pid", "Spans"},
                    {"tid", "PyTorch Profiler"}, {"ts", t0 - 50}, {"dur", t - t0 + 60}});
  return {{"schemaVersion", 1}, {"deviceProperties", json::array({{{"id", 0}, {"name", "Synthetic GPU"}}})},
          {"attnprof", {{"variant", "synthetic"}}}, {"traceEvents", events}};
}

}  // namespace attnprof::testing
