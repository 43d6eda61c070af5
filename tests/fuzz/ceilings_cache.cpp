// report::parse_ceilings_cache on arbitrary bytes, as a cache file under
// ~/.cache may hold them: ceilings or a one-line reason, never a crash or an
// exception. Ceilings that read must be plausible and survive a write/read
// round trip.
#include <cstddef>
#include <cstdint>
#include <string>

#include "attnprof/report/ceilings_cache.h"

using namespace attnprof;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  std::string why;
  const auto c = report::parse_ceilings_cache(bytes, "NVIDIA H200", "580.95.05", &why);
  if (!c) {
    if (why.empty() || why.find('\n') != std::string::npos) __builtin_trap();
    return 0;
  }
  if (!(c->gemm_bf16_tflops > 0) || !(c->copy_gbps > 0) || c->device != "NVIDIA H200") __builtin_trap();
  if (!report::parse_ceilings_cache(report::ceilings_cache_text(*c), "NVIDIA H200", "580.95.05", &why))
    __builtin_trap();  // the writer produced what the reader refuses
  return 0;
}
