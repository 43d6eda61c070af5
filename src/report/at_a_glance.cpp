#include "attnprof/report/at_a_glance.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <stdexcept>

#include "attnprof/io/files.h"
#include "attnprof/report/counter_report.h"
#include "attnprof/report/fingerprint.h"
#include "attnprof/report/kernel_names.h"
#include "attnprof/report/summary.h"
#include "attnprof/report/table_data.h"

namespace attnprof::report {
namespace {

struct KnownGpu {
  const char* match;  // case-insensitive substring of the device name
  const char* name;
  double bf16, fp16, fp32;  // dense TFLOP/s; 0 = no tensor-core path for that dtype
  double dram_gbps;         // memory bandwidth; 0 = not one figure for every model of that name
  double fp8;               // dense e4m3 TFLOP/s, fp32 accumulate; 0 = no fp8 tensor cores
};

// NVIDIA datasheets, dense (the "with sparsity" figures halved), 16-bit and
// fp8 with fp32 accumulate; memory bandwidth in GB/s. More specific names first:
// "H100 PCIe" before "H100", "A100" and "A10G" before "A10", "L40S" and "L40" before "L4".
constexpr std::array<KnownGpu, 18> kKnownGpus{{
    {"B200", "B200", 2250, 2250, 75, 8000, 4500},
    {"H200 NVL", "H200 NVL", 835, 835, 60, 4800, 1670},
    {"H200", "H200 SXM", 989.4, 989.4, 66.9, 4800, 1978.9},
    {"H100 PCIe", "H100 PCIe", 756.5, 756.5, 51.2, 2000, 1513},
    {"H100 NVL", "H100 NVL", 835, 835, 60, 3900, 1670},
    {"H100", "H100 SXM", 989.4, 989.4, 66.9, 3350, 1978.9},
    {"H800", "H800 SXM", 989.4, 989.4, 66.9, 3350, 1978.9},
    {"A100", "A100", 312, 312, 19.5, 0, 0},
    {"A10G", "A10G", 70, 70, 31.2, 600, 0},
    {"A30", "A30", 165, 165, 10.3, 933, 0},
    {"A10", "A10", 125, 125, 31.2, 600, 0},
    {"L40S", "L40S", 362, 362, 91.6, 864, 733},
    {"L40", "L40", 181, 181, 90.5, 864, 362},
    {"L4", "L4", 121, 121, 30.3, 300, 242.5},
    {"RTX 6000 Ada", "RTX 6000 Ada", 364, 364, 91.1, 960, 728.5},
    {"RTX 4090", "RTX 4090", 165.2, 165.2, 82.6, 1008, 330.3},
    {"V100", "V100", 0, 125, 15.7, 900, 0},
    {"T4", "T4", 0, 65, 8.1, 320, 0},
}};

bool contains_nocase(const std::string& hay, const std::string& needle) {
  auto it = std::search(hay.begin(), hay.end(), needle.begin(), needle.end(), [](char a, char b) {
    return std::tolower(static_cast<unsigned char>(a)) == std::tolower(static_cast<unsigned char>(b));
  });
  return it != hay.end();
}

bool contains(const std::string& s, const char* needle) { return s.find(needle) != std::string::npos; }

const KernelStats* dominant_kernel(const std::vector<KernelStats>& kernels) {
  const KernelStats* best = nullptr;
  for (const auto& k : kernels)
    if (!best || k.time_avg_us > best->time_avg_us) best = &k;
  return best;
}

double kernel_time(const std::vector<KernelStats>& kernels) {
  double t = 0;
  for (const auto& k : kernels) t += k.time_avg_us;
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
  const std::vector<KernelStats> kernels = r.kernels();
  const KernelStats* best = nullptr;
  KernelFingerprint best_fp;
  for (const auto& k : kernels) {
    const KernelFingerprint fp = fingerprint_kernel(k.name);
    if (!is_matmul_family(fp.family)) continue;
    if (fp.math_unit != MathUnit::tensor_cores && fp.math_unit != MathUnit::cuda_cores) continue;
    if (!best || k.time_avg_us > best->time_avg_us) best = &k, best_fp = fp;
  }
  if (!best) return "n/a";
  // nvjet's `h` and cuDNN's `f16` say only "16-bit"; the inputs say which.
  std::string precision(precision_name(best_fp.precision));
  if (best_fp.precision == Precision::sixteen_bit && r.problem.dtype != DType::FP32)
    precision = dtype_name(output_dtype(r.problem.dtype));  // fp8 inputs dequantised: bf16
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

// "fwd" for a forward run, "step" otherwise: what the per-unit columns count.
const char* per_word(const std::vector<RunRecord>& records) {
  return records.empty() || records.front().problem.pass == Pass::fwd ? "fwd" : "step";
}

// The measured GEMM ceiling of the run's dtype, from its counter pass's calibration.
std::optional<double> measured_peak(const RunRecord& r) {
  if (!r.counters || !r.counters->ceilings) return std::nullopt;
  return gemm_ceiling_tflops(*r.counters->ceilings, dtype_name(r.problem.dtype));
}

// What "% of peak" divides by: --peak-tflops, else the measured ceiling, else the datasheet.
std::optional<double> peak_for(const RunRecord& r, const AtAGlanceOptions& opt) {
  if (opt.peak_tflops) return opt.peak_tflops;
  if (const auto m = measured_peak(r)) return m;
  if (auto p = lookup_peak_tflops(r.env.device_name, r.problem.dtype)) return p->tflops;
  return std::nullopt;
}

bool any_counters(const std::vector<RunRecord>& records) {
  return std::any_of(records.begin(), records.end(), [](const RunRecord& r) { return r.counters.has_value(); });
}

}  // namespace

std::optional<DevicePeak> lookup_peak_tflops(const std::string& device_name, DType dtype) {
  for (const KnownGpu& g : kKnownGpus) {
    if (!contains_nocase(device_name, g.match)) continue;
    const double v = dtype == DType::BF16 ? g.bf16 : dtype == DType::FP16 ? g.fp16 : dtype == DType::FP8 ? g.fp8 : g.fp32;
    if (v <= 0) return std::nullopt;
    const std::string basis = dtype == DType::FP32  ? "fp32 CUDA cores"
                              : dtype == DType::FP8 ? "fp8 (e4m3) tensor cores, dense"
                                                    : fmt::format("{} tensor cores, dense", dtype_name(dtype));
    return DevicePeak{g.name, v, basis};
  }
  return std::nullopt;
}

std::optional<double> lookup_spec_dram_gbps(const std::string& device_name) {
  for (const KnownGpu& g : kKnownGpus)
    if (contains_nocase(device_name, g.match)) return g.dram_gbps > 0 ? std::optional<double>(g.dram_gbps) : std::nullopt;
  return std::nullopt;
}

std::string at_a_glance_note(const RunRecord& r) {
  if (!r.ok()) return fmt::format("{}: {}", status_name(r.status), r.reason);
  std::vector<std::string> notes;
  const bool sixteen = r.problem.dtype != DType::FP32;
  bool dtod = false, upcast = false, mask = false;
  const std::vector<KernelStats> kernels = r.kernels();
  for (const auto& k : kernels) {
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
  if (mask) notes.emplace_back(r.problem.windowed() ? "causal window mask materialised" : "causal mask materialised");
  if (r.problem.paged()) {
    // A variant without a paged kernel gathers the pages first (aten::index, then a copy).
    const bool gathered = std::any_of(r.rows.begin(), r.rows.end(), [](const OpStats& s) { return s.name == "aten::index"; });
    notes.emplace_back(gathered ? "KV pages gathered first" : "KV pages read in the kernel");
  }
  if (r.problem.varlen()) {
    // The session's fact says how the variant took the batch (packed through cu_seqlens, or padded).
    const bool packed = std::any_of(r.facts.begin(), r.facts.end(), [](const auto& f) {
      return f.first == "variable lengths" && f.second.find("packed") != std::string::npos;
    });
    notes.push_back(packed ? std::string("packed batch (real tokens only)")
                           : fmt::format("padded batch ({:.0f}% padding computed)", r.problem.padding_share() * 100.0));
  }
  if (r.problem.on_cuda() && r.kernels_per_step() == 1.0) notes.emplace_back("single fused kernel");
  if (const KernelStats* k = dominant_kernel(kernels)) {
    const KernelLaunch* l = launch_of(r, k->name);
    // CUPTI's estimate only: the formula would flag every persistent one-block-per-SM
    // kernel (cuDNN's, ours: 19% by design), which the counters judge better.
    if (l && l->est_occupancy_pct && *l->est_occupancy_pct < 25.0)
      notes.push_back(fmt::format("low occupancy ({:.0f}%)", *l->est_occupancy_pct));
  }
  if (r.problem.on_cuda() && r.cpu_time_us() > r.device_time_us())
    notes.emplace_back("CPU time above GPU time");
  if (!r.output_finite) notes.emplace_back("output has NaN/Inf");
  // The column's error is against the dequantised inputs; their rounding to e4m3 comes on top.
  if (r.accuracy && r.accuracy->input_quantisation_error)
    notes.push_back(fmt::format("e4m3 inputs{} move the fp64 output by {:.2g}",
                                r.problem.fp8_rotated ? " (q, k rotated)" : "", *r.accuracy->input_quantisation_error));
  std::string out;
  for (size_t i = 0; i < notes.size(); ++i) out += (i ? "; " : "") + notes[i];
  return out;
}

Table at_a_glance_table(const std::vector<RunRecord>& records, const AtAGlanceOptions& opt) {
  using S = NumberFormat::Style;
  const std::string per = per_word(records);
  const std::string base = opt.baseline.empty() ? "baseline" : opt.baseline;
  Table t;
  t.columns = {text_column("variant", "variant"),
               text_column("status", "status"),
               number_column("kernels/" + per, "kernels_per_" + per, {S::general, 6}),
               number_column("GPU time profiled (us)", "gpu_time_profiled_us", {S::fixed, 1}),
               number_column("GPU time event median (us)", "gpu_time_event_median_us", {S::fixed, 1}),
               number_column("CPU time (us)", "cpu_time_us", {S::fixed, 1}),
               number_column("vs " + base, "speedup_vs_" + base, {S::ratio, 2}),
               number_column("TFLOP/s", "tflops", {S::general, 3}),
               number_column("% of peak", "pct_of_peak", {S::percent, 1}),
               number_column("error vs fp64", "rel_error_vs_fp64", {S::general, 2}),
               number_column("peak memory", "peak_memory_bytes", {S::bytes, 0}),
               text_column("math path", "math_path"),
               text_column("fused kernel", "fused_kernel"),
               text_column("launch API", "launch_api")};
  // With --counters: the dominant (longest counted) kernel's figures and verdict.
  const bool counters = any_counters(records);
  if (counters)
    for (Column c : {number_column("DRAM %", "dram_pct", {S::percent, 0}),
                     number_column("tensor pipe %", "tensor_pipe_pct", {S::percent, 0}),
                     number_column("occupancy", "achieved_occupancy_pct", {S::percent, 0}),
                     text_column("verdict", "verdict")})
      t.columns.push_back(std::move(c));
  t.columns.push_back(text_column("note", "note"));

  // Speedup by the time that is the run's cost: GPU time on CUDA, CPU time on CPU.
  std::optional<double> baseline;
  for (const RunRecord& r : records)
    if (r.variant == opt.baseline && r.ok() && r.cost_us() > 0) baseline = r.cost_us();

  const Cell na;
  for (const RunRecord& r : records) {
    if (!r.ok()) {
      std::vector<Cell> row(t.columns.size(), na);
      row[0] = r.variant, row[1] = status_name(r.status), row.back() = at_a_glance_note(r);
      t.rows.push_back(std::move(row));
      continue;
    }
    const bool cuda = r.problem.on_cuda();
    std::optional<double> speedup;
    if (baseline && r.cost_us() > 0) speedup = *baseline / r.cost_us();
    std::optional<double> pct;
    if (cuda && r.tflops)
      if (const auto peak = peak_for(r, opt); peak && *peak > 0) pct = 100.0 * *r.tflops / *peak;
    Cell fused = na, api = na;
    const std::vector<KernelStats> kernels = r.kernels();
    if (const KernelStats* k = dominant_kernel(kernels)) {
      const double total = kernel_time(kernels);
      if (total > 0 && k->time_avg_us >= kDominantShare * total)
        fused = fmt::format("{} ({:.0f}%)", short_kernel_name(k->name), 100.0 * k->time_avg_us / total);
      if (const KernelLaunch* l = launch_of(r, k->name); l && !l->launch_api.empty()) api = l->launch_api;
    }
    std::vector<Cell> row = {r.variant,
                             status_name(r.status),
                             cuda ? number_cell(r.kernels_per_step()) : na,
                             cuda ? number_cell(r.device_time_us()) : na,
                             cuda && r.timing ? number_cell(r.timing->median_us) : na,
                             number_cell(r.cpu_time_us()),
                             number_cell(speedup),
                             number_cell(r.tflops),
                             number_cell(pct),
                             r.accuracy ? number_cell(r.accuracy->rel_error) : na,
                             number_cell(r.peak_memory_bytes),
                             cuda ? Cell(math_path(r)) : na,
                             fused,
                             api};
    if (counters) {
      const KernelCounters* k = r.counters ? dominant_counted_kernel(*r.counters) : nullptr;
      if (k) {
        const KernelFigures f = kernel_figures(*k, r.counters->ceilings);
        row.insert(row.end(), {number_cell(f.dram_pct), number_cell(k->values.tensor_active_pct),
                               number_cell(k->values.achieved_occupancy_pct), Cell(f.verdict.text)});
      } else {
        row.insert(row.end(), {na, na, na, r.counters ? Cell(counter_state_name(r.counters->state)) : na});
      }
    }
    row.push_back(at_a_glance_note(r));
    t.rows.push_back(std::move(row));
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
  std::optional<double> measured;
  for (const RunRecord& x : records)
    if (!measured) measured = measured_peak(x);
  if (r.problem.on_cuda()) {
    const auto spec = lookup_peak_tflops(device_name, r.problem.dtype);
    if (opt.peak_tflops) peak = fmt::format("; peak {:g} TFLOP/s (--peak-tflops)", *opt.peak_tflops);
    else if (measured)
      peak = fmt::format("; peak {:.0f} TFLOP/s measured ({} GEMM on this GPU{})", *measured, dtype_name(r.problem.dtype),
                         spec ? fmt::format("; datasheet {:g}", spec->tflops) : "");
    else if (auto p = spec)
      peak = fmt::format("; peak {:g} TFLOP/s, {} {}", p->tflops, p->gpu, p->basis);
    else peak = "; peak unknown (use --peak-tflops)";
  }
  return fmt::format("attnprof at a glance: {} {} on {} ({}{})", r.problem.shape_string(), r.problem.config_string(),
                     r.problem.device, device_name.empty() ? "unknown device" : device_name, peak);
}

std::vector<std::string> stage_at_a_glance(io::StagedFiles& files, const std::vector<RunRecord>& records,
                                           const std::string& out_dir, const AtAGlanceOptions& opt) {
  if (records.empty()) throw std::invalid_argument("write_at_a_glance: no records");
  const std::string dir = io::join_path(out_dir, "compare");
  files.make_dir(dir);
  return stage_table_files(files, at_a_glance_table(records, opt),
                           io::join_path(dir, records.front().problem.file_stem()), at_a_glance_header(records, opt));
}

std::vector<std::string> write_at_a_glance(const std::vector<RunRecord>& records, const std::string& out_dir,
                                           const AtAGlanceOptions& opt) {
  io::StagedFiles files;
  std::vector<std::string> paths = stage_at_a_glance(files, records, out_dir, opt);
  files.publish();
  return paths;
}

}  // namespace attnprof::report
