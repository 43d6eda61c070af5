// The key-averages pipeline on arbitrary event lists decoded from the fuzz
// bytes: build_function_events -> key_averages -> format_key_averages_table
// must never crash, whatever the nesting, overlaps, negative durations,
// duplicate or dangling correlation ids. Times stay within what Kineto can
// report (ns since the epoch fit in int64 with room for sums).
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "attnprof/report/key_averages_table.h"

using namespace attnprof;

namespace {

const char* const kNames[] = {
    "ProfilerStep#3", "ProfilerStep#4", "attn_fwd", "aten::matmul", "aten::bmm", "aten::softmax",
    "[memory]", "aten::is_leaf", "cudaLaunchKernel", "cuLaunchKernelEx", "void flash_fwd_kernel<>",
    "Memcpy HtoD (Pageable -> Device)", "",
    "a name that is much longer than the fifty-five character name column of the table",
};
const char* const kActivities[] = {"", "kernel", "gpu_memcpy", "gpu_memset", "gpu_user_annotation", "cuda_runtime"};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  const bool use_device = in.ConsumeBool();
  const bool profile_memory = in.ConsumeBool();
  TableOptions opt;
  opt.sort_by = static_cast<SortKey>(in.ConsumeIntegralInRange<int>(0, 10));
  opt.profile_memory = profile_memory;
  opt.row_limit = in.ConsumeIntegralInRange<int>(-2, 20);
  opt.max_name_column_width = in.ConsumeIntegralInRange<int>(0, 80);
  opt.device_label = in.ConsumeBool() ? "CUDA" : "XPU";
  // Small time units make nesting and ties likely; large ones reach real epoch-ns values.
  const int64_t unit = in.PickValueInArray<int64_t>({1, 1000, 1000000});
  const int64_t base = in.ConsumeBool() ? 0 : int64_t(1) << 60;

  std::vector<TraceEvent> events;
  while (in.remaining_bytes() > 0 && events.size() < 512) {
    TraceEvent e;
    e.name = in.ConsumeBool() ? in.PickValueInArray(kNames) : in.ConsumeRandomLengthString(80);
    e.device = in.ConsumeBool() ? EventDevice::Cuda : EventDevice::Cpu;
    e.start_ns = base + in.ConsumeIntegralInRange<int64_t>(0, 4095) * unit;
    e.end_ns = e.start_ns + in.ConsumeIntegralInRange<int64_t>(-16, 4095) * unit;
    e.thread = in.ConsumeIntegralInRange<uint64_t>(0, 3);
    e.correlation_id = in.ConsumeIntegralInRange<uint64_t>(0, 15);
    e.linked_correlation_id = in.ConsumeIntegralInRange<uint64_t>(0, 15);
    e.is_async = in.ConsumeBool();
    e.is_user_annotation = in.ConsumeBool();
    e.activity = in.PickValueInArray(kActivities);
    // Bounded: 512 records of +-2^40 bytes cannot overflow a sum.
    e.nbytes = in.ConsumeIntegralInRange<int64_t>(-(int64_t(1) << 40), int64_t(1) << 40);
    events.push_back(std::move(e));
  }

  const std::vector<FunctionEvent> fes = build_function_events(events, use_device, profile_memory);
  for (int i = 0; i < static_cast<int>(fes.size()); ++i) {
    const int p = fes[i].parent;
    if (p >= i || p < -1) __builtin_trap();  // a parent sorts before its children
    for (int c : fes[i].children)
      if (c <= i || c >= static_cast<int>(fes.size()) || fes[c].parent != i) __builtin_trap();
  }
  const std::vector<OpStats> rows = key_averages(fes);
  int64_t count = 0;
  for (const OpStats& s : rows) count += s.count;
  if (count != static_cast<int64_t>(fes.size())) __builtin_trap();
  (void)format_key_averages_table(rows, opt);
  return 0;
}
