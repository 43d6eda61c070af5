#include "attnprof/report/compare.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "attnprof/io/files.h"
#include "attnprof/report/key_averages_table.h"
#include "attnprof/report/summary.h"

namespace attnprof::report {
namespace {

std::optional<double> gpu(const RunRecord& r, double v) {
  return r.problem.on_cuda() && r.ok() ? std::optional<double>(v) : std::nullopt;
}
std::optional<double> ok(const RunRecord& r, double v) { return r.ok() ? std::optional<double>(v) : std::nullopt; }
std::optional<double> median(const RunRecord& r) {
  return r.timing ? std::optional<double>(r.timing->median_us) : std::nullopt;
}

std::string problem_line(const RunRecord& r) {
  return fmt::format("{} {} on {}", r.problem.shape_string(), r.problem.config_string(), r.problem.device);
}

// A variable-length batch's lengths for a note: the first few, then how many in all.
std::string lengths_line(const std::vector<int64_t>& lengths) {
  std::string s;
  for (size_t i = 0; i < lengths.size() && i < 6; ++i) s += (i ? "," : "") + std::to_string(lengths[i]);
  return lengths.size() > 6 ? s + fmt::format(",... ({} sequences)", lengths.size()) : s;
}

// "forward" for a forward run, "backward" or "fwd+bwd step" otherwise: what one
// measured unit of the run is called in metric names.
std::string unit_word(const RunRecord& r) {
  switch (r.problem.pass) {
    case Pass::fwd: return "forward";
    case Pass::bwd: return "backward";
    case Pass::fwd_bwd: return "fwd+bwd step";
  }
  return "step";
}
std::string per_word(const RunRecord& r) { return r.problem.pass == Pass::fwd ? "fwd" : "step"; }

struct OpSide {
  double calls = 0, self_cpu_us = 0, device_us = 0;
};

// Per step of the pass: totals over the profiled steps.
std::map<std::pair<std::string, std::string>, OpSide> op_index(const RunRecord& r,
                                                               std::vector<std::pair<std::string, std::string>>& order) {
  std::map<std::pair<std::string, std::string>, OpSide> m;
  const double steps = r.scopes.empty() ? 0.0 : double(r.scopes.front().calls);
  const double per = steps > 0 ? steps : 1.0;
  for (const OpStats& s : r.rows) {
    const std::pair<std::string, std::string> key{s.name, s.device == EventDevice::Cuda ? "cuda" : "cpu"};
    auto [it, inserted] = m.try_emplace(key);
    if (inserted) order.push_back(key);
    it->second.calls += double(s.count) / per;
    it->second.self_cpu_us += double(s.self_cpu_time_total_ns) / 1000.0 / per;
    it->second.device_us += double(s.self_device_time_total_ns) / 1000.0 / per;
  }
  return m;
}

std::string fmt_value(const std::optional<double>& v, const std::string& unit) {
  if (!v) return "n/a";
  if (unit == "us") return format_time_us(*v);
  if (unit == "bytes") return format_bytes(*v);
  if (unit == "TFLOP/s" || unit == "relative") return fmt::format("{:.3g}", *v);
  return fmt::format("{:g}", *v);
}

std::optional<double> ratio_of(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b || *a == 0.0) return std::nullopt;
  return *b / *a;
}

// Summaries under `root`, at most 5 levels down, without leaving the tree: a
// symbolic link is followed only to a file inside it (never to a directory),
// and no other filesystem is entered (a link or mount to / reached /proc).
void walk(const std::string& root, const std::string& real_root, dev_t dev, const std::string& rel, int depth,
          std::vector<std::string>& out) {
  const std::string dir = rel.empty() ? root : io::join_path(root, rel);
  DIR* d = ::opendir(dir.c_str());
  if (!d) throw SummaryError(fmt::format("{}: cannot read directory: {}", dir, std::strerror(errno)));
  std::vector<std::string> names;
  while (const dirent* e = ::readdir(d)) {
    const std::string n = e->d_name;
    if (n != "." && n != "..") names.push_back(n);
  }
  ::closedir(d);
  static const std::string suffix = ".summary.json";
  for (const std::string& n : names) {
    const std::string r = rel.empty() ? n : rel + "/" + n;
    const std::string path = io::join_path(root, r);
    struct stat st {};
    if (::lstat(path.c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth < 4 && st.st_dev == dev) walk(root, real_root, dev, r, depth + 1, out);
      continue;
    }
    const bool named = n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0;
    if (!named) continue;
    if (S_ISLNK(st.st_mode) && !(::stat(path.c_str(), &st) == 0 && io::path_within(path, real_root))) continue;
    // Regular files (and links to them inside the tree) only: a FIFO would block the reader.
    if (S_ISREG(st.st_mode)) out.push_back(r);
  }
}

std::string escape_md(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '|' || c == '*' || c == '_' || c == '`') out += '\\';
    out += c;
  }
  return out;
}

}  // namespace

