#include "profiler/runner.h"

#include <ATen/ATen.h>
#include <ATen/record_function.h>
#include <c10/core/DeviceGuard.h>

#if defined(ATTNPROF_TORCH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#endif

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "attnprof/device.h"
#include "attnprof/interrupt.h"
#include "attnprof/report/run_plan.h"
#include "profiler/event_timer.h"
#include "profiler/kineto_session.h"
#include "profiler/nvtx_range.h"
#include "profiler/pass_step.h"
#include "profiler/stderr_capture.h"

namespace attnprof {

namespace {

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// One profiler step: a ProfilerStep#N scope around the pass's step. Each ends
// with a device synchronise, so steps never overlap in the trace and a step's
// CPU time is its wall time. A blog-style script (prof.step() without a sync)
// lets the host run ahead instead: its table has one cudaDeviceSynchronize
// (profile.__exit__'s) where attnprof's has active + 1, and its ProfilerStep*
// CPU times hold launch time only (README, "How the numbers are made";
// scripts/crosscheck.py compares with such a run and lists the differences).
void profiled_step(Variant& variant, const Problem& p, const Inputs& in, int step) {
  throw_if_interrupted();
  const std::string step_name = kStepScopePrefix + std::to_string(step);
  NvtxRange step_range(step_name.c_str());
  RECORD_USER_SCOPE(step_name);
  run_pass_step(variant, p, in, /*scoped=*/true);
  synchronize(p);
}

std::optional<double> step_peak_memory(Variant& variant, const Problem& p, const Inputs& in) {
#if defined(ATTNPROF_TORCH_CUDA)
  if (!p.on_cuda()) return std::nullopt;
  namespace alloc = c10::cuda::CUDACachingAllocator;
  const auto index = at::Device(p.device).index();
  synchronize(p);
  alloc::resetPeakStats(index);
  const auto before = alloc::getDeviceStats(index).allocated_bytes[0].current;
  run_pass_step(variant, p, in, /*scoped=*/false);
  synchronize(p);
  const auto peak = alloc::getDeviceStats(index).allocated_bytes[0].peak;
  return static_cast<double>(peak - before);
#else
  (void)variant, (void)p, (void)in;
  return std::nullopt;
#endif
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double seconds_since(int64_t t0_ns) { return double(now_ns() - t0_ns) / 1e9; }

}  // namespace

// The run's own set, plus fresh ones until a rotation through them is at least
// 4x the L2 (60 MB on an H200), at most 64.
int timing_input_set_count(const Problem& p, const Inputs& in) {
#if defined(ATTNPROF_TORCH_CUDA)
  if (p.on_cuda()) {
    const double l2 = at::cuda::getDeviceProperties(at::Device(p.device).index())->l2CacheSize;
    const double set_bytes = double(in.q.numel() + in.k.numel() + in.v.numel()) * double(in.q.element_size());
    return std::max(1, static_cast<int>(std::min(64.0, std::ceil(4.0 * l2 / set_bytes))));
  }
#else
  (void)p, (void)in;
#endif
  return 1;
}

int first_touch_steps(const Problem& p, int input_sets) { return p.on_cuda() ? input_sets : 0; }

PhaseClock::PhaseClock() : last_ns_(now_ns()) {}

void PhaseClock::lap(const std::string& name, std::vector<std::pair<std::string, double>>& phases) {
  const int64_t t = now_ns();
  phases.emplace_back(name, double(t - last_ns_) / 1e6);
  last_ns_ = t;
}

ProfiledRun profile_pass(Variant& variant, const Problem& p, const Inputs& in, const RunnerOptions& opt,
                         StepProgress& progress) {
  ProfiledRun run;
  c10::OptionalDeviceGuard device_guard;
  if (p.on_cuda()) device_guard.reset_device(at::Device(p.device));

  PhaseClock clock;
  const Schedule& s = opt.schedule;
  // Auto: each step is timed (a synchronise after it) and decides whether
  // another follows. A fixed count times only the first, the others launch
  // back to back as before.
  const bool auto_warmup = s.warmup_iters == kAutoIters;
  const int warmup_total = auto_warmup ? 0 : s.warmup_iters;  // 0: not counted until decided
  double warmup_elapsed = 0.0, last = -1.0;
  // The fastest step timed without the profiler, and the fastest under it: on
  // the CPU Kineto adds tens of milliseconds to a step, so the timing is sized
  // from the first when there is one.
  double untraced_min = -1.0, profiled_min = -1.0;
  int warmups = 0;
  bool more = auto_warmup || s.warmup_iters > 0;
  if (more) progress.begin(RunPhase::warmup, warmup_total);
  while (more) {
    throw_if_interrupted();
    const int64_t t0 = now_ns();
    run_pass_step(variant, p, in, /*scoped=*/false);
    const bool timed = auto_warmup || warmups == 0;  // the first step's time is what estimates start from
    if (timed) synchronize(p);
    last = timed ? seconds_since(t0) : -1.0;
    if (timed) untraced_min = untraced_min < 0.0 ? last : std::min(untraced_min, last);
    warmup_elapsed += std::max(0.0, last);
    ++warmups;
    more = auto_warmup ? report::warmup_wants_another(warmups, warmup_elapsed, last) : warmups < s.warmup_iters;
    progress.unit_done(RunPhase::warmup, warmups, more ? warmup_total : warmups, 1, last);
  }
  progress.warmup_decided(warmups);
  run.warmup_iters = warmups;
  synchronize(p);
  clock.lap("untraced warm-up", run.phases_ms);
  run.peak_memory_bytes = step_peak_memory(variant, p, in);
  if (p.on_cuda()) progress.unit_done(RunPhase::setup, 1, 1, 1, -1.0);  // the probe's step
  clock.lap("peak-memory step", run.phases_ms);

  const int total = s.wait + s.warmup + s.active;
  progress.begin(RunPhase::profiling, total);
  int step = 0;
  auto steps_until = [&](int end) {
    for (; step < end; ++step) {
      const int64_t t0 = now_ns();
      profiled_step(variant, p, in, step);
      const double seconds = seconds_since(t0);
      double& fastest = step < s.wait ? untraced_min : profiled_min;
      fastest = fastest < 0.0 ? seconds : std::min(fastest, seconds);
      progress.unit_done(RunPhase::profiling, step + 1, total, 1, seconds);
    }
  };
  steps_until(s.wait);
  clock.lap("schedule: wait steps", run.phases_ms);
  StderrCapture libtorch_log;  // until the profiler stops (progress lines have their own descriptor)
  KinetoSession session(p.on_cuda(), opt.profiler, opt.trace_id);
  clock.lap("profiler prepare (CUPTI set-up)", run.phases_ms);
  steps_until(s.wait + s.warmup);
  clock.lap("schedule: warmup steps", run.phases_ms);
  session.start();
  steps_until(total);
  // As Python's profile.__exit__, which synchronises before disabling; here the
  // last step already ended with one, so this is the (active + 1)-th call.
  synchronize(p);
  if (!opt.trace_metadata_json.empty()) session.add_trace_metadata("attnprof", opt.trace_metadata_json);
  for (const auto& [key, json] : opt.extra_trace_metadata) session.add_trace_metadata(key, json);
  // The same markers torch.profiler adds for its flags.
  for (const auto& [on, key] : {std::pair{opt.profiler.record_shapes, "record_shapes"},
                                {opt.profiler.profile_memory, "profile_memory"},
                                {opt.profiler.with_stack, "with_stack"}})
    if (on) session.add_trace_metadata(key, "1");
  clock.lap("schedule: active steps", run.phases_ms);
  const auto result = session.stop();
  run.profiling_messages = libtorch_log.finish();
  clock.lap("profiler disable (collect events)", run.phases_ms);

  run.events = KinetoSession::events_of(*result);
  if (!opt.trace_path.empty()) {
    StderrCapture kineto_log;
    result->save(opt.trace_path);
    run.trace_save_messages = kineto_log.finish();
    run.trace_saved = true;
  }
  clock.lap("copy events, save trace", run.phases_ms);
  run.min_step_seconds = untraced_min >= 0.0 ? untraced_min : profiled_min;
  return run;
}

std::optional<EventTiming> time_pass(Variant& variant, const Problem& p, const Inputs& in, int total_iters,
                                     StepProgress& progress) {
  const report::TimingSplit split = report::split_timing(total_iters);
  if (split.reps <= 0) return std::nullopt;
  c10::OptionalDeviceGuard device_guard;
  if (p.on_cuda()) device_guard.reset_device(at::Device(p.device));
  EventTiming t;
  t.reps = split.reps;
  t.iters_per_rep = split.iters_per_rep;

  std::vector<Inputs> sets = {in};
  for (int i = 1, n = timing_input_set_count(p, in); i < n; ++i) sets.push_back(random_inputs(p));
  t.input_sets = static_cast<int>(sets.size());
  // The backward alone is timed through kept forward graphs, one per set.
  std::vector<std::unique_ptr<RetainedForward>> kept;
  if (p.pass == Pass::bwd)
    for (const Inputs& s : sets) kept.push_back(std::make_unique<RetainedForward>(variant, p, s));
  auto unit = [&](size_t i) {
    if (p.pass == Pass::bwd) kept[i % kept.size()]->backward();
    else run_pass_step(variant, p, sets[i % sets.size()], /*scoped=*/false);
  };
  progress.begin(RunPhase::timing, t.reps);
  // First touch of every set. On the CPU there is one set, the run's own,
  // which every step so far has touched: one more step would only cost time.
  const int touches = first_touch_steps(p, t.input_sets);
  for (int i = 0; i < touches; ++i) unit(size_t(i));
  synchronize(p);
  if (touches) progress.unit_done(RunPhase::timing, 0, t.reps, touches, -1.0);

  EventTimer timer(p);
  t.clock = timer.clock();
  std::vector<double> per_step_us;
  size_t next = 0;
  for (int r = 0; r < t.reps; ++r) {
    throw_if_interrupted();
    timer.start();
    for (int i = 0; i < t.iters_per_rep; ++i) unit(next++);
    const double us = timer.stop_us();
    per_step_us.push_back(us / t.iters_per_rep);
    progress.unit_done(RunPhase::timing, r + 1, t.reps, t.iters_per_rep, us / 1e6);
  }
  t.median_us = median(per_step_us);
  t.min_us = *std::min_element(per_step_us.begin(), per_step_us.end());
  t.max_us = *std::max_element(per_step_us.begin(), per_step_us.end());
  return t;
}

}  // namespace attnprof
