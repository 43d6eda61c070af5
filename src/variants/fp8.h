// fp8 (e4m3) inputs (DType::FP8): their quantisation with one scale per
// (batch, head), the plain FP8 attention the kernels are held to, and why a
// variant without an fp8 path cannot run them, in PyTorch's words where
// PyTorch is what refuses.
#pragma once

#include <ATen/ATen.h>

#include <functional>
#include <string>

#include "attnprof/variant.h"
#include "variants/torch_problem.h"

namespace attnprof {

// e4m3's largest finite value.
inline constexpr double kE4m3Max = 448.0;

// P = exp(s - rowmax) in (0, 1] is scaled by 2^8 before it is rounded to
// e4m3 (256 is the largest power of two below 448): probabilities down to
// 2^-17 of the row's largest keep a value, against 2^-9 unscaled (e4m3's
// smallest subnormal). The output divides it out with the row sum.
inline constexpr double kFp8ProbabilityScale = 256.0;

struct Quantized {
  at::Tensor values;   // e4m3, x's shape
  at::Tensor descale;  // float32 [B, H]: x ≈ values * descale[b, h]
};
// x [B, H, S, D] to e4m3 with one scale per (b, h), from that head's largest
// magnitude (mapped to 448); a head of zeros gets descale 1. Not differentiable.
Quantized quantize_e4m3(const at::Tensor& x);
// values * descale, as `to` (float32 by default), [B, H, S, D].
at::Tensor dequantize(const at::Tensor& values, const at::Tensor& descale, at::ScalarType to = at::kFloat);

// An fp8 problem's inputs from its bf16 (or any floating) q, k, v: each
// quantised by quantize_e4m3, the originals kept in Fp8Scales. With a
// `rotation` R [D, D] (orthogonal, float32, on their device), q and k are
// quantised as q·R and k·R (incoherent processing: the scores are the same);
// the originals kept are the unrotated ones.
Inputs fp8_inputs(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& rotation = {});

// A random orthogonal [d, d] matrix, Haar-distributed (QR of a float64
// Gaussian drawn from the CPU generator, column signs fixed by R's
// diagonal), as float32 on `device`: Problem::fp8_rotated's R.
at::Tensor random_orthogonal(int64_t d, const at::Device& device);

// The plain FP8 implementation the fp8 kernels are held to (at most twice its
// error against float64): the dequantised inputs in float32, scores and
// softmax statistics in float32, P scaled by kFp8ProbabilityScale and rounded
// to e4m3 for P·V (with V's e4m3 values), the float32 row sum dividing it
// out; bf16 [B, Hq, Sq, D]. Dense problems.
at::Tensor plain_fp8_attention(const Problem& p, const Inputs& in);

// Why `variant` cannot run an fp8 problem: `call` runs the variant's own
// first op on one small e4m3 head on the problem's device. Where PyTorch
// refuses, the reason is its message; where it accepts e4m3, the reason is
// that the op takes no descale factors.
using Fp8Probe = std::function<void(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v)>;
Support fp8_refusal(const std::string& variant, const Problem& p, const Fp8Probe& call);
// The probe of the variants whose first op is the scores' at::matmul(q, kᵀ).
void score_matmul_probe(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v);

}  // namespace attnprof
