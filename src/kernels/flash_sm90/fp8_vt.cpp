#include "kernels/flash_sm90/fp8_vt.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include "kernels/flash_sm90/fp8_layout.h"

#ifdef ATTNPROF_HAVE_SM90_KERNELS
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/flash_sm90/flash_sm90_params.h"
#endif

namespace attnprof::flash_sm90 {

namespace {

int64_t padded_keys(int64_t s) { return (s + kFp8KeyGroup - 1) / kFp8KeyGroup * kFp8KeyGroup; }

void check_shape(const at::Tensor& v, const char* fn) {
  TORCH_CHECK(v.dim() == 4 && v.element_size() == 1, fn, ": expected a 1-byte [B, H, S, D] tensor, got ", v.sizes(),
              " of ", v.scalar_type());
}

}  // namespace

at::Tensor fp8_vt_reference(const at::Tensor& v) {
  check_shape(v, "fp8_vt_reference");
  const int64_t b = v.size(0), h = v.size(1), s = v.size(2), d = v.size(3);
  const int64_t padded = padded_keys(s);
  const at::Tensor bytes = v.contiguous().view(at::kByte);
  at::Tensor vt = at::empty({b, h, d, padded}, bytes.options());
  // A group's key 16h + 8j + 2c + i, viewed [groups, h 2, j 2, c 4, i 2], goes
  // to column 16h + 4c + 2j + i: [b, h, d, groups, h, c, j, i]. Whole groups
  // in one copy; a last partial group padded with zeros first (its copy is
  // one group of V, not all of V again).
  static_assert(kFp8KeyGroup == 32, "the views below spell out a group of 32 keys");
  const auto write = [&](const at::Tensor& keys, int64_t first) {  // keys [b, h, n · 32, d]
    const int64_t groups = keys.size(2) / kFp8KeyGroup;
    vt.narrow(3, first, groups * kFp8KeyGroup)
        .view({b, h, d, groups, 2, 4, 2, 2})
        .copy_(keys.view({b, h, groups, 2, 2, 4, 2, d}).permute({0, 1, 7, 2, 3, 5, 4, 6}));
  };
  const int64_t whole = s / kFp8KeyGroup * kFp8KeyGroup;
  if (whole > 0) write(bytes.narrow(2, 0, whole), 0);
  if (padded != s) write(at::constant_pad_nd(bytes.narrow(2, whole, s - whole), {0, 0, 0, padded - s}, 0), whole);
  return vt;
}

at::Tensor fp8_vt(const at::Tensor& v) {
  check_shape(v, "fp8_vt");
#ifdef ATTNPROF_HAVE_SM90_KERNELS
  const int64_t d = v.size(3);
  // The kernel's shapes (every head dim of the fp8 forward); 16-byte loads from a 16-byte aligned base.
  if (v.is_cuda() && v.is_contiguous() && d % 16 == 0 && d <= 256 && v.size(2) <= INT32_MAX - kFp8KeyGroup &&
      reinterpret_cast<uintptr_t>(v.data_ptr()) % 16 == 0) {
    const c10::cuda::CUDAGuard guard(v.device());
    const int64_t b = v.size(0), h = v.size(1), s = v.size(2), padded = padded_keys(s);
    at::Tensor vt = at::empty({b, h, d, padded}, v.options().dtype(at::kByte));
    if (vt.numel() > 0)
      run_fp8_vt(v.data_ptr(), vt.data_ptr(), b * h, static_cast<int>(s), static_cast<int>(padded),
                 static_cast<int>(d), at::cuda::getCurrentDeviceProperties()->multiProcessorCount,
                 at::cuda::getCurrentCUDAStream().stream());
    return vt;
  }
#endif
  return fp8_vt_reference(v);
}

}  // namespace attnprof::flash_sm90
