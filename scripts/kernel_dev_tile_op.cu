// Development operator for scripts/kernel_dev.py --variants, never part of
// attnprof's build: the prefill forward (keys unsplit) with another tile
// configuration of flash_kernel_traits.h, through the operator's own boundary
// (mha_fwd). kernel_dev.py builds it once per alternative with
//   -DKDEV_TILE=<tile type> -DKDEV_LIB=<library name> -Dattnprof=<namespace>
// (the namespace rename keeps each library's symbols its own in one process).
#include <torch/library.h>

#include "kernels/flash_attention/flash_fwd_api.h"
#include "kernels/flash_attention/flash_fwd_launch_template.cuh"

namespace {

void launch_tile(const attnprof::flash::FwdParams& p, CUstream_st* stream) {
  attnprof::flash::run_flash_fwd_tile<attnprof::flash::KDEV_TILE>(p, stream);
}

std::tuple<at::Tensor, at::Tensor> flash_attention_tile(const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& v, bool causal,
                                                        double scale) {
  attnprof::flash::FwdPlanRequest prefill_unsplit;
  prefill_unsplit.force_path = true;
  prefill_unsplit.path = attnprof::flash::FwdPath::kPrefill;
  prefill_unsplit.num_splits = 1;
  return attnprof::flash::mha_fwd(q, k, v, causal, scale, &launch_tile, prefill_unsplit);
}

}  // namespace

TORCH_LIBRARY(KDEV_LIB, m) {
  m.def("flash_attention(Tensor q, Tensor k, Tensor v, bool causal, float scale) -> (Tensor out, Tensor lse)");
}
TORCH_LIBRARY_IMPL(KDEV_LIB, CUDA, m) { m.impl("flash_attention", &flash_attention_tile); }
