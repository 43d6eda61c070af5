// `attnprof compare A B`: diff two summary.json files, or every pair of
// summaries under two output directories (paired by relative path).
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "attnprof/io/files.h"
#include "attnprof/io/text.h"
#include "attnprof/report/compare.h"
#include "attnprof/report/run_files.h"
#include "attnprof/report/summary.h"
#include "attnprof/report/trace_comparison.h"
#include "attnprof/variant.h"
#include "cli/printers.h"
#include "attnprof/interrupt.h"
#include "cli/exit_codes.h"
#include "cli/options.h"
#include "cli/output.h"

namespace attnprof::cli {
namespace {

// Unreadable or malformed inputs share exit code 4 with unwritable outputs:
// either way the files, not the flags, are at fault.
constexpr int kBadFile = exit_code::kOutput;

struct CompareOptions {
  std::string a, b;
  std::string csv, md;
  std::string out = "traces-compare";  // where the merged trace and the timeline go
};

enum class PathKind { missing, file, directory };

// `why` gets the OS reason when the path cannot be looked at.
PathKind kind_of(const std::string& p, std::string& why) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) {
    why = std::strerror(errno);
    return PathKind::missing;
  }
  return S_ISDIR(st.st_mode) ? PathKind::directory : PathKind::file;
}

// The summaries compared: (relative path, A, B). Two files were read once
// already and are passed in (`read`): a pipe or FIFO (`<(zcat a.gz)`) cannot
// be read a second time. Directories' summaries are read back here.
std::vector<std::tuple<std::string, RunRecord, RunRecord>> compared_runs(
    const CompareOptions& o, const std::optional<std::pair<RunRecord, RunRecord>>& read) {
  std::vector<std::tuple<std::string, RunRecord, RunRecord>> runs;
  if (read) {
    runs.emplace_back("", read->first, read->second);
    return runs;
  }
  const std::vector<std::string> fa = report::find_summaries(o.a), fb = report::find_summaries(o.b);
  for (const std::string& rel : fa)
    if (std::binary_search(fb.begin(), fb.end(), rel))
      runs.emplace_back(rel, report::read_summary_file(io::join_path(o.a, rel)),
                        report::read_summary_file(io::join_path(o.b, rel)));
  return runs;
}

// The trace path a summary names, beside the summary's own output directory.
std::string trace_of(const std::string& root, bool files, const std::string& summary_path, const RunRecord& r) {
  if (r.trace_file.empty()) return "";
  if (!files) return io::join_path(root, r.trace_file);
  // A summary file lives at <out>/<variant>/<stem>.summary.json; its trace path is relative to <out>.
  const std::string dir = summary_path.substr(0, summary_path.find_last_of('/') + 1);
  return io::join_path(dir.empty() ? "." : dir + "..", r.trace_file);
}

// The A/B runs of each problem both sides hold, with the traces they name:
// what compare/<stem>.trace.json.gz and .timeline.svg under --out are made of.
struct TracePlan {
  std::map<std::string, std::vector<report::RunTraceFile>> by_stem;
  std::map<std::string, std::vector<RunRecord>> records;
  std::vector<std::string> inputs;      // every file compare reads: summaries and the traces they name
  std::vector<std::string> input_dirs;  // the trees those come from
  // What the runs' slices point at (RunTraceFile::counters); a deque keeps
  // its elements in place as it grows and when the plan is moved.
  std::deque<report::CounterPass> counters;
};

