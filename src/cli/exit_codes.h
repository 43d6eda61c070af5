#pragma once

// Documented in README.md ("Errors and exit codes").
namespace attnprof::exit_code {
inline constexpr int kOk = 0;
inline constexpr int kRunFailed = 1;     // a variant ran and failed
inline constexpr int kUsage = 2;         // bad flag or value
inline constexpr int kUnsupported = 3;   // the one requested variant cannot run here
inline constexpr int kOutput = 4;        // outputs cannot be written
}  // namespace attnprof::exit_code
