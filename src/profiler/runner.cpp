#include "attnprof/runner.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>
#include <c10/core/GradMode.h>
#include <kineto/ActivityType.h>
#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/cuda.h>
#include <torch/version.h>

#if defined(ATTNPROF_TORCH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <ATen/cuda/CUDAEvent.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <cuda_runtime_api.h>
#endif

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <stdexcept>

#include "attnprof/interrupt.h"
#include "profiler/nvtx_range.h"

// Declared in torch/csrc/profiler/kineto_shim.h, which needs libkineto's private
// include path; this is the one function attnprof uses from it.
namespace torch::autograd::profiler {
TORCH_API void addMetadataJson(const std::string& key, const std::string& value);
}  // namespace torch::autograd::profiler

namespace attnprof {

namespace kp = torch::autograd::profiler;
namespace pi = torch::profiler::impl;

namespace {

// Sends file descriptor 2 to an in-memory file until finish(), which puts it
// back and returns what was written. In memory because the disk may be what is
// full; a file rather than a pipe so no reader has to keep up. If it cannot be
// set up, stderr is left alone and finish() returns "".
class StderrCapture {
 public:
  StderrCapture() {
    std::fflush(stderr);
    file_ = ::memfd_create("attnprof-stderr", MFD_CLOEXEC);
    if (file_ < 0) return;
    saved_ = ::fcntl(2, F_DUPFD_CLOEXEC, 3);
    if (saved_ < 0 || ::dup2(file_, 2) < 0) {
      if (saved_ >= 0) ::close(saved_);
      saved_ = -1;
      ::close(file_);
      file_ = -1;
    }
  }
  StderrCapture(const StderrCapture&) = delete;
  StderrCapture& operator=(const StderrCapture&) = delete;
  ~StderrCapture() { finish(); }

  std::string finish() {
    if (saved_ < 0) return text_;
    std::fflush(stderr);
    ::dup2(saved_, 2);
    ::close(saved_);
    saved_ = -1;
    char buf[4096];
    ssize_t n;
    for (off_t at = 0; (n = ::pread(file_, buf, sizeof buf, at)) > 0; at += n)
      text_.append(buf, static_cast<size_t>(n));
    ::close(file_);
    file_ = -1;
    return text_;
  }

