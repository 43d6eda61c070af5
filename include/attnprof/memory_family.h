// How a variant holds device memory while it runs: the input of the memory
// predictor (report/memory_predictor.h), declared by each variant. Core
// vocabulary, so the variant interface does not depend on the report layer.
#pragma once

namespace attnprof {

enum class MemoryFamily {
  materialised_scores_naive,    // matmul, * scale, masked_fill (copy), softmax, matmul
  materialised_scores_inplace,  // same with masked_fill_ in place
  sdpa_math_fp32,               // SDPA math backend on CUDA: computes in fp32
  fused,                        // flash / mem-efficient / cuDNN / our kernels
};

}  // namespace attnprof
