#include "attnprof/report/ceilings_cache.h"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>

#include "attnprof/io/files.h"
#include "attnprof/io/text.h"
#include "attnprof/report/summary.h"

namespace attnprof::report {

using nlohmann::json;

std::string ceilings_cache_dir(const char* xdg_cache_home, const char* home) {
  // The XDG base-directory rules: a relative XDG_CACHE_HOME is to be ignored.
  if (xdg_cache_home && xdg_cache_home[0] == '/') return io::join_path(xdg_cache_home, "attnprof/ceilings");
  if (home && home[0] == '/') return io::join_path(home, ".cache/attnprof/ceilings");
  return "";
}

std::string ceilings_cache_dir() { return ceilings_cache_dir(std::getenv("XDG_CACHE_HOME"), std::getenv("HOME")); }

std::string ceilings_cache_name(const std::string& device, const std::string& driver) {
  std::string name = device + "-" + driver;
  for (char& c : name) {
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  // "." and ".." alone, or a leading dot, would name the directory or hide the file.
  if (!name.empty() && name[0] == '.') name[0] = '_';
  return name + ".json";
}

std::string ceilings_cache_text(const DeviceCeilings& c) {
  const json j = {{"tool", "attnprof"}, {"kind", "device ceilings"}, {"version", kCeilingsCacheVersion},
                  {"ceilings", ceilings_json(c)}};
  return j.dump(2) + "\n";
}

std::optional<DeviceCeilings> parse_ceilings_cache(const std::string& bytes, const std::string& device,
                                                   const std::string& driver, std::string* why) {
  auto refuse = [why](const std::string& reason) -> std::optional<DeviceCeilings> {
    if (why) *why = io::visible(reason);
    return std::nullopt;
  };
  if (bytes.size() > kMaxCeilingsCacheBytes)
    return refuse(fmt::format("{} bytes is larger than a calibration ({} KiB at most)", bytes.size(),
                              kMaxCeilingsCacheBytes >> 10));
  if (json_nesting_depth(bytes) > kMaxSummaryDepth) return refuse("nested too deep; not a calibration");
  const json j = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return refuse("not valid JSON");
  if (!j.is_object() || j.value("tool", json()) != "attnprof" || j.value("kind", json()) != "device ceilings")
    return refuse("not an attnprof calibration");
  if (j.value("version", json()) != kCeilingsCacheVersion)
    return refuse(fmt::format("calibration version {} (this attnprof reads {})", j.value("version", json()).dump(),
                              kCeilingsCacheVersion));
  if (!j.contains("ceilings")) return refuse("no 'ceilings' object");
  DeviceCeilings c;
  try {
    c = read_ceilings(j["ceilings"], "calibration");
  } catch (const SummaryError& e) {
    return refuse(e.what());
  }
  if (c.device != device) return refuse(fmt::format("measured on '{}', not '{}'", c.device, device));
  if (c.driver != driver) return refuse(fmt::format("measured with driver {}, not {}", c.driver, driver));
  for (const auto& [name, v] : {std::pair{"gemm_bf16_tflops", c.gemm_bf16_tflops},
                                {"gemm_fp16_tflops", c.gemm_fp16_tflops}, {"gemm_fp32_tflops", c.gemm_fp32_tflops},
                                {"copy_gbps", c.copy_gbps}})
    if (!(v > 0.0)) return refuse(fmt::format("'{}' is {:g}: not a measurement", name, v));
  if (c.measured_at.empty()) return refuse("no 'measured_at'");
  c.source = "cached";
  return c;
}

std::optional<DeviceCeilings> read_ceilings_cache(const std::string& path, const std::string& device,
                                                  const std::string& driver, std::string* why) {
  if (!io::path_exists(path)) {
    if (why) *why = "not cached yet";
    return std::nullopt;
  }
  std::string bytes;
  try {
    bytes = io::read_file(path, kMaxCeilingsCacheBytes);
  } catch (const io::FileError& e) {
    if (why) *why = io::visible(e.what());
    return std::nullopt;
  }
  auto c = parse_ceilings_cache(bytes, device, driver, why);
  if (c) c->cache_file = path;
  return c;
}

std::string parse_nvidia_driver_version(const std::string& text) {
  const std::string marker = "Kernel Module";
  size_t at = text.find(marker);
  if (at == std::string::npos) return "";
  // The first word after it made of digits and dots, with a dot: "580.95.05".
  // The open module's line has "for x86_64" first.
  const size_t line_end = std::min(text.find('\n', at), text.size());
  at += marker.size();
  while (at < line_end) {
    const size_t begin = text.find_first_not_of(" \t", at);
    if (begin == std::string::npos || begin >= line_end) break;
    const size_t end = std::min(text.find_first_of(" \t\n", begin), line_end);
    const std::string word = text.substr(begin, end - begin);
    if (word.find_first_not_of("0123456789.") == std::string::npos && word.find('.') != std::string::npos &&
        word.front() != '.')
      return word;
    at = end;
  }
  return "";
}

void write_ceilings_cache(const std::string& path, const DeviceCeilings& c) {
  const size_t slash = path.rfind('/');
  if (slash != std::string::npos && slash > 0) io::ensure_writable_dir(path.substr(0, slash));
  io::write_file_atomic(path, ceilings_cache_text(c));
}

}  // namespace attnprof::report