std::optional<double> MetricDiff::ratio() const { return ratio_of(a, b); }

std::string format_ratio(const std::optional<double>& r) { return r ? fmt::format("{:.2f}x", *r) : "n/a"; }

Comparison compare_runs(const RunRecord& a, const RunRecord& b, const std::string& label_a,
                        const std::string& label_b) {
  Comparison c;
  c.label_a = label_a;
  c.label_b = label_b;
  if (problem_line(a) != problem_line(b))
    c.notes.push_back(fmt::format("A and B measure different problems: A {}, B {}", problem_line(a), problem_line(b)));
  else if (a.problem.seqlens != b.problem.seqlens)  // one shape line, other lengths
    c.notes.push_back(fmt::format("A and B measure different problems: {} with other sequence lengths (A {}, B {})",
                                  problem_line(a), lengths_line(a.problem.seqlens), lengths_line(b.problem.seqlens)));
  if (a.variant != b.variant) c.notes.push_back(fmt::format("different variants: A {}, B {}", a.variant, b.variant));
  if (a.env.device_name != b.env.device_name)
    c.notes.push_back(fmt::format("different devices: A {}, B {}", a.env.device_name, b.env.device_name));
  for (const RunRecord* r : {&a, &b})
    if (!r->ok())
      c.notes.push_back(fmt::format("{} is {}: {}", r == &a ? "A" : "B", status_name(r->status), r->reason));

  auto add = [&](const std::string& metric, const char* unit, std::optional<double> va, std::optional<double> vb) {
    c.headline.push_back({metric, unit, va, vb});
  };
  const std::string w = unit_word(a);
  add(w + " GPU time (profiled)", "us", gpu(a, a.device_time_us()), gpu(b, b.device_time_us()));
  add(w + " GPU time (event median)", "us", a.problem.on_cuda() ? median(a) : std::nullopt,
      b.problem.on_cuda() ? median(b) : std::nullopt);
  add(w + " CPU time", "us", ok(a, a.cpu_time_us()), ok(b, b.cpu_time_us()));
  if (!a.problem.on_cuda() || !b.problem.on_cuda())
    add(w + " time (steady-clock median)", "us", a.problem.on_cuda() ? std::nullopt : median(a),
        b.problem.on_cuda() ? std::nullopt : median(b));
  add("kernels per " + w, "", gpu(a, a.kernels_per_step()), gpu(b, b.kernels_per_step()));
  add("TFLOP/s", "TFLOP/s", a.tflops, b.tflops);
  add("peak memory", "bytes", a.peak_memory_bytes, b.peak_memory_bytes);
  const auto error = [](const RunRecord& r) {
    return r.accuracy ? std::optional<double>(r.accuracy->rel_error) : std::nullopt;
  };
  add("error vs fp64", "relative", error(a), error(b));
  c.per = per_word(a);

  std::vector<std::pair<std::string, std::string>> order_a, order_b;
  const auto ia = op_index(a, order_a);
  const auto ib = op_index(b, order_b);
  std::vector<std::pair<std::string, std::string>> order = order_a;
  for (const auto& k : order_b)
    if (!ia.count(k)) order.push_back(k);
  for (const auto& k : order) {
    OpDiff d;
    d.name = k.first;
    d.device = k.second;
    const auto fa = ia.find(k), fb = ib.find(k);
    if (fa != ia.end()) d.calls_a = fa->second.calls, d.self_cpu_us_a = fa->second.self_cpu_us, d.device_us_a = fa->second.device_us;
    if (fb != ib.end()) d.calls_b = fb->second.calls, d.self_cpu_us_b = fb->second.self_cpu_us, d.device_us_b = fb->second.device_us;
    if (fa == ia.end()) d.note = "only in B";
    if (fb == ib.end()) d.note = "only in A";
    c.ops.push_back(std::move(d));
  }
  // The op that costs most on either side first: what changed most is near the top.
  const bool cuda = a.problem.on_cuda() || b.problem.on_cuda();
  auto weight = [cuda](const OpDiff& d) {
    auto v = [](const std::optional<double>& x) { return x.value_or(0.0); };
    return cuda ? std::max(v(d.device_us_a), v(d.device_us_b)) : std::max(v(d.self_cpu_us_a), v(d.self_cpu_us_b));
  };
  std::stable_sort(c.ops.begin(), c.ops.end(), [&](const OpDiff& x, const OpDiff& y) { return weight(x) > weight(y); });
  return c;
}

