// The counter pass through the CUPTI Range Profiler and Profiler Host API
// (CUDA 12.6+; the older profiling API is deprecated as of CUDA 13.0). Kineto's
// own counter collection is compiled out of the torch 2.11 wheel, but the
// wheel's libcupti.so.13 has the range profiler: it is found at run time
// (libtorch_cuda has loaded it already), so nothing links it and a build
// without it still runs.
//
// One scope at a time: enable the range profiler on the device's context with
// auto ranges (one per kernel launch) and user replay: the whole step runs
// again for each hardware pass the metrics need, the profiler started only
// around the scope's body, so every kernel runs as it does in a real step,
// after the same kernels and with the cache they leave. Kernel replay (CUPTI
// saving and restoring device memory around each kernel's passes) was tried
// first on the H200: 4.7 s for one GEMM, and the restores' dirty lines showed
// up as the kernel's DRAM writes (+29% bytes on cuDNN's forward against ncu).
// Then decode, evaluate every range (numbered in execution order), disable.
#include "profiler/counters.h"

#include <ATen/ATen.h>

#include <algorithm>
#include <cmath>
#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "attnprof/interrupt.h"
#include "profiler/pass_step.h"

#if defined(ATTNPROF_HAVE_CUPTI) && defined(ATTNPROF_TORCH_CUDA)
#include <c10/cuda/CUDAGuard.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <cupti_profiler_host.h>
#include <cupti_profiler_target.h>
#include <cupti_range_profiler.h>
#include <cupti_result.h>
#include <cupti_target.h>
#include <dlfcn.h>
#define ATTNPROF_COUNTERS_CUPTI 1
#endif

