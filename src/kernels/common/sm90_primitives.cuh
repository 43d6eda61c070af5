// PTX wrappers for Hopper's own data path (sm_90a): mbarriers, the tensor
// memory accelerator (TMA: cp.async.bulk.tensor), warpgroup register
// reallocation (setmaxnreg), named barriers, and the wgmma fences and
// shared-memory matrix descriptors. The wgmma instructions themselves are in
// sm90_wgmma.cuh. attnprof's own wrappers, not CUTLASS/CuTe: see the design
// note in docs/notes/flash_sm90_progress.md.
#pragma once

#include <cuda.h>  // CUtensorMap (a type only: nothing here links libcuda)

#include <cstdint>

#include "kernels/common/grid_dependency.cuh"  // programmatic dependent launch
#include "kernels/common/packed_halves.cuh"

namespace attnprof::kernels {

// ---- mbarrier (64-bit barrier object in shared memory) ----------------------

__device__ __forceinline__ void mbar_init(uint32_t bar, uint32_t arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");
}

// Makes the initialised barriers visible to the async proxy (TMA completes
// transactions on them) before the __syncthreads that publishes them.
__device__ __forceinline__ void fence_barrier_init() {
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");
}

// One arrival plus `bytes` of expected transactions: the phase completes when
// the TMA copies issued against this barrier have landed that many bytes.
__device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes)
               : "memory");
}

__device__ __forceinline__ bool mbar_try_wait(uint32_t bar, uint32_t parity) {
  uint32_t done;
  asm volatile(
      "{\n.reg .pred p;\n"
      "mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n"
      "selp.u32 %0, 1, 0, p;\n}\n"
      : "=r"(done)
      : "r"(bar), "r"(parity)
      : "memory");
  return done != 0;
}

__device__ __forceinline__ uint64_t global_timer_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
  return t;
}

// Waits until the barrier's phase with parity `parity` has completed (acquire:
// what the arriving threads wrote, and the TMA bytes, are visible after it).
// ATTNPROF_SM90_HANG_TRAP is a debug feature gate (CMake option
// ATTNPROF_SM90_HANG_TRAP, default OFF), not a tuning choice: with it a wait that lasts
// over 10 s traps, so a pipeline deadlock ends as a launch error rather than a
// hung process; release builds leave it out because a time-sliced GPU can
// legitimately pause a kernel that long.
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
#ifdef ATTNPROF_SM90_HANG_TRAP
  uint64_t start = 0;
  for (uint32_t n = 1; !mbar_try_wait(bar, parity); ++n) {
    if ((n & 0x3FFF) == 0) {
      const uint64_t now = global_timer_ns();
      if (start == 0) {
        start = now;
      } else if (now - start > 10ull * 1000 * 1000 * 1000) {
        __trap();
      }
    }
  }
#else
  while (!mbar_try_wait(bar, parity)) {
  }
#endif
}

// ---- TMA --------------------------------------------------------------------

__device__ __forceinline__ void prefetch_tensor_map(const CUtensorMap* map) {
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(reinterpret_cast<uint64_t>(map)) : "memory");
}

// Copies the box at (c0, c1, c2) (innermost first) of a 3-D tensor map into
// shared memory at `dst`, completing `bytes` of transactions on `bar`.
// Out-of-bounds elements arrive as zeros. `map` must live in kernel-parameter,
// constant or global memory: here a __grid_constant__ kernel parameter.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, uint32_t bar,
                                            int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes "
      "[%0], [%1, {%3, %4, %5}], [%2];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(map)), "r"(bar), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}

