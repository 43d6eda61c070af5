#include "variants/factories.h"

namespace attnprof {

const std::vector<VariantEntry>& variant_registry() {
  static const std::vector<VariantEntry> registry = {
      {"naive", make_naive},
      {"inplace", make_inplace},
      {"sdpa-math", make_sdpa_math},
      {"sdpa-efficient", make_sdpa_efficient},
      {"sdpa-flash", make_sdpa_flash},
      {"sdpa-cudnn", make_sdpa_cudnn},
      {"sdpa-auto", make_sdpa_auto},
      {"custom-softmax", make_custom_softmax},
      {"custom-flash", make_custom_flash},
      {"custom-flash-sm90", make_custom_flash_sm90},
  };
  return registry;
}

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const auto& e : variant_registry()) names.push_back(e.name);
  return names;
}

std::unique_ptr<Variant> make_variant(const std::string& name) {
  for (const auto& e : variant_registry())
    if (e.name == name) return e.make();
  return nullptr;
}

}  // namespace attnprof
