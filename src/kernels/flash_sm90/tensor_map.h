// TMA tensor maps over the attention tensors (host side; defined in
// flash_fwd_sm90_api.cu, used by the forward and backward launch layers).
#pragma once

#include <cuda.h>  // CUtensorMap

#include <cstdint>

namespace attnprof::flash_sm90 {

// A 3-D tensor map over a contiguous [slabs][rows][head_dim] 16-bit tensor,
// boxes of box_rows × 64 elements, 128-byte swizzled, out-of-bounds rows read
// as zeros. Errors name the operator `op`.
CUtensorMap make_tensor_map(const void* base, bool is_bf16, int head_dim, int rows, int slabs,
                            int box_rows, const char* op);

// The same with rows and slabs row_stride and slab_stride elements apart
// (multiples of 8): a packed batch [total_rows][heads][head_dim] is the map
// [heads][total_rows][head_dim] with strides heads · head_dim and head_dim.
CUtensorMap make_packed_tensor_map(const void* base, bool is_bf16, int head_dim, int rows, int slabs,
                                   int64_t row_stride, int64_t slab_stride, int box_rows, const char* op);

// The same over an 8-bit (e4m3) tensor [slabs][rows][cols], rows and slabs
// row_stride and slab_stride bytes apart (multiples of 16), boxes of
// box_rows × box_bytes (128, 128-byte swizzled, or 64, 64-byte swizzled).
CUtensorMap make_tensor_map_8bit(const void* base, int cols, int rows, int slabs, int64_t row_stride,
                                 int64_t slab_stride, int box_rows, int box_bytes, const char* op);

// The same over a contiguous [slabs][rows][cols] float32 tensor, boxes of
// box_rows × 32 elements (128 bytes), 128-byte swizzled: the target of TMA
// reductions (the backward's dQ workspace).
CUtensorMap make_tensor_map_f32(float* base, int cols, int rows, int slabs, int box_rows, const char* op);

}  // namespace attnprof::flash_sm90
