// attnprof's command line: parse, validate, call the library, print. Every
// error is one line on stderr and a documented exit code (exit_codes.h).
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "attnprof/interrupt.h"
#include "attnprof/io/files.h"
#include "cli/exit_codes.h"
#include "cli/options.h"
#include "cli/output.h"

namespace {
// Milliseconds from process start to now (10 ms resolution): /proc gives the
// start time in clock ticks since boot and the uptime in seconds.
std::optional<double> ms_since_process_start() {
  std::ifstream stat("/proc/self/stat"), uptime("/proc/uptime");
  std::string line;
  double up = 0.0;
  if (!std::getline(stat, line) || !(uptime >> up)) return std::nullopt;
  std::istringstream fields(line.substr(line.rfind(')') + 2));  // skip "pid (comm) "
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return up * 1000.0 - std::stod(field) * 1000.0 / double(sysconf(_SC_CLK_TCK));
  }
  return std::nullopt;
}

// Options of the top-level command given before a subcommand would be silently
// unused ("attnprof --variant naive sweep" runs sweep's default variants): refused.
void refuse_options_before(const CLI::App& app, const CLI::App& sub) {
  std::vector<std::string> given;
  for (const CLI::Option* opt : app.get_options())
    if (opt->count() > 0) given.push_back(opt->get_name());
  if (given.empty()) return;
  const std::string list = attnprof::cli::join(given, ", ");
  throw attnprof::cli::UsageError(
      sub.get_name() == "compare"
          ? fmt::format("{} given before 'compare', which takes no profiling options (see attnprof compare --help)",
                        list)
          : fmt::format("{} given before '{}' would be ignored; put {} after it: attnprof {} {} ...", list,
                        sub.get_name(), given.size() == 1 ? "it" : "them", sub.get_name(), given.front()));
}

// The documented exit code (README, "Errors and exit codes") for what happened,
// once every file is written: a lost standard output is reported last, so a
// run piped into `head` still writes all its files.
int finish(int rc) {
  using namespace attnprof::cli;
  const std::string lost = stdout_lost();
  if (lost.empty()) return rc;
  error(fmt::format("standard output could not be written ({}); the files were written", lost));
  return rc == attnprof::exit_code::kOk ? attnprof::exit_code::kStdout : rc;
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
  o.startup_ms = ms_since_process_start();
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
    error(fmt::format("{} (see attnprof --help)", msg));
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
    error(e.what());
    return exit_code::kUsage;
  } catch (const io::DirBusy& e) {
    error(e.what());
    return finish(exit_code::kBusy);
  } catch (const io::FileError& e) {
    error(e.what());
    return finish(exit_code::kOutput);
  } catch (const std::exception& e) {
    error(e.what());
    return finish(exit_code::kRunFailed);
  }
}
}  // namespace
