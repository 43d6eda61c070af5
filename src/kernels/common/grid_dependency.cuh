// Programmatic dependent launch (sm_90 and later): PTX wrappers for kernels
// launched with programmatic stream serialization. Kernels built for earlier
// architectures too call them; there they compile to nothing (a kernel
// starts only after the one before it has ended, so there is nothing to wait
// for and no one to let in early).
#pragma once

namespace attnprof::kernels {

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
