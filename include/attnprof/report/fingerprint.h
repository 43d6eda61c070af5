// Kernel-name fingerprints: what a profiler's kernel name says about the code
// that ran (library, math unit, precision, target architecture, tile shape).
// Pure string decoding, no LibTorch. A field the name does not encode stays
// unknown: a wrong "tensor cores" label would mislead more than a blank one.
#pragma once

#include <string>
#include <string_view>

namespace attnprof::report {

enum class KernelFamily {
  unknown,
  cublas_nvjet,       // Hopper cuBLAS JIT kernels: nvjet_sm90_...
  cublas_xmma,        // smXX_xmma_gemm_..._cublas
  cublas_legacy,      // ampere_sgemm_..., volta_h884gemm_..., gemv/gemmSN
  cutlass,            // cutlass_80_tensorop_..., cutlass::Kernel<...>
  cutlass_fmha,       // fmha_cutlassF_... (xformers / mem-efficient SDPA)
  flash_attention_2,  // pytorch_flash::flash_fwd_kernel<...>
  cudnn_generated,    // cudnn_generated_fort_native_sdpa_...
  aten_elementwise,
  aten_reduce,
  aten_softmax,
  aten_copy,          // direct copies and dtype casts
  aten_triu_tril,
  memcpy,
  memset,
  attnprof,           // our own kernels (namespace attnprof)
};

enum class MathUnit { unknown, tensor_cores, cuda_cores, memory };

// bf16 and fp16 where the name says which; sixteen_bit where it only says
// "16-bit" (nvjet's `h` tag and cuDNN's `f16` both appear for bf16 inputs).
enum class Precision { unknown, bf16, fp16, sixteen_bit, tf32, fp32, fp64 };

struct KernelFingerprint {
  KernelFamily family = KernelFamily::unknown;
  MathUnit math_unit = MathUnit::unknown;
  Precision precision = Precision::unknown;
  std::string arch = "unknown";  // "sm80", "sm90", "sm90a" as encoded
  std::string tile = "unknown";  // "256x128", "128x128x8" as encoded
  std::string summary;           // one line for tables, built from the above
};

KernelFingerprint fingerprint_kernel(std::string_view name);

// Display names: "cuBLAS (nvjet)", "tensor cores", "16-bit", ... and "unknown".
std::string_view family_name(KernelFamily family);
std::string_view math_unit_name(MathUnit unit);
std::string_view precision_name(Precision precision);

}  // namespace attnprof::report
