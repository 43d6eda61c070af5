#include "attnprof/device.h"

#include <c10/core/Device.h>
#include <torch/cuda.h>
#include <torch/version.h>

#if defined(ATTNPROF_TORCH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <cuda_runtime_api.h>
#endif

#include <stdexcept>

namespace attnprof {

bool cuda_available() { return torch::cuda::is_available(); }
int cuda_device_count() { return static_cast<int>(torch::cuda::device_count()); }

std::string resolve_device(const std::string& requested) {
  if (requested == "cpu") return "cpu";
  if (requested == "auto") return cuda_available() ? "cuda:0" : "cpu";
  int index = 0;
  if (requested != "cuda") {
    const std::string prefix = "cuda:";
    const std::string rest = requested.rfind(prefix, 0) == 0 ? requested.substr(prefix.size()) : "";
    if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos || rest.size() > 4)
      throw std::invalid_argument("invalid --device '" + requested + "' (valid: auto, cpu, cuda, cuda:N)");
    index = std::stoi(rest);
  }
  if (!cuda_available())
    throw std::invalid_argument("--device " + requested + ": no CUDA device is available on this machine");
  if (index >= cuda_device_count())
    throw std::invalid_argument("--device " + requested + ": only " + std::to_string(cuda_device_count()) +
                                " CUDA device(s) present (cuda:0.." + std::to_string(cuda_device_count() - 1) + ")");
  return "cuda:" + std::to_string(index);
}

Environment describe_environment(const Problem& p) {
  Environment env;
  env.torch_version = TORCH_VERSION;
  env.attnprof_version = ATTNPROF_VERSION;
  env.device_name = "CPU";
#if defined(ATTNPROF_TORCH_CUDA)
  if (p.on_cuda()) {
    const at::Device d(p.device);
    env.device_name = at::cuda::getDeviceProperties(d.index())->name;
    int rt = 0;
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
      env.cuda_runtime = std::to_string(rt / 1000) + "." + std::to_string((rt % 1000) / 10);
  }
#else
  (void)p;
#endif
  return env;
}

std::optional<report::DeviceLimits> device_limits(const Problem& p) {
#if defined(ATTNPROF_TORCH_CUDA)
  if (!p.on_cuda()) return std::nullopt;
  const cudaDeviceProp* d = at::cuda::getDeviceProperties(at::Device(p.device).index());
  report::DeviceLimits l;
  l.name = d->name;
  l.compute_major = d->major, l.compute_minor = d->minor;
  l.sm_count = d->multiProcessorCount;
  l.warp_size = d->warpSize;
  l.max_threads_per_block = d->maxThreadsPerBlock;
  l.max_threads_per_sm = d->maxThreadsPerMultiProcessor;
  l.max_blocks_per_sm = d->maxBlocksPerMultiProcessor;
  l.regs_per_sm = d->regsPerMultiprocessor;
  l.regs_per_block = d->regsPerBlock;
  l.smem_per_sm = int64_t(d->sharedMemPerMultiprocessor);
  l.smem_per_block_optin = int64_t(d->sharedMemPerBlockOptin);
  l.smem_reserved_per_block = int64_t(d->reservedSharedMemPerBlock);
  report::apply_allocation_rules(l);
  return l;
#else
  (void)p;
  return std::nullopt;
#endif
}

void synchronize(const Problem& p) {
  if (p.on_cuda()) torch::cuda::synchronize(at::Device(p.device).index());
}

}  // namespace attnprof