TracePlan plan_traces(const CompareOptions& o, const std::optional<std::pair<RunRecord, RunRecord>>& files) {
  TracePlan plan;
  if (!files) plan.input_dirs = {o.a, o.b};
  // A summary's own output directory (<out>/<variant>/<stem>.summary.json):
  // a comparison written there would replace that run's own compare/ files.
  auto add_input = [&plan](const std::string& summary) {
    plan.inputs.push_back(summary);
    const size_t slash = summary.find_last_of('/');
    plan.input_dirs.push_back((slash == std::string::npos ? std::string(".") : summary.substr(0, slash)) + "/..");
  };
  for (const auto& [rel, a, b] : compared_runs(o, files)) {
    add_input(rel.empty() ? o.a : io::join_path(o.a, rel));
    add_input(rel.empty() ? o.b : io::join_path(o.b, rel));
    if (!a.ok() || !b.ok()) continue;
    const std::string ta = trace_of(o.a, files.has_value(), o.a, a), tb = trace_of(o.b, files.has_value(), o.b, b);
    if (ta.empty() || tb.empty()) continue;
    plan.inputs.push_back(ta), plan.inputs.push_back(tb);
    // Two single summaries of different variants: one row label, so A and B group.
    const std::string label = a.variant == b.variant ? a.variant : a.variant + " / " + b.variant;
    const std::string stem = a.problem.file_stem();
    auto counters_of = [&plan](const RunRecord& r) -> const report::CounterPass* {
      if (!r.counters) return nullptr;
      plan.counters.push_back(*r.counters);
      return &plan.counters.back();
    };
    plan.by_stem[stem].push_back({label, "A", unit_headline(a), ta, unit_scope(a.problem), counters_of(a)});
    plan.by_stem[stem].push_back({label, "B", unit_headline(b), tb, unit_scope(b.problem), counters_of(b)});
    plan.records[stem].push_back(a);
  }
  return plan;
}

// Outputs that would replace an input or each other are refused before
// anything is printed or written (exit 2).
void refuse_clashes(const CompareOptions& o, const TracePlan& plan) {
  std::vector<std::pair<std::string, std::string>> outputs;  // (flag, path)
  if (!o.csv.empty()) outputs.emplace_back("--csv", o.csv);
  if (!o.md.empty()) outputs.emplace_back("--md", o.md);
  for (const auto& [stem, runs] : plan.by_stem) {
    outputs.emplace_back("--out", report::comparison_trace_path(o.out, stem));
    outputs.emplace_back("--out", report::comparison_timeline_path(o.out, stem));
  }
  if (!plan.by_stem.empty())
    for (const std::string& dir : plan.input_dirs)
      if (io::same_file(o.out, dir))
        throw UsageError(fmt::format("compare: --out '{}' is the output directory of a compared run ('{}'): its "
                                     "merged traces would replace that run's own compare/ files; choose another --out",
                                     o.out, dir));
  for (size_t i = 0; i < outputs.size(); ++i) {
    for (const std::string& in : plan.inputs)
      if (io::same_file(outputs[i].second, in))
        throw UsageError(fmt::format("compare: {} '{}' names an input ('{}'); writing it would replace what is compared",
                                     outputs[i].first, outputs[i].second, in));
    for (size_t j = 0; j < i; ++j)
      if (!io::is_stream(outputs[i].second) && io::same_file(outputs[i].second, outputs[j].second))
        throw UsageError(fmt::format("compare: {} and {} name one file, '{}'", outputs[j].first, outputs[i].first,
                                     outputs[i].second));
  }
}

// compare/<stem>.trace.json.gz and .timeline.svg under --out: each variant's
// A and B runs side by side, one file pair per problem compared, staged into
// `staged` (the command's one set of outputs). --out is made and locked
// against other runs (`out_dir`) only when there is a trace to write. Returns
// the lines to print.
std::string stage_ab_traces(io::StagedFiles& staged, std::unique_ptr<io::OutputDir>& out_dir, const CompareOptions& o,
                            const TracePlan& plan) {
  std::string text;
  if (!plan.by_stem.empty()) out_dir = std::make_unique<io::OutputDir>(o.out, is_own_output_path);  // FileError: exit 4; DirBusy: exit 6
  for (const auto& [stem, runs] : plan.by_stem) {
    try {
      std::string title = comparison_title(plan.records.at(stem));
      title.replace(0, title.find(':') + 1, "attnprof compare (A: " + o.a + ", B: " + o.b + "):");
      const auto f = report::stage_trace_comparison(staged, runs, o.out, stem, title);
      for (const std::string& n : f.notes) text += fmt::format("note: {}\n", n);
      text += fmt::format("merged trace: {}\ntimeline: {}\n", io::visible(f.trace_path), io::visible(f.timeline_path));
    } catch (const report::TraceError& e) {
      // An earlier compare's pair of this problem would sit beside this one's tables.
      report::remove_trace_comparison_at_publish(staged, o.out, stem);
      text += fmt::format("note: no merged trace for {}: {}\n", stem, e.what());
    }
  }
  return text;
}

