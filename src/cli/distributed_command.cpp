// Multi-GPU variants (ring-*, ulysses-*): `attnprof --variant ring-custom-flash --nproc 2`
// starts one rank process per GPU of this host (distributed/launcher.h); each
// rank (started so, or by torchrun or Slurm) joins the process group, runs the
// variants every rank can run, writes its own trace, table and summary
// (<stem>.rank<k>.*), and rank 0 gathers every rank's figures into the ring
// table (<stem>.ring.*) with the speed-up over the same attention on one GPU.
// Only rank 0 prints to stdout; a rank that fails says so on stderr and
// leaves, and the launcher stops the rest.
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "attnprof/device.h"
#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "attnprof/io/text.h"
#include "attnprof/report/ring_report.h"
#include "attnprof/run_units.h"
#include "attnprof/variant.h"
#include "cli/exit_codes.h"
#include "cli/options.h"
#include "cli/output.h"
#include "cli/printers.h"
#include "distributed/inner.h"
#include "distributed/launcher.h"
#include "distributed/process_group.h"
#include "distributed/rank_env.h"
#include "distributed/rank_run.h"

namespace attnprof::cli {
namespace {

// "ring" -> "Ring": a scheme's name at the head of its table.
std::string capitalised(std::string s) {
  if (!s.empty()) s[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(s[0])));
  return s;
}

constexpr int kMaxProcs = 1024;
// Set by our launcher for its ranks: it holds the output directory's lock.
constexpr const char* kOutLockedVar = "ATTNPROF_OUT_LOCKED_BY";
// Rank 0 may run the single-GPU baseline while the others wait on the store.
constexpr std::chrono::minutes kStoreTimeout{60};
constexpr std::chrono::minutes kOpTimeout{10};
constexpr double kMaxRendezvousSeconds = 7 * 24 * 3600;

void check_device_flag(const CliOptions& o) {
  if (o.device.rfind("cuda:", 0) == 0)
    throw UsageError(fmt::format("--device {}: a multi-GPU run gives each rank its own GPU (cuda:LOCAL_RANK); "
                                 "use --device cuda, auto or cpu",
                                 o.device));
}

// --ring-baseline FILE, read and checked before any rank starts (the
// launcher) or joins (rank 0 under torchrun): a bad file is exit 4, one that
// this run would write is exit 2, never a reason inside the ring table.
std::optional<RunRecord> file_baseline(const CliOptions& o, const Problem& p, const std::vector<std::string>& names,
                                       int world) {
  if (o.ring_baseline == "auto" || o.ring_baseline == "off") return std::nullopt;
  for (const std::string& n : names)
    for (const std::string& out : report::ring_run_outputs(o.out, n, p, world))
      if (io::same_file(o.ring_baseline, out))
        throw UsageError(fmt::format("--ring-baseline '{}' is one of this run's own outputs ({}); give a single-GPU "
                                     ".summary.json from another run",
                                     o.ring_baseline, out));
  return report::load_ring_baseline(o.ring_baseline, p);  // FileError: exit 4
}

// The output directory exists and is writable; else one error line.
bool output_dir_ready(const std::string& dir) {
  try {
    io::ensure_writable_dir(dir);
    return true;
  } catch (const io::FileError& e) {
    error(e.what());
    return false;
  }
}

// Why no variant of `names` can run `p` on `world` ranks, when every scheme
// refuses it (one reason, or each variant's when they differ); "" when one
// can. It depends on the flags alone, so every rank of a run gives the same.
std::string every_scheme_refuses(const std::vector<std::string>& names, const Problem& p, int world) {
  std::vector<std::string> reasons;
  for (const std::string& name : names) reasons.push_back(ring::scheme_refusal(name, p, world));
  auto empty = [](const std::string& r) { return r.empty(); };
  auto same = [&](const std::string& r) { return r == reasons.front(); };
  std::string why;
  if (std::none_of(reasons.begin(), reasons.end(), empty)) {
    if (std::all_of(reasons.begin(), reasons.end(), same)) why = reasons.front();
    else  // reasons that differ by scheme: each with its variant
      for (size_t i = 0; i < names.size(); ++i) why += (i ? "; " : "") + names[i] + ": " + reasons[i];
  }
  return why;
}

// Launcher side: cheap checks here (one line, exit 3, no process started),
// then one process per rank; the ranks check the rest themselves.
int launch(const CliOptions& o, const std::vector<std::string>& names) {
  const int nproc = *o.nproc;  // 1 to kMaxProcs (run_distributed)
  check_device_flag(o);
  const Problem p = build_problem(o);
  (void)build_settings(o);  // every flag validated before N processes start
  // A bad --ring-baseline is exit 4, which outranks a refusal's 3 (README, "Errors and exit codes").
  (void)file_baseline(o, p, names, nproc);
  // Refused here only when every variant's scheme refuses: the ranks skip the others one by one.
  std::string why = every_scheme_refuses(names, p, nproc);
  if (why.empty() && p.on_cuda() && nproc > cuda_device_count())
    why = fmt::format("--nproc {} needs {} GPUs; this host has {}", nproc, nproc, cuda_device_count());
  if (!why.empty()) {
    notef("attnprof: {} cannot run here: {}", join(names), why);
    return exit_code::kUnsupported;
  }
  // The launcher holds --out for the ranks (DirLock: a second run into it
  // exits 6); the ranks are told so and take no lock of their own.
  io::OutputDir out_dir(o.out, is_own_output_path);  // FileError: exit 4; DirBusy: exit 6
  ring::LaunchSpec spec;
  spec.exe = ring::self_exe();
  spec.argv = ring::self_argv();
  spec.nproc = nproc;
  spec.hold_stop_signals = true;  // a rank's main() unblocks them once its handlers are in
  spec.master_port = ring::free_tcp_port();
  spec.env = {{"NCCL_NVLS_ENABLE", "0"}, {"TORCH_SYMM_MEM_DISABLE_MULTICAST", "1"}, {"NVSHMEM_DISABLE_NVLS", "1"},
              {kOutLockedVar, std::to_string(::getpid())}};
  if (!cuda_available()) spec.env.emplace_back("KINETO_LOG_LEVEL", std::getenv("KINETO_LOG_LEVEL") ? std::getenv("KINETO_LOG_LEVEL") : "5");
  const ring::LaunchResult res = ring::launch_ranks(spec);
  // Rank 0's stderr came through as it was written; the others' last line is
  // shown where their outcome differs from rank 0's.
  const ring::RankOutcome& lead = res.ranks.front();
  for (const ring::RankOutcome& r : res.ranks) {
    if (r.rank == 0 || r.ok() || r.stopped_by_launcher) continue;
    if (!lead.stopped_by_launcher && r.exit_code == lead.exit_code && r.term_signal == lead.term_signal) continue;
    notef("attnprof: rank {} ended with {}{}", r.rank, r.how(),
               r.last_line.empty() ? "" : ": " + r.last_line);
  }
  if (res.first_failure > 0 && lead.stopped_by_launcher)
    notef("attnprof: the other ranks were stopped after rank {} failed", res.first_failure);
  if (res.forwarded_signal) {
    // A rank that has not stopped within the grace period (one may be left in
    // a collective its peer never joins) is killed mid-step: its temps are
    // removed here, not left to the next run.
    std::vector<std::string> killed;
    for (const ring::RankOutcome& r : res.ranks)
      if (r.term_signal == SIGKILL) killed.push_back(std::to_string(r.rank));
    if (!killed.empty()) {
      auto own = [](const std::string& rel) {
        return [rel](const std::string& target) { return is_own_output_path(rel, target); };
      };
      io::remove_stale_temps(o.out, own(""));
      for (const std::string& name : names) {
        const std::string rel_stem = io::join_path(name, p.file_stem());
        io::remove_stale_temps(io::join_path(o.out, name), own(name));
        io::remove_stale_temps(io::join_path(o.out, rel_stem), own(rel_stem));
      }
      // Rank 0 says what happened when it stopped itself; when it was killed, this line does.
      if (killed.front() == "0")
        notef("attnprof: interrupted by {}: rank{} {} did not stop within {:g} s of it and {} killed; the variants "
              "finished before keep their files",
              signal_name(res.forwarded_signal), killed.size() > 1 ? "s" : "", join(killed),
              ring::LaunchSpec{}.grace_seconds, killed.size() > 1 ? "were" : "was");
    }
  }
  return res.exit_code();
}

// Rank side: ring::run_rank_units() runs the variants; this says what
// happened. A rank leaving early (a failure, a signal) keeps the group
// joined: its peers may still be inside a transfer, which shutting the
// communicators down would wait for; main() ends the process without static
// destructors.
int run_rank(const CliOptions& o, const std::vector<std::string>& names, const ring::RankEnv& env) {
  check_device_flag(o);
  const bool lead = env.rank == 0;
  CliOptions ro = o;
  if (o.device != "cpu") {
    if (cuda_available()) ro.device = "cuda:" + std::to_string(env.local_rank);
    else if (o.device == "auto") ro.device = "cpu";
  }
  const Problem p = build_problem(ro);
  RunSettings s = build_settings(o);
  s.files.stem_suffix = ".rank" + std::to_string(env.rank);
  ring::fix_auto_counts(s.measure, p.on_cuda());
  if (!cuda_available()) ::setenv("KINETO_LOG_LEVEL", "5", /*overwrite=*/0);
  // Rank 0 alone reads it (the others may not see rank 0's files); a bad one
  // ends rank 0 before the rendezvous, and the others' rendezvous says so.
  const std::optional<RunRecord> baseline = lead ? file_baseline(o, p, names, env.world_size) : std::nullopt;
  // Before the rendezvous: every rank refuses alike, so none waits for peers that will not come.
  if (const std::string why = every_scheme_refuses(names, p, env.world_size); !why.empty()) {
    notef("attnprof: rank {}: {} cannot run here: {}", env.rank, join(names), why);
    return exit_code::kUnsupported;
  }
  if (!output_dir_ready(s.files.out_dir)) return exit_code::kOutput;
  // Under torchrun or Slurm no launcher of ours holds --out: rank 0 does.
  std::unique_ptr<io::OutputDir> out_lock;
  if (lead && !std::getenv(kOutLockedVar)) out_lock = std::make_unique<io::OutputDir>(s.files.out_dir, is_own_output_path);
  install_interrupt_handlers();
  ring::JoinOptions join;
  join.rendezvous_timeout = std::chrono::milliseconds(int64_t(o.rendezvous_timeout_s.value_or(ring::kDefaultRendezvousSeconds) * 1000));
  join.store_timeout = kStoreTimeout;
  join.op_timeout = kOpTimeout;
  join.on_waiting = [](const std::string& line) { note("attnprof: " + line); };
  try {
    ring::set_current_group(ring::ProcessGroup::join(env, p.device, join));
  } catch (const Interrupted&) {
    notef("attnprof: rank {} interrupted by {} during the rendezvous at {}:{}; nothing written", env.rank,
          signal_name(interrupt_signal()), env.master_addr, env.master_port);
    return 128 + interrupt_signal();
  } catch (const ring::RendezvousError& e) {
    note(std::string("attnprof: ") + e.what());
    return exit_code::kRendezvous;
  } catch (const std::exception& e) {
    note(std::string("attnprof: ") + e.what());
    return exit_code::kRunFailed;
  }
  ring::ProcessGroup& group = *ring::current_group();
  s.measure.trace_metadata.emplace_back("distributedInfo", group.distributed_info_json());
  const TableOptions table = s.table_for(p);
  ring::RankRunOptions opt;
  opt.run = {s.measure, s.files, /*write_interrupted_summary=*/true};
  opt.baseline = {o.ring_baseline, baseline};
  // Rank 0 prints; the others only leave their files.
  ring::RankObserver observer;
  observer.begin = [&](size_t i, const std::string& name) {
    if (lead && names.size() > 1 && !o.quiet) notef("[{}/{}] {}", i + 1, names.size(), run_label(name, p));
  };
  observer.refused = [&](size_t, const std::string& name, const std::string& refusal) {
    if (!lead) return;
    if (names.size() == 1) notef("attnprof: {} cannot run here: {}", name, refusal);
    else notef("  skipped {}: {}", name, refusal);
  };
  observer.ran = [&](size_t, const RunRecord& r) {
    if (lead) out(run_text(r, table, o.kernels, s.files.out_dir));
  };
  observer.summary = [&](size_t, const report::RingSummary& sum, const std::vector<std::string>& files) {
    outf("\n{}, rank by rank: {}\n{}  files: {} (+ .csv, .md, .json, .summary.json)\n", capitalised(sum.scheme),
         report::ring_headline(sum), report::to_text(report::ring_table(sum)), io::visible(files.front()));
  };
  ring::RankRunResult res;
  try {
    res = ring::run_rank_units(group, names, p, opt, observer);
  } catch (const io::FileError& e) {
    error(e.what());
    return exit_code::kOutput;
  }
  if (!res.left_at && !res.context_parallel_files.empty())  // written before any signal came
    outf("\nContext parallel, side by side:\n{}  files: {} (+ .csv, .md, .json)\n",
         report::to_text(report::context_parallel_table(res.summaries)),
         io::visible(res.context_parallel_files.front()));
  // A stop signal seen (during a unit, between two, or before the first: a signal just after the
  // rendezvous ended the rank with no line before): one line, the signal's exit code. Also when a
  // unit failed after it: the launcher signals every rank, and a peer that stopped first closes the
  // connection under this rank's transfer (seen on the GPU machine under load: "Connection closed by peer").
  if (const int sig = interrupt_signal()) {
    std::vector<RunRecord> records = res.run.records;  // a unit that failed after the signal was stopped by it
    if (res.left_at)
      for (RunRecord& r : records)
        if (r.variant == res.left_at->variant && r.status == Status::failed) r.status = Status::interrupted;
    notef("attnprof: rank {} {}", env.rank,
          interrupted_line(sig, names, records, res.run.interrupted ? interrupted_left(*res.run.interrupted) : ""));
    return 128 + sig;
  }
  if (res.left_at) {  // its peers would wait for it in the next transfer: leave, the launcher stops them
    const RunRecord& r = *res.left_at;
    notef("attnprof: rank {}: {} {}: {}", env.rank, r.variant, r.status == Status::failed ? "failed" : "could not run",
          r.reason);
    return exit_code::kRunFailed;
  }
  try {
    group.leave();
  } catch (const Interrupted&) {
    return 128 + interrupt_signal();
  }
  ring::set_current_group(nullptr);
  if (res.refused == names.size()) {
    if (names.size() > 1 && lead) notef("attnprof: none of the {} variants can run here (reasons above)", names.size());
    return exit_code::kUnsupported;
  }
  return exit_code::kOk;
}

}  // namespace

