// What the Hopper kernel tests share (test_flash_sm90.cpp, test_flash_sm90_fp8.cpp).
#pragma once

#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/cuda.h>
#ifdef ATTNPROF_HAVE_SM90_KERNELS
#include <ATen/cuda/CUDAContext.h>
#endif

#include <string>

namespace attnprof::testing {

// Why operator `op`'s GPU tests cannot run here, or "" when they can: a CUDA
// device, the operator's sm_90a CUDA kernel in this build, compute capability 9.0.
inline std::string sm90_why_not_runnable(const char* op) {
  if (!torch::cuda::is_available()) return "no CUDA device: the sm_90a kernel tests need a GPU";
  if (!c10::Dispatcher::singleton().findSchemaOrThrow(op, "").hasKernelForDispatchKey(c10::DispatchKey::CUDA))
    return "attnprof was built without its sm_90a kernels";
#ifdef ATTNPROF_HAVE_SM90_KERNELS
  const cudaDeviceProp* prop = at::cuda::getCurrentDeviceProperties();
  if (prop->major != 9 || prop->minor != 0)
    return std::string("the sm_90a kernel needs a compute capability 9.0 GPU; this is ") + prop->name;
#endif
  return "";
}

}  // namespace attnprof::testing
