// Launchers of the fused scale + causal mask + softmax kernel and of its
// backward (scaled_masked_softmax.cu).
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
  // Bottom-right aligned: key j visible to query i iff j <= i + seq_k − seq_q
  // (top-left when square); rows that see no key give zeros.
  bool causal = false;
  ScalarKind kind = ScalarKind::BF16;
};

void run_scaled_masked_softmax(const SoftmaxParams& params, CUstream_st* stream);

// grad_in = scale · out ∘ (grad_out − rowsum(grad_out ∘ out)), one kernel.
struct SoftmaxBwdParams {
  const void* grad_out = nullptr;  // [rows, seq_k], contiguous
  const void* out = nullptr;       // the forward's probabilities, same shape
  void* grad_in = nullptr;         // same shape
  int64_t rows = 0;
  int seq_k = 0;
  float scale = 1.f;
  ScalarKind kind = ScalarKind::BF16;
};

void run_scaled_masked_softmax_backward(const SoftmaxBwdParams& params, CUstream_st* stream);

}  // namespace attnprof::softmax
