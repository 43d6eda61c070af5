#include "attnprof/report/fingerprint.h"

#include <array>
#include <cctype>
#include <utility>
#include <vector>

namespace attnprof::report {
namespace {

constexpr std::string_view kUnknown = "unknown";

bool contains(std::string_view s, std::string_view needle) {
  return s.find(needle) != std::string_view::npos;
}

bool starts_with(std::string_view s, std::string_view prefix) {
  return s.substr(0, prefix.size()) == prefix;
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

bool is_digits(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

// The symbol before template arguments and parameters; library kernels that
// encode facts in their names (nvjet, xmma, cuDNN, CUTLASS) encode them here.
std::string_view symbol_head(std::string_view name) {
  std::string_view head = name.substr(0, name.find_first_of("<("));
  if (starts_with(head, "void ")) head.remove_prefix(5);
  return head;
}

std::vector<std::string_view> underscore_tokens(std::string_view head) {
  std::vector<std::string_view> tokens;
  size_t start = 0;
  while (start <= head.size()) {
    size_t end = head.find('_', start);
    if (end == std::string_view::npos) end = head.size();
    if (end > start) tokens.push_back(head.substr(start, end - start));
    start = end + 1;
  }
  return tokens;
}

bool has_token(const std::vector<std::string_view>& tokens, std::string_view wanted) {
  for (auto t : tokens)
    if (t == wanted) return true;
  return false;
}

// "256x128" or "64x128x64": two or three numbers joined by 'x'.
bool is_tile_token(std::string_view token) {
  int numbers = 0;
  size_t start = 0;
  while (start <= token.size()) {
    size_t end = token.find('x', start);
    if (end == std::string_view::npos) end = token.size();
    if (!is_digits(token.substr(start, end - start))) return false;
    ++numbers;
    start = end + 1;
  }
  return numbers == 2 || numbers == 3;
}

std::string first_tile_token(const std::vector<std::string_view>& tokens) {
  for (auto t : tokens)
    if (is_tile_token(t)) return std::string(t);
  return std::string(kUnknown);
}

// "sm80", "sm90a", "Sm80" (cutlass::arch::Sm80) as a whole word.
std::string find_sm_arch(std::string_view name) {
  for (size_t i = 0; i + 4 <= name.size(); ++i) {
    if ((name[i] != 's' && name[i] != 'S') || name[i + 1] != 'm') continue;
    if (i > 0 && std::isalnum(static_cast<unsigned char>(name[i - 1]))) continue;
    size_t end = i + 2;
    while (end < name.size() && std::isdigit(static_cast<unsigned char>(name[end]))) ++end;
    const size_t digits = end - (i + 2);
    if (digits < 2 || digits > 3) continue;
    if (end < name.size() && name[end] == 'a') ++end;
    if (end < name.size() && std::isalnum(static_cast<unsigned char>(name[end]))) continue;
    return "sm" + std::string(name.substr(i + 2, end - (i + 2)));
  }
  return std::string(kUnknown);
}

// cuBLAS's pre-Hopper kernels name the GPU generation instead of the SM.
std::string legacy_cublas_arch(std::string_view head) {
  static constexpr std::array<std::pair<std::string_view, std::string_view>, 5> generations{{
      {"maxwell_", "sm50"}, {"volta_", "sm70"}, {"turing_", "sm75"},
      {"ampere_", "sm80"}, {"hopper_", "sm90"}}};
  for (auto [prefix, arch] : generations)
    if (starts_with(head, prefix)) return std::string(arch);
  return std::string(kUnknown);
}

// The earliest scalar type among template arguments: the storage type comes
// before the accumulator (softmax_warp_forward<c10::BFloat16, c10::BFloat16,
// float, ...>, MulFunctor<float> after the BFloat16 operands).
Precision first_template_scalar(std::string_view name) {
  static constexpr std::array<std::pair<std::string_view, Precision>, 8> scalar_types{{
      {"c10::BFloat16", Precision::bf16}, {"cutlass::bfloat16_t", Precision::bf16},
      {"__nv_bfloat16", Precision::bf16}, {"c10::Half", Precision::fp16},
      {"cutlass::half_t", Precision::fp16}, {"__half", Precision::fp16},
      {"float", Precision::fp32}, {"double", Precision::fp64}}};
  size_t best_pos = std::string_view::npos;
  Precision best = Precision::unknown;
  for (auto [type, precision] : scalar_types) {
    for (size_t pos = name.find(type); pos != std::string_view::npos;
         pos = name.find(type, pos + 1)) {
      const size_t end = pos + type.size();
      const bool whole_word = (pos == 0 || !is_word_char(name[pos - 1])) &&
                              (end == name.size() || !is_word_char(name[end]));
      if (!whole_word) continue;
      if (pos < best_pos) {
        best_pos = pos;
        best = precision;
      }
      break;
    }
  }
  return best;
}

// The MMA-instruction token of cuBLAS/CUTLASS GEMM names: s16816gemm,
// h1688gemm, h884gemm. The letter is the accumulator: 'h' means fp16 throughout,
// 's' means 16-bit inputs with fp32 accumulation (bf16 or fp16 by other tokens).
bool is_mma_gemm_token(std::string_view token) {
  if (token.size() < 8 || (token[0] != 's' && token[0] != 'h')) return false;
  const size_t gemm = token.find("gemm");
  return gemm != std::string_view::npos && gemm >= 4 && is_digits(token.substr(1, gemm - 1));
}

struct MathAndPrecision {
  MathUnit math = MathUnit::unknown;
  Precision precision = Precision::unknown;
};

// GEMM names from cuBLAS (legacy and xmma) and CUTLASS share one vocabulary.
MathAndPrecision decode_gemm_tokens(const std::vector<std::string_view>& tokens) {
  MathAndPrecision out;
  for (auto t : tokens) {
    if (t == "sgemm" || starts_with(t, "f32f32") || t == "ffma" || t == "simt")
      return {MathUnit::cuda_cores, Precision::fp32};
    if (t == "dgemm") return {MathUnit::cuda_cores, Precision::fp64};
    if (t == "tensorop" || t == "hmma" || t == "gmma" || t == "wgmma")
      out.math = MathUnit::tensor_cores;
    if (is_mma_gemm_token(t)) {
      out.math = MathUnit::tensor_cores;
      if (out.precision == Precision::unknown)
        out.precision = t[0] == 'h' ? Precision::fp16 : Precision::sixteen_bit;
    }
    if (t == "bf16" || starts_with(t, "bf16bf16")) out.precision = Precision::bf16;
    if (starts_with(t, "f16f16")) out.precision = Precision::fp16;
    if (t == "tf32" || starts_with(t, "tf32tf32")) out.precision = Precision::tf32;
  }
  // cuBLAS and CUTLASS run these input types only on the MMA units.
  if (out.precision == Precision::bf16 || out.precision == Precision::fp16 ||
      out.precision == Precision::tf32)
    out.math = MathUnit::tensor_cores;
  return out;
}

// "cutlass_80_tensorop_..." names the SM after the library prefix.
std::string cutlass_arch(const std::vector<std::string_view>& tokens) {
  for (size_t i = 0; i + 1 < tokens.size(); ++i)
    if (ends_with(tokens[i], "cutlass") && is_digits(tokens[i + 1])) return "sm" + std::string(tokens[i + 1]);
  return std::string(kUnknown);
}

// "tilesize128x128x8" in xmma names.
std::string xmma_tile(const std::vector<std::string_view>& tokens) {
  constexpr std::string_view prefix = "tilesize";
  for (auto t : tokens)
    if (starts_with(t, prefix) && is_tile_token(t.substr(prefix.size())))
      return std::string(t.substr(prefix.size()));
  return std::string(kUnknown);
}

// Flash_fwd_kernel_traits<kHeadDim, kBlockM, kBlockN, kNWarps, ...>: the tile
// is kBlockM x kBlockN.
std::string flash_traits_tile(std::string_view name) {
  constexpr std::string_view traits = "Flash_fwd_kernel_traits<";
  const size_t pos = name.find(traits);
  if (pos == std::string_view::npos) return std::string(kUnknown);
  std::vector<std::string_view> args;
  size_t start = pos + traits.size();
  while (args.size() < 3) {
    const size_t comma = name.find(',', start);
    if (comma == std::string_view::npos) return std::string(kUnknown);
    std::string_view arg = name.substr(start, comma - start);
    while (!arg.empty() && arg.front() == ' ') arg.remove_prefix(1);
    if (!is_digits(arg)) return std::string(kUnknown);
    args.push_back(arg);
    start = comma + 1;
  }
  return std::string(args[1]) + "x" + std::string(args[2]);
}

KernelFamily classify_aten(std::string_view name) {
  if (contains(name, "triu_tril_kernel")) return KernelFamily::aten_triu_tril;
  if (contains(name, "softmax_warp_forward") || contains(name, "cunn_SoftMaxForward"))
    return KernelFamily::aten_softmax;
  if (contains(name, "at::native::reduce_kernel")) return KernelFamily::aten_reduce;
  // Copies launch through the elementwise templates, so they are checked first.
  if (contains(name, "at::native") && contains(name, "copy_kernel"))
    return KernelFamily::aten_copy;
  if (contains(name, "at::native") && contains(name, "elementwise_kernel"))
    return KernelFamily::aten_elementwise;
  return KernelFamily::unknown;
}

bool is_legacy_cublas(std::string_view head) {
  if (legacy_cublas_arch(head) != kUnknown && contains(head, "gemm")) return true;
  static constexpr std::array<std::string_view, 4> helpers{
      "gemv2T_kernel", "gemv2N_kernel", "gemmSN_", "gemmk1_kernel"};
  for (auto h : helpers)
    if (contains(head, h)) return true;
  return false;
}

KernelFamily classify(std::string_view name) {
  const std::string_view head = symbol_head(name);
  if (starts_with(name, "Memcpy")) return KernelFamily::memcpy;
  if (starts_with(name, "Memset")) return KernelFamily::memset;
  // Ours first: our kernels may carry cutlass types or flash-like names.
  if (contains(name, "attnprof")) return KernelFamily::attnprof;
  if (starts_with(head, "nvjet_")) return KernelFamily::cublas_nvjet;
  if (contains(head, "_xmma_gemm")) return KernelFamily::cublas_xmma;
  if (starts_with(head, "fmha_cutlass")) return KernelFamily::cutlass_fmha;
  if (contains(name, "pytorch_flash::flash_fwd")) return KernelFamily::flash_attention_2;
  if (starts_with(head, "cudnn_generated")) return KernelFamily::cudnn_generated;
  if (starts_with(head, "cutlass_") || contains(name, "cutlass::Kernel"))
    return KernelFamily::cutlass;
  if (is_legacy_cublas(head)) return KernelFamily::cublas_legacy;
  return classify_aten(name);
}

// nvjet names carry an element-type tag; `h` is seen for both fp16 and bf16
// GEMMs (the H200 bf16 baseline shows ..._h_bz_...), so it only says 16-bit.
MathAndPrecision decode_nvjet(const std::vector<std::string_view>& tokens) {
  if (has_token(tokens, "h")) return {MathUnit::tensor_cores, Precision::sixteen_bit};
  return {};
}

MathAndPrecision decode_cudnn(const std::vector<std::string_view>& tokens) {
  MathAndPrecision out;
  for (auto t : tokens) {
    if (t == "wgmma" || t == "gmma" || t == "hmma" || t == "mma") out.math = MathUnit::tensor_cores;
    if (t == "bf16") out.precision = Precision::bf16;
    // cuDNN's SDPA engines say f16 for bf16 inputs too (the H200 bf16 baseline).
    if (t == "f16" && out.precision == Precision::unknown) out.precision = Precision::sixteen_bit;
  }
  return out;
}

MathAndPrecision decode_fmha(const std::vector<std::string_view>& tokens) {
  if (has_token(tokens, "bf16")) return {MathUnit::tensor_cores, Precision::bf16};
  if (has_token(tokens, "f16")) return {MathUnit::tensor_cores, Precision::fp16};
  // fp32 inputs take a different GEMM path per architecture: not decoded.
  if (has_token(tokens, "f32")) return {MathUnit::unknown, Precision::fp32};
  return {};
}

// Our kernels are known by name: the flash forward is mma.sync on tensor cores;
// the scale-mask-softmax kernel is a memory-bound pass over the score rows, and
// the fp8 forward's Vᵀ kernel one over V.
MathAndPrecision decode_attnprof(std::string_view name) {
  MathAndPrecision out{MathUnit::unknown, first_template_scalar(name)};
  if (contains(name, "wgmma") || contains(name, "mma") || contains(name, "flash_fwd"))
    out.math = MathUnit::tensor_cores;
  else if (contains(name, "softmax") || contains(name, "fp8_vt"))
    out.math = MathUnit::memory;
  return out;
}

void decode_fields(std::string_view name, KernelFingerprint& fp) {
  const auto tokens = underscore_tokens(symbol_head(name));
  MathAndPrecision mp;
  switch (fp.family) {
    case KernelFamily::cublas_nvjet:
      mp = decode_nvjet(tokens);
      fp.arch = find_sm_arch(name);
      fp.tile = first_tile_token(tokens);
      break;
    case KernelFamily::cublas_xmma:
      mp = decode_gemm_tokens(tokens);
      fp.arch = find_sm_arch(name);
      fp.tile = xmma_tile(tokens);
      break;
    case KernelFamily::cublas_legacy:
      mp = decode_gemm_tokens(tokens);
      if (mp.precision == Precision::unknown) mp.precision = first_template_scalar(name);
      fp.arch = legacy_cublas_arch(symbol_head(name));
      fp.tile = first_tile_token(tokens);
      break;
    case KernelFamily::cutlass: {
      // CUTLASS puts the GEMM description in a template argument.
      const auto all_tokens = underscore_tokens(name);
      mp = decode_gemm_tokens(all_tokens);
      const std::string arch = find_sm_arch(name);
      fp.arch = arch != kUnknown ? arch : cutlass_arch(all_tokens);
      fp.tile = first_tile_token(all_tokens);
      break;
    }
    case KernelFamily::cutlass_fmha:
      mp = decode_fmha(tokens);
      fp.arch = find_sm_arch(name);
      fp.tile = first_tile_token(tokens);
      break;
    case KernelFamily::flash_attention_2:
      // FlashAttention-2 is written only with mma.sync on 16-bit types.
      mp = {MathUnit::tensor_cores, first_template_scalar(name)};
      fp.tile = flash_traits_tile(name);
      break;
    case KernelFamily::cudnn_generated:
      mp = decode_cudnn(tokens);
      fp.arch = find_sm_arch(name);
      fp.tile = first_tile_token(tokens);
      break;
    case KernelFamily::aten_elementwise:
    case KernelFamily::aten_reduce:
    case KernelFamily::aten_softmax:
    case KernelFamily::aten_triu_tril:
      mp = {MathUnit::cuda_cores, first_template_scalar(name)};
      break;
    case KernelFamily::aten_copy:
      // A cast names both dtypes in its lambdas; which is which is not encoded.
      mp = {MathUnit::cuda_cores, Precision::unknown};
      break;
    case KernelFamily::memcpy:
    case KernelFamily::memset:
      mp = {MathUnit::memory, Precision::unknown};
      break;
    case KernelFamily::attnprof:
      mp = decode_attnprof(name);
      fp.arch = find_sm_arch(name);
      fp.tile = first_tile_token(tokens);
      break;
    case KernelFamily::unknown:
      break;
  }
  fp.math_unit = mp.math;
  fp.precision = mp.precision;
}

// "Memcpy DtoD (Device -> Device)" -> "DtoD".
std::string_view copy_direction(std::string_view name) {
  const size_t space = name.find(' ');
  if (space == std::string_view::npos) return {};
  std::string_view rest = name.substr(space + 1);
  return rest.substr(0, rest.find(' '));
}

std::string make_summary(std::string_view name, const KernelFingerprint& fp) {
  if (fp.family == KernelFamily::unknown) return "unknown kernel";
  std::vector<std::string> facts;
  if (fp.family == KernelFamily::memcpy) {
    const std::string_view direction = copy_direction(name);
    if (!direction.empty() && direction.front() != '(') facts.emplace_back(direction);
  }
  if (fp.math_unit != MathUnit::unknown) facts.emplace_back(math_unit_name(fp.math_unit));
  if (fp.precision != Precision::unknown) facts.emplace_back(precision_name(fp.precision));
  if (fp.arch != kUnknown) facts.push_back(fp.arch);
  if (fp.tile != kUnknown) facts.push_back("tile " + fp.tile);
  std::string summary(family_name(fp.family));
  for (size_t i = 0; i < facts.size(); ++i) summary += (i == 0 ? ": " : ", ") + facts[i];
  return summary;
}

}  // namespace

KernelFingerprint fingerprint_kernel(std::string_view name) {
  KernelFingerprint fp;
  fp.family = classify(name);
  decode_fields(name, fp);
  fp.summary = make_summary(name, fp);
  return fp;
}

std::string_view family_name(KernelFamily family) {
  switch (family) {
    case KernelFamily::cublas_nvjet: return "cuBLAS (nvjet)";
    case KernelFamily::cublas_xmma: return "cuBLAS/CUTLASS xmma";
    case KernelFamily::cublas_legacy: return "cuBLAS";
    case KernelFamily::cutlass: return "CUTLASS";
    case KernelFamily::cutlass_fmha: return "CUTLASS fmha (xformers)";
    case KernelFamily::flash_attention_2: return "FlashAttention-2 (pytorch_flash)";
    case KernelFamily::cudnn_generated: return "cuDNN generated (runtime-fused)";
    case KernelFamily::aten_elementwise: return "ATen elementwise";
    case KernelFamily::aten_reduce: return "ATen reduce";
    case KernelFamily::aten_softmax: return "ATen softmax";
    case KernelFamily::aten_copy: return "ATen copy/cast";
    case KernelFamily::aten_triu_tril: return "ATen triu/tril";
    case KernelFamily::memcpy: return "memcpy";
    case KernelFamily::memset: return "memset";
    case KernelFamily::attnprof: return "attnprof (ours)";
    case KernelFamily::unknown: break;
  }
  return kUnknown;
}

std::string_view math_unit_name(MathUnit unit) {
  switch (unit) {
    case MathUnit::tensor_cores: return "tensor cores";
    case MathUnit::cuda_cores: return "CUDA cores";
    case MathUnit::memory: return "memory";
    case MathUnit::unknown: break;
  }
  return kUnknown;
}

std::string_view precision_name(Precision precision) {
  switch (precision) {
    case Precision::bf16: return "bf16";
    case Precision::fp16: return "fp16";
    case Precision::sixteen_bit: return "16-bit";
    case Precision::tf32: return "tf32";
    case Precision::fp32: return "fp32";
    case Precision::fp64: return "fp64";
    case Precision::unknown: break;
  }
  return kUnknown;
}

}  // namespace attnprof::report
