#include "variants/factories.h"

#include "attnprof/report/run_files.h"

namespace attnprof {

const std::vector<VariantEntry>& variant_registry() {
  using T = VariantTag;
  static const std::vector<VariantEntry> registry = {
      {"naive", make_naive, T::baseline | T::default_sweep},
      {"inplace", make_inplace, unsigned(T::default_sweep)},
      {"sdpa-math", make_sdpa_math, unsigned(T::default_sweep)},
      {"sdpa-efficient", make_sdpa_efficient, unsigned(T::default_sweep)},
      {"sdpa-flash", make_sdpa_flash, unsigned(T::default_sweep)},
      {"sdpa-cudnn", make_sdpa_cudnn, unsigned(T::default_sweep)},
      {"sdpa-auto", make_sdpa_auto},
      {"custom-softmax", make_custom_softmax},
      {"custom-flash", make_custom_flash},
      {"custom-flash-sm90", make_custom_flash_sm90},
      // Multi-GPU: `--variant all` leaves them out unless ranks are asked for (--nproc or a launcher).
      {"ring-sdpa-flash", make_ring_sdpa_flash, unsigned(T::multi_gpu)},
      {"ring-custom-flash", make_ring_custom_flash, unsigned(T::multi_gpu)},
      {"ring-custom-flash-sm90", make_ring_custom_flash_sm90, unsigned(T::multi_gpu)},
      {"ulysses-sdpa-flash", make_ulysses_sdpa_flash, unsigned(T::multi_gpu)},
      {"ulysses-custom-flash", make_ulysses_custom_flash, unsigned(T::multi_gpu)},
      {"ulysses-custom-flash-sm90", make_ulysses_custom_flash_sm90, unsigned(T::multi_gpu)},
  };
  return registry;
}

std::vector<std::string> variant_names() {
  std::vector<std::string> names;
  for (const auto& e : variant_registry()) names.push_back(e.name);
  return names;
}

bool is_own_output_path(const std::string& rel_dir, const std::string& name) {
  const std::string top = rel_dir.substr(0, rel_dir.find('/'));
  if (!top.empty() && top != "compare" && top != "sweep" && !find_variant(top)) return false;
  return report::is_own_output(rel_dir, name);
}

std::vector<std::string> variants_tagged(VariantTag tag) {
  std::vector<std::string> names;
  for (const auto& e : variant_registry())
    if (e.has(tag)) names.push_back(e.name);
  return names;
}

const VariantEntry* find_variant(const std::string& name) {
  for (const auto& e : variant_registry())
    if (e.name == name) return &e;
  return nullptr;
}

std::unique_ptr<Variant> make_variant(const std::string& name) {
  const VariantEntry* e = find_variant(name);
  return e ? e->make() : nullptr;
}

}  // namespace attnprof
