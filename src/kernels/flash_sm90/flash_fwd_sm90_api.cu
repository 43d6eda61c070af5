// Host side of the Hopper attention forward that needs no kernel: the
// dispatch to a configuration and dtype, and the TMA tensor maps.
#include <c10/cuda/CUDAException.h>
#include <c10/util/Exception.h>
#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>
#include <cudaTypedefs.h>  // PFN_cuTensorMapEncodeTiled

#include "kernels/common/static_switch.h"
#include "kernels/flash_sm90/flash_sm90_params.h"
#include "kernels/flash_sm90/flash_sm90_traits.h"
#include "kernels/flash_sm90/tensor_map.h"

namespace attnprof::flash_sm90 {
namespace {

// cuTensorMapEncodeTiled is a driver API function. It is looked up through the
// runtime instead of linked, so nothing here needs libcuda at link time (CI
// builds on machines without a driver).
PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const PFN_cuTensorMapEncodeTiled_v12000 fn = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    const cudaError_t err =
        cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found);
    TORCH_CHECK(err == cudaSuccess && found == cudaDriverEntryPointSuccess && p != nullptr,
                "attnprof::flash_attention_sm90: the CUDA driver has no cuTensorMapEncodeTiled (",
                cudaGetErrorString(err), "); TMA needs a CUDA 12+ driver");
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(p);
  }();
  return fn;
}

}  // namespace

namespace {

// [slabs][rows][cols], cols contiguous, rows and slabs row_stride and
// slab_stride elements apart; boxes of box_cols × box_rows (box_cols ·
// element size = 128 bytes, the widest box the 128-byte swizzle allows).
CUtensorMap encode(const void* base, CUtensorMapDataType type, cuuint64_t elem_bytes, int cols, int rows, int slabs,
                   int64_t row_stride, int64_t slab_stride, int box_cols, int box_rows, const char* op,
                   CUtensorMapSwizzle swizzle = CU_TENSOR_MAP_SWIZZLE_128B) {
  const cuuint64_t dims[3] = {static_cast<cuuint64_t>(cols), static_cast<cuuint64_t>(rows),
                              static_cast<cuuint64_t>(slabs)};
  // Byte strides of dims 1 and 2 (dim 0 is contiguous).
  const cuuint64_t strides[2] = {static_cast<cuuint64_t>(row_stride) * elem_bytes,
                                 static_cast<cuuint64_t>(slab_stride) * elem_bytes};
  const cuuint32_t box[3] = {static_cast<cuuint32_t>(box_cols), static_cast<cuuint32_t>(box_rows), 1};
  const cuuint32_t elem_strides[3] = {1, 1, 1};
  // A driver call needs a context current on the calling thread. A thread whose
  // CUDA work so far was only cached allocations has none (autograd's device
  // thread running a small backward: the encode failed with
  // CUDA_ERROR_INVALID_CONTEXT, 201); cudaSetDevice binds the primary context.
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaSetDevice(device));
  CUtensorMap map;
  const CUresult r = tensor_map_encoder()(&map, type, 3, const_cast<void*>(base), dims, strides, box, elem_strides,
                                          CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                          CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, op, ": cuTensorMapEncodeTiled failed (CUresult ", static_cast<int>(r), ") for a [",
              slabs, ", ", rows, ", ", cols, "] tensor at ", base);
  return map;
}

}  // namespace

CUtensorMap make_tensor_map(const void* base, bool is_bf16, int head_dim, int rows, int slabs,
                            int box_rows, const char* op) {
  return make_packed_tensor_map(base, is_bf16, head_dim, rows, slabs, head_dim, int64_t{rows} * head_dim, box_rows,
                                op);
}

CUtensorMap make_packed_tensor_map(const void* base, bool is_bf16, int head_dim, int rows, int slabs,
                                   int64_t row_stride, int64_t slab_stride, int box_rows, const char* op) {
  return encode(base, is_bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16, 2, head_dim,
                rows, slabs, row_stride, slab_stride, 64, box_rows, op);
}

CUtensorMap make_tensor_map_8bit(const void* base, int cols, int rows, int slabs, int64_t row_stride,
                                 int64_t slab_stride, int box_rows, int box_bytes, const char* op) {
  TORCH_CHECK(box_bytes == 128 || box_bytes == 64, op, ": an 8-bit tensor map's box is 128 or 64 bytes wide, not ",
              box_bytes);
  return encode(base, CU_TENSOR_MAP_DATA_TYPE_UINT8, 1, cols, rows, slabs, row_stride, slab_stride, box_bytes,
                box_rows, op, box_bytes == 128 ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_64B);
}

CUtensorMap make_tensor_map_f32(float* base, int cols, int rows, int slabs, int box_rows, const char* op) {
  return encode(base, CU_TENSOR_MAP_DATA_TYPE_FLOAT32, 4, cols, rows, slabs, cols, int64_t{rows} * cols, 32,
                box_rows, op);
}

namespace {

// f(config, element) for the first configuration of `list` that runs this launch.
template <typename List, typename Element, typename F>
decltype(auto) first_config(List list, Element element, const FwdParams& p, const char* op, F&& f) {
  return kernels::config_switch(
      list,
      [&](auto c) {
        using Config = decltype(c);
        return Config::kHeadDim == p.head_dim && runs_launch<Config>(p.causal, p.seqlen_q, p.varlen());
      },
      op, p.head_dim, [&](auto config) { return f(config, element); });
}

// f(config, element) for p's dtype and the first configuration of
// Sm90FwdConfigs (Sm90FwdFp8Configs for 8-bit inputs) that runs this launch.
template <typename F>
decltype(auto) with_config(const FwdParams& p, F&& f) {
  if (p.is_fp8) return first_config(Sm90FwdFp8Configs{}, __nv_fp8_e4m3{}, p, "attnprof::flash_attention_sm90_fp8", f);
  return kernels::dtype_switch(p.is_bf16, [&](auto element) {
    return first_config(Sm90FwdConfigs{}, element, p, "attnprof::flash_attention_sm90", f);
  });
}

}  // namespace

FwdWorkspace fwd_workspace(const FwdParams& p) {
  return with_config(p, [&](auto config, auto element) {
    return fwd_workspace_config<decltype(config), decltype(element)>(p);
  });
}

void run_fwd(const FwdParams& p, CUstream_st* stream) {
  with_config(p, [&](auto config, auto element) { run_fwd_config<decltype(config), decltype(element)>(p, stream); });
}

}  // namespace attnprof::flash_sm90
