// at::scaled_dot_product_attention with exactly one backend allowed (or, for
// sdpa-auto, SDPA's own choice). The global backend flags are pinned for the
// duration of each call and restored afterwards, also when the call throws.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/util/Exception.h>

#include <optional>

#include "variants/factories.h"
#include "variants/fp8.h"
#include "variants/torch_problem.h"

namespace attnprof {
namespace {

struct SdpFlags {
  bool flash, efficient, math, cudnn, overrideable;

  static SdpFlags current() {
    auto& c = at::globalContext();
    return {c.userEnabledFlashSDP(), c.userEnabledMemEfficientSDP(), c.userEnabledMathSDP(),
            c.userEnabledCuDNNSDP(), c.userEnabledOverrideableSDP()};
  }
  static SdpFlags only(at::SDPBackend b) {
    return {b == at::SDPBackend::flash_attention, b == at::SDPBackend::efficient_attention,
            b == at::SDPBackend::math, b == at::SDPBackend::cudnn_attention, false};
  }
  void apply() const {
    auto& c = at::globalContext();
    c.setSDPUseFlash(flash);
    c.setSDPUseMemEfficient(efficient);
    c.setSDPUseMath(math);
    c.setSDPUseCuDNN(cudnn);
    c.setSDPUseOverrideable(overrideable);
  }
};

class ScopedSdpBackend {
 public:
  explicit ScopedSdpBackend(std::optional<at::SDPBackend> only) : saved_(SdpFlags::current()) {
    if (only) SdpFlags::only(*only).apply();
  }
  ~ScopedSdpBackend() { saved_.apply(); }
  ScopedSdpBackend(const ScopedSdpBackend&) = delete;
  ScopedSdpBackend& operator=(const ScopedSdpBackend&) = delete;

 private:
  SdpFlags saved_;
};

// Collects TORCH_WARN text (SDPA explains a refused backend only through warnings).
class WarningCollector : public c10::WarningHandler {
 public:
  WarningCollector() : guard_(this), warn_always_(c10::WarningUtils::get_warnAlways()) {
    c10::WarningUtils::set_warnAlways(true);
  }
  ~WarningCollector() override { c10::WarningUtils::set_warnAlways(warn_always_); }
  void process(const c10::Warning& w) override { messages.push_back(w.msg()); }
  std::vector<std::string> messages;

