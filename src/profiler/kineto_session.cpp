#include "profiler/kineto_session.h"

#include <kineto/ActivityType.h>

// Declared in torch/csrc/profiler/kineto_shim.h, which needs libkineto's private
// include path; this is the one function attnprof uses from it.
namespace torch::autograd::profiler {
TORCH_API void addMetadataJson(const std::string& key, const std::string& value);
}  // namespace torch::autograd::profiler

namespace attnprof {

namespace kp = torch::autograd::profiler;
namespace pi = torch::profiler::impl;

KinetoSession::KinetoSession(bool cuda, const ProfilerOptions& options, const std::string& trace_id)
    : config_(pi::ProfilerState::KINETO, options.record_shapes, options.profile_memory, options.with_stack,
              /*with_flops=*/false, /*with_modules=*/false, pi::ExperimentalConfig(), trace_id),
      activities_{pi::ActivityType::CPU} {
  if (cuda) activities_.insert(pi::ActivityType::CUDA);
  kp::prepareProfiler(config_, activities_);
}

KinetoSession::~KinetoSession() {
  if (state_ == State::stopped) return;
  // Kineto refuses to disable a profiler that was prepared but never enabled
  // ("Can't disable Kineto profiler when it's not running"); Python's
  // torch.profiler leaves its warm-up state the same way: start, then stop.
  try {
    if (state_ == State::prepared) kp::enableProfiler(config_, activities_);
    (void)kp::disableProfiler();
  } catch (...) {
    // Tearing down after another error: that error is the one to report.
  }
}

void KinetoSession::start() {
  kp::enableProfiler(config_, activities_);
  state_ = State::recording;
}

void KinetoSession::add_trace_metadata(const std::string& key, const std::string& json_object) {
  kp::addMetadataJson(key, json_object);
}

std::unique_ptr<kp::ProfilerResult> KinetoSession::stop() {
  state_ = State::stopped;
  return kp::disableProfiler();
}

namespace {
TraceEvent to_trace_event(const kp::KinetoEvent& e) {
  TraceEvent t;
  t.name = e.name();
  t.device = e.deviceType() == c10::DeviceType::CUDA ? EventDevice::Cuda : EventDevice::Cpu;
  t.start_ns = static_cast<int64_t>(e.startNs());
  t.end_ns = static_cast<int64_t>(e.endNs());
  t.thread = e.startThreadId();
  t.correlation_id = e.correlationId();
  t.linked_correlation_id = e.linkedCorrelationId();
  // Python treats an event that ends on another thread as async too.
  t.is_async = e.isAsync() || e.startThreadId() != e.endThreadId();
  using AT = libkineto::ActivityType;
  switch (static_cast<AT>(e.activityType())) {
    case AT::CONCURRENT_KERNEL: t.activity = "kernel"; break;
    case AT::GPU_MEMCPY: t.activity = "gpu_memcpy"; break;
    case AT::GPU_MEMSET: t.activity = "gpu_memset"; break;
    case AT::GPU_USER_ANNOTATION: t.activity = "gpu_user_annotation"; break;
    case AT::USER_ANNOTATION: t.activity = "user_annotation"; break;
    case AT::CUDA_RUNTIME: t.activity = "cuda_runtime"; break;
    case AT::CUDA_DRIVER: t.activity = "cuda_driver"; break;
    case AT::CPU_OP: t.activity = "cpu_op"; break;
    default: t.activity = "other"; break;
  }
  t.is_user_annotation = t.activity == "user_annotation" || t.activity == "gpu_user_annotation";
  if (t.name == "[memory]" || t.name == "[OutOfMemory]") t.nbytes = e.nBytes();
  return t;
}
}  // namespace

std::vector<TraceEvent> KinetoSession::events_of(const kp::ProfilerResult& result) {
  std::vector<TraceEvent> events;
  events.reserve(result.events().size());
  for (const auto& e : result.events())
    if (!e.isHiddenEvent()) events.push_back(to_trace_event(e));
  return events;
}

}  // namespace attnprof
