// How much memory a forward may use on a device, asked before running it, and
// giving cached memory back after an out-of-memory error. No LibTorch types.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace attnprof {

struct MemoryBudget {
  uint64_t bytes = 0;
  std::string what;  // "free" (CUDA), "allowed (half of RAM)" (CPU)
};

// CUDA: cudaMemGetInfo's free bytes after the caching allocator has returned
// its unused blocks. CPU: half the physical RAM (sysconf), since the machine
// runs other things and swapping would ruin the timing long before an error.
// nullopt when the device cannot be asked (no CUDA build, bad device string).
std::optional<MemoryBudget> available_memory(const std::string& device);

// Empties the CUDA caching allocator (after an OOM, so the next point starts
// clean). No-op on CPU and in builds without CUDA.
void release_cached_memory(const std::string& device) noexcept;

// Whether a failure reason is an out-of-memory error (CUDA or CPU allocator).
bool is_out_of_memory_reason(const std::string& reason);
// Such a reason without c10's "[enforce fail at alloc_cpu.cpp:N] err == 0." prefix.
std::string out_of_memory_words(const std::string& reason);

}  // namespace attnprof
