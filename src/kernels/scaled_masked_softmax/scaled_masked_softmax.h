// Launcher of the fused scale + causal mask + softmax kernel (scaled_masked_softmax.cu).
#pragma once

#include <cstdint>

struct CUstream_st;

namespace attnprof::softmax {

enum class ScalarKind { BF16, FP16, FP32 };

struct SoftmaxParams {
  const void* in = nullptr;  // [rows, seq_k], rows = batch·heads·seq_q, contiguous
  void* out = nullptr;       // same shape, contiguous
  int64_t rows = 0;
  int seq_q = 0;             // query index of a row = row % seq_q (for the causal mask)
  int seq_k = 0;
  float scale = 1.f;
  bool causal = false;       // top-left aligned: key j visible to query i iff j <= i
  ScalarKind kind = ScalarKind::BF16;
};

void run_scaled_masked_softmax(const SoftmaxParams& params, CUstream_st* stream);

}  // namespace attnprof::softmax
