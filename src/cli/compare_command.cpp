// `attnprof compare A B`: diff two summary.json files, or every pair of
// summaries under two output directories (paired by relative path).
#include <fmt/format.h>
#include <sys/stat.h>

#include <string>

#include "attnprof/io/files.h"
#include "attnprof/report/compare.h"
#include "attnprof/report/summary.h"
#include "cli/exit_codes.h"
#include "cli/options.h"

namespace attnprof::cli {
namespace {

// Unreadable or malformed inputs share exit code 4 with unwritable outputs:
// either way the files, not the flags, are at fault.
constexpr int kBadFile = exit_code::kOutput;

struct CompareOptions {
  std::string a, b;
  std::string csv, md;
};

enum class PathKind { missing, file, directory };

PathKind kind_of(const std::string& p) {
  struct stat st {};
  if (::stat(p.c_str(), &st) != 0) return PathKind::missing;
  return S_ISDIR(st.st_mode) ? PathKind::directory : PathKind::file;
}

int run_compare(const CompareOptions& o) {
  const PathKind ka = kind_of(o.a), kb = kind_of(o.b);
  for (const auto& [path, kind] : {std::pair{o.a, ka}, std::pair{o.b, kb}}) {
    if (kind == PathKind::missing) {
      fmt::print(stderr, "attnprof: error: {}: cannot read: no such file or directory\n", path);
      return kBadFile;
    }
  }
  if (ka != kb)
    throw UsageError(fmt::format("compare needs two summary files or two directories; '{}' is a {} and '{}' a {}", o.a,
                                 ka == PathKind::file ? "file" : "directory", o.b,
                                 kb == PathKind::file ? "file" : "directory"));
  std::vector<report::PairedComparison> pairs;
  std::vector<std::string> only_a, only_b;
  try {
    if (ka == PathKind::file) {
      const RunRecord ra = report::read_summary_file(o.a), rb = report::read_summary_file(o.b);
      pairs.push_back({ra.variant + "/" + ra.problem.file_stem(), report::compare_runs(ra, rb, o.a, o.b)});
    } else {
      report::DirectoryComparison d = report::compare_directories(o.a, o.b);
      if (d.pairs.empty()) {
        fmt::print(stderr, "attnprof: error: no summaries with the same relative path under {} and {} ({} and {} found)\n",
                   o.a, o.b, d.only_in_a.size(), d.only_in_b.size());
        return kBadFile;
      }
      pairs = std::move(d.pairs);
      only_a = std::move(d.only_in_a);
      only_b = std::move(d.only_in_b);
      for (auto& p : pairs) p.comparison.label_a = io::join_path(o.a, p.relative_path),
                            p.comparison.label_b = io::join_path(o.b, p.relative_path);
    }
  } catch (const report::SummaryError& e) {
    fmt::print(stderr, "attnprof: error: {}\n", e.what());
    return kBadFile;
  }
  fmt::print("{}", report::comparison_text(pairs, only_a, only_b));
  try {
    if (!o.csv.empty()) io::write_file_atomic(o.csv, report::to_csv(report::comparison_long_table(pairs)));
    if (!o.md.empty()) io::write_file_atomic(o.md, report::comparison_markdown(pairs, only_a, only_b));
  } catch (const io::FileError& e) {
    fmt::print(stderr, "attnprof: error: {}\n", e.what());
    return exit_code::kOutput;
  }
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
  s.action = [o] { return run_compare(*o); };
  return s;
}

}  // namespace attnprof::cli