// Display tables: each row of the headline has its own unit, so the cells are
// formatted here, for text and Markdown only; CSV and JSON get the plain
// numbers of comparison_long_table.
Table headline_table(const Comparison& c) {
  Table t;
  // The labels (paths) are printed above the table; as headers they would be too wide.
  t.columns = {text_column("metric", "metric"), number_column("A", "a"), number_column("B", "b"),
               number_column("B/A", "ratio_b_over_a")};
  for (const MetricDiff& m : c.headline)
    t.rows.push_back({m.metric, fmt_value(m.a, m.unit), fmt_value(m.b, m.unit), format_ratio(m.ratio())});
  return t;
}

Table ops_table(const Comparison& c) {
  Table t;
  const std::string& per = c.per;
  t.columns = {text_column("op", "op"),
               text_column("device", "device"),
               number_column("calls/" + per + " A", "calls_a"),
               number_column("calls/" + per + " B", "calls_b"),
               number_column("self CPU/" + per + " A", "self_cpu_a"),
               number_column("self CPU/" + per + " B", "self_cpu_b"),
               number_column("CPU B/A", "cpu_ratio"),
               number_column("device/" + per + " A", "device_a"),
               number_column("device/" + per + " B", "device_b"),
               number_column("device B/A", "device_ratio"),
               text_column("note", "note")};
  for (const OpDiff& d : c.ops) {
    const bool dev = d.device == "cuda" || d.device_us_a.value_or(0) > 0 || d.device_us_b.value_or(0) > 0;
    auto dv = [&](const std::optional<double>& v) { return dev ? fmt_value(v, "us") : std::string("-"); };
    t.rows.push_back({d.name.size() > 70 ? d.name.substr(0, 67) + "..." : d.name, d.device,
                      fmt_value(d.calls_a, ""), fmt_value(d.calls_b, ""), fmt_value(d.self_cpu_us_a, "us"),
                      fmt_value(d.self_cpu_us_b, "us"), format_ratio(ratio_of(d.self_cpu_us_a, d.self_cpu_us_b)),
                      dv(d.device_us_a), dv(d.device_us_b),
                      dev ? format_ratio(ratio_of(d.device_us_a, d.device_us_b)) : "-", d.note});
  }
  return t;
}

std::vector<std::string> find_summaries(const std::string& dir) {
  std::vector<std::string> out;
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) throw SummaryError(fmt::format("{}: cannot read directory: {}", dir, std::strerror(errno)));
  walk(dir, io::canonical_path(dir), st.st_dev, "", 0, out);
  std::sort(out.begin(), out.end());
  return out;
}