 private:
  c10::WarningUtils::WarningHandlerGuard guard_;
  bool warn_always_;
};

const char* backend_name(int64_t b) {
  switch (static_cast<at::SDPBackend>(b)) {
    case at::SDPBackend::math: return "math";
    case at::SDPBackend::flash_attention: return "flash";
    case at::SDPBackend::efficient_attention: return "efficient";
    case at::SDPBackend::cudnn_attention: return "cudnn";
    case at::SDPBackend::overrideable: return "overrideable";
    case at::SDPBackend::error: return "none";
  }
  return "unknown";
}

// SDPA's warnings come in sections headed "<Backend> ... not used because:";
// keep the lines of the section about `backend`, first line of each only.
std::string refusal_reason(const std::vector<std::string>& messages, const std::string& header_word) {
  std::string section, reason;
  for (const std::string& raw : messages) {
    const std::string m = first_line(raw);
    if (m.find("not used because") != std::string::npos) {
      section = m;
      continue;
    }
    if (section.find(header_word) == std::string::npos) continue;
    if (reason.empty()) reason = section + " ";
    else reason += "; ";
    reason += m;
  }
  return reason;
}

// How a problem's mask reaches SDPA. PyTorch's is_causal is top-left aligned;
// for the bottom-right (KV-cache) mask with seq_q != seq_kv this follows
// torch.nn.attention.bias.causal_lower_right: the flash and efficient kernels
// are called directly with their own lower-right causal mode, every other
// backend gets the mask materialised as a boolean tensor.
enum class MaskRoute {
  none,              // nothing hidden (no mask, or one query that sees every key)
  is_causal,         // square, or top-left aligned
  flash_op,          // aten::_scaled_dot_product_flash_attention(is_causal=True): lower-right
  efficient_op,      // aten::_efficient_attention_forward(custom_mask_type=2): lower-right
  flash_window,      // aten::_flash_attention_forward(is_causal, window_size_left = window - 1)
  flash_varlen,      // aten::_flash_attention_forward(cum_seq_q, cum_seq_k, ...) on the packed batch
  efficient_varlen,  // aten::_efficient_attention_forward(cu_seqlens_q, cu_seqlens_k, ...) on the packed batch
  cudnn_varlen,      // aten::_cudnn_attention_forward(cum_seq_q, cum_seq_k, ...) on the packed batch (ragged)
  materialised,      // attn_mask = the boolean [Sq, Skv] mask (with the window, if any; [B, 1, Sq, Skv] for a
                     // variable-length batch, the padding hidden too)
};

bool reads_packed_route(MaskRoute r) {
  return r == MaskRoute::flash_varlen || r == MaskRoute::efficient_varlen || r == MaskRoute::cudnn_varlen;
}

// LibTorch's allocators refuse in their own words: the CPU's as an enforce
// failure ("DefaultCPUAllocator: can't allocate memory: you tried to allocate
// ..."), CUDA's as OutOfMemoryError ("Tried to allocate ...").
bool is_allocation_failure(const c10::Error& e) {
  if (dynamic_cast<const c10::OutOfMemoryError*>(&e)) return true;
  const std::string what = e.what_without_backtrace();
  return what.find("you tried to allocate") != std::string::npos || what.find("Tried to allocate") != std::string::npos;
}

bool cudnn_takes_ragged(const at::Tensor& q) {
  const cudaDeviceProp* d = at::cuda::getDeviceProperties(q.device().index());
  return (d->major == 9 || d->major == 10) && d->minor == 0;
}

// An fp8 problem as the bf16 one its dequantised inputs make.
Problem dequantised(Problem p) {
  p.dtype = DType::BF16;
  return p;
}

bool hides_nothing(const Problem& p) {
  const Mask m = p.effective_mask();
  return !p.windowed() && (m == Mask::none || (m == Mask::causal_bottom_right && p.seq_q <= 1));
}

class Sdpa : public Variant {
 public:
  Sdpa(std::string name, std::optional<at::SDPBackend> backend, std::string header_word, std::string description)
      : name_(std::move(name)), backend_(backend), header_word_(std::move(header_word)),
        description_(std::move(description)) {}

  std::string name() const override { return name_; }
  std::string description() const override { return description_; }

  Support supports(const Problem& p) const override {
    // sdpa-auto runs fp8 inputs dequantised to bf16: it can where it can run the bf16 problem.
    if (p.dtype == DType::FP8 && fp8_path() == Fp8Path::dequantised) return supports(dequantised(p));
    const Support s = backend_support(p);
    if (!s.ok || p.dtype != DType::FP8) return s;
    // The backend's choice took e4m3 (or, for math, asked nothing): the call itself answers.
    return fp8_refusal(name_, p, [this](const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
      ScopedSdpBackend pin(backend_);
      (void)at::scaled_dot_product_attention(q, k, v);
    });
  }

  // The reference path of an fp8 run: SDPA's own choice on the inputs
  // dequantised to bf16 inside the measured scope (what a user without an fp8
  // attention kernel pays), beside the fp8 kernels in one table.
  Fp8Path fp8_path() const override { return backend_ ? Fp8Path::none : Fp8Path::dequantised; }
  at::Tensor forward_fp8(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const Fp8Scales& s) override {
    TORCH_CHECK(fp8_path() == Fp8Path::dequantised, name_, " has no fp8 path");
    return forward(dequantize(q, s.q_descale, at::kBFloat16), dequantize(k, s.k_descale, at::kBFloat16),
                   dequantize(v, s.v_descale, at::kBFloat16));
  }