 private:
  int file_ = -1;
  int saved_ = -1;
  std::string text_;
};

}  // namespace

bool cuda_available() { return torch::cuda::is_available(); }
int cuda_device_count() { return static_cast<int>(torch::cuda::device_count()); }

std::string resolve_device(const std::string& requested) {
  if (requested == "cpu") return "cpu";
  if (requested == "auto") return cuda_available() ? "cuda:0" : "cpu";
  int index = 0;
  if (requested != "cuda") {
    const std::string prefix = "cuda:";
    const std::string rest = requested.rfind(prefix, 0) == 0 ? requested.substr(prefix.size()) : "";
    if (rest.empty() || rest.find_first_not_of("0123456789") != std::string::npos || rest.size() > 4)
      throw std::invalid_argument("invalid --device '" + requested + "' (valid: auto, cpu, cuda, cuda:N)");
    index = std::stoi(rest);
  }
  if (!cuda_available())
    throw std::invalid_argument("--device " + requested + ": no CUDA device is available on this machine");
  if (index >= cuda_device_count())
    throw std::invalid_argument("--device " + requested + ": only " + std::to_string(cuda_device_count()) +
                                " CUDA device(s) present (cuda:0.." + std::to_string(cuda_device_count() - 1) + ")");
  return "cuda:" + std::to_string(index);
}

Environment describe_environment(const Problem& p) {
  Environment env;
  env.torch_version = TORCH_VERSION;
  env.attnprof_version = ATTNPROF_VERSION;
  env.device_name = "CPU";
#if defined(ATTNPROF_TORCH_CUDA)
  if (p.on_cuda()) {
    const at::Device d(p.device);
    env.device_name = at::cuda::getDeviceProperties(d.index())->name;
    int rt = 0;
    if (cudaRuntimeGetVersion(&rt) == cudaSuccess)
      env.cuda_runtime = std::to_string(rt / 1000) + "." + std::to_string((rt % 1000) / 10);
  }
#else
  (void)p;
#endif
  return env;
}

namespace {

void synchronize(const Problem& p) {
  if (p.on_cuda()) torch::cuda::synchronize(at::Device(p.device).index());
}

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
  return t;
}

void run_step(Variant& variant, const Problem& p, const at::Tensor& q, const at::Tensor& k,
              const at::Tensor& v, int step) {
  throw_if_interrupted();
  const std::string step_name = kStepScopePrefix + std::to_string(step);
  NvtxRange step_range(step_name.c_str());
  RECORD_USER_SCOPE(step_name);
  {
    NvtxRange fwd_range(kForwardScope);
    RECORD_USER_SCOPE(kForwardScope);
    c10::NoGradGuard no_grad;
    at::Tensor out = variant.forward(q, k, v);
  }
  // Each step ends with the device idle, so steps never overlap in the trace.
  synchronize(p);
}

std::optional<double> forward_peak_memory(Variant& variant, const Problem& p, const at::Tensor& q,
                                          const at::Tensor& k, const at::Tensor& v) {
#if defined(ATTNPROF_TORCH_CUDA)
  if (!p.on_cuda()) return std::nullopt;
  namespace alloc = c10::cuda::CUDACachingAllocator;
  const auto index = at::Device(p.device).index();
  synchronize(p);
  alloc::resetPeakStats(index);
  const auto before = alloc::getDeviceStats(index).allocated_bytes[0].current;
  {
    c10::NoGradGuard no_grad;
    at::Tensor out = variant.forward(q, k, v);
    synchronize(p);
  }
  const auto peak = alloc::getDeviceStats(index).allocated_bytes[0].peak;
  return static_cast<double>(peak - before);
#else
  (void)variant, (void)p, (void)q, (void)k, (void)v;
  return std::nullopt;
#endif
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

std::optional<EventTiming> time_forward(Variant& variant, const Problem& p, const at::Tensor& q,
                                        const at::Tensor& k, const at::Tensor& v, int total_iters) {
  if (total_iters <= 0) return std::nullopt;
  c10::OptionalDeviceGuard device_guard;
  if (p.on_cuda()) device_guard.reset_device(at::Device(p.device));
  c10::NoGradGuard no_grad;
  EventTiming t;
  t.reps = std::min(total_iters, 10);
  t.iters_per_rep = std::max(1, total_iters / t.reps);

  struct Set {
    at::Tensor q, k, v;
  };
  std::vector<Set> sets = {{q, k, v}};
#if defined(ATTNPROF_TORCH_CUDA)
  if (p.on_cuda()) {
    // Enough sets to make the rotation at least 4x the L2 (60 MB on an H200).
    const double l2 = at::cuda::getDeviceProperties(at::Device(p.device).index())->l2CacheSize;
    const double set_bytes = 3.0 * double(q.numel()) * double(q.element_size());
    const int want = static_cast<int>(std::min(64.0, std::ceil(4.0 * l2 / set_bytes)));
    for (int i = 1; i < want; ++i) sets.push_back({at::randn_like(q), at::randn_like(k), at::randn_like(v)});
  }
#endif
  t.input_sets = static_cast<int>(sets.size());
  for (const Set& s : sets) variant.forward(s.q, s.k, s.v);  // first touch of every set
  synchronize(p);

  std::vector<double> per_forward_us;
  size_t next = 0;
  for (int r = 0; r < t.reps; ++r) {
    throw_if_interrupted();
    auto run_rep = [&] {
      for (int i = 0; i < t.iters_per_rep; ++i, ++next) {
        const Set& s = sets[next % sets.size()];
        variant.forward(s.q, s.k, s.v);
      }
    };
#if defined(ATTNPROF_TORCH_CUDA)
    if (p.on_cuda()) {
      t.clock = "cuda_event";
      at::cuda::CUDAEvent start(cudaEventDefault), end(cudaEventDefault);
      start.record();
      run_rep();
      end.record();
      end.synchronize();
      per_forward_us.push_back(double(start.elapsed_time(end)) * 1000.0 / t.iters_per_rep);
      continue;
    }
#endif
    t.clock = "steady_clock";
    const auto t0 = std::chrono::steady_clock::now();
    run_rep();
    const auto t1 = std::chrono::steady_clock::now();
    per_forward_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count() / t.iters_per_rep);
  }
  t.median_us = median(per_forward_us);
  t.min_us = *std::min_element(per_forward_us.begin(), per_forward_us.end());
  t.max_us = *std::max_element(per_forward_us.begin(), per_forward_us.end());
  return t;
}

namespace {
int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}
}  // namespace

