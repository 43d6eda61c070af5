#include "attnprof/session.h"

#include <ATen/ATen.h>
#include <c10/util/Exception.h>

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>

#include "attnprof/device.h"
#include "attnprof/device_memory.h"
#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "attnprof/report/counter_report.h"
#include "attnprof/report/key_averages.h"
#include "attnprof/report/launch_facts.h"
#include "attnprof/report/memory_predictor.h"
#include "attnprof/report/run_plan.h"
#include "attnprof/report/scope_stats.h"
#include "attnprof/report/summary.h"
#include "attnprof/report/table_data.h"
#include "attnprof/variant.h"
#include "profiler/calibration.h"
#include "profiler/counters.h"
#include "profiler/pass_step.h"
#include "profiler/runner.h"
#include "profiler/step_progress.h"
#include "variants/torch_problem.h"

namespace attnprof {

namespace {

std::vector<std::string> split_nonempty_lines(const std::string& s) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start < s.size()) {
    size_t end = s.find('\n', start);
    if (end == std::string::npos) end = s.size();
    if (end > start) lines.push_back(s.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// "CPUAllocator.cpp:245: Memory block ..." from c10's log line
// "[W1130 12:00:00.123456 4242 CPUAllocator.cpp:245] Memory block ...".
std::string without_log_prefix(const std::string& line) {
  if (line.size() < 4 || line[0] != '[' || std::string("WEIF").find(line[1]) == std::string::npos) return line;
  const size_t close = line.find("] ");
  if (close == std::string::npos) return line;
  const std::string head = line.substr(1, close - 1);
  const size_t space = head.rfind(' ');
  return (space == std::string::npos ? head : head.substr(space + 1)) + ": " + line.substr(close + 2);
}

// The directory Kineto saves its trace in, under a name it keeps intact:
// Kineto deletes line breaks from the file name and turns backslashes into
// slashes before it renames its temp into place (output_json.cpp), so a
// --out holding either is reached through /proc/self/fd instead.
class ScratchDir {
 public:
  explicit ScratchDir(const std::string& dir) {
    if (dir.find_first_of("\n\\") == std::string::npos) return;
    fd_ = ::open(dir.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC);
    struct stat st {};
    if (fd_ < 0 || ::stat(("/proc/self/fd/" + std::to_string(fd_)).c_str(), &st) != 0 || !S_ISDIR(st.st_mode))
      throw io::FileError("cannot profile into '" + dir +
                          "': the profiler cannot save a trace under a path with a line break or a backslash "
                          "without /proc/self/fd; choose another --out");
  }
  ~ScratchDir() {
    if (fd_ >= 0) ::close(fd_);
  }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  // `path` (in the directory) as Kineto is to be given it.
  std::string path_for(const std::string& path) const {
    if (fd_ < 0) return path;
    return "/proc/self/fd/" + std::to_string(fd_) + "/" + path.substr(path.rfind('/') + 1);
  }

 private:
  int fd_ = -1;
};

// "" when a step should fit, else why not ("needs ~4.4 GiB (predicted), 2 GiB free").
std::string predicted_not_to_fit(const Variant& v, const Problem& p) {
  const std::optional<MemoryBudget> budget = available_memory(p.device);
  if (!budget) return "";
  const auto need = report::predict_memory(p, v.memory_family(), !v.reads_pages());
  if (need && need->peak_bytes <= budget->bytes) return "";
  return "needs ~" + (need ? report::format_bytes(double(need->peak_bytes)) : std::string("more than 16 EiB")) +
         " (predicted), " + report::format_bytes(double(budget->bytes)) + " " + budget->what;
}

// How the variant read the paged cache: through the block table in its
// kernel, or gathered into contiguous K/V first (inside the measured scope).
std::string paged_kv_fact(const Variant& v, const Problem& p) {
  const std::string cache = std::to_string(p.batch * p.pages_per_sequence()) + " pages of " +
                            std::to_string(p.page_size) + (p.page_size == 1 ? " token" : " tokens") +
                            " in a random order";
  if (v.reads_pages()) return cache + ", read through the block table in the kernel (no gather)";
  return cache + ", gathered into contiguous K/V inside the measured scope (aten::index, then a copy into "
                 "[batch, heads, seq, head_dim]) before attention: what a server without a paged kernel pays";
}

// How the variant ran the variable-length batch: packed through cu_seqlens,
// or padded to the longest sequence under a mask (the waste it computes).
std::string varlen_fact(const Variant& v, const Problem& p) {
  const auto [lo, hi] = std::minmax_element(p.seqlens.begin(), p.seqlens.end());
  const auto plural = [](int64_t n, const char* one, const char* many) {
    return std::to_string(n) + " " + (n == 1 ? one : many);
  };
  const std::string keys = *lo == *hi ? plural(*hi, "key", "keys")
                                      : std::to_string(*lo) + "-" + std::to_string(*hi) + " keys";
  const std::string batch = plural(p.batch, "sequence", "sequences") + " of " + keys +
                            (p.seq_q == p.seq_kv ? " and as many queries"
                                                 : ", " + plural(p.seq_q, "query", "queries") + " each");
  if (v.reads_packed()) return batch + ", packed (cu_seqlens): only the real tokens are computed";
  if (p.padding_share() == 0.0) return batch + ", run as a padded batch with nothing to pad (one length)";
  return batch + ", padded to " + std::to_string(p.seq_kv) + ": a [batch, 1, seq_q, seq_kv] mask hides the padding, " +
         std::to_string(int(p.padding_share() * 100.0 + 0.5)) +
         "% of the padded query-key area, computed and then masked" +
         (p.varlen_padded ? " (--varlen-layout padded)" : "");
}

std::string trace_metadata(const RunRecord& r) {
  nlohmann::json meta = {{"variant", r.variant},
                         {"problem", report::problem_json(r.problem)},
                         {"device", r.problem.device},
                         {"device_name", r.env.device_name},
                         {"torch_version", r.env.torch_version},
                         {"attnprof_version", r.env.attnprof_version}};
  return meta.dump();
}

// 32 upper-case hex digits, as torch.profiler's default_trace_id (a UUID4).
std::string new_trace_id() {
  std::random_device rd;
  std::string id;
  for (int i = 0; i < 4; ++i) id += fmt::format("{:08X}", rd());
  return id;
}

void finish_record(RunRecord& r, const ProfiledRun& run) {
  const Problem& p = r.problem;
  const std::vector<FunctionEvent> fes = build_function_events(run.events, p.on_cuda(), r.profiler.profile_memory);
  r.rows = key_averages(fes);
  for (const std::string& scope : pass_scopes(p.pass)) r.scopes.push_back(scope_stats(fes, scope));
  r.peak_memory_bytes = run.peak_memory_bytes;
  r.tflops = achieved_tflops(p.flops(), r.cost_us());
  if (r.timing && r.timing->median_us > 0.0) r.profiler_overhead = r.cost_us() / r.timing->median_us;
  if (!r.output_finite) r.warnings.push_back(p.pass == Pass::fwd ? "output contains NaN or Inf"
                                                                  : "output or gradients contain NaN or Inf");
  for (const std::string& line : split_nonempty_lines(run.trace_save_messages))
    r.warnings.push_back("Kineto, while saving the trace: " + line);
  // Each distinct message once, with its count: LibTorch repeats them per allocation.
  std::vector<std::pair<std::string, int>> seen;
  for (const std::string& line : split_nonempty_lines(run.profiling_messages)) {
    const std::string m = without_log_prefix(line);
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& e) { return e.first == m; });
    if (it == seen.end()) seen.emplace_back(m, 1);
    else ++it->second;
  }
  for (const auto& [m, n] : seen)
    r.warnings.push_back("LibTorch, while profiling" + (n > 1 ? " (" + std::to_string(n) + " times)" : std::string()) +
                         ": " + m);
}

// The counter pass and the ceilings it is judged against, on their own after
// everything timed. A stop signal during it is recorded (the pass says
// interrupted) and returned as true, so the record keeps what was measured.
bool count_hardware(RunRecord& r, Variant& variant, const Problem& p, const Inputs& in, StepProgress& progress) {
  report::CounterPass& pass = r.counters.emplace();
  const auto t0 = std::chrono::steady_clock::now();
  try {
    progress.begin(RunPhase::counters, 0);
    pass = collect_counters(variant, p, in);
    throw_if_interrupted();  // a stop during the pass, also one the collector finished through
    if (pass.state != report::CounterPass::State::collected) return false;
    progress.begin(RunPhase::calibrating, 0);
    try {
      Calibration cal = device_ceilings(p);
      pass.ceilings = std::move(cal.ceilings);
      r.warnings.insert(r.warnings.end(), cal.notes.begin(), cal.notes.end());
    } catch (const Interrupted&) {
      throw;
    } catch (const std::exception& e) {
      // Without ceilings the DRAM figures fall back to the hardware's own peak.
      r.warnings.push_back("ceilings not measured: " + first_line(e.what()));
    }
    throw_if_interrupted();
    return false;
  } catch (const Interrupted&) {
    pass.state = report::CounterPass::State::interrupted;
    pass.reason = "stopped by signal " + std::to_string(interrupt_signal());
    pass.kernels.clear();
    pass.wall_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return true;
  } catch (const std::exception& e) {
    pass.state = report::CounterPass::State::failed;
    pass.reason = first_line(e.what());
    pass.kernels.clear();
    return false;
  }
}

// The float64 reference's size: 16 Mi score elements on a GPU (128 MiB of
// float64 per temporary), 2 Mi on the CPU (about a GFLOP at head_dim 128).
int64_t reference_budget(const Problem& p) { return p.on_cuda() ? int64_t{1} << 24 : int64_t{1} << 21; }

std::optional<Accuracy> measure_accuracy(const Problem& p, const Inputs& in, const at::Tensor& out,
                                         std::vector<std::string>& warnings) {
  try {
    Accuracy a = sampled_output_error(p, in, out, reference_budget(p));
    if (!std::isfinite(a.rel_error)) return std::nullopt;
    if (in.fp8.defined()) a.input_quantisation_error = sampled_quantisation_error(p, in, reference_budget(p));
    return a;
  } catch (const c10::Error& e) {
    // The reference did not fit next to the run's own tensors: the run stands without it.
    release_cached_memory(p.device);
    const std::string why = first_line(e.what_without_backtrace());
    warnings.push_back("error vs fp64 not measured: " +
                       (is_out_of_memory_reason(why) ? "out of memory: " + out_of_memory_words(why) : why));
    return std::nullopt;
  }
}

}  // namespace