namespace attnprof {

namespace {

using report::CounterPass;
using State = CounterPass::State;

CounterPass not_collected(State state, std::string reason) {
  CounterPass pass;
  pass.state = state;
  pass.route = "cupti-range-profiler";
  pass.reason = std::move(reason);
  return pass;
}

#if defined(ATTNPROF_COUNTERS_CUPTI)

// The metrics, by what they answer. Names as Nsight Compute spells them; a
// name this chip does not know is left out (its value stays nullopt).
struct MetricSlot {
  const char* name;
  std::optional<double> report::CounterValues::*field;  // nullptr: summed into tensor_flops
};
const MetricSlot kMetrics[] = {
    {"gpu__time_duration.sum", &report::CounterValues::duration_ns},
    {"sm__cycles_elapsed.avg.per_second", &report::CounterValues::sm_clock_hz},
    {"dram__bytes_read.sum", &report::CounterValues::dram_read_bytes},
    {"dram__bytes_write.sum", &report::CounterValues::dram_write_bytes},
    {"dram__throughput.avg.pct_of_peak_sustained_elapsed", &report::CounterValues::dram_throughput_pct},
    {"sm__throughput.avg.pct_of_peak_sustained_elapsed", &report::CounterValues::sm_throughput_pct},
    {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active", &report::CounterValues::tensor_active_pct},
    {"sm__inst_executed_pipe_tensor_op_gmma.sum", &report::CounterValues::gmma_inst},
    {"sm__inst_executed_pipe_tensor_op_hmma.sum", &report::CounterValues::hmma_inst},
    {"sm__warps_active.avg.pct_of_peak_sustained_active", &report::CounterValues::achieved_occupancy_pct},
    {"lts__t_sector_hit_rate.pct", &report::CounterValues::l2_hit_rate_pct},
};
// Sums of counters with weights, by what they add up to.
struct WeightedMetric {
  const char* name;
  double weight;
};
// Tensor operations executed, by source and destination type, for wgmma
// (hgmma) and mma.sync (hmma). A bf16 cuBLAS 8192^3 GEMM counts 1.016x its
// analytic 2·M·N·K on the H200: what the hardware executes, padding included.
const WeightedMetric kTensorOpMetrics[] = {
    {"sm__ops_path_tensor_op_hgmma_src_bf16_dst_fp32.sum", 1}, {"sm__ops_path_tensor_op_hgmma_src_fp16_dst_fp32.sum", 1},
    {"sm__ops_path_tensor_op_hgmma_src_fp16_dst_fp16.sum", 1}, {"sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum", 1},
    {"sm__ops_path_tensor_op_hmma_src_bf16_dst_fp32.sum", 1},  {"sm__ops_path_tensor_op_hmma_src_fp16_dst_fp32.sum", 1},
    {"sm__ops_path_tensor_op_hmma_src_fp16_dst_fp16.sum", 1},  {"sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32.sum", 1},
};

// The entry points this file calls, looked up in the process's libcupti.
struct Cupti {
#define ATTNPROF_CUPTI_FN(name) decltype(&::name) name = nullptr;
  ATTNPROF_CUPTI_FN(cuptiGetResultString)
  ATTNPROF_CUPTI_FN(cuptiProfilerInitialize)
  ATTNPROF_CUPTI_FN(cuptiProfilerDeviceSupported)
  ATTNPROF_CUPTI_FN(cuptiDeviceGetChipName)
  ATTNPROF_CUPTI_FN(cuptiProfilerGetCounterAvailability)
  ATTNPROF_CUPTI_FN(cuptiProfilerHostInitialize)
  ATTNPROF_CUPTI_FN(cuptiProfilerHostDeinitialize)
  ATTNPROF_CUPTI_FN(cuptiProfilerHostGetMetricProperties)
  ATTNPROF_CUPTI_FN(cuptiProfilerHostConfigAddMetrics)
  ATTNPROF_CUPTI_FN(cuptiProfilerHostGetConfigImageSize)
  ATTNPROF_CUPTI_FN(cuptiProfilerHostGetConfigImage)
  ATTNPROF_CUPTI_FN(cuptiProfilerHostEvaluateToGpuValues)
  ATTNPROF_CUPTI_FN(cuptiRangeProfilerEnable)
  ATTNPROF_CUPTI_FN(cuptiRangeProfilerDisable)
  ATTNPROF_CUPTI_FN(cuptiRangeProfilerGetCounterDataSize)
  ATTNPROF_CUPTI_FN(cuptiRangeProfilerCounterDataImageInitialize)
  ATTNPROF_CUPTI_FN(cuptiRangeProfilerSetConfig)
  ATTNPROF_CUPTI_FN(cuptiRangeProfilerStart)
  ATTNPROF_CUPTI_FN(cuptiRangeProfilerStop)
  ATTNPROF_CUPTI_FN(cuptiRangeProfilerDecodeData)
  ATTNPROF_CUPTI_FN(cuptiRangeProfilerGetCounterDataInfo)
  ATTNPROF_CUPTI_FN(cuptiRangeProfilerCounterDataGetRangeInfo)
#undef ATTNPROF_CUPTI_FN
  std::string missing;  // why it could not be loaded, "" when it was
};

// libtorch_cuda links libcupti.so.13 (Kineto), so it is normally loaded
// already; else the loader's search path and torch's nvidia/cu13/lib.
const Cupti& cupti() {
  static const Cupti api = [] {
    Cupti c;
    void* lib = dlopen("libcupti.so.13", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libcupti.so.13", RTLD_NOW);
    if (!lib) lib = dlopen("libcupti.so", RTLD_NOW);
    if (!lib) {
      const char* err = dlerror();
      c.missing = std::string("CUPTI (libcupti.so.13) could not be loaded: ") + (err ? err : "not found");
      return c;
    }
#define ATTNPROF_CUPTI_SYM(name)                                                                          \
  c.name = reinterpret_cast<decltype(c.name)>(dlsym(lib, #name));                                        \
  if (!c.name && c.missing.empty()) c.missing = "this libcupti has no " #name " (the range profiler needs CUPTI 12.6+)";
    ATTNPROF_CUPTI_SYM(cuptiGetResultString)
    ATTNPROF_CUPTI_SYM(cuptiProfilerInitialize)
    ATTNPROF_CUPTI_SYM(cuptiProfilerDeviceSupported)
    ATTNPROF_CUPTI_SYM(cuptiDeviceGetChipName)
    ATTNPROF_CUPTI_SYM(cuptiProfilerGetCounterAvailability)
    ATTNPROF_CUPTI_SYM(cuptiProfilerHostInitialize)
    ATTNPROF_CUPTI_SYM(cuptiProfilerHostDeinitialize)
    ATTNPROF_CUPTI_SYM(cuptiProfilerHostGetMetricProperties)
    ATTNPROF_CUPTI_SYM(cuptiProfilerHostConfigAddMetrics)
    ATTNPROF_CUPTI_SYM(cuptiProfilerHostGetConfigImageSize)
    ATTNPROF_CUPTI_SYM(cuptiProfilerHostGetConfigImage)
    ATTNPROF_CUPTI_SYM(cuptiProfilerHostEvaluateToGpuValues)
    ATTNPROF_CUPTI_SYM(cuptiRangeProfilerEnable)
    ATTNPROF_CUPTI_SYM(cuptiRangeProfilerDisable)
    ATTNPROF_CUPTI_SYM(cuptiRangeProfilerGetCounterDataSize)
    ATTNPROF_CUPTI_SYM(cuptiRangeProfilerCounterDataImageInitialize)
    ATTNPROF_CUPTI_SYM(cuptiRangeProfilerSetConfig)
    ATTNPROF_CUPTI_SYM(cuptiRangeProfilerStart)
    ATTNPROF_CUPTI_SYM(cuptiRangeProfilerStop)
    ATTNPROF_CUPTI_SYM(cuptiRangeProfilerDecodeData)
    ATTNPROF_CUPTI_SYM(cuptiRangeProfilerGetCounterDataInfo)
    ATTNPROF_CUPTI_SYM(cuptiRangeProfilerCounterDataGetRangeInfo)
#undef ATTNPROF_CUPTI_SYM
    return c;
  }();
  return api;
}

// A CUPTI call that failed, with what it means for the user.
struct CuptiError : std::runtime_error {
  CuptiError(const std::string& what, bool permission) : std::runtime_error(what), permission(permission) {}
  bool permission;
};

void check(CUptiResult r, const char* call) {
  if (r == CUPTI_SUCCESS) return;
  const char* text = nullptr;
  if (cupti().cuptiGetResultString) cupti().cuptiGetResultString(r, &text);
  const std::string code = text ? text : ("CUptiResult " + std::to_string(static_cast<int>(r)));
  if (r == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES)
    throw CuptiError("no permission to read the GPU's performance counters (" + code +
                         "): run as root, or load the NVIDIA driver with NVreg_RestrictProfilingToAdminUsers=0",
                     true);
  throw CuptiError(std::string(call) + " failed: " + code, false);
}

template <class P>
P params(size_t size) {
  P p{};
  p.structSize = size;
  return p;
}
#define ATTNPROF_PARAMS(T) params<T>(T##_STRUCT_SIZE)

CUcontext current_context() {
  using Fn = CUresult (*)(CUcontext*);
  static const Fn get = [] {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found = cudaDriverEntryPointSymbolNotFound;
    if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", &p, 12000, cudaEnableDefault, &found) != cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      return Fn(nullptr);
    return reinterpret_cast<Fn>(p);
  }();
  CUcontext ctx = nullptr;
  if (!get || get(&ctx) != CUDA_SUCCESS || !ctx)
    throw CuptiError("no current CUDA context for the range profiler", false);
  return ctx;
}

// Why the device cannot be profiled, or "".
std::string device_unsupported(int device) {
  auto dev = ATTNPROF_PARAMS(CUpti_Profiler_DeviceSupported_Params);
  dev.cuDevice = device;
  dev.api = CUPTI_PROFILER_RANGE_PROFILING;
  check(cupti().cuptiProfilerDeviceSupported(&dev), "cuptiProfilerDeviceSupported");
  if (dev.isSupported == CUPTI_PROFILER_CONFIGURATION_SUPPORTED) return "";
  std::vector<std::string> why;
  if (dev.architecture != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why.push_back("its architecture (before Volta)");
  if (dev.vGpu == CUPTI_PROFILER_CONFIGURATION_DISABLED) why.push_back("profiling is disabled on this vGPU");
  else if (dev.vGpu != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why.push_back("this vGPU");
  if (dev.confidentialCompute != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why.push_back("confidential compute");
  if (dev.sli != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why.push_back("SLI");
  if (dev.cmp != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why.push_back("a CMP device");
  if (dev.wsl != CUPTI_PROFILER_CONFIGURATION_SUPPORTED) why.push_back("WSL");
  std::string s = "CUPTI cannot read this GPU's counters";
  for (size_t i = 0; i < why.size(); ++i) s += (i ? ", " : " (") + why[i];
  return why.empty() ? s : s + ")";
}

// The host object (metric names → config image, counter data → values) for
// the device's chip, and the metrics it knows.
class MetricHost {
 public:
  MetricHost(int device, CUcontext ctx) {
    const Cupti& c = cupti();
    auto chip = ATTNPROF_PARAMS(CUpti_Device_GetChipName_Params);
    chip.deviceIndex = static_cast<size_t>(device);
    check(c.cuptiDeviceGetChipName(&chip), "cuptiDeviceGetChipName");
    chip_ = chip.pChipName ? chip.pChipName : "";
    auto avail = ATTNPROF_PARAMS(CUpti_Profiler_GetCounterAvailability_Params);
    avail.ctx = ctx;
    check(c.cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");
    availability_.resize(avail.counterAvailabilityImageSize);
    avail.pCounterAvailabilityImage = availability_.data();
    check(c.cuptiProfilerGetCounterAvailability(&avail), "cuptiProfilerGetCounterAvailability");
    auto init = ATTNPROF_PARAMS(CUpti_Profiler_Host_Initialize_Params);
    init.profilerType = CUPTI_PROFILER_TYPE_RANGE_PROFILER;
    init.pChipName = chip_.c_str();
    init.pCounterAvailabilityImage = availability_.data();
    check(c.cuptiProfilerHostInitialize(&init), "cuptiProfilerHostInitialize");
    host_ = init.pHostObject;
    for (const MetricSlot& m : kMetrics)
      if (known(m.name)) names_.push_back(m.name);
    for (const WeightedMetric& m : kTensorOpMetrics)
      if (known(m.name)) names_.push_back(m.name);
    if (names_.empty()) throw CuptiError("CUPTI knows none of attnprof's metrics on chip " + chip_, false);
    auto add = ATTNPROF_PARAMS(CUpti_Profiler_Host_ConfigAddMetrics_Params);
    add.pHostObject = host_;
    add.ppMetricNames = names_.data();
    add.numMetrics = names_.size();
    check(c.cuptiProfilerHostConfigAddMetrics(&add), "cuptiProfilerHostConfigAddMetrics");
    auto size = ATTNPROF_PARAMS(CUpti_Profiler_Host_GetConfigImageSize_Params);
    size.pHostObject = host_;
    check(c.cuptiProfilerHostGetConfigImageSize(&size), "cuptiProfilerHostGetConfigImageSize");
    config_.resize(size.configImageSize);
    auto image = ATTNPROF_PARAMS(CUpti_Profiler_Host_GetConfigImage_Params);
    image.pHostObject = host_;
    image.configImageSize = config_.size();
    image.pConfigImage = config_.data();
    check(c.cuptiProfilerHostGetConfigImage(&image), "cuptiProfilerHostGetConfigImage");
  }
  ~MetricHost() {
    if (!host_) return;
    auto de = ATTNPROF_PARAMS(CUpti_Profiler_Host_Deinitialize_Params);
    de.pHostObject = host_;
    cupti().cuptiProfilerHostDeinitialize(&de);
  }
  MetricHost(const MetricHost&) = delete;
  MetricHost& operator=(const MetricHost&) = delete;

  const std::vector<const char*>& names() const { return names_; }
  std::vector<uint8_t>& config() { return config_; }

  std::vector<double> evaluate(const std::vector<uint8_t>& counter_data, size_t range) const {
    std::vector<double> values(names_.size(), 0.0);
    auto eval = ATTNPROF_PARAMS(CUpti_Profiler_Host_EvaluateToGpuValues_Params);
    eval.pHostObject = host_;
    eval.pCounterDataImage = counter_data.data();
    eval.counterDataImageSize = counter_data.size();
    eval.rangeIndex = range;
    eval.ppMetricNames = const_cast<const char**>(names_.data());
    eval.numMetrics = names_.size();
    eval.pMetricValues = values.data();
    check(cupti().cuptiProfilerHostEvaluateToGpuValues(&eval), "cuptiProfilerHostEvaluateToGpuValues");
    return values;
  }

 private:
  bool known(const char* metric) const {
    auto prop = ATTNPROF_PARAMS(CUpti_Profiler_Host_GetMetricProperties_Params);
    prop.pHostObject = host_;
    prop.pMetricName = metric;
    return cupti().cuptiProfilerHostGetMetricProperties(&prop) == CUPTI_SUCCESS;
  }

  std::string chip_;
  std::vector<uint8_t> availability_;
  CUpti_Profiler_Host_Object* host_ = nullptr;
  std::vector<const char*> names_;
  std::vector<uint8_t> config_;
};

// Launches in one scope of one step; a forward of the largest variants has
// about 30, a backward about 60.
constexpr size_t kMaxRanges = 2048;

// The range profiler enabled on a context for one scope; disabled on every
// way out.
class ScopeProfiler {
 public:
  ScopeProfiler(MetricHost& host, CUcontext ctx) : host_(host) {
    auto enable = ATTNPROF_PARAMS(CUpti_RangeProfiler_Enable_Params);
    enable.ctx = ctx;
    check(cupti().cuptiRangeProfilerEnable(&enable), "cuptiRangeProfilerEnable");
    object_ = enable.pRangeProfilerObject;
    try {
      configure();
    } catch (...) {
      disable();
      throw;
    }
  }
  ~ScopeProfiler() {
    if (started_) {
      auto stop = ATTNPROF_PARAMS(CUpti_RangeProfiler_Stop_Params);
      stop.pRangeProfilerObject = object_;
      cupti().cuptiRangeProfilerStop(&stop);
    }
    disable();
  }
  ScopeProfiler(const ScopeProfiler&) = delete;
  ScopeProfiler& operator=(const ScopeProfiler&) = delete;

  void start() {
    auto start = ATTNPROF_PARAMS(CUpti_RangeProfiler_Start_Params);
    start.pRangeProfilerObject = object_;
    check(cupti().cuptiRangeProfilerStart(&start), "cuptiRangeProfilerStart");
    started_ = true;
  }
  // Ends one pass once the scope's work has finished; true when CUPTI has
  // every metric pass it needs (else the scope runs again).
  bool stop_pass() {
    if (const cudaError_t err = cudaDeviceSynchronize(); err != cudaSuccess)
      throw CuptiError(std::string("the counted step failed: ") + cudaGetErrorString(err), false);
    auto stop = ATTNPROF_PARAMS(CUpti_RangeProfiler_Stop_Params);
    stop.pRangeProfilerObject = object_;
    started_ = false;
    check(cupti().cuptiRangeProfilerStop(&stop), "cuptiRangeProfilerStop");
    return stop.isAllPassSubmitted != 0;
  }

  // After the last pass: decodes, and returns each range's metric values in
  // execution order.
  std::vector<std::vector<double>> values() {
    const Cupti& c = cupti();
    auto decode = ATTNPROF_PARAMS(CUpti_RangeProfiler_DecodeData_Params);
    decode.pRangeProfilerObject = object_;
    check(c.cuptiRangeProfilerDecodeData(&decode), "cuptiRangeProfilerDecodeData");
    if (decode.numOfRangeDropped > 0)
      throw CuptiError(std::to_string(decode.numOfRangeDropped) + " kernel launches were dropped (more than " +
                           std::to_string(kMaxRanges) + " in one scope)",
                       false);
    auto info = ATTNPROF_PARAMS(CUpti_RangeProfiler_GetCounterDataInfo_Params);
    info.pCounterDataImage = data_.data();
    info.counterDataImageSize = data_.size();
    check(c.cuptiRangeProfilerGetCounterDataInfo(&info), "cuptiRangeProfilerGetCounterDataInfo");
    // Auto ranges are named by their execution index ("0", "1", ...).
    std::vector<std::pair<long, size_t>> order;
    for (size_t i = 0; i < info.numTotalRanges; ++i) {
      auto range = ATTNPROF_PARAMS(CUpti_RangeProfiler_CounterData_GetRangeInfo_Params);
      range.pCounterDataImage = data_.data();
      range.counterDataImageSize = data_.size();
      range.rangeIndex = i;
      range.rangeDelimiter = "/";
      check(c.cuptiRangeProfilerCounterDataGetRangeInfo(&range), "cuptiRangeProfilerCounterDataGetRangeInfo");
      char* end = nullptr;
      const long index = range.rangeName ? std::strtol(range.rangeName, &end, 10) : -1;
      order.emplace_back(end && *end == '\0' ? index : static_cast<long>(i), i);
    }
    std::stable_sort(order.begin(), order.end());
    std::vector<std::vector<double>> values;
    for (const auto& [index, i] : order) values.push_back(host_.evaluate(data_, i));
    return values;
  }

 private:
  void disable() {
    auto disable = ATTNPROF_PARAMS(CUpti_RangeProfiler_Disable_Params);
    disable.pRangeProfilerObject = object_;
    cupti().cuptiRangeProfilerDisable(&disable);
  }

  // Counter data for kMaxRanges auto ranges, and the metric configuration.
  void configure() {
    const Cupti& c = cupti();
    MetricHost& host = host_;
    auto size = ATTNPROF_PARAMS(CUpti_RangeProfiler_GetCounterDataSize_Params);
    size.pRangeProfilerObject = object_;
    size.pMetricNames = const_cast<const char**>(host.names().data());
    size.numMetrics = host.names().size();
    size.maxNumOfRanges = kMaxRanges;
    size.maxNumRangeTreeNodes = kMaxRanges;
    check(c.cuptiRangeProfilerGetCounterDataSize(&size), "cuptiRangeProfilerGetCounterDataSize");
    data_.resize(size.counterDataSize);
    auto init = ATTNPROF_PARAMS(CUpti_RangeProfiler_CounterDataImage_Initialize_Params);
    init.pRangeProfilerObject = object_;
    init.counterDataSize = data_.size();
    init.pCounterData = data_.data();
    check(c.cuptiRangeProfilerCounterDataImageInitialize(&init), "cuptiRangeProfilerCounterDataImageInitialize");
    auto config = ATTNPROF_PARAMS(CUpti_RangeProfiler_SetConfig_Params);
    config.pRangeProfilerObject = object_;
    config.configSize = host.config().size();
    config.pConfig = host.config().data();
    config.counterDataImageSize = data_.size();
    config.pCounterDataImage = data_.data();
    config.range = CUPTI_AutoRange;
    config.replayMode = CUPTI_UserReplay;
    config.maxRangesPerPass = kMaxRanges;
    config.numNestingLevels = 1;
    config.minNestingLevel = 1;
    config.passIndex = 0;
    config.targetNestingLevel = 1;
    check(c.cuptiRangeProfilerSetConfig(&config), "cuptiRangeProfilerSetConfig");
  }

  MetricHost& host_;
  CUpti_RangeProfiler_Object* object_ = nullptr;
  std::vector<uint8_t> data_;
  bool started_ = false;
};

report::CounterValues to_values(const std::vector<const char*>& names, const std::vector<double>& raw) {
  report::CounterValues v;
  const auto add = [](std::optional<double>& sum, double x) { sum = sum.value_or(0.0) + x; };
  for (size_t i = 0; i < names.size() && i < raw.size(); ++i) {
    const std::string name = names[i];
    for (const MetricSlot& m : kMetrics)
      if (name == m.name) v.*(m.field) = raw[i];
    for (const WeightedMetric& m : kTensorOpMetrics)
      if (name == m.name) add(v.tensor_flops, m.weight * raw[i]);
  }
  return v;
}

// The host object of a device, made once per process: it costs a config image
// build, and every counter pass of the device needs the same one. Never
// freed: at exit CUPTI may be gone before static destructors run.
MetricHost& metric_host(int device, CUcontext ctx) {
  static std::mutex mutex;
  static auto* hosts = new std::map<int, MetricHost*>();
  const std::lock_guard<std::mutex> lock(mutex);
  auto it = hosts->find(device);
  if (it == hosts->end()) it = hosts->emplace(device, new MetricHost(device, ctx)).first;
  return *it->second;
}

using Phases = std::vector<std::pair<std::string, double>>;

// Milliseconds since the last lap, appended to `phases` as `name`.
class Laps {
 public:
  void lap(Phases& phases, std::string name) {
    const auto now = std::chrono::steady_clock::now();
    phases.emplace_back(std::move(name), std::chrono::duration<double, std::milli>(now - last_).count());
    last_ = now;
  }

 private:
  std::chrono::steady_clock::time_point last_ = std::chrono::steady_clock::now();
};

// A scope's metrics need several hardware passes; a step that has not
// finished them after this many is not repeating itself.
constexpr int kMaxPasses = 64;

// A cold L2 for the scope's first kernel. cuptiRangeProfilerStart leaves dirty
// lines in the L2 (on the H200 a read-only kernel first in the range wrote 27 MB
// to DRAM, the same read right after it 10 KB), and the first kernel counted
// would write them back as its own: custom-flash-sm90's 8x16x1024x64 forward
// counted 34 MB written against ncu's 21 (O and LSE: 17.3 MB). So each pass opens
// its range with a read of three times the L2, whose own ranges are dropped; the
// scope's kernels then start from an L2 holding nothing of theirs and nothing
// dirty, as ncu's default cache control (--cache-control all) starts each kernel.
class ColdL2 {
 public:
  explicit ColdL2(int device) {
    int bytes = 0;
    if (cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device) != cudaSuccess || bytes <= 0)
      throw CuptiError("cannot read the L2 cache size of device " + std::to_string(device), false);
    scratch_ = at::empty({3 * static_cast<int64_t>(bytes) / 4},
                         at::TensorOptions().dtype(at::kFloat).device(at::kCUDA, static_cast<c10::DeviceIndex>(device)));
  }
  // On the current stream, before the scope's work: reads only, so it leaves nothing dirty.
  void evict() const { (void)scratch_.sum(); }

 private:
  at::Tensor scratch_;
};

// Runs `pass` (one step, which starts and stops the profiler and says whether
// CUPTI has every metric pass it needs) until it has; returns how many it took.
int replay(const std::string& what, const std::function<bool()>& pass) {
  for (int passes = 1;; ++passes) {
    if (passes > kMaxPasses)
      throw CuptiError(what + " did not finish its metric passes in " + std::to_string(kMaxPasses) + " steps", false);
    const bool done = pass();
    throw_if_interrupted();  // between passes; the profiler is disabled on the way out
    if (done) return passes;
  }
}

// How many auto ranges (kernel launches) one ColdL2::evict() makes on `device`:
// counted once per process, so no assumption about how PyTorch launches a
// reduction, and no extra replay for each variant of a run.
size_t evict_ranges(int device, MetricHost& host, CUcontext ctx, const ColdL2& cold) {
  static std::mutex mutex;
  static auto* counts = new std::map<int, size_t>();  // never freed, as metric_host's
  const std::lock_guard<std::mutex> lock(mutex);
  if (auto it = counts->find(device); it != counts->end()) return it->second;
  ScopeProfiler profiler(host, ctx);
  replay("emptying the L2", [&] {
    profiler.start();
    cold.evict();
    return profiler.stop_pass();
  });
  const size_t n = profiler.values().size();
  if (n == 0) throw CuptiError("emptying the L2 launched no kernel the range profiler saw", false);
  return counts->emplace(device, n).first->second;
}

// The kernels of one measured scope, counted into pass.kernels: the whole step
// runs once per hardware pass (user replay), the range profiler started only
// around `scope`'s body, which begins on a cold L2.
void count_scope(Variant& variant, const Problem& p, const Inputs& in, const std::string& scope, MetricHost& host,
                 CUcontext ctx, const ColdL2& cold, size_t cold_ranges, CounterPass& pass, Laps& laps) {
  ScopeProfiler profiler(host, ctx);
  bool done = false;
  ScopeHooks hooks;
  hooks.enter = [&](const char* s) {
    if (s != scope) return;
    profiler.start();
    cold.evict();
  };
  hooks.leave = [&](const char* s) {
    if (s == scope) done = profiler.stop_pass();
  };
  const int passes = replay(scope, [&] {
    run_pass_step(variant, p, in, /*scoped=*/true, &hooks);
    return done;
  });
  std::vector<std::vector<double>> ranges = profiler.values();
  if (ranges.size() < cold_ranges)
    throw CuptiError(scope + ": the range profiler saw fewer kernels than emptying the L2 launches", false);
  ranges.erase(ranges.begin(), ranges.begin() + static_cast<std::ptrdiff_t>(cold_ranges));
  // A kernel missing from some passes evaluates to NaN: the passes did not run the same kernels.
  for (const std::vector<double>& r : ranges)
    for (double x : r)
      if (!std::isfinite(x))
        throw CuptiError(scope + " launched different kernels from one pass of the step to the next; "
                                 "its counters cannot be combined",
                         false);
  laps.lap(pass.phases_ms, scope + ": " + std::to_string(ranges.size()) + " kernels, " + std::to_string(passes) +
                               " passes of the step");
  for (size_t i = 0; i < ranges.size(); ++i) {
    report::KernelCounters k;
    k.scope = scope;
    k.index = static_cast<int>(i);
    k.values = to_values(host.names(), ranges[i]);
    pass.kernels.push_back(std::move(k));
  }
}

void count_step(Variant& variant, const Problem& p, const Inputs& in, MetricHost& host, CUcontext ctx,
                CounterPass& pass, Laps& laps) {
  const int device = at::Device(p.device).index();
  const ColdL2 cold(device);
  const size_t cold_ranges = evict_ranges(device, host, ctx, cold);
  laps.lap(pass.phases_ms, "L2 eviction: " + std::to_string(cold_ranges) + " kernel(s)");
  for (const std::string& scope : pass_scopes(p.pass))
    count_scope(variant, p, in, scope, host, ctx, cold, cold_ranges, pass, laps);
}

CounterPass collect(Variant& variant, const Problem& p, const Inputs& in) {
  const auto t0 = std::chrono::steady_clock::now();
  Laps laps;
  const Cupti& c = cupti();
  if (!c.missing.empty()) return not_collected(State::unavailable, c.missing);
  const int device = at::Device(p.device).index();
  c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
  CounterPass pass;
  pass.route = "cupti-range-profiler";
  try {
    // CUPTI's profiler library; idempotent across counter passes of one process.
    auto init = ATTNPROF_PARAMS(CUpti_Profiler_Initialize_Params);
    check(c.cuptiProfilerInitialize(&init), "cuptiProfilerInitialize");
    if (std::string why = device_unsupported(device); !why.empty()) return not_collected(State::unavailable, why);
    if (cudaDeviceSynchronize() != cudaSuccess) throw CuptiError("the device failed before the counter pass", false);
    const CUcontext ctx = current_context();
    MetricHost& host = metric_host(device, ctx);
    laps.lap(pass.phases_ms, "CUPTI set-up (" + std::to_string(host.names().size()) + " counters)");
    // One step first, uncounted: every pass must launch the same kernels, and a
    // first call may launch more (a workspace's fill, a library's set-up).
    run_pass_step(variant, p, in, /*scoped=*/false);
    laps.lap(pass.phases_ms, "one step uncounted");
    count_step(variant, p, in, host, ctx, pass, laps);
    pass.state = State::collected;
  } catch (const Interrupted&) {
    throw;
  } catch (const CuptiError& e) {
    pass.kernels.clear();
    pass.state = e.permission ? State::unavailable : State::failed;
    pass.reason = e.what();
  } catch (const c10::Error& e) {  // the step itself failed under replay
    pass.kernels.clear();
    pass.state = State::failed;
    pass.reason = std::string("the counted step failed: ") + e.what_without_backtrace();
  } catch (const std::exception& e) {
    pass.kernels.clear();
    pass.state = State::failed;
    pass.reason = std::string("the counted step failed: ") + e.what();
  }
  pass.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Outside the step: the profiler is disabled before the signal is honoured.
  throw_if_interrupted();
  return pass;
}

#endif  // ATTNPROF_COUNTERS_CUPTI

}  // namespace

report::CounterPass collect_counters(Variant& variant, const Problem& p, const Inputs& in) {
  if (!p.on_cuda()) return not_collected(State::unavailable, "hardware counters need an NVIDIA GPU; this run is on the CPU");
#if defined(ATTNPROF_COUNTERS_CUPTI)
  return collect(variant, p, in);
#else
  (void)variant, (void)in;
  return not_collected(State::unavailable,
                       "attnprof was built without the CUPTI headers (cupti_range_profiler.h); rebuild with a CUDA "
                       "torch whose nvidia-cuda-cupti package carries them");
#endif
}

void name_counted_kernels(report::CounterPass& pass, const std::vector<ScopeStats>& scopes) {
  if (pass.state != CounterPass::State::collected) return;
  for (const ScopeStats& s : scopes) {
    std::vector<const ScopeStats::Launch*> kernels;
    for (const ScopeStats::Launch& l : s.first_call)
      if (l.name.rfind("Memcpy", 0) != 0 && l.name.rfind("Memset", 0) != 0) kernels.push_back(&l);
    std::vector<report::KernelCounters*> counted;
    for (report::KernelCounters& k : pass.kernels)
      if (k.scope == s.scope) counted.push_back(&k);
    if (counted.size() != kernels.size()) {
      pass.state = CounterPass::State::failed;
      pass.reason = "the counter pass saw " + std::to_string(counted.size()) + " kernel launches in " + s.scope +
                    ", the profiled step " + std::to_string(kernels.size()) + ": the step does not repeat itself";
      pass.kernels.clear();
      return;
    }
    for (size_t i = 0; i < counted.size(); ++i) counted[i]->kernel = kernels[i]->name;
  }
}

}  // namespace attnprof
