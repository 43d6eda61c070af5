// report::read_summary on arbitrary bytes, as `attnprof compare` meets them:
// a RunRecord or a SummaryError, never a crash or any other exception. The
// text goes through read_summary_text (size and depth limits, then nlohmann),
// the parsed JSON through read_summary directly, and gzip input through
// read_summary_file (its bounded inflate). A summary that reads must survive
// a write/read round trip.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "attnprof/report/summary.h"
#include "attnprof/report/summary.h"

using namespace attnprof;

namespace {

void round_trip(const RunRecord& r) {
  try {
    (void)report::read_summary(report::summary_json(r), "round trip");
  } catch (const report::SummaryError&) {
    __builtin_trap();  // the writer produced what the reader refuses
  }
}

void read_gzip_file(const uint8_t* data, size_t size) {
  const int fd = ::memfd_create("summary", 0);
  if (fd < 0) return;
  if (::write(fd, data, size) == static_cast<ssize_t>(size)) {
    try {
      round_trip(report::read_summary_file("/proc/self/fd/" + std::to_string(fd)));
    } catch (const report::SummaryError&) {
    }
  }
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    round_trip(report::read_summary_text(text, "fuzz"));
  } catch (const report::SummaryError&) {
  }
  const nlohmann::json j = nlohmann::json::parse(text, /*callback=*/nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) {
    try {
      round_trip(report::read_summary(j, "fuzz"));
    } catch (const report::SummaryError&) {
    }
  }
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) read_gzip_file(data, size);
  return 0;
}