  // Whether the pinned backend (any, for sdpa-auto) takes the problem's inputs.
  Support backend_support(const Problem& p) const {
    if (backend_ == at::SDPBackend::math) return Support::yes();
    WarningCollector warnings;
    try {
      // Uninitialised tensors of the real shape: the backend checks look at
      // sizes, strides, dtype and device only.
      const auto opt = tensor_options(p);
      const at::Tensor q = at::empty({p.batch, p.heads_q, p.seq_q, p.head_dim}, opt);
      const at::Tensor k = at::empty({p.batch, p.heads_kv, p.seq_kv, p.head_dim}, opt), v = at::empty_like(k);
      const MaskRoute route = route_for(p, q, k, v);
      if (!backend_) return Support::yes();
      const int64_t choice = choice_for(p, route, q, k, v);
      if (choice == static_cast<int64_t>(*backend_)) return Support::yes();
      const std::string why = refusal_reason(warnings.messages, header_word_);
      return Support::no(!why.empty() ? why
                                      : name_ + " is not available for this input on " + p.device +
                                            " (SDPA chose " + backend_name(choice) + ")");
    } catch (const c10::Error& e) {
      // Inputs (or their mask) too large to hold even uninitialised: the
      // memory prediction, next, refuses the run and says how much it needs.
      if (is_allocation_failure(e)) return Support::yes();
      const std::string why = refusal_reason(warnings.messages, header_word_);
      if (!why.empty()) return Support::no(why);
      if (!p.on_cuda())
        return Support::no(name_ + " has no CPU kernel in PyTorch; it needs a CUDA device");
      return Support::no(name_ + ": " + first_line(e.what_without_backtrace()));
    }
  }

  void prepare(const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    if (p.dtype == DType::FP8) {
      // The route of the bf16 inputs forward_fp8 hands on.
      const auto bf16 = [](const at::Tensor& t) { return at::empty(t.sizes(), t.options().dtype(at::kBFloat16)); };
      prepare(dequantised(p), bf16(q), bf16(k), bf16(v));
      fp8_ = true;
      return;
    }
    fp8_ = false;
    enable_gqa_ = p.heads_kv != p.heads_q;
    scale_ = p.softmax_scale();
    window_ = p.effective_window();
    causal_ = p.causal();
    varlen_ = p.varlen();
    route_ = route_for(p, q, k, v);
    if (route_ == MaskRoute::materialised) allowed_ = hidden_keys_mask(p, q.options()).logical_not();
    if (!backend_)
      chosen_ = route_ == MaskRoute::flash_op || route_ == MaskRoute::flash_window || route_ == MaskRoute::flash_varlen
                    ? "flash"
                : route_ == MaskRoute::efficient_op ? "efficient"
                                                    : backend_name(choice_for(p, route_, q, k, v));
  }

  bool reads_packed() const override { return reads_packed_route(route_); }

