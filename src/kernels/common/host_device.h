// ATTNPROF_HOST_DEVICE marks what both the host (planning a launch, the
// variants' facts) and the kernels call: tile_order.h, tail_split.h, the
// portable kernels' shared-memory geometry.
#pragma once

#if defined(__CUDACC__)
#define ATTNPROF_HOST_DEVICE __host__ __device__
#else
#define ATTNPROF_HOST_DEVICE
#endif
