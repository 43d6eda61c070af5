// The Hopper family's configurations by name (flash_sm90_params.h): each
// generated instantiation file registers its configuration and dtype at load
// time; the by-name operators look them up.
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "kernels/flash_sm90/flash_sm90_params.h"

namespace attnprof::flash_sm90 {
namespace {

template <typename Entry>
struct Registry {
  std::mutex mutex;
  std::map<std::pair<std::string, bool>, Entry> entries;  // (name, is_bf16)

  bool add(const char* name, bool is_bf16, const Entry& e) {
    const std::lock_guard<std::mutex> lock(mutex);
    return entries.emplace(std::make_pair(std::string(name), is_bf16), e).second;
  }
  const Entry* find(const std::string& name, bool is_bf16) {
    const std::lock_guard<std::mutex> lock(mutex);
    const auto it = entries.find({name, is_bf16});
    return it == entries.end() ? nullptr : &it->second;  // entries are never removed
  }
  // The names of the entries `keep` takes, each once, sorted.
  template <typename Keep>
  std::vector<std::string> names(Keep keep) {
    const std::lock_guard<std::mutex> lock(mutex);
    std::set<std::string> unique;
    for (const auto& [key, entry] : entries)
      if (keep(entry)) unique.insert(key.first);
    return {unique.begin(), unique.end()};
  }
};

// Function-local statics: registration runs from other files' static
// initialisers, in no defined order.
Registry<FwdConfigEntry>& fwd_registry() {
  static auto* r = new Registry<FwdConfigEntry>();  // never destroyed: a late lookup at exit stays valid
  return *r;
}
Registry<BwdConfigEntry>& bwd_registry() {
  static auto* r = new Registry<BwdConfigEntry>();
  return *r;
}

}  // namespace

bool register_config(const char* name, bool is_bf16, const FwdConfigEntry& entry) {
  return fwd_registry().add(name, is_bf16, entry);
}
bool register_config(const char* name, bool is_bf16, const BwdConfigEntry& entry) {
  return bwd_registry().add(name, is_bf16, entry);
}
const FwdConfigEntry* find_fwd_config(const std::string& name, bool is_bf16) {
  return fwd_registry().find(name, is_bf16);
}
const BwdConfigEntry* find_bwd_config(const std::string& name, bool is_bf16) {
  return bwd_registry().find(name, is_bf16);
}
// The packed-batch configurations run only through attnprof::flash_attention_sm90_varlen,
// the fp8 ones through attnprof::flash_attention_sm90_fp8.
std::vector<std::string> fwd_config_names() {
  return fwd_registry().names([](const FwdConfigEntry& e) { return !e.varlen && !e.fp8; });
}
std::vector<std::string> fp8_config_names() {
  return fwd_registry().names([](const FwdConfigEntry& e) { return e.fp8; });
}
std::vector<std::string> bwd_config_names() {
  return bwd_registry().names([](const BwdConfigEntry&) { return true; });
}

}  // namespace attnprof::flash_sm90