void add_distributed_options(CLI::App& app, CliOptions& o) {
  app.add_option("--nproc", o.nproc,
                 "Multi-GPU variants (ring-*, ulysses-*): start N rank processes, one per GPU of this host (under torchrun "
                 "or Slurm the launcher's RANK/WORLD_SIZE are read instead)");
  app.add_option("--rendezvous-timeout", o.rendezvous_timeout_s,
                 fmt::format("Seconds a multi-GPU rank waits for the others to meet at MASTER_ADDR:MASTER_PORT before "
                             "it gives up (exit 7; default {})",
                             ring::kDefaultRendezvousSeconds))
      ->check(positive_number())
      ->check(CLI::Validator(
          [](std::string& v) {
            return std::strtod(v.c_str(), nullptr) > kMaxRendezvousSeconds
                       ? fmt::format("{} is too long (at most {:g} s, a week)", v, kMaxRendezvousSeconds)
                       : std::string();
          },
          ""));
  app.add_option("--ring-baseline", o.ring_baseline,
                 "A ring variant's speed-up over one GPU: 'auto' (rank 0 runs the inner variant on the full "
                 "sequence), 'off', or a single-GPU .summary.json of the same problem")
      ->capture_default_str();
}

std::optional<int> run_distributed(const CliOptions& o) {
  std::optional<ring::RankEnv> env;
  try {
    env = ring::rank_env_from_process();
  } catch (const std::invalid_argument& e) {
    throw UsageError(e.what());
  }
  if (!env && !o.nproc) return std::nullopt;
  // The count first: `--nproc 0` is about the count, whatever the variant.
  if (o.nproc && (*o.nproc < 1 || *o.nproc > kMaxProcs))
    throw UsageError(fmt::format("--nproc must be 1 to {}, got {}", kMaxProcs, *o.nproc));
  const std::vector<std::string> names = expand_variants(o.variants, /*multi_gpu=*/true);
  for (const std::string& n : names)
    if (!find_variant(n)->has(VariantTag::multi_gpu))
      throw UsageError(fmt::format("{} runs multi-GPU variants (ring-*, ulysses-*); {} runs on one GPU: run it without {}",
                                   env ? "a launcher's RANK/WORLD_SIZE" : "--nproc", n,
                                   env ? "the launcher" : "--nproc"));
  if (!env) return launch(o, names);
  if (o.nproc && *o.nproc != env->world_size)
    throw UsageError(fmt::format("--nproc {} disagrees with the launcher's world size {} ({})", *o.nproc,
                                 env->world_size, env->launcher));
  return run_rank(o, names, *env);
}

}  // namespace attnprof::cli
