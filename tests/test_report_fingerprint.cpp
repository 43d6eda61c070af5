// Every kernel name below was seen in the seven core variants on the H200
// (docs: /work/shared/reference/h200-baseline.md), except the made-up unknowns.
#include "attnprof/report/fingerprint.h"

#include <gtest/gtest.h>

#include <string>

namespace attnprof::report {
namespace {

struct Expected {
  KernelFamily family;
  MathUnit math;
  Precision precision;
  std::string arch;
  std::string tile;
};

void expect_fingerprint(const std::string& name, const Expected& want) {
  SCOPED_TRACE(name);
  const KernelFingerprint fp = fingerprint_kernel(name);
  EXPECT_EQ(family_name(fp.family), family_name(want.family));
  EXPECT_EQ(math_unit_name(fp.math_unit), math_unit_name(want.math));
  EXPECT_EQ(precision_name(fp.precision), precision_name(want.precision));
  EXPECT_EQ(fp.arch, want.arch);
  EXPECT_EQ(fp.tile, want.tile);
  EXPECT_FALSE(fp.summary.empty());
  EXPECT_EQ(fp.summary.find('\n'), std::string::npos);
}

TEST(Fingerprint, NvjetQKt) {
  expect_fingerprint("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT",
                     {KernelFamily::cublas_nvjet, MathUnit::tensor_cores,
                      Precision::sixteen_bit, "sm90", "256x128"});
}

TEST(Fingerprint, NvjetPV) {
  expect_fingerprint("nvjet_sm90_tst_64x512_64x2_1x2_h_bz_coopB_NNT",
                     {KernelFamily::cublas_nvjet, MathUnit::tensor_cores,
                      Precision::sixteen_bit, "sm90", "64x512"});
}

TEST(Fingerprint, NvjetSummaryNamesTheFacts) {
  EXPECT_EQ(fingerprint_kernel("nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT").summary,
            "cuBLAS (nvjet): tensor cores, 16-bit, sm90, tile 256x128");
}

TEST(Fingerprint, XmmaFp32GemmsRunOnCudaCores) {
  const Expected want{KernelFamily::cublas_xmma, MathUnit::cuda_cores, Precision::fp32,
                      "sm80", "128x128x8"};
  expect_fingerprint(
      "sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
      "aligna4_alignc4_execute_kernel__5x_cublas",
      want);
  expect_fingerprint(
      "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_"
      "aligna4_alignc4_execute_kernel__5x_cublas",
      want);
}

TEST(Fingerprint, XmmaBf16GemmRunsOnTensorCores) {
  expect_fingerprint(
      "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_"
      "execute_segment_k_off_kernel__5x_cublas",
      {KernelFamily::cublas_xmma, MathUnit::tensor_cores, Precision::bf16, "sm90",
       "128x128x64"});
}

TEST(Fingerprint, CutlassMemEfficientAttention) {
  expect_fingerprint(
      "fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<"
      "cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
      {KernelFamily::cutlass_fmha, MathUnit::tensor_cores, Precision::bf16, "sm80", "64x64"});
}

TEST(Fingerprint, FlashAttention2) {
  expect_fingerprint(
      "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, "
      "false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, "
      "false, true, false, false, false, true, false, false>(pytorch_flash::Flash_fwd_params)",
      {KernelFamily::flash_attention_2, MathUnit::tensor_cores, Precision::bf16, "unknown",
       "128x128"});
}

TEST(Fingerprint, FlashAttention2Fp16) {
  const auto fp = fingerprint_kernel(
      "void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, "
      "false, cutlass::half_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::half_t> >, false, "
      "true, false, false, false, true, false, false>(pytorch_flash::Flash_fwd_params)");
  EXPECT_EQ(fp.precision, Precision::fp16);
  EXPECT_EQ(fp.tile, "128x64");
}

TEST(Fingerprint, CudnnSdpa) {
  expect_fingerprint(
      "cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_"
      "kernel0_0",
      {KernelFamily::cudnn_generated, MathUnit::tensor_cores, Precision::sixteen_bit, "sm90",
       "64x128x64"});
}

TEST(Fingerprint, AtenElementwiseScale) {
  expect_fingerprint(
      "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<c10::BFloat16, "
      "c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, "
      "std::array<char*, 2> >(int, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, "
      "c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2>)",
      {KernelFamily::aten_elementwise, MathUnit::cuda_cores, Precision::bf16, "unknown",
       "unknown"});
}

TEST(Fingerprint, AtenSoftmax) {
  expect_fingerprint(
      "void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10, "
      "false, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)",
      {KernelFamily::aten_softmax, MathUnit::cuda_cores, Precision::bf16, "unknown", "unknown"});
  expect_fingerprint(
      "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, "
      "false>(float*, float const*, int, int, int, bool const*, int, bool)",
      {KernelFamily::aten_softmax, MathUnit::cuda_cores, Precision::fp32, "unknown", "unknown"});
}

TEST(Fingerprint, AtenReduce) {
  expect_fingerprint(
      "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, "
      "at::native::func_wrapper_t<float, at::native::MaxNanFunctor<float> >, unsigned int, float, "
      "4, 4> >(at::native::ReduceOp<float, at::native::func_wrapper_t<float, "
      "at::native::MaxNanFunctor<float> >, unsigned int, float, 4, 4>)",
      {KernelFamily::aten_reduce, MathUnit::cuda_cores, Precision::fp32, "unknown", "unknown"});
}

TEST(Fingerprint, AtenReduceWithElidedArguments) {
  expect_fingerprint("void at::native::reduce_kernel<512, 1, at::native::ReduceOp<...> >(...)",
                     {KernelFamily::aten_reduce, MathUnit::cuda_cores, Precision::unknown,
                      "unknown", "unknown"});
}

TEST(Fingerprint, AtenTriuTril) {
  expect_fingerprint("void at::native::triu_tril_kernel<bool, long, false, 4, true>(...)",
                     {KernelFamily::aten_triu_tril, MathUnit::cuda_cores, Precision::unknown,
                      "unknown", "unknown"});
  expect_fingerprint("void at::native::triu_tril_kernel<...>",
                     {KernelFamily::aten_triu_tril, MathUnit::cuda_cores, Precision::unknown,
                      "unknown", "unknown"});
}

TEST(Fingerprint, AtenCopyIsNotPlainElementwise) {
  expect_fingerprint(
      "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous "
      "namespace)::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
      "const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}, std::array<char*, 2ul> "
      ">(int, ...)",
      {KernelFamily::aten_copy, MathUnit::cuda_cores, Precision::unknown, "unknown", "unknown"});
}

TEST(Fingerprint, MemcpyAndMemset) {
  expect_fingerprint("Memcpy DtoD (Device -> Device)",
                     {KernelFamily::memcpy, MathUnit::memory, Precision::unknown, "unknown",
                      "unknown"});
  EXPECT_EQ(fingerprint_kernel("Memcpy DtoD (Device -> Device)").summary,
            "memcpy: DtoD, memory");
  expect_fingerprint("Memset (Device)", {KernelFamily::memset, MathUnit::memory,
                                         Precision::unknown, "unknown", "unknown"});
}

TEST(Fingerprint, OurKernels) {
  const auto fp = fingerprint_kernel(
      "void attnprof::kernels::flash_fwd_wgmma_sm90<64, 128, cutlass::bfloat16_t>(attnprof::Params)");
  EXPECT_EQ(fp.family, KernelFamily::attnprof);
  EXPECT_EQ(family_name(fp.family), "attnprof (ours)");
  EXPECT_EQ(fp.math_unit, MathUnit::tensor_cores);
  EXPECT_EQ(fp.precision, Precision::bf16);
  EXPECT_EQ(fp.arch, "sm90");
}

TEST(Fingerprint, LegacyCublasAndCutlass) {
  expect_fingerprint("ampere_sgemm_128x64_tn", {KernelFamily::cublas_legacy,
                                                MathUnit::cuda_cores, Precision::fp32, "sm80",
                                                "128x64"});
  expect_fingerprint("ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_stages_32x5_tn",
                     {KernelFamily::cublas_legacy, MathUnit::tensor_cores, Precision::bf16,
                      "sm80", "128x128"});
  expect_fingerprint("volta_h884gemm_64x64_ldg8_nn", {KernelFamily::cublas_legacy,
                                                      MathUnit::tensor_cores, Precision::fp16,
                                                      "sm70", "64x64"});
  expect_fingerprint(
      "void cutlass::Kernel<cutlass_80_tensorop_bf16_s16816gemm_relu_bf16_64x64_32x6_tn_align8>"
      "(Params)",
      {KernelFamily::cutlass, MathUnit::tensor_cores, Precision::bf16, "sm80", "64x64"});
}

TEST(Fingerprint, UnknownNamesDecodeNothing) {
  for (const char* name :
       {"", "my_kernel", "void foo::bar<float>(float*)", "kernel_128x64_sm90",
        "smash_sm80x_kernel", "nvjetpack_256x128", "Memcp", "(anonymous namespace)::helper"}) {
    SCOPED_TRACE(name);
    const KernelFingerprint fp = fingerprint_kernel(name);
    EXPECT_EQ(fp.family, KernelFamily::unknown);
    EXPECT_EQ(fp.math_unit, MathUnit::unknown);
    EXPECT_EQ(fp.precision, Precision::unknown);
    EXPECT_EQ(fp.arch, "unknown");
    EXPECT_EQ(fp.tile, "unknown");
    EXPECT_EQ(fp.summary, "unknown kernel");
    EXPECT_EQ(family_name(fp.family), "unknown");
  }
}

TEST(Fingerprint, NvjetWithoutA16BitTagLeavesMathUnknown) {
  const auto fp = fingerprint_kernel("nvjet_sm90_tss_128x128_64x4_1x2_zz_NNT");
  EXPECT_EQ(fp.family, KernelFamily::cublas_nvjet);
  EXPECT_EQ(fp.math_unit, MathUnit::unknown);
  EXPECT_EQ(fp.precision, Precision::unknown);
  EXPECT_EQ(fp.arch, "sm90");
}

}  // namespace
}  // namespace attnprof::report

