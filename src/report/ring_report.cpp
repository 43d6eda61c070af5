#include "attnprof/report/ring_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>
#include <stdexcept>

#include <dirent.h>
#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "attnprof/io/files.h"
#include "attnprof/report/run_files.h"
#include "attnprof/report/summary.h"

namespace attnprof::report {

namespace {

std::vector<Interval> merged(std::vector<Interval> v) {
  std::sort(v.begin(), v.end(), [](const Interval& a, const Interval& b) { return a.begin < b.begin; });
  std::vector<Interval> out;
  for (const Interval& i : v) {
    if (i.end <= i.begin) continue;
    if (!out.empty() && i.begin <= out.back().end) out.back().end = std::max(out.back().end, i.end);
    else out.push_back(i);
  }
  return out;
}

std::string time_text(double us) {
  return us < 1000.0 ? fmt::format("{:.1f} us", us) : fmt::format("{:.2f} ms", us / 1000.0);
}

template <class T>
T field(const nlohmann::json& j, const char* key) {
  if (!j.is_object() || !j.contains(key)) throw std::invalid_argument(std::string("rank figures: '") + key + "' missing");
  try {
    return j.at(key).get<T>();
  } catch (const nlohmann::json::exception&) {
    throw std::invalid_argument(std::string("rank figures: '") + key + "' has the wrong type");
  }
}

std::optional<double> optional_number(const nlohmann::json& j, const char* key) {
  if (!j.contains(key) || j.at(key).is_null()) return std::nullopt;
  return field<double>(j, key);
}

}  // namespace

int64_t union_ns(std::vector<Interval> v) {
  int64_t total = 0;
  for (const Interval& i : merged(std::move(v))) total += i.end - i.begin;
  return total;
}

int64_t uncovered_ns(std::vector<Interval> v, std::vector<Interval> cover) {
  const std::vector<Interval> a = merged(std::move(v)), c = merged(std::move(cover));
  int64_t total = 0;
  size_t j = 0;
  for (const Interval& i : a) {
    int64_t at = i.begin;
    while (j < c.size() && c[j].end <= at) ++j;
    for (size_t k = j; k < c.size() && c[k].begin < i.end; ++k) {
      if (c[k].begin > at) total += c[k].begin - at;
      at = std::max(at, c[k].end);
    }
    if (at < i.end) total += i.end - at;
  }
  return total;
}

bool is_communication_kernel(std::string_view name) { return name.rfind("nccl", 0) == 0; }

std::optional<double> OverlapFigures::overlap_pct() const {
  if (comm_us <= 0.0) return std::nullopt;
  return 100.0 * (1.0 - exposed_comm_us / comm_us);
}

std::optional<OverlapFigures> overlap_figures(const KinetoTrace& trace) {
  OverlapFigures f;
  double compute_ns = 0, comm_ns = 0, exposed_ns = 0, span_ns = 0;
  for (const Forward& fwd : find_forwards(trace)) {
    if (fwd.device_work.empty()) continue;
    std::vector<Interval> compute, comm;
    int64_t first = std::numeric_limits<int64_t>::max(), last = std::numeric_limits<int64_t>::min();
    for (size_t w : fwd.device_work) {
      const TraceSlice& s = trace.slices[w];
      (is_communication_kernel(trace.name_of(s)) ? comm : compute).push_back({s.ts_ns, s.end_ns()});
      first = std::min(first, s.ts_ns);
      last = std::max(last, s.end_ns());
    }
    ++f.forwards;
    compute_ns += double(union_ns(compute));
    comm_ns += double(union_ns(comm));
    exposed_ns += double(uncovered_ns(comm, compute));
    span_ns += double(last - first);
  }
  if (f.forwards == 0) return std::nullopt;
  const double per = 1000.0 * f.forwards;
  f.compute_us = compute_ns / per;
  f.comm_us = comm_ns / per;
  f.exposed_comm_us = exposed_ns / per;
  f.span_us = span_ns / per;
  return f;
}

nlohmann::json rank_figures_json(const RankFigures& f) {
  nlohmann::json j = {{"rank", f.rank},     {"device", f.device}, {"device_name", f.device_name},
                      {"status", f.status}, {"reason", f.reason}, {"forward_us", nullptr},
                      {"overlap", nullptr}};
  if (f.forward_us) j["forward_us"] = *f.forward_us;
  if (f.overlap)
    j["overlap"] = {{"forwards", f.overlap->forwards},
                    {"compute_us", f.overlap->compute_us},
                    {"comm_us", f.overlap->comm_us},
                    {"exposed_comm_us", f.overlap->exposed_comm_us},
                    {"span_us", f.overlap->span_us},
                    {"overlap_pct", f.overlap->overlap_pct() ? nlohmann::json(*f.overlap->overlap_pct()) : nullptr}};
  return j;
}

RankFigures rank_figures_from_json(const nlohmann::json& j) {
  RankFigures f;
  f.rank = field<int>(j, "rank");
  f.device = field<std::string>(j, "device");
  f.device_name = field<std::string>(j, "device_name");
  f.status = field<std::string>(j, "status");
  f.reason = field<std::string>(j, "reason");
  f.forward_us = optional_number(j, "forward_us");
  if (j.contains("overlap") && !j.at("overlap").is_null()) {
    const nlohmann::json& o = j.at("overlap");
    OverlapFigures of;
    of.forwards = field<int>(o, "forwards");
    of.compute_us = field<double>(o, "compute_us");
    of.comm_us = field<double>(o, "comm_us");
    of.exposed_comm_us = field<double>(o, "exposed_comm_us");
    of.span_us = field<double>(o, "span_us");
    f.overlap = of;
  }
  return f;
}

std::optional<double> RingSummary::ring_forward_us() const {
  std::optional<double> slowest;
  for (const RankFigures& r : ranks) {
    if (!r.forward_us) return std::nullopt;  // a rank without a time: no ring time
    slowest = std::max(slowest.value_or(0.0), *r.forward_us);
  }
  return slowest;
}

std::optional<double> RingSummary::speedup() const {
  const auto ring = ring_forward_us();
  if (!ring || !single_gpu_us || *ring <= 0.0) return std::nullopt;
  return *single_gpu_us / *ring;
}

std::optional<double> RingSummary::efficiency() const {
  const auto s = speedup();
  if (!s || world <= 0) return std::nullopt;
  return *s / world;
}

Table ring_table(const RingSummary& s) {
  const NumberFormat us{NumberFormat::Style::fixed, 1}, pct{NumberFormat::Style::percent, 1};
  Table t;
  t.columns = {text_column("rank", "rank"),
               text_column("device", "device"),
               number_column("forward (us)", "forward_us", us),
               number_column("compute (us)", "compute_us", us),
               number_column("communication (us)", "comm_us", us),
               number_column("exposed comm (us)", "exposed_comm_us", us),
               number_column("exposed % of forward", "exposed_pct_of_forward", pct),
               number_column("overlap %", "overlap_pct", pct),
               text_column("note", "note")};
  for (const RankFigures& r : s.ranks) {
    const OverlapFigures* o = r.overlap ? &*r.overlap : nullptr;
    std::optional<double> exposed_pct;
    if (o && r.forward_us && *r.forward_us > 0) exposed_pct = 100.0 * o->exposed_comm_us / *r.forward_us;
    t.rows.push_back({std::to_string(r.rank), r.device, number_cell(r.forward_us),
                      number_cell(o ? std::optional(o->compute_us) : std::nullopt),
                      number_cell(o ? std::optional(o->comm_us) : std::nullopt),
                      number_cell(o ? std::optional(o->exposed_comm_us) : std::nullopt), number_cell(exposed_pct),
                      number_cell(o ? o->overlap_pct() : std::nullopt),
                      r.status == "ok" ? std::string() : r.status + ": " + r.reason});
  }
  return t;
}

Table context_parallel_table(const std::vector<RingSummary>& runs) {
  const NumberFormat us{NumberFormat::Style::fixed, 1}, pct{NumberFormat::Style::percent, 1},
      ratio{NumberFormat::Style::fixed, 2};
  Table t;
  t.columns = {text_column("variant", "variant"),
               text_column("scheme", "scheme"),
               text_column("inner", "inner"),
               number_column("ranks", "world_size", NumberFormat{NumberFormat::Style::fixed, 0}),
               number_column("forward (us)", "forward_us", us),
               number_column("one GPU (us)", "single_gpu_us", us),
               number_column("speed-up", "speedup", ratio),
               number_column("parallel efficiency", "parallel_efficiency", ratio),
               number_column("max exposed comm % of forward", "max_exposed_pct_of_forward", pct)};
  for (const RingSummary& s : runs) {
    std::optional<double> exposed;
    for (const RankFigures& r : s.ranks)
      if (r.overlap && r.forward_us && *r.forward_us > 0)
        exposed = std::max(exposed.value_or(0.0), 100.0 * r.overlap->exposed_comm_us / *r.forward_us);
    t.rows.push_back({s.variant, s.scheme, s.inner, number_cell(std::optional<double>(s.world)),
                      number_cell(s.ring_forward_us()), number_cell(s.single_gpu_us), number_cell(s.speedup()),
                      number_cell(s.efficiency()), number_cell(exposed)});
  }
  return t;
}

std::vector<std::string> write_context_parallel_table(const std::vector<RingSummary>& runs,
                                                      const std::string& out_dir) {
  if (runs.empty()) return {};
  const Problem& p = runs.front().problem;
  const std::string dir = io::join_path(out_dir, "compare");
  const std::string headline = fmt::format("context parallel, side by side | {} {} | {} ranks", p.shape_string(),
                                           p.config_string(), runs.front().world);
  io::StagedFiles files;
  files.make_dir(dir);
  const std::vector<std::string> paths = stage_table_files(
      files, context_parallel_table(runs), io::join_path(dir, p.file_stem() + ".context_parallel"), headline);
  files.publish();
  return paths;
}

std::string ring_headline(const RingSummary& s) {
  std::string device_name;
  for (const RankFigures& r : s.ranks)
    if (!r.device_name.empty()) device_name = " (" + r.device_name + ")";
  std::string line = fmt::format("{} | {} {} | {} ranks{}", s.variant, s.problem.shape_string(),
                                 s.problem.config_string(), s.world, device_name);
  const auto ring = s.ring_forward_us();
  line += " | " + s.scheme + " " + (ring ? time_text(*ring) : std::string("n/a"));
  const char* one = s.problem.on_cuda() ? "1 GPU" : "1 process";
  if (s.single_gpu_us)
    line += fmt::format(", {} {} ({})", one, time_text(*s.single_gpu_us), s.single_gpu_source);
  else
    line += fmt::format(", {} n/a{}", one, s.single_gpu_source.empty() ? "" : " (" + s.single_gpu_source + ")");
  if (const auto sp = s.speedup()) line += fmt::format(": speed-up {:.2f}x, parallel efficiency {:.2f}", *sp, *s.efficiency());
  return line;
}

nlohmann::json ring_summary_json(const RingSummary& s) {
  auto opt = [](const std::optional<double>& v) { return v ? nlohmann::json(*v) : nlohmann::json(nullptr); };
  nlohmann::json ranks = nlohmann::json::array();
  for (const RankFigures& r : s.ranks) ranks.push_back(rank_figures_json(r));
  return {{"tool", "attnprof"},
          {"variant", s.variant},
          {"inner", s.inner},
          {"scheme", s.scheme},
          {"problem", problem_json(s.problem)},
          {"world_size", s.world},
          {"ranks", ranks},
          {"ring_forward_us", opt(s.ring_forward_us())},
          {"single_gpu_us", opt(s.single_gpu_us)},
          {"single_gpu_source", s.single_gpu_source},
          {"speedup", opt(s.speedup())},
          {"parallel_efficiency", opt(s.efficiency())}};
}

std::vector<std::string> write_ring_report(const RingSummary& s, const std::string& out_dir) {
  const std::string dir = io::join_path(out_dir, s.variant);
  const std::string file_stem = s.problem.file_stem();
  const std::string stem = io::join_path(dir, file_stem + ".ring");
  // One set: tables, summary, and the removal of the files of ranks this
  // world does not have (an earlier run with more ranks), which would
  // otherwise read as part of this run (HTA takes the folder's traces as its ranks).
  io::StagedFiles files;
  files.make_dir(dir);
  std::vector<std::string> paths = stage_table_files(files, ring_table(s), stem, ring_headline(s));
  files.add(stem + ".summary.json", json_text(ring_summary_json(s)));
  paths.push_back(stem + ".summary.json");
  for (const std::string& sub : {dir, io::join_path(dir, file_stem)}) {
    DIR* d = ::opendir(sub.c_str());
    if (!d) continue;
    std::vector<std::string> stale;
    const std::string prefix = file_stem + ".rank";
    while (const dirent* e = ::readdir(d)) {
      const std::string n = e->d_name;
      if (n.compare(0, prefix.size(), prefix) != 0) continue;
      size_t end = prefix.size();
      while (end < n.size() && n[end] >= '0' && n[end] <= '9') ++end;
      if (end == prefix.size() || end >= n.size() || n[end] != '.' || end - prefix.size() > 7) continue;
      if (std::stol(n.substr(prefix.size(), end - prefix.size())) >= s.world && is_own_output(sub == dir ? s.variant : s.variant + "/" + file_stem, n))
        stale.push_back(io::join_path(sub, n));
    }
    ::closedir(d);
    for (const std::string& p : stale) files.remove_at_publish(p);
  }
  files.publish();
  return paths;
}

std::vector<std::string> ring_run_outputs(const std::string& out_dir, const std::string& variant, const Problem& p,
                                          int world) {
  const std::string dir = io::join_path(out_dir, variant), stem = p.file_stem();
  std::vector<std::string> out;
  for (int k = 0; k < world; ++k) {
    const std::string rank = stem + ".rank" + std::to_string(k);
    for (const char* ext : {".txt", ".summary.json"}) out.push_back(io::join_path(dir, rank + ext));
    for (const char* ext : {".pt.trace.json", ".pt.trace.json.gz"})
      out.push_back(io::join_path(io::join_path(dir, stem), rank + ext));
  }
  for (const char* ext : {".txt", ".csv", ".md", ".json", ".summary.json"})
    out.push_back(io::join_path(dir, stem + ".ring" + ext));
  return out;
}

RunRecord load_ring_baseline(const std::string& path, const Problem& p) {
  const std::string what = "--ring-baseline '" + path + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) throw io::FileError(what + ": cannot read: " + std::strerror(errno));
  if (!S_ISREG(st.st_mode))
    throw io::FileError(what + ": it is " +
                        (S_ISDIR(st.st_mode)    ? std::string("a directory")
                         : S_ISFIFO(st.st_mode) ? std::string("a FIFO")
                                                : std::string("not a regular file")) +
                        "; give a single-GPU .summary.json of the same problem");
  RunRecord b;
  try {
    b = read_summary_file(path);
  } catch (const SummaryError& e) {
    throw io::FileError(what + ": " + e.what());
  }
  const Problem& q = b.problem;
  if (q.batch != p.batch || q.heads_q != p.heads_q || q.heads_kv != p.heads_kv || q.seq_q != p.seq_q ||
      q.seq_kv != p.seq_kv || q.head_dim != p.head_dim || q.dtype != p.dtype || q.causal() != p.causal() ||
      q.windowed() != p.windowed() || (q.windowed() && q.window != p.window) || q.page_size != p.page_size ||
      q.pass != p.pass)
    throw io::FileError(fmt::format("{}: a summary of another problem ({} {}), not of this run's {} {}", what,
                                    q.shape_string(), q.config_string(), p.shape_string(), p.config_string()));
  if (!b.ok()) throw io::FileError(fmt::format("{}: its run is {}, not complete", what, status_name(b.status)));
  if (!b.timing) throw io::FileError(what + ": it has no unprofiled timing (run with --timing-iters other than 0)");
  return b;
}

}  // namespace attnprof::report
