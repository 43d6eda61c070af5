#include "attnprof/session.h"

#include <ATen/ATen.h>
#include <sys/stat.h>
#include <c10/core/GradMode.h>
#include <c10/util/Exception.h>

#include "attnprof/device_memory.h"
#include "attnprof/forward_stats.h"
#include "attnprof/report/memory_predictor.h"
#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "attnprof/report/launch_facts.h"
#include "attnprof/report/summary.h"
#include "attnprof/runner.h"
#include "attnprof/variant.h"
#include "variants/torch_problem.h"

namespace attnprof {

SortKey default_sort_key(const Problem& p) {
  return p.on_cuda() ? SortKey::CudaTimeTotal : SortKey::CpuTimeTotal;
}

int default_timing_iters(const Problem& p) { return p.on_cuda() ? 100 : 3; }

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

// "" when the forward should fit, else why not ("needs ~4.4 GiB (predicted), 2 GiB free").
std::string predicted_not_to_fit(const Variant& v, const Problem& p) {
  const std::optional<MemoryBudget> budget = available_memory(p.device);
  if (!budget) return "";
  const report::AttentionShape shape{p.batch, p.heads, p.seq, p.head_dim, dtype_bytes(p.dtype), p.causal};
  const auto need = report::predict_forward_memory(shape, v.memory_family());
  if (need && need->peak_bytes <= budget->bytes) return "";
  return "needs ~" + (need ? report::format_bytes(double(need->peak_bytes)) : std::string("more than 16 EiB")) +
         " (predicted), " + report::format_bytes(double(budget->bytes)) + " " + budget->what;
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

// Kineto writes its trace itself (to `kineto_path` + ".tmp", then renamed); we let
// it write beside the target and then compress (or just rename) it into place,
// so a crash never leaves a partial trace. Returns the trace text, which also
// holds the kernels' launch details.
std::string place_trace(const std::string& kineto_path, const std::string& target, bool gzip) {
  struct stat st {};
  if (::stat(kineto_path.c_str(), &st) != 0) {
    // Kineto reports a failed save only in its log; a full disk is the usual cause.
    const std::string dir = target.substr(0, target.rfind('/') + 1);
    const auto left = io::free_bytes(dir.empty() ? "." : dir);
    throw io::FileError("cannot write '" + target + "': the profiler could not save its trace (" +
                        (left ? report::format_bytes(double(*left)) + " free there" : std::string("free space unknown")) +
                        (left && *left < (1u << 20) ? ": No space left on device)" : ")"));
  }
  std::string json = io::read_file(kineto_path);
  io::remove_quietly(kineto_path);
  io::write_file_atomic(target, gzip ? io::gzip_compress(json) : json);
  return json;
}

// Kineto's file and its own temporary, whatever state they are in.
void remove_kineto_files(const std::string& kineto_path) noexcept {
  io::remove_quietly(kineto_path);
  io::remove_quietly(kineto_path + ".tmp");
}

}  // namespace

VariantOutcome run_variant(const std::string& name, const Problem& p, const SessionOptions& opt) {
  VariantOutcome out;
  RunRecord& r = out.record;
  r.variant = name;
  r.problem = p;
  r.schedule = opt.schedule;
  if (opt.startup_ms) r.phases_ms.emplace_back("process start to main (loading LibTorch)", *opt.startup_ms);
  PhaseClock clock;  // from here: the first CUDA call creates the context
  r.env = describe_environment(p);

  std::unique_ptr<Variant> variant = make_variant(name);
  if (!variant) {
    r.status = "failed";
    r.reason = "unknown variant";
    return out;
  }
  r.description = variant->description();
  const Support support = variant->supports(p);
  if (!support.ok) {
    r.status = "skipped";
    r.reason = support.reason;
    return out;
  }

  if (const std::string why = predicted_not_to_fit(*variant, p); !why.empty()) {
    r.status = "skipped";
    r.reason = why;
    return out;
  }

  const std::string dir = io::join_path(opt.out_dir, name);
  io::ensure_writable_dir(dir);
  const std::string stem = p.file_stem();
  r.trace_file = io::join_path(name, stem + (opt.gzip ? ".json.gz" : ".json"));
  r.table_file = io::join_path(name, stem + ".txt");
  r.summary_file = io::join_path(name, stem + ".summary.json");
  const std::string kineto_tmp = io::temp_path_for(io::join_path(dir, stem + ".json"));

  ProfiledRun run;
  clock.lap("device, environment, support check", r.phases_ms);
  try {
    at::manual_seed(p.seed);
    const Inputs in = random_inputs(p);
    variant->prepare(p, in.q, in.k, in.v);
    clock.lap("inputs and prepare", r.phases_ms);
    for (const Fact& f : variant->facts()) r.facts.emplace_back(f.key, f.value);
    RunnerOptions ro;
    ro.schedule = opt.schedule;
    ro.trace_path = kineto_tmp;
    ro.trace_metadata_json = trace_metadata(r);
    run = profile_forward(*variant, p, in.q, in.k, in.v, ro);
    r.phases_ms.insert(r.phases_ms.end(), run.phases_ms.begin(), run.phases_ms.end());
    clock = PhaseClock();
    r.timing = time_forward(*variant, p, in.q, in.k, in.v,
                            opt.timing_iters >= 0 ? opt.timing_iters : default_timing_iters(p));
    {
      // Outside every timed region: a fast variant that returns NaN is not fast.
      c10::NoGradGuard no_grad;
      r.output_finite = at::isfinite(variant->forward(in.q, in.k, in.v)).all().item<bool>();
    }
    clock.lap("unprofiled timing and NaN check", r.phases_ms);
  } catch (const Interrupted&) {
    // Stopped at a step boundary: nothing of this variant but its summary, which
    // says so; the variants before it keep their files.
    remove_kineto_files(kineto_tmp);
    r.status = "interrupted";
    r.reason = "stopped by signal " + std::to_string(interrupt_signal());
    io::write_file_atomic(io::join_path(opt.out_dir, r.summary_file), report::summary_json(r).dump(2) + "\n");
    r.trace_file.clear(), r.table_file.clear();
    return out;
  } catch (const c10::Error& e) {
    // CUDA throws c10::OutOfMemoryError; the CPU allocator a plain c10::Error
    // ("DefaultCPUAllocator: not enough memory"). Both mean skip, not failure.
    remove_kineto_files(kineto_tmp);
    const std::string why = first_line(e.what_without_backtrace());
    if (dynamic_cast<const c10::OutOfMemoryError*>(&e) || is_out_of_memory_reason(why)) {
      release_cached_memory(p.device);
      r.status = "skipped";
      r.reason = "out of memory: " + why;
    } else {
      r.status = "failed";
      r.reason = why;
    }
    return out;
  } catch (const std::exception& e) {
    remove_kineto_files(kineto_tmp);
    r.status = "failed";
    r.reason = e.what();
    return out;
  }

  const std::vector<FunctionEvent> fes = build_function_events(run.events, p.on_cuda());
  r.rows = key_averages(fes);
  r.forward = forward_stats(fes, kForwardScope);
  r.peak_memory_bytes = run.peak_memory_bytes;
  const double profiled_us = p.on_cuda() ? r.forward.device_time_avg_us : r.forward.cpu_time_avg_us;
  r.tflops = achieved_tflops(p.flops(), profiled_us);
  if (r.timing && r.timing->median_us > 0.0) r.profiler_overhead = profiled_us / r.timing->median_us;
  if (!r.output_finite) r.warnings.push_back("output contains NaN or Inf");

  TableOptions table_opt;
  table_opt.sort_by = opt.sort_by.value_or(default_sort_key(p));
  table_opt.row_limit = opt.row_limit;
  out.table = format_key_averages_table(r.rows, table_opt);

  std::string trace_text;
  try {
    // A failed save becomes one error line of ours; Kineto's own log line about
    // it ("Failed to write to log file!") is dropped with it.
    trace_text = place_trace(kineto_tmp, io::join_path(opt.out_dir, r.trace_file), opt.gzip);
  } catch (...) {
    remove_kineto_files(kineto_tmp);
    throw;
  }
  for (const std::string& line : split_nonempty_lines(run.trace_save_messages))
    r.warnings.push_back("Kineto, while saving the trace: " + line);
  if (p.on_cuda()) {
    const auto trace = nlohmann::json::parse(trace_text, nullptr, /*allow_exceptions=*/false);
    if (!trace.is_discarded()) r.launches = report::launch_facts(trace, r.forward.first_forward);
  }
  io::write_file_atomic(io::join_path(opt.out_dir, r.table_file), out.table);
  clock.lap("aggregate, gzip and write trace and table", r.phases_ms);
  io::write_file_atomic(io::join_path(opt.out_dir, r.summary_file),
                        report::summary_json(r).dump(2) + "\n");
  return out;
}

}  // namespace attnprof
