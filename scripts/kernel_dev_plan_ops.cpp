// Development operators for scripts/kernel_dev.py, never part of attnprof's
// build (kernel_dev.py compiles this file with the real kernel sources): the
// forward with its path and/or number of key splits forced, to find the
// decode/prefill crossover and check the split planner, and the plan in
// words for the shapes it times.
#include <ATen/ATen.h>
#include <torch/library.h>

#include <string>
#include <tuple>

#include "kernels/flash_attention/flash_fwd_api.h"
#include "kernels/flash_attention/flash_fwd_plan.h"

namespace {

using attnprof::flash::FwdPath;
using attnprof::flash::FwdPlanRequest;

// path: "auto", "prefill" or "decode"; num_splits 0: the planner's.
FwdPlanRequest request_of(const std::string& path, int64_t num_splits) {
  FwdPlanRequest r;
  TORCH_CHECK(path == "auto" || path == "prefill" || path == "decode",
              "attnprof_dev: path must be auto, prefill or decode, got ", path);
  r.force_path = path != "auto";
  r.path = path == "decode" ? FwdPath::kDecode : FwdPath::kPrefill;
  r.num_splits = static_cast<int>(num_splits);
  return r;
}

std::tuple<at::Tensor, at::Tensor> flash_attention_plan(const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& v, bool causal,
                                                        double scale, std::string path,
                                                        int64_t num_splits) {
  return attnprof::flash::mha_fwd(q, k, v, causal, scale, &attnprof::flash::run_flash_fwd,
                                  request_of(path, num_splits));
}

std::string describe_plan(const at::Tensor& q, const at::Tensor& k, bool causal, std::string path,
                          int64_t num_splits) {
  const auto plan = attnprof::flash::plan_for(q, k, causal, request_of(path, num_splits));
  return attnprof::flash::describe_fwd(static_cast<int>(q.size(3)),
                                       q.scalar_type() == at::kBFloat16, plan);
}

}  // namespace

TORCH_LIBRARY(attnprof_dev, m) {
  m.def("flash_attention_plan(Tensor q, Tensor k, Tensor v, bool causal, float scale, str path, "
        "int num_splits) -> (Tensor out, Tensor lse)");
  m.def("describe_plan(Tensor q, Tensor k, bool causal, str path, int num_splits) -> str");
}
TORCH_LIBRARY_IMPL(attnprof_dev, CUDA, m) {
  m.impl("flash_attention_plan", &flash_attention_plan);
  m.impl("describe_plan", &describe_plan);
}