DirectoryComparison compare_directories(const std::string& dir_a, const std::string& dir_b) {
  const std::vector<std::string> fa = find_summaries(dir_a), fb = find_summaries(dir_b);
  DirectoryComparison d;
  for (const std::string& rel : fa) {
    if (!std::binary_search(fb.begin(), fb.end(), rel)) {
      d.only_in_a.push_back(rel);
      continue;
    }
    const RunRecord a = read_summary_file(io::join_path(dir_a, rel));
    const RunRecord b = read_summary_file(io::join_path(dir_b, rel));
    d.pairs.push_back({rel, compare_runs(a, b, "A", "B")});
  }
  for (const std::string& rel : fb)
    if (!std::binary_search(fa.begin(), fa.end(), rel)) d.only_in_b.push_back(rel);
  return d;
}

Table comparison_long_table(const std::vector<PairedComparison>& pairs) {
  Table t;
  t.columns = {text_column("summary", "summary"),   text_column("section", "section"),
               text_column("name", "name"),         text_column("device", "device"),
               text_column("metric", "metric"),     text_column("unit", "unit"),
               number_column("A", "a"),             number_column("B", "b"),
               number_column("B/A", "ratio_b_over_a"), text_column("note", "note")};
  t.missing = "";
  for (const PairedComparison& p : pairs) {
    const std::string per = p.comparison.per == "fwd" ? "forward" : "step";
    for (const MetricDiff& m : p.comparison.headline)
      t.rows.push_back({p.relative_path, "headline", "", "", m.metric, m.unit, number_cell(m.a), number_cell(m.b),
                        number_cell(m.ratio()), ""});
    for (const OpDiff& d : p.comparison.ops) {
      auto row = [&](const std::string& metric, const char* unit, const std::optional<double>& a,
                     const std::optional<double>& b) {
        t.rows.push_back({p.relative_path, "op", d.name, d.device, metric, unit, number_cell(a), number_cell(b),
                          number_cell(ratio_of(a, b)), d.note});
      };
      row("calls per " + per, "", d.calls_a, d.calls_b);
      row("self CPU time per " + per, "us", d.self_cpu_us_a, d.self_cpu_us_b);
      row("self device time per " + per, "us", d.device_us_a, d.device_us_b);
    }
  }
  return t;
}

std::string comparison_text(const std::vector<PairedComparison>& pairs, const std::vector<std::string>& only_in_a,
                            const std::vector<std::string>& only_in_b) {
  std::string out;
  for (const PairedComparison& p : pairs) {
    const Comparison& c = p.comparison;
    out += fmt::format("== {}\n   A: {}\n   B: {}\n", p.relative_path, c.label_a, c.label_b);
    for (const std::string& n : c.notes) out += "   note: " + n + "\n";
    out += "\n" + to_text(headline_table(c)) + "\n";
    if (!c.ops.empty()) out += to_text(ops_table(c)) + "\n";
  }
  for (const std::string& f : only_in_a) out += "only in A: " + f + "\n";
  for (const std::string& f : only_in_b) out += "only in B: " + f + "\n";
  return out;
}

std::string comparison_markdown(const std::vector<PairedComparison>& pairs, const std::vector<std::string>& only_in_a,
                                const std::vector<std::string>& only_in_b) {
  std::string out;
  for (const PairedComparison& p : pairs) {
    const Comparison& c = p.comparison;
    out += fmt::format("### {}\n\nA: `{}`  \nB: `{}`\n\n", escape_md(p.relative_path), c.label_a, c.label_b);
    for (const std::string& n : c.notes) out += "> " + escape_md(n) + "\n\n";
    out += to_markdown(headline_table(c)) + "\n";
    if (!c.ops.empty()) out += to_markdown(ops_table(c)) + "\n";
  }
  if (!only_in_a.empty() || !only_in_b.empty()) {
    for (const std::string& f : only_in_a) out += "- only in A: `" + f + "`\n";
    for (const std::string& f : only_in_b) out += "- only in B: `" + f + "`\n";
  }
  return out;
}

}  // namespace attnprof::report