  at::Tensor forward_varlen(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                            const PackedBatch& packed) override {
    if (!reads_packed_route(route_)) return forward(q, k, v);  // the padded batch under its mask
    ScopedSdpBackend pin(backend_);
    if (route_ == MaskRoute::flash_varlen) {
      // FlashAttention-2's varlen path: GQA in place, causal bottom-right per sequence.
      const auto out = at::_flash_attention_forward(
          packed.q, packed.k, packed.v, packed.cu_seqlens_q, packed.cu_seqlens_k, packed.max_q, packed.max_kv, 0.0,
          causal_, /*return_debug_mask=*/false, scale_,
          window_ > 0 ? std::optional<int64_t>(window_ - 1) : std::nullopt,
          window_ > 0 ? std::optional<int64_t>(0) : std::nullopt);
      return std::get<0>(out);
    }
    if (route_ == MaskRoute::cudnn_varlen) {
      // cuDNN's ragged offsets: [total, heads, head_dim] rows, GQA in place.
      const auto out = at::_cudnn_attention_forward(packed.q, packed.k, packed.v, std::nullopt, packed.cu_seqlens_q,
                                                    packed.cu_seqlens_k, packed.max_q, packed.max_kv,
                                                    /*compute_log_sumexp=*/false, 0.0, causal_, false, scale_);
      return std::get<0>(out);
    }
    // The CUTLASS kernel takes a packed batch as one sequence of total rows with cu_seqlens.
    const auto out = at::_efficient_attention_forward(
        packed.q.unsqueeze(0), packed.k.unsqueeze(0), packed.v.unsqueeze(0), std::nullopt, packed.cu_seqlens_q,
        packed.cu_seqlens_k, packed.max_q, packed.max_kv, 0.0,
        /*custom_mask_type: none, or causal from bottom right*/ causal_ ? 2 : 0, /*compute_log_sumexp=*/false, scale_);
    return std::get<0>(out).squeeze(0);
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    ScopedSdpBackend pin(backend_);
    switch (route_) {
      case MaskRoute::flash_op:
        return std::get<0>(at::_scaled_dot_product_flash_attention(q, k, v, 0.0, /*is_causal=*/true, false, scale_));
      case MaskRoute::flash_window: {
        // FlashAttention-2's local attention: [batch, seq, heads, head_dim] views, GQA in place.
        const auto out = at::_flash_attention_forward(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                                                      std::nullopt, std::nullopt, q.size(2), k.size(2), 0.0,
                                                      /*is_causal=*/true, /*return_debug_mask=*/false, scale_,
                                                      /*window_size_left=*/window_ - 1, /*window_size_right=*/0);
        return std::get<0>(out).transpose(1, 2);
      }
      case MaskRoute::efficient_op: {
        const auto out = at::_efficient_attention_forward(
            q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), std::nullopt, std::nullopt, std::nullopt,
            std::nullopt, std::nullopt, 0.0, /*custom_mask_type: causal from bottom right*/ 2,
            /*compute_log_sumexp=*/q.requires_grad() || k.requires_grad() || v.requires_grad(), scale_);
        return std::get<0>(out).transpose(1, 2);
      }
      case MaskRoute::materialised:
        return at::scaled_dot_product_attention(q, k, v, allowed_, 0.0, false, scale_, enable_gqa_);
      case MaskRoute::flash_varlen:
      case MaskRoute::efficient_varlen:
      case MaskRoute::cudnn_varlen:
        TORCH_CHECK(false, name_, ": a variable-length batch runs through forward_varlen");
      case MaskRoute::is_causal:
      case MaskRoute::none:
        break;
    }
    return at::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, route_ == MaskRoute::is_causal, scale_,
                                            enable_gqa_);
  }

  MemoryFamily memory_family() const override {
    return backend_ == at::SDPBackend::math ? MemoryFamily::sdpa_math_fp32 : MemoryFamily::fused;
  }

  std::vector<Fact> facts() const override {
    std::vector<Fact> f;
    if (fp8_)
      f.push_back({"fp8 inputs", "dequantised to bf16 inside the measured scope (for each of q, k and v: e4m3 to "
                                 "float32, times its per-head descale, to bf16), then SDPA's choice: the path a "
                                 "user without an fp8 attention kernel takes"});
    if (!backend_) f.push_back({"sdpa_backend", chosen_});
    if (route_ == MaskRoute::flash_op)
      f.push_back({"causal mask", "lower-right, via aten::_scaled_dot_product_flash_attention(is_causal=True), as "
                                  "torch.nn.attention.bias.causal_lower_right dispatches it"});
    if (route_ == MaskRoute::efficient_op)
      f.push_back({"causal mask", "lower-right, via aten::_efficient_attention_forward(custom_mask_type=2), as "
                                  "torch.nn.attention.bias.causal_lower_right dispatches it"});
    // A variable-length batch's mask and layout are the session's "variable lengths" fact.
    if (route_ == MaskRoute::materialised && !varlen_)
      f.push_back({"causal mask", "materialised as a boolean [seq_q, seq_kv] attn_mask (lower-right aligned)"});
    if (reads_packed_route(route_))
      f.push_back({"variable-length call",
                   route_ == MaskRoute::flash_varlen
                       ? "aten::_flash_attention_forward(cum_seq_q, cum_seq_k, max_q, max_k): FlashAttention-2's varlen path"
                   : route_ == MaskRoute::efficient_varlen
                       ? "aten::_efficient_attention_forward(cu_seqlens_q, cu_seqlens_k): the packed batch as one "
                         "sequence of total rows"
                       : "aten::_cudnn_attention_forward(cum_seq_q, cum_seq_k): cuDNN's ragged offsets, int32 (int64 "
                         "offsets gave wrong output on the H200, torch 2.11)"});
    if (route_ == MaskRoute::flash_window || (route_ == MaskRoute::flash_varlen && window_ > 0))
      f.push_back({"sliding window", std::to_string(window_) + " keys, via aten::_flash_attention_forward("
                                     "window_size_left=" + std::to_string(window_ - 1) +
                                     ", window_size_right=0): FlashAttention-2 skips the key blocks outside it"});
    else if (window_ > 0)
      f.push_back({"sliding window", std::to_string(window_) + " keys, in the materialised mask: every score is "
                                     "computed, those outside the window masked"});
    return f;
  }

