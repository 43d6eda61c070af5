// io::gzip_decompress on arbitrary bytes: a FileError or the inflated text,
// never a crash, a hang or a read past the input.
#include <cstddef>
#include <cstdint>
#include <string>

#include "attnprof/io/files.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const std::string text = attnprof::io::gzip_decompress(bytes);
    // Whatever inflates must deflate and inflate back to itself.
    if (attnprof::io::gzip_decompress(attnprof::io::gzip_compress(text)) != text) __builtin_trap();
  } catch (const attnprof::io::FileError&) {
  }
  return 0;
}
