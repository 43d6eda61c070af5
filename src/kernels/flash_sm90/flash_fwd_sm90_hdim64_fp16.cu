// The Hopper attention forward for head_dim 64, fp16: one instantiation per
// file so the build compiles the kernels in parallel.
#include "kernels/flash_sm90/flash_fwd_sm90_launch.cuh"

namespace attnprof::flash_sm90 {
template void run_fwd_hdim<64, __half>(const FwdParams&, CUstream_st*);
template FwdWorkspace fwd_workspace_hdim<64, __half>(const FwdParams&);
}  // namespace attnprof::flash_sm90
