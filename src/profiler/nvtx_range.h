// NVTX ranges named like the profiler's user scopes, so Nsight tools see the
// same steps and forwards. Compiles to nothing without the NVTX3 headers.
//
// Each scope is two ranges of one name: a push/pop range, nested on the
// calling thread's timeline, and a start/end range, which belongs to the
// process. Nsight Compute's filter matches a push/pop range only for kernels
// launched by the thread that pushed it (`--nvtx-include attn_fwd/`), and
// autograd launches a backward's kernels from its own device thread; the
// start/end range (`--nvtx-include attn_bwd`, no slash) catches them from any
// thread.
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
    id_ = nvtxRangeStartA(name);
#else
    (void)name;
#endif
  }
  ~NvtxRange() {
#if defined(ATTNPROF_HAVE_NVTX)
    nvtxRangeEnd(id_);
    nvtxRangePop();
#endif
  }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;

 private:
#if defined(ATTNPROF_HAVE_NVTX)
  nvtxRangeId_t id_ = 0;
#endif
};

}  // namespace attnprof
