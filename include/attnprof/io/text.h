// Text that crosses a trust boundary: bytes from files, directory listings or
// the command line that are about to reach a terminal, and integers typed by
// a user. Pure functions, no LibTorch.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace attnprof::io {

// `s` with every byte a terminal could act on made visible as \xNN: C0
// controls and DEL (ESC starts ANSI sequences; CR and BS overwrite what was
// printed), UTF-8-encoded C1 controls (U+0080..U+009F; U+009B is a one-byte
// CSI), and bytes that are not valid UTF-8. Newline and tab stay as they are
// when `keep_line_breaks`, else they are escaped too, so one line stays one line.
std::string visible(std::string_view s, bool keep_line_breaks = false);

// A decimal integer as a user types it: an optional '-' and digits, no sign
// '+', no spaces, no leading zero (010 would be 8 to strtol's base 0), no
// fraction or exponent, no 0x. `error` is empty on success, else what is
// wrong, ready to follow the flag's name: "'010' is not a decimal integer
// (leading zero)", "'99999999999999999999' is out of range".
struct DecimalParse {
  int64_t value = 0;
  std::string error;
};
DecimalParse parse_decimal(std::string_view s);

}  // namespace attnprof::io
