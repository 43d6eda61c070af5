// Programmatic dependent launch (sm_90 and later): PTX wrappers for kernels
// launched with programmatic stream serialization. Kernels built for earlier
// architectures too call them; there they compile to nothing (a kernel
// starts only after the one before it has ended, so there is nothing to wait
// for and no one to let in early).
#pragma once

#include <cuda_runtime.h>

namespace attnprof::kernels {

// Host: lets the kernel launched with `config` start under programmatic stream
// serialization when `on` (compute capability 9.0 and later), i.e. set up
// while the previous kernel on the stream drains; the kernel must call
// grid_dependency_wait() before its first global memory access. `attr` holds
// the attribute and must outlive the cudaLaunchKernelEx call.
inline void allow_programmatic_launch(cudaLaunchConfig_t& config, cudaLaunchAttribute& attr, bool on) {
  attr.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr.val.programmaticStreamSerializationAllowed = 1;
  config.attrs = &attr;
  config.numAttrs = on ? 1 : 0;
}

// For kernels launched with programmatic stream serialization: the kernel may
// start while the previous kernel on its stream still runs. Wait blocks until
// that kernel has completed and its memory operations are visible; call it
// before the first global memory access. Launch-dependents lets the next such
// kernel on the stream start its blocks once every block of this one has
// called it (or exited); they still wait for this kernel's completion.
__device__ __forceinline__ void grid_dependency_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}
__device__ __forceinline__ void grid_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

}  // namespace attnprof::kernels
