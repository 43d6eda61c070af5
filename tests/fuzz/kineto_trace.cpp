// The comparison readers on arbitrary bytes, as `attnprof compare` meets a
// hand-edited trace: report::parse_kineto_trace (and read_kineto_trace_file
// for gzip input) must give records or a TraceError, never a crash, a hang or
// any other exception. A trace that reads must then merge (twice, as runs A
// and B of a compare) into a file that obeys Perfetto's import rules and stays
// within a few times the input's size, and draw a well-formed picture without
// script.
#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "../perfetto_rules.h"
#include "../xml_checker.h"
#include "attnprof/report/merged_trace.h"
#include "attnprof/report/timeline_svg.h"

using namespace attnprof;

namespace {

void check_merge(const report::KinetoTrace& t, size_t input_size) {
  const std::vector<report::RunTrace> runs{{"a", "A", "1 µs", &t}, {"a", "B", "2 µs", &t}};
  report::MergedTrace m;
  try {
    m = report::merge_traces(runs);
  } catch (const report::TraceError&) {
    return;  // no forward in it
  }
  if (m.json.size() > 2 * (8 * input_size + 65536)) __builtin_trap();
  const nlohmann::json back = nlohmann::json::parse(m.json, nullptr, false);
  if (back.is_discarded()) __builtin_trap();
  if (!testing::perfetto_rule_violations(back).empty()) __builtin_trap();
}

void check_timeline(const report::KinetoTrace& t) {
  report::Timeline tl;
  tl.title = "fuzz";
  try {
    tl.rows.push_back(report::timeline_row({"a", "A", "", &t}));
  } catch (const report::TraceError&) {
    return;
  }
  const std::string svg = report::render_timeline_svg(tl);
  if (svg.find("<script") != std::string::npos) __builtin_trap();
  try {
    (void)testing::XmlChecker(svg).parse();
  } catch (const std::runtime_error&) {
    __builtin_trap();  // not well-formed
  }
}

void read_gzip_file(const uint8_t* data, size_t size) {
  const int fd = ::memfd_create("trace", 0);
  if (fd < 0) return;
  if (::write(fd, data, size) == static_cast<ssize_t>(size)) {
    try {
      (void)report::read_kineto_trace_file("/proc/self/fd/" + std::to_string(fd));
    } catch (const report::TraceError&) {
    }
  }
  ::close(fd);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) {
    read_gzip_file(data, size);
    return 0;
  }
  report::KinetoTrace t;
  try {
    t = report::parse_kineto_trace(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
  } catch (const report::TraceError&) {
    return 0;
  }
  check_merge(t, size);
  check_timeline(t);
  return 0;
}