// Adds the box at (c0, c1, c2) of shared memory at `src` (laid out as the
// map's box, swizzle included) to a 3-D float32 tensor in global memory,
// element by element in L2 (TMA reduction). Completes as a bulk group:
// bulk_commit_group, then bulk_wait_group_read before `src` is written again.
__device__ __forceinline__ void tma_reduce_add_3d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
// Copies shared memory at `src` (laid out as the map's box, swizzle included)
// to the box at (c0, c1, c2) of a 3-D tensor map; elements out of the map's
// bounds are not written. Completes as a bulk group (as tma_reduce_add_3d).
__device__ __forceinline__ void tma_store_3d(const CUtensorMap* map, uint32_t src, int c0, int c1, int c2) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%2, %3, %4}], [%1];\n" ::"l"(
          reinterpret_cast<uint64_t>(map)),
      "r"(src), "r"(c0), "r"(c1), "r"(c2)
      : "memory");
}
__device__ __forceinline__ void bulk_commit_group() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
// Until at most kPending of this thread's bulk groups still read shared memory.
template <int kPending>
__device__ __forceinline__ void bulk_wait_group_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
}
// Until at most kPending of this thread's bulk groups are incomplete (their
// writes done).
template <int kPending>
__device__ __forceinline__ void bulk_wait_group() {
  asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
}

// Copies `bytes` (a multiple of 16; both addresses 16-byte aligned) from
// global memory to shared memory at `dst` without a tensor map, completing
// them on `bar`.
__device__ __forceinline__ void bulk_load_1d(uint32_t dst, const void* src, uint32_t bytes, uint32_t bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
      "l"(reinterpret_cast<uint64_t>(src)), "r"(bytes), "r"(bar)
      : "memory");
}

// Orders this thread's ordinary shared-memory stores before later reads of
// them by the async proxy (wgmma operands from shared memory, TMA stores).
__device__ __forceinline__ void fence_proxy_async_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

// Stores four 8x8 16-bit matrices: register r[i] holds matrix i in the mma
// fragment layout (lane l: row l / 4, columns 2(l % 4), +1), and lanes
// 8i..8i+7 give the addresses of matrix i's rows (16 bytes each).
__device__ __forceinline__ void stmatrix_x4(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr), "r"(r[0]),
               "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}
// The same, transposed: the stored rows are the fragment's columns.
__device__ __forceinline__ void stmatrix_x4_trans(uint32_t addr, const uint32_t (&r)[4]) {
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n" ::"r"(addr),
               "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
}

// ---- warpgroup register reallocation and named barriers ----------------------

// Every warp of a warpgroup must execute the same setmaxnreg; it takes effect
// only when the kernel has a register cap at entry (__launch_bounds__(n, 1)).
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}
template <int kRegs>
__device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegs));
}

// Hardware barrier `id` (1..15; 0 is __syncthreads) over `threads` threads:
// sync waits for the count, arrive only adds to it.
__device__ __forceinline__ void named_bar_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}
__device__ __forceinline__ void named_bar_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
}

// x as lane 0 of the warp has it. For a value that is warp-uniform but that
// ptxas cannot prove so (derived from threadIdx, read from shared memory, or
// flowing through loops with per-thread waits), this tells ptxas: it then
// keeps the value, and what is computed from it, in uniform registers, and
// does not serialise wgmma under branches on it (C7520).
template <typename T>
__device__ __forceinline__ T warp_uniform(T x) {
  return __shfl_sync(0xffffffffu, x, 0);
}

// ---- wgmma ordering ------------------------------------------------------------

// Before the first wgmma that reads registers (accumulators, A fragments)
// written by ordinary instructions.
__device__ __forceinline__ void wgmma_fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
// Waits until at most kPending committed groups of this warp are in flight.
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
}

// A wgmma accumulator of kSteps·16 columns as the register A operand of the
// next GEMM (sm90_wgmma.cuh: k16 step kk takes d[8kk + 2r], d[8kk + 2r + 1]
// packed into a[kk][r]), e.g. P of S = Q·Kᵀ for O += P·V.
template <typename Element, int kSteps>
__device__ __forceinline__ void pack_a_fragments(const float (&d)[8 * kSteps], uint32_t (&a)[kSteps][4]) {
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk)
#pragma unroll
    for (int r = 0; r < 4; ++r) a[kk][r] = pack2<Element>(d[8 * kk + 2 * r], d[8 * kk + 2 * r + 1]);
}