namespace attnprof::report {

TEST(Fingerprint, OurKernelsAsSeenOnTheH200) {
  const auto flash = fingerprint_kernel(
      "void attnprof::flash::flash_fwd_kernel<attnprof::flash::FwdKernelTraits<64, 64, 4, 2, 3, 2, "
      "__nv_bfloat16>, true>(attnprof::flash::FwdParams)");
  EXPECT_EQ(flash.family, KernelFamily::attnprof);
  EXPECT_EQ(flash.math_unit, MathUnit::tensor_cores);
  EXPECT_EQ(flash.precision, Precision::bf16);
  const auto softmax = fingerprint_kernel(
      "void attnprof::softmax::(anonymous namespace)::scaled_masked_softmax_warp_kernel<__nv_bfloat16, 4>"
      "(__nv_bfloat16 const*, __nv_bfloat16*, long, int, int, float, bool)");
  EXPECT_EQ(softmax.family, KernelFamily::attnprof);
  EXPECT_EQ(softmax.math_unit, MathUnit::memory);
  EXPECT_EQ(softmax.precision, Precision::bf16);
  const auto vt = fingerprint_kernel(
      "attnprof::flash_sm90::(anonymous namespace)::fp8_vt_kernel(unsigned char const*, unsigned char*, long, int, "
      "int, int)");
  EXPECT_EQ(vt.family, KernelFamily::attnprof);
  EXPECT_EQ(vt.math_unit, MathUnit::memory);
}

}  // namespace attnprof::report

