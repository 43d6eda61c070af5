// The device's ceilings, measured rather than taken from a datasheet (a kernel
// is judged against what this GPU reaches at the clocks it runs, not against
// a figure no kernel can reach at its power cap): dense 8192^3 GEMMs in bf16,
// fp16 and fp32 (TF32 off) and a large device-to-device copy, on random data,
// timed with CUDA events after a warm-up. Taken once per device and driver and
// cached (report/ceilings_cache.h). Nothing here prints.
#pragma once

#include <string>
#include <vector>

#include "attnprof/problem.h"
#include "attnprof/report/counters.h"

namespace attnprof {

struct Calibration {
  report::DeviceCeilings ceilings;
  // One line each, for the caller to show: why the cache was not used
  // ("re-measured: the cache ... is not valid JSON"), a cache that could not be written.
  std::vector<std::string> notes;
};

// The ceilings of p's GPU: a valid cached calibration of this device and
// driver, else measured now and cached; once per device per process. `force`
// measures again. Throws Interrupted when a stop signal arrives between
// measurements, c10::Error when CUDA fails, std::invalid_argument on CPU.
Calibration device_ceilings(const Problem& p, bool force = false);

// Always measures: per GEMM dtype and for the copy, five repetitions of about 50 ms.
report::DeviceCeilings measure_ceilings(const Problem& p);

// The NVIDIA driver's version ("580.95.05": NVML, else /proc/driver/nvidia/version),
// else the CUDA driver API's ("cuda 13.0"); "unknown" without either.
std::string gpu_driver_version();

}  // namespace attnprof