int interrupted_reading(int sig) {
  notef("attnprof: interrupted by {} while reading the inputs; nothing written", signal_name(sig));
  return 128 + sig;
}

int run_compare(const CompareOptions& o) {
  std::string why_a, why_b;
  const PathKind ka = kind_of(o.a, why_a), kb = kind_of(o.b, why_b);
  for (const auto& [path, kind, why] : {std::tuple{o.a, ka, why_a}, std::tuple{o.b, kb, why_b}}) {
    if (kind == PathKind::missing) {
      error(fmt::format("{}: cannot read: {}", path, why));
      return kBadFile;
    }
  }
  if (ka != kb)
    throw UsageError(fmt::format("compare needs two summary files or two directories; '{}' is a {} and '{}' a {}", o.a,
                                 ka == PathKind::file ? "file" : "directory", o.b,
                                 kb == PathKind::file ? "file" : "directory"));
  std::vector<report::PairedComparison> pairs;
  std::vector<std::string> only_a, only_b;
  std::optional<std::pair<RunRecord, RunRecord>> files;  // two summary files, read once
  TracePlan plan;
  try {
    if (ka == PathKind::file) {
      files.emplace(report::read_summary_file(o.a), report::read_summary_file(o.b));
      const auto& [ra, rb] = *files;
      pairs.push_back({ra.variant + "/" + ra.problem.file_stem(), report::compare_runs(ra, rb, o.a, o.b)});
    } else {
      report::DirectoryComparison d = report::compare_directories(o.a, o.b);
      if (d.pairs.empty()) {
        error(fmt::format("no summaries with the same relative path under {} and {} ({} and {} found; runs of "
                          "different problems have different file names: give the two .summary.json files to "
                          "compare them)",
                          o.a, o.b, d.only_in_a.size(), d.only_in_b.size()));
        return kBadFile;
      }
      pairs = std::move(d.pairs);
      only_a = std::move(d.only_in_a);
      only_b = std::move(d.only_in_b);
      for (auto& p : pairs) p.comparison.label_a = io::join_path(o.a, p.relative_path),
                            p.comparison.label_b = io::join_path(o.b, p.relative_path);
    }
    plan = plan_traces(o, files);
  } catch (const report::SummaryError& e) {
    if (const int sig = interrupt_signal()) return interrupted_reading(sig);
    error(e.what());
    return kBadFile;
  } catch (const Interrupted&) {
    return interrupted_reading(interrupt_signal());
  }
  refuse_clashes(o, plan);
  out(report::comparison_text(pairs, only_a, only_b));
  if (const int sig = interrupt_signal()) {
    notef("attnprof: interrupted by {} before any file was written; nothing written", signal_name(sig));
    return 128 + sig;
  }
  // One set: compare/ under --out, --csv and --md are all written, or none
  // is changed.
  std::unique_ptr<io::OutputDir> out_dir;
  io::StagedFiles outputs;
  const std::string written = stage_ab_traces(outputs, out_dir, o, plan);
  if (!o.csv.empty()) outputs.add(o.csv, report::to_csv(report::comparison_long_table(pairs)));
  if (!o.md.empty()) outputs.add(o.md, report::comparison_markdown(pairs, only_a, only_b));
  outputs.publish();  // FileError: exit 4
  out(written);
  return exit_code::kOk;
}

}  // namespace

Subcommand add_compare_command(CLI::App& app) {
  auto o = std::make_shared<CompareOptions>();
  Subcommand s;
  s.app = app.add_subcommand("compare",
                             "Diff two summary.json files (or two output directories): headline figures and "
                             "per-op rows, with ratios B/A");
  s.app->add_option("A", o->a, "Before: a .summary.json (plain or .gz) or an output directory")->required();
  s.app->add_option("B", o->b, "After: the same kind as A")->required();
  s.app->add_option("--csv", o->csv, "Also write the diff as one long CSV table to FILE");
  s.app->add_option("--md", o->md, "Also write the diff as Markdown to FILE");
  s.app->add_option("--out", o->out,
                    "Directory for the merged Perfetto trace and the timeline picture of A against B "
                    "(compare/<stem>.trace.json.gz, .timeline.svg)")
      ->capture_default_str();
  s.action = [o] { return run_compare(*o); };
  return s;
}

}  // namespace attnprof::cli
