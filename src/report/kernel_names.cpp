#include "attnprof/report/kernel_names.h"

#include <string>

namespace attnprof::report {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

// The symbol before template arguments and parameters. "(anonymous namespace)::"
// is dropped first: its parenthesis is not a parameter list (ATen's
// softmax_warp_forward and our softmax kernel live in one).
std::string symbol_with_namespaces(std::string_view name) {
  constexpr std::string_view kAnonymous = "(anonymous namespace)::";
  std::string s;  // one pass: hostile names are megabytes long
  s.reserve(name.size());
  for (size_t i = 0; i < name.size();) {
    if (name.compare(i, kAnonymous.size(), kAnonymous) == 0) {
      i += kAnonymous.size();
      continue;
    }
    if (name[i] == '<' || name[i] == '(') break;
    s += name[i++];
  }
  std::string_view head = trim(s);
  if (head.substr(0, 5) == "void ") head = trim(head.substr(5));
  return std::string(head.empty() ? trim(name) : head);
}

// Cut at a character boundary, so a UTF-8 name stays valid UTF-8.
std::string cut(std::string_view s, size_t max_chars) {
  if (s.size() <= max_chars) return std::string(s);
  const bool dots = max_chars > 3;
  size_t keep = dots ? max_chars - 3 : max_chars;
  while (keep > 0 && (static_cast<unsigned char>(s[keep]) & 0xC0) == 0x80) --keep;
  return std::string(s.substr(0, keep)) + (dots ? "..." : "");
}

}  // namespace

std::string short_kernel_name(std::string_view name, size_t max_chars) {
  return cut(symbol_with_namespaces(name), max_chars);
}

std::string kernel_symbol(std::string_view name, size_t max_chars) {
  const std::string full = symbol_with_namespaces(name);
  std::string_view s = full;
  if (const size_t colons = s.rfind("::"); colons != std::string_view::npos && colons + 2 < s.size())
    s.remove_prefix(colons + 2);
  return cut(s, max_chars);
}

}  // namespace attnprof::report
