// attnprof's command line: parse, validate, call the library, print. Every
// error is one line on stderr and a documented exit code (exit_codes.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <vector>

#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "cli/exit_codes.h"
#include "cli/options.h"
#include "cli/output.h"

namespace {
// The monotonic clock when the executable's first code ran: its preinit_array
// runs after the dynamic loader has mapped the libraries and before any of
// their initialisers (LibTorch's static registrations, the bulk of loading
// it), and only after this process's exec. /proc/self/stat's start time is
// the fork's instead: `bash -c 'sleep 15; exec attnprof'` counted the 15 s.
int64_t g_first_code_ns = 0;

int64_t monotonic_ns() noexcept {
  timespec t{};
  ::clock_gettime(CLOCK_MONOTONIC, &t);
  return int64_t(t.tv_sec) * 1000000000 + t.tv_nsec;
}

void mark_first_code(int, char**, char**) { g_first_code_ns = monotonic_ns(); }
__attribute__((section(".preinit_array"), used)) void (*const kMarkFirstCode)(int, char**, char**) = mark_first_code;

std::optional<double> ms_since_first_code() {
  if (g_first_code_ns == 0) return std::nullopt;
  return double(monotonic_ns() - g_first_code_ns) / 1e6;
}

// Options of the top-level command given before a subcommand would be silently
// unused ("attnprof --variant naive sweep" runs sweep's default variants): refused.
void refuse_options_before(const CLI::App& app, const CLI::App& sub) {
  std::vector<std::string> given, not_taken;
  for (const CLI::Option* opt : app.get_options()) {
    if (opt->count() == 0) continue;
    given.push_back(opt->get_name());
    if (sub.get_option_no_throw(opt->get_name()) == nullptr) not_taken.push_back(opt->get_name());
  }
  if (given.empty()) return;
  const std::string list = attnprof::cli::join(given, ", ");
  if (sub.get_name() == "compare")
    throw attnprof::cli::UsageError(fmt::format(
        "{} given before 'compare', which takes no profiling options (see attnprof compare --help)", list));
  // Moving an option after the subcommand only helps if the subcommand takes it.
  if (!not_taken.empty())
    throw attnprof::cli::UsageError(fmt::format("{} given before '{}', which does not take {} (see attnprof {} --help)",
                                                list, sub.get_name(),
                                                not_taken.size() == 1 ? not_taken.front()
                                                                      : attnprof::cli::join(not_taken, ", "),
                                                sub.get_name()));
  throw attnprof::cli::UsageError(fmt::format("{} given before '{}' would be ignored; put {} after it: attnprof {} {} ...",
                                              list, sub.get_name(), given.size() == 1 ? "it" : "them",
                                              sub.get_name(), given.front()));
}

// The documented exit code (README, "Errors and exit codes") for what happened,
// once every file is written: a lost standard output is reported last, so a
// run piped into `head` still writes all its files.
int finish(int rc) {
  using namespace attnprof::cli;
  const std::string lost = stdout_lost();
  if (lost.empty()) return rc;
  // Only a command that wrote files says so (--help, --version,
  // --list-variants and a compare without outputs write none).
  error(fmt::format("standard output could not be written ({}){}", lost,
                    attnprof::io::files_published() > 0 ? "; the files were written" : ""));
  return rc == attnprof::exit_code::kOk ? attnprof::exit_code::kStdout : rc;
}

// A stop signal came before the error: the signal decides the exit code
// (README, "Errors and exit codes"), and the one line says both.
std::optional<int> signal_first(const std::exception& e) {
  const int sig = attnprof::interrupt_signal();
  if (!sig) return std::nullopt;
  const std::string what = e.what();
  attnprof::cli::note(fmt::format("attnprof: interrupted by {}{}", attnprof::signal_name(sig),
                                  dynamic_cast<const attnprof::Interrupted*>(&e) ? std::string()
                                                                                 : "; then: " + what));
  return 128 + sig;
}

}  // namespace

namespace {
int run(int argc, char** argv);
}  // namespace

