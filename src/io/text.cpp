#include "attnprof/io/text.h"

#include <fmt/format.h>

#include <limits>

namespace attnprof::io {

namespace {
void escape_bytes(std::string& out, std::string_view bytes) {
  for (unsigned char c : bytes) out += fmt::format("\\x{:02x}", c);
}

// Length of the well-formed UTF-8 sequence starting at s[i], 0 if there is none
// (overlong forms, surrogates and code points past U+10FFFF are ill-formed).
size_t utf8_length(std::string_view s, size_t i) {
  const auto at = [&](size_t k) { return static_cast<unsigned char>(s[k]); };
  const unsigned char c = at(i);
  size_t n = 0;
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the second byte
  if (c >= 0xC2 && c <= 0xDF) n = 2;
  else if (c >= 0xE0 && c <= 0xEF) n = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
  else if (c >= 0xF0 && c <= 0xF4) n = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
  else return 0;
  if (i + n > s.size() || at(i + 1) < lo || at(i + 1) > hi) return 0;
  for (size_t k = 2; k < n; ++k)
    if (at(i + k) < 0x80 || at(i + k) > 0xBF) return 0;
  return n;
}
}  // namespace

std::string visible(std::string_view s, bool keep_line_breaks) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    if (c < 0x80) {
      const bool line_break = c == '\n' || c == '\t';
      if ((c < 0x20 && !(keep_line_breaks && line_break)) || c == 0x7f) escape_bytes(out, s.substr(i, 1));
      else out += static_cast<char>(c);
      ++i;
      continue;
    }
    const size_t n = utf8_length(s, i);
    if (n == 0) {
      escape_bytes(out, s.substr(i, 1));
      ++i;
    } else if (n == 2 && c == 0xC2 && static_cast<unsigned char>(s[i + 1]) <= 0x9F) {
      escape_bytes(out, s.substr(i, 2));  // a C1 control
      i += 2;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

DecimalParse parse_decimal(std::string_view s) {
  DecimalParse r;
  const std::string shown = visible(s);
  const bool negative = !s.empty() && s.front() == '-';
  const std::string_view digits = negative ? s.substr(1) : s;
  if (digits.empty()) {
    r.error = fmt::format("'{}' is not a decimal integer", shown);
    return r;
  }
  for (char c : digits) {
    if (c < '0' || c > '9') {
      r.error = fmt::format("'{}' is not a decimal integer", shown);
      return r;
    }
  }
  if (digits.size() > 1 && digits.front() == '0') {
    r.error = fmt::format("'{}' is not a decimal integer (leading zero)", shown);
    return r;
  }
  // Accumulated as a negative number, whose range includes INT64_MIN.
  int64_t v = 0;
  for (char c : digits) {
    const int d = c - '0';
    if (v < (std::numeric_limits<int64_t>::min() + d) / 10) {
      r.error = fmt::format("'{}' is out of range", shown);
      return r;
    }
    v = v * 10 - d;
  }
  if (!negative && v == std::numeric_limits<int64_t>::min()) {
    r.error = fmt::format("'{}' is out of range", shown);
    return r;
  }
  r.value = negative ? v : -v;
  return r;
}

}  // namespace attnprof::io
