// NVTX ranges named like the profiler's user scopes, so Nsight tools see the
// same steps and forwards. Compiles to nothing without the NVTX3 headers.
#pragma once

#if defined(ATTNPROF_HAVE_NVTX)
#include <nvtx3/nvToolsExt.h>
#endif

namespace attnprof {

class NvtxRange {
 public:
  explicit NvtxRange(const char* name) {
#if defined(ATTNPROF_HAVE_NVTX)
    nvtxRangePushA(name);
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#if defined(ATTNPROF_HAVE_NVTX)
    nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace attnprof
