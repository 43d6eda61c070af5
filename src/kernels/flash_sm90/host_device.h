// ATTNPROF_SM90_HD marks what both the host (planning a launch) and the
// kernel (walking that plan) call: tile_order.h, tail_split.h.
#pragma once

#if defined(__CUDACC__)
#define ATTNPROF_SM90_HD __host__ __device__
#else
#define ATTNPROF_SM90_HD
#endif
