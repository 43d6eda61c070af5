#include "profiler/calibration.h"

#include <ATen/ATen.h>
#include <fmt/format.h>

#include <dlfcn.h>

#include <algorithm>
#include <ctime>
#include <map>
#include <mutex>
#include <stdexcept>
#include <vector>

#if defined(ATTNPROF_TORCH_CUDA)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

#include "attnprof/device_memory.h"
#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "attnprof/report/at_a_glance.h"
#include "attnprof/report/ceilings_cache.h"
#include "profiler/event_timer.h"

namespace attnprof {
namespace {

// NVML, opened at run time (the driver ships it; nothing links against it):
// the SM and memory clocks while the calibration GEMM runs, and the driver's
// version. The declarations are NVML's C ABI (nvml.h, stable since 2012).
class Nvml {
 public:
  Nvml() {
    lib_ = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) return;
    init_ = reinterpret_cast<Init>(::dlsym(lib_, "nvmlInit_v2"));
    shutdown_ = reinterpret_cast<Shutdown>(::dlsym(lib_, "nvmlShutdown"));
    by_pci_ = reinterpret_cast<ByPci>(::dlsym(lib_, "nvmlDeviceGetHandleByPciBusId_v2"));
    clock_ = reinterpret_cast<Clock>(::dlsym(lib_, "nvmlDeviceGetClockInfo"));
    driver_ = reinterpret_cast<Driver>(::dlsym(lib_, "nvmlSystemGetDriverVersion"));
    ok_ = init_ && shutdown_ && init_() == 0;
  }
  ~Nvml() {
    if (ok_) shutdown_();
    if (lib_) ::dlclose(lib_);
  }
  Nvml(const Nvml&) = delete;
  Nvml& operator=(const Nvml&) = delete;

  std::string driver_version() const {
    char buf[96] = {};
    if (!ok_ || !driver_ || driver_(buf, sizeof buf) != 0) return "";
    return buf;
  }
  // kSm or kMemory clock of the GPU at this PCI bus id, MHz.
  std::optional<double> clock_mhz(const std::string& pci_bus_id, int which) const {
    void* dev = nullptr;
    unsigned mhz = 0;
    if (!ok_ || !by_pci_ || !clock_ || by_pci_(pci_bus_id.c_str(), &dev) != 0 || clock_(dev, which, &mhz) != 0)
      return std::nullopt;
    return double(mhz);
  }
  static constexpr int kSm = 1, kMemory = 2;  // nvmlClockType_t