 private:
  // The backend SDPA would pick with this route's arguments, under this
  // variant's pin (sdpa-auto: every backend allowed).
  int64_t choice_for(const Problem& p, MaskRoute route, const at::Tensor& q, const at::Tensor& k,
                     const at::Tensor& v) const {
    ScopedSdpBackend pin(backend_);
    const bool gqa = p.heads_kv != p.heads_q;
    switch (route) {
      case MaskRoute::flash_op:
      case MaskRoute::efficient_op:
      case MaskRoute::flash_window:
      case MaskRoute::flash_varlen:
      case MaskRoute::efficient_varlen:
      case MaskRoute::cudnn_varlen:
        // causal_lower_right asks can_use_* without a mask and without is_causal (and so do the varlen calls).
        return at::_fused_sdp_choice(q, k, v, std::nullopt, 0.0, false, std::nullopt, gqa);
      case MaskRoute::materialised:
        // The choice reads the mask's sizes, strides and dtype, never its values: an
        // uninitialised stand-in of the mask's layout, not the mask (a varlen batch's
        // [B, 1, Sq, Skv] took 8.5 s and 3.4 GB to build for --list-variants).
        return at::_fused_sdp_choice(q, k, v, at::empty(hidden_keys_mask_sizes(p), q.options().dtype(at::kBool)), 0.0, false,
                                     std::nullopt, gqa);
      case MaskRoute::is_causal:
      case MaskRoute::none:
        break;
    }
    return at::_fused_sdp_choice(q, k, v, std::nullopt, 0.0, route == MaskRoute::is_causal, std::nullopt, gqa);
  }

  // Whether SDPA picks `b` for this input asked without a mask and without
  // is_causal, as causal_lower_right and the window and varlen calls ask; its
  // refusal warnings kept quiet (a refusal is an answer here, not an error).
  static bool takes_unmasked(at::SDPBackend b, const Problem& p, const at::Tensor& q, const at::Tensor& k,
                             const at::Tensor& v) {
    ScopedSdpBackend pin(b);
    WarningCollector quiet;
    try {
      return at::_fused_sdp_choice(q, k, v, std::nullopt, 0.0, false, std::nullopt, p.heads_kv != p.heads_q) ==
             static_cast<int64_t>(b);
    } catch (const c10::Error&) {
      return false;
    }
  }

