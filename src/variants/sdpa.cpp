// at::scaled_dot_product_attention with exactly one backend allowed (or, for
// sdpa-auto, SDPA's own choice). The global backend flags are pinned for the
// duration of each call and restored afterwards, also when the call throws.
#include <ATen/ATen.h>
#include <ATen/Context.h>
#include <ATen/SDPBackend.h>
#include <c10/util/Exception.h>

#include <optional>

#include "variants/factories.h"
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

class Sdpa : public Variant {
 public:
  Sdpa(std::string name, std::optional<at::SDPBackend> backend, std::string header_word, std::string description)
      : name_(std::move(name)), backend_(backend), header_word_(std::move(header_word)),
        description_(std::move(description)) {}

  std::string name() const override { return name_; }
  std::string description() const override { return description_; }

  Support supports(const Problem& p) const override {
    if (!backend_ || *backend_ == at::SDPBackend::math) return Support::yes();
    WarningCollector warnings;
    try {
      // Uninitialised tensors of the real shape: the backend checks look at
      // sizes, strides, dtype and device only.
      const auto opt = tensor_options(p);
      const std::vector<int64_t> shape = {p.batch, p.heads, p.seq, p.head_dim};
      const at::Tensor q = at::empty(shape, opt), k = at::empty(shape, opt), v = at::empty(shape, opt);
      ScopedSdpBackend pin(backend_);
      const int64_t choice = at::_fused_sdp_choice(q, k, v, std::nullopt, 0.0, p.causal);
      if (choice == static_cast<int64_t>(*backend_)) return Support::yes();
      const std::string why = refusal_reason(warnings.messages, header_word_);
      return Support::no(!why.empty() ? why
                                      : name_ + " is not available for this input on " + p.device +
                                            " (SDPA chose " + backend_name(choice) + ")");
    } catch (const c10::Error& e) {
      const std::string why = refusal_reason(warnings.messages, header_word_);
      if (!why.empty()) return Support::no(why);
      if (!p.on_cuda())
        return Support::no(name_ + " has no CPU kernel in PyTorch; it needs a CUDA device");
      return Support::no(name_ + ": " + first_line(e.what_without_backtrace()));
    }
  }

  void prepare(const Problem& p, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    causal_ = p.causal;
    if (!backend_) {
      chosen_ = backend_name(at::_fused_sdp_choice(q, k, v, std::nullopt, 0.0, p.causal));
    }
  }

  at::Tensor forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) override {
    ScopedSdpBackend pin(backend_);
    return at::scaled_dot_product_attention(q, k, v, std::nullopt, 0.0, causal_);
  }

  report::MemoryFamily memory_family() const override {
    return backend_ == at::SDPBackend::math ? report::MemoryFamily::sdpa_math_fp32 : report::MemoryFamily::fused;
  }

  std::vector<Fact> facts() const override {
    if (backend_) return {};
    return {{"sdpa_backend", chosen_}};
  }

 private:
  std::string name_;
  std::optional<at::SDPBackend> backend_;
  std::string header_word_;
  std::string description_;
  bool causal_ = true;
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
                                "SDPA with every backend allowed: PyTorch's own choice (reported)");
}

}  // namespace attnprof
