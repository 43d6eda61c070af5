// Can the sm_90a kernels run here? One answer for the operators' checks
// (ops_sm90.cpp), the autograd backward's choice (ops_autograd.cpp) and the
// custom-flash-sm90 variant's supports(): each reason is a phrase the caller
// prefixes with its own name. CUDA builds only.
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/cuda/CUDAContext.h>

#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

namespace attnprof::flash_sm90 {

// wgmma and TMA are sm_90a instructions: compute capability 9.0 exactly.
inline std::optional<std::string> device_unsupported(c10::DeviceIndex index) {
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(index);
  if (prop->major == 9 && prop->minor == 0) return std::nullopt;
  std::ostringstream why;
  why << "needs a compute capability 9.0 GPU (Hopper, e.g. H100/H200: wgmma and TMA); "
      << c10::Device(c10::kCUDA, index) << " is " << prop->name << " with compute capability " << prop->major << "."
      << prop->minor;
  return why.str();
}

// The tensor maps describe dense [slabs][rows][head_dim] tensors, and TMA reads
// from 16-byte aligned addresses only.
inline std::optional<std::string> layout_unsupported(const at::Tensor& t, const char* name) {
  const bool contiguous = t.is_contiguous();
  if (contiguous && reinterpret_cast<uintptr_t>(t.data_ptr()) % 16 == 0) return std::nullopt;
  std::ostringstream why;
  if (!contiguous)
    why << name << " must be contiguous (sizes " << t.sizes() << ", strides " << t.strides()
        << "); call .contiguous() first";
  else
    why << name << " must start at a 16-byte aligned address (storage offset " << t.storage_offset() << ")";
  return why.str();
}

}  // namespace attnprof::flash_sm90