  MaskRoute route_for(const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) const {
    if (p.varlen()) {
      // The flash, efficient and cuDNN kernels take the packed batch; math (and
      // the CPU, and a top-left mask) the padded one under a mask.
      if (!p.on_cuda() || p.effective_mask() == Mask::causal_top_left || p.varlen_padded) return MaskRoute::materialised;
      if (backend_ == at::SDPBackend::flash_attention) return MaskRoute::flash_varlen;
      if (backend_ == at::SDPBackend::efficient_attention)
        return p.windowed() ? MaskRoute::materialised : MaskRoute::efficient_varlen;
      // cuDNN's causal mask is top-left: bottom-right only where every sequence has as many queries as keys;
      // PyTorch takes its ragged offsets on SM 9.0 and 10.0 only (sdp_utils' check_for_nested_inputs).
      if (backend_ == at::SDPBackend::cudnn_attention)
        return !p.windowed() && p.seq_q == p.seq_kv && cudnn_takes_ragged(q) ? MaskRoute::cudnn_varlen
                                                                                : MaskRoute::materialised;
      if (backend_) return MaskRoute::materialised;
      // sdpa-auto: flash's varlen call where its kernel takes the input, else the padded batch under a mask.
      return takes_unmasked(at::SDPBackend::flash_attention, p, q, k, v) ? MaskRoute::flash_varlen
                                                                          : MaskRoute::materialised;
    }
    if (hides_nothing(p)) return MaskRoute::none;
    if (p.windowed()) {
      // Only the flash kernel takes a window; the others get it in the mask.
      if (!p.on_cuda() || (backend_ && *backend_ != at::SDPBackend::flash_attention)) return MaskRoute::materialised;
      if (backend_) return MaskRoute::flash_window;
      // No flash kernel for this input: the mask, as for every other backend.
      return takes_unmasked(at::SDPBackend::flash_attention, p, q, k, v) ? MaskRoute::flash_window
                                                                          : MaskRoute::materialised;
    }
    if (p.seq_q == p.seq_kv || p.effective_mask() == Mask::causal_top_left) return MaskRoute::is_causal;
    if (!p.on_cuda()) return MaskRoute::materialised;
    if (backend_ == at::SDPBackend::flash_attention) return MaskRoute::flash_op;
    if (backend_ == at::SDPBackend::efficient_attention) return MaskRoute::efficient_op;
    if (backend_) return MaskRoute::materialised;
    // sdpa-auto: causal_lower_right's own order — flash, then efficient, then a materialised mask.
    for (const auto [b, route] : {std::pair{at::SDPBackend::flash_attention, MaskRoute::flash_op},
                                  std::pair{at::SDPBackend::efficient_attention, MaskRoute::efficient_op}})
      if (takes_unmasked(b, p, q, k, v)) return route;  // else this backend cannot take the shape: try the next
    return MaskRoute::materialised;
  }

  std::string name_;
  std::optional<at::SDPBackend> backend_;
  std::string header_word_;
  std::string description_;
  bool enable_gqa_ = false;
  double scale_ = 1.0;
  int64_t window_ = 0;  // the problem's window where it hides keys, else 0
  bool causal_ = true;
  bool varlen_ = false;
  bool fp8_ = false;  // fp8 inputs, dequantised by forward_fp8
  MaskRoute route_ = MaskRoute::none;
  at::Tensor allowed_;  // the materialised mask (true = attend), when the route needs it
  std::string chosen_;
};

}  // namespace

std::unique_ptr<Variant> make_sdpa_math() {
  return std::make_unique<Sdpa>("sdpa-math", at::SDPBackend::math, "",
                                "SDPA math backend: upcasts to FP32, rebuilds the mask every call, ~20 kernels");
}
std::unique_ptr<Variant> make_sdpa_efficient() {
  return std::make_unique<Sdpa>("sdpa-efficient", at::SDPBackend::efficient_attention, "Memory efficient",
                                "SDPA memory-efficient backend: one CUTLASS fmha_cutlassF kernel");
}
std::unique_ptr<Variant> make_sdpa_flash() {
  return std::make_unique<Sdpa>("sdpa-flash", at::SDPBackend::flash_attention, "Flash attention",
                                "SDPA flash backend: FlashAttention-2 (CPU: ATen's flash kernel)");
}
std::unique_ptr<Variant> make_sdpa_cudnn() {
  return std::make_unique<Sdpa>("sdpa-cudnn", at::SDPBackend::cudnn_attention, "CuDNN",
                                "SDPA cuDNN backend: a per-problem generated kernel via cuLaunchKernelEx");
}
std::unique_ptr<Variant> make_sdpa_auto() {
  return std::make_unique<Sdpa>("sdpa-auto", std::nullopt, "",
                                "SDPA with every backend allowed: PyTorch's own choice (reported); fp8 inputs "
                                "dequantised to bf16 first");
}

}  // namespace attnprof
