// Plain event records: what the profiler saw, copied out of LibTorch's
// KinetoEvent so that everything downstream (aggregation, headline figures,
// tables) is a pure function testable on hand-built events without a GPU.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace attnprof {

// Where an event ran. Not LibTorch's c10::DeviceType nor libkineto's
// ActivityType: only the distinction the aggregation needs.
enum class EventDevice { Cpu, Cuda };

struct TraceEvent {
  std::string name;
  EventDevice device = EventDevice::Cpu;
  int64_t start_ns = 0;
  int64_t end_ns = 0;
  uint64_t thread = 0;
  // CPU ops: the op's own id. Device activities and runtime calls: CUPTI's id.
  uint64_t correlation_id = 0;
  // Device activities and runtime calls: the id of the CPU op that was innermost
  // when they were launched (0 = none). CPU ops: 0.
  uint64_t linked_correlation_id = 0;
  bool is_async = false;
  bool is_user_annotation = false;
  // Kineto's activity type name for device events ("kernel", "gpu_memcpy",
  // "gpu_memset", "gpu_user_annotation"), empty for CPU ops.
  std::string activity;
  // "[memory]" and "[OutOfMemory]" events (--profile-memory): bytes allocated
  // at start_ns, negative when freed; `device` is where the memory is.
  int64_t nbytes = 0;
};

int64_t duration_ns(const TraceEvent& e);
bool is_device_work(const TraceEvent& e);  // kernel, memcpy or memset on the device

}  // namespace attnprof