// The compiler sees a wgmma as an ordinary instruction that has finished when
// it issues. Pinning its registers here (after wgmma_wait, and before the
// issue) keeps the compiler from moving their uses across the wait or reusing
// their registers while the tensor cores still read or write them.
template <int N>
__device__ __forceinline__ void pin_registers(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
template <int N>
__device__ __forceinline__ void pin_registers(uint32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

// Shared-memory matrix descriptor for the 128-byte swizzle layout that TMA
// writes with CU_TENSOR_MAP_SWIZZLE_128B: rows of 128 bytes, 8-row atoms of
// 1024 bytes (the start of every atom must be 1024-byte aligned; the matrix
// base offset field stays 0). `lbo`/`sbo` in bytes:
//  - K-major operand (K contiguous, 64 16-bit elements per 128-byte row):
//    sbo = distance between 8-row groups along M/N (1024 for packed rows);
//    lbo unused (one k16 step, 32 bytes, never leaves a row). A k16 step
//    inside the row is a +32-byte start address; the hardware applies the
//    swizzle to the final address.
//  - MN-major operand (M/N contiguous): lbo = distance between 64-element
//    column blocks along M/N, sbo = distance between 8-row groups along K.
//
// The descriptor in its two words. The low word (start address / 16 and
// leading byte offset / 16) is the only one that moves with k steps and ring
// stages; the high word (stride byte offset / 16, the 128-byte swizzle mode)
// is a constant. Offsets added to the low word never carry: shared-memory
// addresses / 16 stay below 2^14, the field's width.
__device__ __forceinline__ uint32_t smem_desc_sw128_lo(uint32_t smem_addr, uint32_t lbo) {
  return ((smem_addr & 0x3FFFF) >> 4) | (((lbo >> 4) & 0x3FFF) << 16);
}
__device__ __forceinline__ uint64_t smem_desc_sw128_join(uint32_t lo, uint32_t sbo) {
  return (static_cast<uint64_t>(((sbo >> 4) & 0x3FFF) | (1u << 30)) << 32) | lo;
}
__device__ __forceinline__ uint64_t smem_desc_sw128(uint32_t smem_addr, uint32_t lbo, uint32_t sbo) {
  return smem_desc_sw128_join(smem_desc_sw128_lo(smem_addr, lbo), sbo);
}
// The same low word with the 64-byte swizzle mode (rows of 64 bytes, 8-row
// groups sbo = 512 bytes apart, tiles 512-byte aligned).
__device__ __forceinline__ uint64_t smem_desc_sw64_join(uint32_t lo, uint32_t sbo) {
  return (static_cast<uint64_t>(((sbo >> 4) & 0x3FFF) | (2u << 30)) << 32) | lo;
}

// Byte offset of 16-byte chunk c of row r in a tile of kRowBytes-byte rows
// as TMA's kRowBytes swizzle writes it (and wgmma's matching descriptor mode
// reads it): the chunk index XOR the address bits above the 128-byte line
// (CuTe's Swizzle<3,4,3> for 128 bytes, <2,4,3> for 64).
template <int kRowBytes>
__device__ __forceinline__ uint32_t swizzled_chunk(int r, int c) {
  static_assert(kRowBytes == 128 || kRowBytes == 64, "the 128- or 64-byte swizzle");
  if constexpr (kRowBytes == 128) {
    return static_cast<uint32_t>(r * 128 + ((c ^ (r % 8)) << 4));
  } else {
    const uint32_t off = static_cast<uint32_t>(r * kRowBytes + c * 16);
    return off ^ (((off >> 7) & (kRowBytes / 16 - 1)) << 4);
  }
}

}  // namespace attnprof::kernels