namespace attnprof::report {

// Every kernel name the H200 run printed for the nine variants at 8x16x1024x64
// and 4x16x4096x128 bf16 (the cross-check at commit bf61c97; our flash kernel's
// names also as of 959a7b8): none may decode as unknown, and each gets its
// library and math unit right.
TEST(Fingerprint, EveryKernelSeenOnTheH200) {
  struct Seen {
    const char* name;
    KernelFamily family;
    MathUnit math;
  };
  const Seen seen[] = {
      {"Memcpy DtoD (Device -> Device)",
       KernelFamily::memcpy, MathUnit::memory},
      {"Memset (Device)",
       KernelFamily::memset, MathUnit::memory},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x128_4x1x1_cga1x1x1_kernel0_0",
       KernelFamily::cudnn_generated, MathUnit::tensor_cores},
      {"cudnn_generated_fort_native_sdpa_sm90_flash_fprop_wgmma_f16_knob_7_64x128x64_4x1x1_cga1x1x1_kernel0_0",
       KernelFamily::cudnn_generated, MathUnit::tensor_cores},
      {"fmha_cutlassF_bf16_aligned_64x128_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 128, 128, true, true>::Params)",
       KernelFamily::cutlass_fmha, MathUnit::tensor_cores},
      {"fmha_cutlassF_bf16_aligned_64x64_rf_sm80(PyTorchMemEffAttention::AttentionKernel<cutlass::bfloat16_t, cutlass::arch::Sm80, true, 64, 64, 64, true, true>::Params)",
       KernelFamily::cutlass_fmha, MathUnit::tensor_cores},
      {"nvjet_sm90_tst_128x256_64x4_1x2_h_bz_coopA_NNN",
       KernelFamily::cublas_nvjet, MathUnit::tensor_cores},
      {"nvjet_sm90_tst_256x128_64x4_1x2_h_bz_coopA_TNT",
       KernelFamily::cublas_nvjet, MathUnit::tensor_cores},
      {"nvjet_sm90_tst_64x512_64x2_1x2_h_bz_coopB_NNT",
       KernelFamily::cublas_nvjet, MathUnit::tensor_cores},
      {"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
       KernelFamily::cublas_xmma, MathUnit::cuda_cores},
      {"sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
       KernelFamily::cublas_xmma, MathUnit::cuda_cores},
      {"sm80_xmma_gemm_f32f32_f32f32_f32_tn_n_tilesize128x128x8_stage3_warpsize2x2x1_ffma_aligna4_alignc4_execute_kernel__5x_cublas",
       KernelFamily::cublas_xmma, MathUnit::cuda_cores},
      {"void (anonymous namespace)::softmax_warp_forward<c10::BFloat16, c10::BFloat16, float, 10, false, false>(c10::BFloat16*, c10::BFloat16 const*, int, int, int, bool const*, int, bool)",
       KernelFamily::aten_softmax, MathUnit::cuda_cores},
      {"void (anonymous namespace)::softmax_warp_forward<float, float, float, 10, false, false>(float*, float const*, int, int, int, bool const*, int, bool)",
       KernelFamily::aten_softmax, MathUnit::cuda_cores},
      {"void at::native::(anonymous namespace)::cunn_SoftMaxForwardReg<c10::BFloat16, float, c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue, long, 4>(c10::BFloat16*, c10::BFloat16 const*, long)",
       KernelFamily::aten_softmax, MathUnit::cuda_cores},
      {"void at::native::(anonymous namespace)::cunn_SoftMaxForwardReg<float, float, float, at::native::(anonymous namespace)::SoftMaxForwardEpilogue, long, 4>(float*, float const*, long)",
       KernelFamily::aten_softmax, MathUnit::cuda_cores},
      {"void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::(anonymous namespace)::where_kernel_impl(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#11}::operator()() const::{lambda(bool, float, float)#1}>(at::TensorIteratorBase&, at::native::(anonymous namespace)::where_kernel_impl(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#11}::operator()() const::{lambda(bool, float, float)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::(anonymous namespace)::where_kernel_impl(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#11}::operator()() const::{lambda(bool, float, float)#1}>(at::TensorIteratorBase&, at::native::(anonymous namespace)::where_kernel_impl(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#11}::operator()() const::{lambda(bool, float, float)#1} const&)::{lambda(int)#1})",
       KernelFamily::aten_elementwise, MathUnit::cuda_cores},
      {"void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> const&)::{lambda(int)#1})",
       KernelFamily::aten_elementwise, MathUnit::cuda_cores},
      {"void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16, bool)#1}>(at::TensorIteratorBase&, at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16, bool)#1} const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16, bool)#1}>(at::TensorIteratorBase&, at::native::(anonymous namespace)::masked_fill_kernel(at::TensorIterator&, c10::Scalar const&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() const::{lambda(c10::BFloat16, bool)#1} const&)::{lambda(int)#1})",
       KernelFamily::aten_elementwise, MathUnit::cuda_cores},
      {"void at::native::reduce_kernel<512, 1, at::native::ReduceOp<bool, at::native::func_wrapper_t<bool, at::native::and_kernel_cuda(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() const::{lambda(bool, bool)#1}>, unsigned int, bool, 4, 4> >(at::native::ReduceOp<bool, at::native::func_wrapper_t<bool, at::native::and_kernel_cuda(at::TensorIterator&)::{lambda()#1}::operator()() const::{lambda()#12}::operator()() const::{lambda(bool, bool)#1}>, unsigned int, bool, 4, 4>)",
       KernelFamily::aten_reduce, MathUnit::cuda_cores},
      {"void at::native::triu_tril_kernel<bool, int, false, 8, false>(at::cuda::detail::TensorInfo<bool, int>, at::cuda::detail::TensorInfo<bool const, int>, long, long, int)",
       KernelFamily::aten_triu_tril, MathUnit::cuda_cores},
      {"void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, 4, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1> >(int, at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>, TrivialOffsetCalculator<1, unsigned int>, TrivialOffsetCalculator<1, unsigned int>, at::native::memory::LoadWithCast<1>, at::native::memory::StoreWithCast<1>)",
       KernelFamily::aten_copy, MathUnit::cuda_cores},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::isneginf_kernel_impl(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::(anonymous namespace)::isneginf_kernel_impl(at::TensorIteratorBase&)::{lambda()#1}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul>)",
       KernelFamily::aten_elementwise, MathUnit::cuda_cores},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::AUnaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)",
       KernelFamily::aten_elementwise, MathUnit::cuda_cores},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<bool>, std::array<char*, 1ul> >(int, at::native::FillFunctor<bool>, std::array<char*, 1ul>)",
       KernelFamily::aten_elementwise, MathUnit::cuda_cores},
      {"void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, std::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
       KernelFamily::aten_elementwise, MathUnit::cuda_cores},
      {"void at::native::vectorized_elementwise_kernel<8, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, at::native::AUnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul>)",
       KernelFamily::aten_elementwise, MathUnit::cuda_cores},
      {"void at::native::vectorized_elementwise_kernel<8, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::native::bfloat16_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda(float)#1}, std::array<char*, 2ul>)",
       KernelFamily::aten_copy, MathUnit::cuda_cores},
      {"void attnprof::flash::flash_fwd_kernel<attnprof::flash::FwdKernelTraits<128, 32, 4, 2, 3, 1, __nv_bfloat16>, true>(attnprof::flash::FwdParams)",
       KernelFamily::attnprof, MathUnit::tensor_cores},
      {"void attnprof::flash::flash_fwd_kernel<attnprof::flash::FwdKernelTraits<64, 64, 4, 2, 3, 2, __nv_bfloat16>, true>(attnprof::flash::FwdParams)",
       KernelFamily::attnprof, MathUnit::tensor_cores},
      // After the d128 retune (46f0f45) the traits carry the rescale slack too.
      {"void attnprof::flash::flash_fwd_kernel<attnprof::flash::FwdKernelTraits<128, 48, 4, 2, 2, 1, 8, __nv_bfloat16>, true>(attnprof::flash::FwdParams)",
       KernelFamily::attnprof, MathUnit::tensor_cores},
      {"void attnprof::flash::flash_fwd_kernel<attnprof::flash::FwdKernelTraits<64, 64, 4, 2, 3, 2, -1, __nv_bfloat16>, true>(attnprof::flash::FwdParams)",
       KernelFamily::attnprof, MathUnit::tensor_cores},
      {"void attnprof::softmax::(anonymous namespace)::scaled_masked_softmax_warp_kernel<__nv_bfloat16, 16>(__nv_bfloat16 const*, __nv_bfloat16*, long, int, int, float, bool)",
       KernelFamily::attnprof, MathUnit::memory},
      {"void attnprof::softmax::(anonymous namespace)::scaled_masked_softmax_warp_kernel<__nv_bfloat16, 4>(__nv_bfloat16 const*, __nv_bfloat16*, long, int, int, float, bool)",
       KernelFamily::attnprof, MathUnit::memory},
      {"void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<128, 128, 64, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<128, 128, 64, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
       KernelFamily::flash_attention_2, MathUnit::tensor_cores},
      {"void pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64, 128, 128, 4, false, false, cutlass::bfloat16_t, Flash_kernel_traits<64, 128, 128, 4, cutlass::bfloat16_t> >, false, true, false, false, true, true, false, false>(pytorch_flash::Flash_fwd_params)",
       KernelFamily::flash_attention_2, MathUnit::tensor_cores},
  };
  for (const Seen& s : seen) {
    const KernelFingerprint fp = fingerprint_kernel(s.name);
    EXPECT_EQ(fp.family, s.family) << s.name;
    EXPECT_EQ(fp.math_unit, s.math) << s.name;
    EXPECT_NE(fp.summary, "unknown kernel") << s.name;
  }
  EXPECT_EQ(sizeof(seen) / sizeof(seen[0]), 36u);
}

}  // namespace attnprof::report
