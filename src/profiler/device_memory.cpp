#include "attnprof/device_memory.h"

#include <unistd.h>

#include <c10/core/Device.h>

#if defined(ATTNPROF_TORCH_CUDA)
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace attnprof {

std::optional<MemoryBudget> available_memory(const std::string& device) {
  if (device.rfind("cuda", 0) != 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGE_SIZE);
    if (pages <= 0 || page <= 0) return std::nullopt;
    return MemoryBudget{uint64_t(pages) * uint64_t(page) / 2, "allowed (half of RAM)"};
  }
#if defined(ATTNPROF_TORCH_CUDA)
  try {
    const c10::Device d(device);
    c10::cuda::CUDAGuard guard(d.has_index() ? d.index() : 0);
    c10::cuda::CUDACachingAllocator::emptyCache();
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) != cudaSuccess) {
      (void)cudaGetLastError();
      return std::nullopt;
    }
    return MemoryBudget{uint64_t(free_bytes), "free"};
  } catch (const std::exception&) {
    return std::nullopt;
  }
#else
  return std::nullopt;
#endif
}

void release_cached_memory(const std::string& device) noexcept {
#if defined(ATTNPROF_TORCH_CUDA)
  if (device.rfind("cuda", 0) != 0) return;
  try {
    c10::cuda::CUDACachingAllocator::emptyCache();
  } catch (...) {
  }
#else
  (void)device;
#endif
}

bool is_out_of_memory_reason(const std::string& reason) {
  // c10::OutOfMemoryError: "CUDA out of memory. Tried to allocate ...";
  // the CPU allocator: "DefaultCPUAllocator: not enough memory: ..." or, past
  // what the system grants, "[enforce fail at alloc_cpu.cpp:127] err == 0.
  // DefaultCPUAllocator: can't allocate memory: you tried to allocate ...".
  return reason.find("out of memory") != std::string::npos ||
         reason.find("not enough memory") != std::string::npos ||
         reason.find("can't allocate memory") != std::string::npos;
}

std::string out_of_memory_words(const std::string& reason) {
  // c10's enforce prefix names its source line, not the problem.
  const size_t from = reason.find("DefaultCPUAllocator:");
  return from == std::string::npos ? reason : reason.substr(from);
}

}  // namespace attnprof