// Every file a command writes is complete (renamed into place) before it
// returns, so the process ends here without running static destructors:
// LibTorch's and Kineto's background threads can still be alive then, and
// tearing their state down under them corrupted the heap at exit now and then
// (seen as "malloc(): unsorted double linked list corrupted" after the
// full-disk error, 1 run in ~5 under ctest).
int main(int argc, char** argv) {
  const int code = run(argc, argv);
  std::fflush(stdout);
  std::fflush(stderr);
  std::_Exit(code);
}

namespace {
int run(int argc, char** argv) {
  using namespace attnprof;
  using namespace attnprof::cli;
  init_streams();
  // From the start: a signal at any moment is answered the same way (commands
  // check it between units of work and say what finished).
  install_interrupt_handlers();
  CliOptions o;
  o.startup_ms = ms_since_first_code();
  CLI::App app{"attnprof: what really runs on the GPU when a model computes attention.\n"
               "Profiles one or more attention variants with the PyTorch (Kineto) profiler and writes\n"
               "a Chrome trace (open it in ui.perfetto.dev), a key-averages table and a summary JSON."};
  app.name("attnprof");
  add_variant_option(app, o);
  add_shape_options(app, o);
  add_run_options(app, o);
  add_distributed_options(app, o);
  app.add_option("--peak-tflops", o.peak_tflops,
                 "Device peak for the at-a-glance table's % of peak (default: from a table of known GPUs)")
      ->check(positive_number());
  app.add_flag("--list-variants", o.list_variants, "List the variants, what each shows, and whether it can run here");
  app.set_version_flag("--version", std::string(ATTNPROF_VERSION));
  const std::vector<Subcommand> subcommands = {add_sweep_command(app), add_compare_command(app)};

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp&) {
    out(app.help());
    return finish(exit_code::kOk);
  } catch (const CLI::CallForAllHelp&) {
    out(app.help("", CLI::AppFormatMode::All));
    return finish(exit_code::kOk);
  } catch (const CLI::CallForVersion& e) {
    out(std::string(e.what()) + "\n");
    return finish(exit_code::kOk);
  } catch (const CLI::ParseError& e) {
    std::string msg = e.what();
    msg = msg.substr(0, msg.find('\n'));
    // CLI11 checks the required positionals before the arguments nobody took:
    // "compare --kv-layout paged" read "paged" as A and said "B is required".
    // An unknown option is the cause there, so it is named instead.
    std::string unexpected, command = "attnprof";
    for (const Subcommand& sub : subcommands)
      if (sub.app->parsed()) command = "attnprof " + sub.app->get_name();
    if (dynamic_cast<const CLI::RequiredError*>(&e) != nullptr)
      for (const std::string& arg : app.remaining(true))
        if (arg.size() > 1 && arg[0] == '-') unexpected += (unexpected.empty() ? "" : ", ") + arg;
    if (!unexpected.empty()) msg = fmt::format("'{}' takes no {}", command, unexpected);
    const std::string help = command + " --help";
    error(fmt::format("{} (see {})", msg, help));
    return exit_code::kUsage;
  }
  try {
    for (const Subcommand& sub : subcommands) {
      if (!sub.app->parsed()) continue;
      refuse_options_before(app, *sub.app);
      return finish(sub.action());
    }
    if (o.list_variants) return finish(list_variants(o));
    if (const auto rc = run_distributed(o)) return finish(*rc);
    return finish(run_profile(o));
  } catch (const UsageError& e) {
    if (const auto rc = signal_first(e)) return finish(*rc);
    error(e.what());
    return exit_code::kUsage;
  } catch (const io::DirBusy& e) {
    if (const auto rc = signal_first(e)) return finish(*rc);
    error(e.what());
    return finish(exit_code::kBusy);
  } catch (const io::FileError& e) {
    if (const auto rc = signal_first(e)) return finish(*rc);
    error(e.what());
    return finish(exit_code::kOutput);
  } catch (const std::exception& e) {
    if (const auto rc = signal_first(e)) return finish(*rc);
    error(e.what());
    return finish(exit_code::kRunFailed);
  }
}
}  // namespace