Measurement run_variant(const std::string& name, const Problem& p, const MeasureOptions& opt) {
  Measurement out;
  RunRecord& r = out.record;
  r.variant = name;
  r.problem = p;
  r.schedule = opt.schedule;
  if (r.schedule.warmup_iters == kAutoIters) r.schedule.warmup_iters = 0;  // none ran yet
  r.profiler = opt.profiler;
  if (opt.startup_ms) r.phases_ms.emplace_back("program start to main (loading LibTorch)", *opt.startup_ms);
  PhaseClock clock;  // from here: the first CUDA call creates the context
  r.env = describe_environment(p);

  std::unique_ptr<Variant> variant = make_variant(name);
  if (!variant) {
    r.status = Status::failed;
    r.reason = "unknown variant";
    return out;
  }
  r.description = variant->description();
  const VariantEntry* entry = find_variant(name);
  const bool multi_gpu = entry && entry->has(VariantTag::multi_gpu);
  if (const Support support = variant->supports(p); !support.ok) {
    r.status = Status::skipped;
    r.reason = support.reason;
    return out;
  }
  if (const std::string why = predicted_not_to_fit(*variant, p); !why.empty()) {
    r.status = Status::skipped;
    r.reason = why;
    return out;
  }

  const std::string scratch = io::join_path(opt.scratch_dir, name + "_" + p.file_stem() + ".json");
  io::remove_stale_temps_of(scratch);
  const ScratchDir kineto_dir(opt.scratch_dir);  // FileError: before any work
  io::TempFile kineto_trace(kineto_dir.path_for(io::temp_path_for(scratch)));
  ProfiledRun run;
  report::PlanRequest plan;
  plan.schedule = opt.schedule;
  plan.timing_iters = opt.timing_iters;
  plan.cuda = p.on_cuda();
  StepProgress progress(opt.progress, plan);
  // The record holds the warm-up steps that ran, also when the run stops early.
  auto record_warmup = [&] { r.schedule.warmup_iters = progress.warmup_steps(); };
  clock.lap("device, environment, support check", r.phases_ms);
  bool counters_interrupted = false;
  try {
    at::manual_seed(p.seed);
    const Inputs in = random_inputs(p);
    variant->prepare(p, in.q, in.k, in.v);
    clock.lap("inputs and prepare", r.phases_ms);
    for (const Fact& f : variant->facts()) r.facts.emplace_back(f.key, f.value);
    if (p.paged()) r.facts.emplace_back("kv cache", paged_kv_fact(*variant, p));
    if (p.varlen()) r.facts.emplace_back("variable lengths", varlen_fact(*variant, p));
    const int first_touch = first_touch_steps(p, timing_input_set_count(p, in));
    progress.plan_timing(opt.timing_iters, first_touch);
    RunnerOptions ro;
    ro.schedule = opt.schedule;
    ro.trace_path = kineto_trace.path();
    ro.trace_metadata_json = trace_metadata(r);
    ro.extra_trace_metadata = opt.trace_metadata;
    ro.profiler = opt.profiler;
    ro.trace_id = new_trace_id();
    run = profile_pass(*variant, p, in, ro, progress);
    record_warmup();
    r.phases_ms.insert(r.phases_ms.end(), run.phases_ms.begin(), run.phases_ms.end());
    clock = PhaseClock();
    // Auto: as many as fit the budget at the pace of the fastest step.
    const int timing_iters =
        opt.timing_iters == kAutoIters ? report::auto_timing_iters(run.min_step_seconds) : opt.timing_iters;
    progress.plan_timing(timing_iters, first_touch);
    r.timing = time_pass(*variant, p, in, timing_iters, progress);
    clock.lap("unprofiled timing", r.phases_ms);
    progress.begin(RunPhase::checking, 1);
    // Outside every timed region: a fast variant that returns NaN, or far
    // from the float64 answer, is not fast.
    {
      const PassOutputs outputs = check_pass_outputs(*variant, p, in);
      r.output_finite = outputs.finite;
      // A rank of a multi-GPU variant holds its shard of the output, in its layout's order, not the output.
      if (outputs.finite && !multi_gpu)
        r.accuracy = measure_accuracy(p, in, outputs.out, r.warnings);
    }
    progress.unit_done(RunPhase::checking, 1, 1, 1, -1.0);
    clock.lap("NaN and error checks", r.phases_ms);
    if (opt.counters && p.on_cuda() && !multi_gpu) {
      counters_interrupted = count_hardware(r, *variant, p, in, progress);
      clock.lap("hardware counters and ceilings", r.phases_ms);
    } else if (opt.counters) {
      report::CounterPass& pass = r.counters.emplace();
      pass.state = report::CounterPass::State::unavailable;
      // Kernel replay runs one kernel at a time; a ring's NCCL kernels would wait on peers that are not replaying.
      pass.reason = p.on_cuda() ? "multi-GPU variants are not counted: replaying a kernel alone would leave its "
                                  "NCCL peers waiting"
                                : "the problem runs on the CPU; hardware counters need a CUDA device";
    }
  } catch (const Interrupted&) {
    record_warmup();
    r.status = Status::interrupted;
    r.reason = "stopped by signal " + std::to_string(interrupt_signal());
    return out;
  } catch (const c10::Error& e) {
    // CUDA throws c10::OutOfMemoryError; the CPU allocator a plain c10::Error
    // ("DefaultCPUAllocator: not enough memory"). Both mean skip, not failure.
    record_warmup();
    const std::string why = first_line(e.what_without_backtrace());
    if (dynamic_cast<const c10::OutOfMemoryError*>(&e) || is_out_of_memory_reason(why)) {
      release_cached_memory(p.device);
      r.status = Status::skipped;
      r.reason = "out of memory: " + out_of_memory_words(why);
    } else {
      r.status = Status::failed;
      r.reason = why;
    }
    return out;
  } catch (const std::exception& e) {
    record_warmup();
    r.status = Status::failed;
    r.reason = first_line(e.what());
    return out;
  }

  finish_record(r, run);
  // Kineto reports a failed save only in its log (a full disk is the usual
  // cause): no file here means no trace, which the writers report.
  if (run.trace_saved && io::path_exists(kineto_trace.path())) out.trace_json = io::read_file(kineto_trace.path());
  kineto_trace.remove();
  if (p.on_cuda() && !out.trace_json.empty()) {
    const auto trace = nlohmann::json::parse(out.trace_json, nullptr, /*allow_exceptions=*/false);
    if (!trace.is_discarded() && !r.scopes.empty()) {
      std::vector<ScopeStats::Launch> first_step;
      for (const ScopeStats& s : r.scopes) first_step.insert(first_step.end(), s.first_call.begin(), s.first_call.end());
      r.launches = report::launch_facts(trace, first_step);
    }
  }
  r.device_limits = device_limits(p);
  if (r.device_limits) report::fill_launch_occupancy(r.launches, *r.device_limits);
  if (r.counters) name_counted_kernels(*r.counters, r.scopes);
  if (r.counters && r.counters->state == report::CounterPass::State::collected) report::complete_counters(*r.counters, r);
  clock.lap("aggregate events, read trace", r.phases_ms);
  if (counters_interrupted) {
    r.status = Status::interrupted;
    r.reason = "stopped by signal " + std::to_string(interrupt_signal()) + " during the counter pass";
  }
  return out;
}

}  // namespace attnprof
