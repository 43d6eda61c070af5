// The Hopper attention backward for head_dim 64, bf16: one instantiation per
// file so the build compiles the kernels in parallel.
#include "kernels/flash_sm90/flash_bwd_sm90_launch.cuh"

namespace attnprof::flash_sm90 {
template void run_bwd_hdim<64, __nv_bfloat16>(const flash::BwdParams&, CUstream_st*);
}  // namespace attnprof::flash_sm90
