// The calibration cache: a device's measured ceilings (report::DeviceCeilings)
// in one small JSON file per device and driver under the user's cache
// directory, $XDG_CACHE_HOME/attnprof/ceilings/<device>-<driver>.json (or
// ~/.cache/...). Its bytes are untrusted (another version, a hand edit, a
// disk error): anything that is not a complete, plausible calibration of the
// same device and driver is refused with a reason, and the caller measures
// again. No LibTorch.
#pragma once

#include <optional>
#include <string>

#include "attnprof/report/counters.h"

namespace attnprof::report {

inline constexpr int kCeilingsCacheVersion = 2;  // 2: the fp8 GEMM
// A cache file is a few hundred bytes; anything past this is not one.
inline constexpr size_t kMaxCeilingsCacheBytes = 64 * 1024;

// $XDG_CACHE_HOME/attnprof/ceilings when XDG_CACHE_HOME is an absolute path,
// else $HOME/.cache/attnprof/ceilings; "" when neither is usable.
std::string ceilings_cache_dir(const char* xdg_cache_home, const char* home);
std::string ceilings_cache_dir();  // from this process's environment

// "<device>-<driver>.json", each byte outside [A-Za-z0-9._-] written as '_':
// "NVIDIA_H200-580.95.05.json".
std::string ceilings_cache_name(const std::string& device, const std::string& driver);

// The file's text: {"tool": "attnprof", "kind": "device ceilings", "version": 1, "ceilings": {...}}.
std::string ceilings_cache_text(const DeviceCeilings& c);

// The ceilings in `bytes` when they are a valid cache of `device` and
// `driver` (every field present, typed and in range, GEMM and copy figures
// above zero); else nullopt, with the reason in *why (one line).
std::optional<DeviceCeilings> parse_ceilings_cache(const std::string& bytes, const std::string& device,
                                                   const std::string& driver, std::string* why);

// The same for a file; a missing file reads as "not cached yet". The result's
// source is "cached" and cache_file `path`. Never throws.
std::optional<DeviceCeilings> read_ceilings_cache(const std::string& path, const std::string& device,
                                                  const std::string& driver, std::string* why);

// The kernel module's version in /proc/driver/nvidia/version's text ("NVRM
// version: NVIDIA UNIX x86_64 Kernel Module  580.95.05  Thu ..." -> "580.95.05");
// "" when the text holds none.
std::string parse_nvidia_driver_version(const std::string& proc_text);

// Writes the file atomically, making its directories. Throws io::FileError.
void write_ceilings_cache(const std::string& path, const DeviceCeilings& c);

}  // namespace attnprof::report
