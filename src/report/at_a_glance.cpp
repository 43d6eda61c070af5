#include "attnprof/report/at_a_glance.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>

#include "attnprof/io/files.h"
#include "attnprof/report/fingerprint.h"
#include "attnprof/report/kernel_names.h"
#include "attnprof/report/summary.h"

namespace attnprof::report {
namespace {

struct KnownGpu {
  const char* match;  // case-insensitive substring of the device name
  const char* name;
  double bf16, fp16, fp32;  // dense TFLOP/s; 0 = no tensor-core path for that dtype
};

// NVIDIA datasheets, dense (the "with sparsity" figures halved), 16-bit with
// fp32 accumulate. More specific names first: "H100 PCIe" before "H100",
// "A100" and "A10G" before "A10", "L40S" and "L40" before "L4".
constexpr std::array<KnownGpu, 18> kKnownGpus{{
    {"B200", "B200", 2250, 2250, 75},
    {"H200 NVL", "H200 NVL", 835, 835, 60},
    {"H200", "H200 SXM", 989.4, 989.4, 66.9},
    {"H100 PCIe", "H100 PCIe", 756.5, 756.5, 51.2},
    {"H100 NVL", "H100 NVL", 835, 835, 60},
    {"H100", "H100 SXM", 989.4, 989.4, 66.9},
    {"H800", "H800 SXM", 989.4, 989.4, 66.9},
    {"A100", "A100", 312, 312, 19.5},
    {"A10G", "A10G", 70, 70, 31.2},
    {"A30", "A30", 165, 165, 10.3},
    {"A10", "A10", 125, 125, 31.2},
    {"L40S", "L40S", 362, 362, 91.6},
    {"L40", "L40", 181, 181, 90.5},
    {"L4", "L4", 121, 121, 30.3},
    {"RTX 6000 Ada", "RTX 6000 Ada", 364, 364, 91.1},
    {"RTX 4090", "RTX 4090", 165.2, 165.2, 82.6},
    {"V100", "V100", 0, 125, 15.7},
    {"T4", "T4", 0, 65, 8.1},
}};

bool contains_nocase(const std::string& hay, const std::string& needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != hay.end();
}

bool contains(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

std::string us(double v) { return fmt::format("{:.1f}", v); }

const ForwardStats::Kernel* dominant_kernel(const ForwardStats& f) {
  const ForwardStats::Kernel* best = nullptr;
  for (const auto& k : f.kernels)
    if (!best || k.total_us > best->total_us) best = &k;
  return best;
}

double forward_kernel_time(const ForwardStats& f) {
  double t = 0;
  for (const auto& k : f.kernels) t += k.total_us;
  return t;
}

bool is_matmul_family(KernelFamily f) {
  switch (f) {
    case KernelFamily::cublas_nvjet:
    case KernelFamily::cublas_xmma:
    case KernelFamily::cublas_legacy:
    case KernelFamily::cutlass:
    case KernelFamily::cutlass_fmha:
    case KernelFamily::flash_attention_2:
    case KernelFamily::cudnn_generated:
    case KernelFamily::attnprof:
      return true;
    default:
      return false;
  }
}

// The math unit of the matrix products: the largest GEMM or attention kernel
// whose name says tensor cores or CUDA cores. (Elementwise kernels run on CUDA
// cores too and can take longer, but they are not where the FLOPs are: seen on
// the H200, naive's mask fill outlasts its two nvjet GEMMs.)
std::string math_path(const RunRecord& r) {
  const ForwardStats::Kernel* best = nullptr;
  KernelFingerprint best_fp;
  for (const auto& k : r.forward.kernels) {
    const KernelFingerprint fp = fingerprint_kernel(k.name);
    if (!is_matmul_family(fp.family)) continue;
    if (fp.math_unit != MathUnit::tensor_cores && fp.math_unit != MathUnit::cuda_cores) continue;
    if (!best || k.total_us > best->total_us) best = &k, best_fp = fp;
  }
  if (!best) return "n/a";
  // nvjet's `h` and cuDNN's `f16` say only "16-bit"; the inputs say which.
  std::string precision(precision_name(best_fp.precision));
  if (best_fp.precision == Precision::sixteen_bit && r.problem.dtype != DType::FP32)
    precision = dtype_name(r.problem.dtype);
  if (best_fp.precision == Precision::unknown) precision = "unknown precision";
  return fmt::format("{} ({})", best_fp.math_unit == MathUnit::tensor_cores ? "tensor cores" : "CUDA cores", precision);
}

// A kernel that takes at least this share of the forward's device time is the
// forward, for the table's purposes (flash/cuDNN/fmha run at 95-100%).
constexpr double kDominantShare = 0.8;

const KernelLaunch* launch_of(const RunRecord& r, const std::string& kernel) {
  for (const auto& l : r.launches)
    if (l.name == kernel) return &l;
  return nullptr;
}

std::string status_cell(const RunRecord& r) { return r.status; }

}  // namespace

std::optional<DevicePeak> lookup_peak_tflops(const std::string& device_name, DType dtype) {
  for (const KnownGpu& g : kKnownGpus) {
    if (!contains_nocase(device_name, g.match)) continue;
    const double v = dtype == DType::BF16 ? g.bf16 : dtype == DType::FP16 ? g.fp16 : g.fp32;
    if (v <= 0) return std::nullopt;
    const std::string basis = dtype == DType::FP32 ? "fp32 CUDA cores"
                                                   : fmt::format("{} tensor cores, dense", dtype_name(dtype));
    return DevicePeak{g.name, v, basis};
  }
  return std::nullopt;
}

std::string at_a_glance_note(const RunRecord& r) {
  if (r.status != "ok") return fmt::format("{}: {}", r.status, r.reason);
  std::vector<std::string> notes;
  const bool sixteen = r.problem.dtype != DType::FP32;
  bool dtod = false, upcast = false, mask = false;
  for (const auto& k : r.forward.kernels) {
    const KernelFingerprint fp = fingerprint_kernel(k.name);
    if (fp.family == KernelFamily::memcpy && contains(k.name, "DtoD")) dtod = true;
    if (sixteen && fp.math_unit == MathUnit::cuda_cores && fp.precision == Precision::fp32) upcast = true;
    if (fp.family == KernelFamily::aten_triu_tril || contains(k.name, "where_kernel")) mask = true;
  }
  // CPU runs have no kernels: the ops say the same.
  for (const OpStats& s : r.rows)
    if (s.name == "aten::triu" || s.name == "aten::tril" || s.name == "aten::where") mask = true;
  if (dtod) notes.emplace_back("DtoD Memcpy present");
  if (upcast) notes.emplace_back("FP32 upcast");
  if (mask) notes.emplace_back("causal mask materialised");
  if (r.problem.on_cuda() && r.forward.kernels_per_forward == 1.0) notes.emplace_back("single fused kernel");
  if (const ForwardStats::Kernel* k = dominant_kernel(r.forward)) {
    const KernelLaunch* l = launch_of(r, k->name);
    if (l && l->est_occupancy_pct && *l->est_occupancy_pct < 25.0)
      notes.push_back(fmt::format("low occupancy ({:.0f}%)", *l->est_occupancy_pct));
  }
  if (r.problem.on_cuda() && r.forward.cpu_time_avg_us > r.forward.device_time_avg_us)
    notes.emplace_back("CPU time above GPU time");
  if (!r.output_finite) notes.emplace_back("output has NaN/Inf");
  std::string out;
  for (size_t i = 0; i < notes.size(); ++i) out += (i ? "; " : "") + notes[i];
  return out;
}

Table at_a_glance_table(const std::vector<RunRecord>& records, const AtAGlanceOptions& opt) {
  Table t;
  t.columns = {"variant",       "status",     "kernels/fwd",  "GPU time profiled (us)", "GPU time event median (us)",
               "CPU time (us)", "vs naive",   "TFLOP/s",      "% of peak",              "peak memory",
               "math path",     "fused kernel", "launch API", "note"};
  t.numeric = {false, false, true, true, true, true, true, true, true, true, false, false, false, false};

  // Speedup by the time that is the run's cost: GPU time on CUDA, CPU time on CPU.
  auto cost = [](const RunRecord& r) {
    return r.problem.on_cuda() ? r.forward.device_time_avg_us : r.forward.cpu_time_avg_us;
  };
  std::optional<double> naive;
  for (const RunRecord& r : records)
    if (r.variant == "naive" && r.status == "ok" && cost(r) > 0) naive = cost(r);

  for (const RunRecord& r : records) {
    const std::string na = "n/a";
    if (r.status != "ok") {
      t.rows.push_back({r.variant, status_cell(r), na, na, na, na, na, na, na, na, na, na, na, at_a_glance_note(r)});
      continue;
    }
    const bool cuda = r.problem.on_cuda();
    const ForwardStats& f = r.forward;
    std::string speedup = na;
    if (naive && cost(r) > 0) speedup = fmt::format("{:.2f}x", *naive / cost(r));
    std::string pct = na;
    if (cuda && r.tflops) {
      std::optional<double> peak = opt.peak_tflops;
      if (!peak)
        if (auto p = lookup_peak_tflops(r.env.device_name, r.problem.dtype)) peak = p->tflops;
      if (peak && *peak > 0) pct = fmt::format("{:.1f}%", 100.0 * *r.tflops / *peak);
    }
    std::string fused = na, api = na;
    if (const ForwardStats::Kernel* k = dominant_kernel(f)) {
      const double total = forward_kernel_time(f);
      if (total > 0 && k->total_us >= kDominantShare * total)
        fused = fmt::format("{} ({:.0f}%)", short_kernel_name(k->name), 100.0 * k->total_us / total);
      if (const KernelLaunch* l = launch_of(r, k->name); l && !l->launch_api.empty()) api = l->launch_api;
    }
    t.rows.push_back({r.variant,
                      status_cell(r),
                      cuda ? fmt::format("{:g}", f.kernels_per_forward) : na,
                      cuda ? us(f.device_time_avg_us) : na,
                      cuda && r.timing ? us(r.timing->median_us) : na,
                      us(f.cpu_time_avg_us),
                      speedup,
                      r.tflops ? fmt::format("{:.3g}", *r.tflops) : na,
                      pct,
                      r.peak_memory_bytes ? format_bytes(*r.peak_memory_bytes) : na,
                      cuda ? math_path(r) : na,
                      fused,
                      api,
                      at_a_glance_note(r)});
  }
  return t;
}

std::string at_a_glance_header(const std::vector<RunRecord>& records, const AtAGlanceOptions& opt) {
  if (records.empty()) return "attnprof at a glance: no runs";
  const RunRecord& r = records.front();
  std::string device_name;
  for (const RunRecord& x : records)
    if (!x.env.device_name.empty()) device_name = x.env.device_name;
  std::string peak;
  if (r.problem.on_cuda()) {
    if (opt.peak_tflops) peak = fmt::format("; peak {:g} TFLOP/s (--peak-tflops)", *opt.peak_tflops);
    else if (auto p = lookup_peak_tflops(device_name, r.problem.dtype))
      peak = fmt::format("; peak {:g} TFLOP/s, {} {}", p->tflops, p->gpu, p->basis);
    else peak = "; peak unknown (use --peak-tflops)";
  }
  return fmt::format("attnprof at a glance: {} {} {} on {} ({}{})", r.problem.shape_string(),
                     dtype_name(r.problem.dtype), r.problem.causal ? "causal" : "non-causal", r.problem.device,
                     device_name.empty() ? "unknown device" : device_name, peak);
}

std::vector<std::string> write_at_a_glance(const std::vector<RunRecord>& records, const std::string& out_dir,
                                           const AtAGlanceOptions& opt) {
  if (records.empty()) throw std::invalid_argument("write_at_a_glance: no records");
  const Table t = at_a_glance_table(records, opt);
  const std::string dir = io::join_path(out_dir, "compare");
  io::ensure_writable_dir(dir);
  const std::string stem = io::join_path(dir, records.front().problem.file_stem());
  std::vector<std::string> paths = write_table_files(t, stem);
  const std::string header = at_a_glance_header(records, opt);
  io::write_file_atomic(stem + ".txt", header + "\n\n" + to_text(t));
  io::write_file_atomic(stem + ".md", "**" + header + "**\n\n" + to_markdown(t));
  return paths;
}

}  // namespace attnprof::report
