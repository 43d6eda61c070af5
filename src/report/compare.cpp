#include "attnprof/report/compare.h"

#include <dirent.h>
#include <fmt/format.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>

#include "attnprof/io/files.h"
#include "attnprof/key_averages.h"
#include "attnprof/report/summary.h"
#include "attnprof/report/summary_reader.h"

namespace attnprof::report {
namespace {

std::optional<double> gpu(const RunRecord& r, double v) {
  return r.problem.on_cuda() && r.status == "ok" ? std::optional<double>(v) : std::nullopt;
}
std::optional<double> ok(const RunRecord& r, double v) {
  return r.status == "ok" ? std::optional<double>(v) : std::nullopt;
}
std::optional<double> median(const RunRecord& r) {
  return r.timing ? std::optional<double>(r.timing->median_us) : std::nullopt;
}

std::string problem_line(const RunRecord& r) {
  return fmt::format("{} {} {} on {}", r.problem.shape_string(), dtype_name(r.problem.dtype),
                     r.problem.causal ? "causal" : "non-causal", r.problem.device);
}

struct OpSide {
  double calls = 0, self_cpu_us = 0, device_us = 0;
};

// Per forward: totals over the profiled forwards.
std::map<std::pair<std::string, std::string>, OpSide> op_index(const RunRecord& r,
                                                               std::vector<std::pair<std::string, std::string>>& order) {
  std::map<std::pair<std::string, std::string>, OpSide> m;
  const double per = r.forward.forwards > 0 ? double(r.forward.forwards) : 1.0;
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
  if (unit == "TFLOP/s") return fmt::format("{:.3g}", *v);
  return fmt::format("{:g}", *v);
}

std::string plain(const std::optional<double>& v) { return v ? fmt::format("{:.6g}", *v) : ""; }

std::optional<double> ratio_of(const std::optional<double>& a, const std::optional<double>& b) {
  if (!a || !b || *a == 0.0) return std::nullopt;
  return *b / *a;
}

void walk(const std::string& root, const std::string& rel, int depth, std::vector<std::string>& out) {
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
    struct stat st {};
    if (::stat(io::join_path(root, r).c_str(), &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      if (depth < 4) walk(root, r, depth + 1, out);
    } else if (n.size() > suffix.size() && n.compare(n.size() - suffix.size(), suffix.size(), suffix) == 0) {
      out.push_back(r);
    }
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
  if (a.variant != b.variant) c.notes.push_back(fmt::format("different variants: A {}, B {}", a.variant, b.variant));
  if (a.env.device_name != b.env.device_name)
    c.notes.push_back(fmt::format("different devices: A {}, B {}", a.env.device_name, b.env.device_name));
  for (const RunRecord* r : {&a, &b})
    if (r->status != "ok")
      c.notes.push_back(fmt::format("{} is {}: {}", r == &a ? "A" : "B", r->status, r->reason));

  auto add = [&](const char* metric, const char* unit, std::optional<double> va, std::optional<double> vb) {
    c.headline.push_back({metric, unit, va, vb});
  };
  add("forward GPU time (profiled)", "us", gpu(a, a.forward.device_time_avg_us), gpu(b, b.forward.device_time_avg_us));
  add("forward GPU time (event median)", "us", a.problem.on_cuda() ? median(a) : std::nullopt,
      b.problem.on_cuda() ? median(b) : std::nullopt);
  add("forward CPU time", "us", ok(a, a.forward.cpu_time_avg_us), ok(b, b.forward.cpu_time_avg_us));
  if (!a.problem.on_cuda() || !b.problem.on_cuda())
    add("forward time (steady-clock median)", "us", a.problem.on_cuda() ? std::nullopt : median(a),
        b.problem.on_cuda() ? std::nullopt : median(b));
  add("kernels per forward", "", gpu(a, a.forward.kernels_per_forward), gpu(b, b.forward.kernels_per_forward));
  add("TFLOP/s", "TFLOP/s", a.tflops, b.tflops);
  add("peak memory", "bytes", a.peak_memory_bytes, b.peak_memory_bytes);

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

Table headline_table(const Comparison& c) {
  Table t;
  // The labels (paths) are printed above the table; as headers they would be too wide.
  t.columns = {"metric", "A", "B", "B/A"};
  t.numeric = {false, true, true, true};
  for (const MetricDiff& m : c.headline)
    t.rows.push_back({m.metric, fmt_value(m.a, m.unit), fmt_value(m.b, m.unit), format_ratio(m.ratio())});
  return t;
}

Table ops_table(const Comparison& c) {
  Table t;
  t.columns = {"op",          "device",       "calls/fwd A",  "calls/fwd B", "self CPU/fwd A", "self CPU/fwd B",
               "CPU B/A",     "device/fwd A", "device/fwd B", "device B/A",  "note"};
  t.numeric = {false, false, true, true, true, true, true, true, true, true, false};
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
  walk(dir, "", 0, out);
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
  t.columns = {"summary", "section", "name", "device", "metric", "A", "B", "B/A", "note"};
  t.numeric = {false, false, false, false, false, true, true, true, false};
  auto ratio = [](const std::optional<double>& a, const std::optional<double>& b) { return plain(ratio_of(a, b)); };
  for (const PairedComparison& p : pairs) {
    for (const MetricDiff& m : p.comparison.headline) {
      const std::string metric = m.unit.empty() ? m.metric : fmt::format("{} ({})", m.metric, m.unit);
      t.rows.push_back({p.relative_path, "headline", "", "", metric, plain(m.a), plain(m.b), plain(m.ratio()), ""});
    }
    for (const OpDiff& d : p.comparison.ops) {
      t.rows.push_back({p.relative_path, "op", d.name, d.device, "calls per forward", plain(d.calls_a),
                        plain(d.calls_b), ratio(d.calls_a, d.calls_b), d.note});
      t.rows.push_back({p.relative_path, "op", d.name, d.device, "self CPU time per forward (us)",
                        plain(d.self_cpu_us_a), plain(d.self_cpu_us_b), ratio(d.self_cpu_us_a, d.self_cpu_us_b),
                        d.note});
      t.rows.push_back({p.relative_path, "op", d.name, d.device, "self device time per forward (us)",
                        plain(d.device_us_a), plain(d.device_us_b), ratio(d.device_us_a, d.device_us_b), d.note});
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
