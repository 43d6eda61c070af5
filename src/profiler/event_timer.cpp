#include "profiler/event_timer.h"

#include <chrono>
#include <optional>

#if defined(ATTNPROF_TORCH_CUDA)
#include <ATen/cuda/CUDAEvent.h>
#endif

namespace attnprof {

struct EventTimer::Impl {
  bool cuda = false;
#if defined(ATTNPROF_TORCH_CUDA)
  std::optional<at::cuda::CUDAEvent> begin, end;
#endif
  std::chrono::steady_clock::time_point t0;
};

EventTimer::EventTimer(const Problem& p) : impl_(std::make_unique<Impl>()) {
#if defined(ATTNPROF_TORCH_CUDA)
  impl_->cuda = p.on_cuda();
#else
  (void)p;
#endif
}

EventTimer::~EventTimer() = default;

void EventTimer::start() {
#if defined(ATTNPROF_TORCH_CUDA)
  if (impl_->cuda) {
    impl_->begin.emplace(cudaEventDefault);
    impl_->end.emplace(cudaEventDefault);
    impl_->begin->record();
    return;
  }
#endif
  impl_->t0 = std::chrono::steady_clock::now();
}

double EventTimer::stop_us() {
#if defined(ATTNPROF_TORCH_CUDA)
  if (impl_->cuda) {
    impl_->end->record();
    impl_->end->synchronize();
    return double(impl_->begin->elapsed_time(*impl_->end)) * 1000.0;
  }
#endif
  return std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - impl_->t0).count();
}

const char* EventTimer::clock() const { return impl_->cuda ? "cuda_event" : "steady_clock"; }

}  // namespace attnprof
