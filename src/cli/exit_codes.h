#pragma once

// Documented in README.md ("Errors and exit codes"). A stop signal ends a run
// with 128 + its number (130 SIGINT, 143 SIGTERM, 129 SIGHUP, ...; attnprof/interrupt.h).
namespace attnprof::exit_code {
inline constexpr int kOk = 0;
inline constexpr int kRunFailed = 1;     // a variant ran and failed
inline constexpr int kUsage = 2;         // bad flag or value
inline constexpr int kUnsupported = 3;   // the one requested variant cannot run here
inline constexpr int kOutput = 4;        // outputs cannot be written (or compare's inputs read)
inline constexpr int kStdout = 5;        // standard output lost (closed, full, pipe closed); files written
inline constexpr int kBusy = 6;          // another attnprof run holds the output directory
inline constexpr int kRendezvous = 7;    // the ranks of a multi-GPU run could not meet
}  // namespace attnprof::exit_code