PhaseClock::PhaseClock() : last_ns_(now_ns()) {}

void PhaseClock::lap(const std::string& name, std::vector<std::pair<std::string, double>>& phases) {
  const int64_t t = now_ns();
  phases.emplace_back(name, double(t - last_ns_) / 1e6);
  last_ns_ = t;
}

ProfiledRun profile_forward(Variant& variant, const Problem& p, const at::Tensor& q, const at::Tensor& k,
                            const at::Tensor& v, const RunnerOptions& opt) {
  ProfiledRun run;
  c10::OptionalDeviceGuard device_guard;
  if (p.on_cuda()) device_guard.reset_device(at::Device(p.device));

  PhaseClock clock;
  for (int i = 0; i < opt.schedule.warmup_iters; ++i) {
    throw_if_interrupted();
    c10::NoGradGuard no_grad;
    at::Tensor out = variant.forward(q, k, v);
  }
  synchronize(p);
  clock.lap("untraced warm-up", run.phases_ms);
  run.peak_memory_bytes = forward_peak_memory(variant, p, q, k, v);
  clock.lap("peak-memory forward", run.phases_ms);

  std::set<pi::ActivityType> activities = {pi::ActivityType::CPU};
  if (p.on_cuda()) activities.insert(pi::ActivityType::CUDA);
  const pi::ProfilerConfig config(pi::ProfilerState::KINETO);

  const Schedule& s = opt.schedule;
  int step = 0;
  for (; step < s.wait; ++step) run_step(variant, p, q, k, v, step);
  // Kineto's own warm-up: CUPTI buffers and callbacks are set up here, during
  // steps that are thrown away, so none of that cost lands in the active steps.
  clock.lap("schedule: wait steps", run.phases_ms);
  kp::prepareProfiler(config, activities);
  clock.lap("profiler prepare (CUPTI set-up)", run.phases_ms);
  try {
    for (; step < s.wait + s.warmup; ++step) run_step(variant, p, q, k, v, step);
  } catch (...) {
    kp::disableProfiler();  // prepared but not started: still must be torn down
    throw;
  }
  clock.lap("schedule: warmup steps", run.phases_ms);
  kp::enableProfiler(config, activities);
  std::unique_ptr<kp::ProfilerResult> result;
  try {
    for (; step < s.wait + s.warmup + s.active; ++step) run_step(variant, p, q, k, v, step);
    // Python's profile.__exit__ synchronises the device before disabling; doing the
    // same keeps the two tables' cudaDeviceSynchronize counts equal.
    synchronize(p);
    if (!opt.trace_metadata_json.empty()) kp::addMetadataJson("attnprof", opt.trace_metadata_json);
  } catch (...) {
    kp::disableProfiler();
    throw;
  }
  clock.lap("schedule: active steps", run.phases_ms);
  result = kp::disableProfiler();
  clock.lap("profiler disable (collect events)", run.phases_ms);

  run.events.reserve(result->events().size());
  // Python's _parse_kineto_results drops the events the collector marked hidden;
  // so do we, or key_averages would count ops Python's table never shows.
  for (const auto& e : result->events())
    if (!e.isHiddenEvent()) run.events.push_back(to_trace_event(e));
  if (!opt.trace_path.empty()) {
    StderrCapture kineto_log;
    result->save(opt.trace_path);
    run.trace_save_messages = kineto_log.finish();
    run.trace_saved = true;
  }
  clock.lap("copy events, save trace", run.phases_ms);
  return run;
}

}  // namespace attnprof