 private:
  using Init = int (*)();
  using Shutdown = int (*)();
  using ByPci = int (*)(const char*, void**);
  using Clock = int (*)(void*, int, unsigned*);
  using Driver = int (*)(char*, unsigned);
  void* lib_ = nullptr;
  Init init_ = nullptr;
  Shutdown shutdown_ = nullptr;
  ByPci by_pci_ = nullptr;
  Clock clock_ = nullptr;
  Driver driver_ = nullptr;
  bool ok_ = false;
};

std::string utc_now() {
  const std::time_t t = std::time(nullptr);
  std::tm tm{};
  ::gmtime_r(&t, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

#if defined(ATTNPROF_TORCH_CUDA)
// Median seconds per call of `op`: a warm-up, one timed call to size the
// repetitions (about 50 ms of work each), then five repetitions between CUDA
// events. `during` runs once while the first repetition's work is queued, to
// read the clocks under load.
template <class Op, class During>
double seconds_per_call(const Problem& p, Op&& op, During&& during) {
  EventTimer timer(p);
  for (int i = 0; i < 3; ++i) op();
  timer.start();
  op();
  const double one_s = std::max(timer.stop_us() * 1e-6, 1e-7);
  const int iters = std::clamp(int(0.05 / one_s), 1, 1000);
  std::vector<double> per_call;
  for (int rep = 0; rep < 5; ++rep) {
    throw_if_interrupted();
    timer.start();
    for (int i = 0; i < iters; ++i) op();
    if (rep == 0) during();
    per_call.push_back(timer.stop_us() * 1e-6 / iters);
  }
  std::sort(per_call.begin(), per_call.end());
  return per_call[per_call.size() / 2];
}
#endif

std::mutex g_memo_mutex;
std::map<std::string, report::DeviceCeilings> g_memo;  // device string -> this process's ceilings

}  // namespace

std::string gpu_driver_version() {
  if (const std::string v = Nvml().driver_version(); !v.empty()) return v;
  try {
    const std::string v = report::parse_nvidia_driver_version(io::read_file("/proc/driver/nvidia/version", 4096));
    if (!v.empty()) return v;
  } catch (const io::FileError&) {
  }
#if defined(ATTNPROF_TORCH_CUDA)
  int d = 0;
  if (cudaDriverGetVersion(&d) == cudaSuccess && d > 0) return fmt::format("cuda {}.{}", d / 1000, (d % 1000) / 10);
#endif
  return "unknown";
}

report::DeviceCeilings measure_ceilings(const Problem& p) {
#if defined(ATTNPROF_TORCH_CUDA)
  if (!p.on_cuda()) throw std::invalid_argument("the ceilings are measured on a CUDA device; the problem runs on " + p.device);
  const at::Device dev(p.device);
  const c10::cuda::CUDAGuard guard(dev);
  const cudaDeviceProp* prop = at::cuda::getDeviceProperties(dev.index());
  report::DeviceCeilings c;
  c.device = prop->name;
  c.driver = gpu_driver_version();
  if (const auto spec = report::lookup_peak_tflops(c.device, DType::BF16)) c.spec_bf16_tflops = spec->tflops;
  c.spec_dram_gbps = report::lookup_spec_dram_gbps(c.device);
  char pci[32] = {};
  cudaDeviceGetPCIBusId(pci, sizeof pci, dev.index());
  const Nvml nvml;

  release_cached_memory(p.device);
  size_t free_bytes = 0, total_bytes = 0;
  cudaMemGetInfo(&free_bytes, &total_bytes);
  // Three fp32 n x n matrices in at most half the free memory (8192: 768 MiB).
  int64_t n = 8192;
  while (n > 1024 && 3.0 * double(n) * double(n) * 4.0 > 0.5 * double(free_bytes)) n /= 2;
  c.gemm_n = n;
  // TF32 off, as PyTorch's default for matmul: the fp32 ceiling is the CUDA cores'.
  auto& ctx = at::globalContext();
  const bool tf32 = ctx.allowTF32CuBLAS();
  ctx.setAllowTF32CuBLAS(false);
  try {
    const auto opts = at::TensorOptions().device(dev);
    for (const DType d : {DType::BF16, DType::FP16, DType::FP32}) {
      const auto st = d == DType::BF16 ? at::kBFloat16 : d == DType::FP16 ? at::kHalf : at::kFloat;
      // Random data: zeros draw less power, so the clocks (and the figure) would run higher.
      const at::Tensor a = at::randn({n, n}, opts.dtype(st)), b = at::randn({n, n}, opts.dtype(st));
      at::Tensor out = at::empty({n, n}, opts.dtype(st));
      const double s = seconds_per_call(
          p, [&] { at::mm_out(out, a, b); },
          [&] {
            if (d != DType::BF16) return;
            c.sm_clock_mhz = nvml.clock_mhz(pci, Nvml::kSm).value_or(0.0);
            c.mem_clock_mhz = nvml.clock_mhz(pci, Nvml::kMemory).value_or(0.0);
          });
      const double tflops = 2.0 * double(n) * double(n) * double(n) / s / 1e12;
      (d == DType::BF16 ? c.gemm_bf16_tflops : d == DType::FP16 ? c.gemm_fp16_tflops : c.gemm_fp32_tflops) = tflops;
    }
    // fp8 (SM 8.9 and later): e4m3 x e4m3 -> bf16 through cuBLASLt, the
    // second operand column-major as its fp8 GEMM takes it.
    // Where cuBLASLt refuses, the fp8 ceiling stays absent (fp8's "% of peak" then divides by the datasheet's).
    if (prop->major > 8 || (prop->major == 8 && prop->minor >= 9)) try {
      const auto f32 = opts.dtype(at::kFloat);
      const at::Tensor a = at::randn({n, n}, f32).to(at::kFloat8_e4m3fn);
      const at::Tensor b = at::randn({n, n}, f32).to(at::kFloat8_e4m3fn).t();
      const at::Tensor one = at::ones({}, f32);
      at::Tensor out = at::empty({n, n}, opts.dtype(at::kBFloat16));
      const double s = seconds_per_call(
          p, [&] { at::_scaled_mm_out(out, a, b, one, one, std::nullopt, std::nullopt, at::kBFloat16, true); }, [] {});
      c.gemm_fp8_tflops = 2.0 * double(n) * double(n) * double(n) / s / 1e12;
    } catch (const c10::Error&) {
      c.gemm_fp8_tflops.reset();
    }
    // The copy: 1 GiB, or a quarter of the free memory, each way; far past any L2.
    const int64_t elems = std::max<int64_t>(1 << 20, std::min<int64_t>(int64_t(1) << 28, int64_t(free_bytes / 16)));
    const at::Tensor src = at::randn({elems}, opts.dtype(at::kFloat));
    at::Tensor dst = at::empty_like(src);
    c.copy_bytes = double(elems) * 4.0;
    const double s = seconds_per_call(p, [&] { dst.copy_(src); }, [] {});
    c.copy_gbps = 2.0 * c.copy_bytes / s / 1e9;  // read + written
  } catch (...) {
    ctx.setAllowTF32CuBLAS(tf32);
    release_cached_memory(p.device);
    throw;
  }
  ctx.setAllowTF32CuBLAS(tf32);
  release_cached_memory(p.device);
  c.measured_at = utc_now();
  c.source = "measured";
  return c;
#else
  throw std::invalid_argument("this attnprof was built without CUDA; the ceilings need a CUDA device (" + p.device + ")");
#endif
}

Calibration device_ceilings(const Problem& p, bool force) {
  Calibration out;
  {
    std::lock_guard<std::mutex> lock(g_memo_mutex);
    if (const auto it = g_memo.find(p.device); it != g_memo.end() && !force) {
      out.ceilings = it->second;
      return out;
    }
  }
  std::string device;
#if defined(ATTNPROF_TORCH_CUDA)
  if (p.on_cuda()) device = at::cuda::getDeviceProperties(at::Device(p.device).index())->name;
#endif
  const std::string driver = gpu_driver_version();
  const std::string dir = report::ceilings_cache_dir();
  const std::string path = dir.empty() ? "" : io::join_path(dir, report::ceilings_cache_name(device, driver));
  std::optional<report::DeviceCeilings> cached;
  if (!force && !path.empty()) {
    std::string why;
    cached = report::read_ceilings_cache(path, device, driver, &why);
    if (!cached && why != "not cached yet") out.notes.push_back(fmt::format("ceilings re-measured: {}: {}", path, why));
  }
  if (cached) {
    out.ceilings = *cached;
  } else {
    out.ceilings = measure_ceilings(p);
    if (path.empty()) {
      out.notes.emplace_back("ceilings not cached: neither XDG_CACHE_HOME nor HOME is set");
    } else {
      try {
        report::write_ceilings_cache(path, out.ceilings);
        out.ceilings.cache_file = path;
      } catch (const io::FileError& e) {
        out.notes.push_back(fmt::format("ceilings not cached: {}", e.what()));
      }
    }
  }
  std::lock_guard<std::mutex> lock(g_memo_mutex);
  g_memo[p.device] = out.ceilings;
  return out;
}

}  // namespace attnprof
