#include "attnprof/report/sweep.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <set>
#include <tuple>

#include "attnprof/io/files.h"
#include "attnprof/report/svg_plot.h"

namespace attnprof::report {
namespace {

struct Metric {
  const char* file;
  const char* what;  // after the pass word: "forward GPU time (profiled)"
  const char* unit;  // "µs"; none for TFLOP/s, whose title and label stand alone
  std::optional<double> (*value)(const RunRecord&);
};

const Metric kGpuTime{"gpu_time_us", "GPU time (profiled)", "µs",
                      [](const RunRecord& r) { return std::optional<double>(r.device_time_us()); }};
const Metric kCpuTime{"cpu_time_us", "CPU time", "µs",
                      [](const RunRecord& r) { return std::optional<double>(r.cpu_time_us()); }};
const Metric kTflops{"tflops", "Achieved TFLOP/s", nullptr, [](const RunRecord& r) { return r.tflops; }};

std::string pass_word(const std::string& pass) {
  return pass == "fwd" ? "forward" : pass == "bwd" ? "backward" : "fwd+bwd";
}

// Everything but seq_kv (the x axis) and the variant (the lines). seq_q joins
// the key only where it differs from seq_kv: a sweep of --seq moves both.
using GroupKey = std::tuple<std::string, int64_t, int64_t, int64_t, int64_t, int64_t, std::string, std::string>;

// A sweep's --window is one value for every point (a point it covers whole
// runs causal): named with the mask, so those points stay on one plot.
GroupKey group_of(const Problem& p) {
  std::string mask = mask_name(p.effective_mask());
  if (p.window > 0 && p.effective_mask() == Mask::causal_bottom_right) mask += "-w" + std::to_string(p.window);
  if (p.paged()) mask += "-p" + std::to_string(p.page_size);  // --page-size: one value too
  return {dtype_name(p.dtype), p.batch, p.heads_q, p.heads_kv, p.head_dim,
          p.seq_q == p.seq_kv ? -1 : p.seq_q, mask, pass_name(p.pass)};
}

// "causal-w4096" -> "causal, window 4096", "causal-w4096-p16" -> "causal, window 4096, paged 16"
// for a title.
std::string mask_words(const std::string& mask) {
  if (mask.rfind("causal-top-left", 0) == 0) return mask;
  std::string out = mask.substr(0, mask.find('-'));
  for (size_t at = mask.find('-'); at != std::string::npos; at = mask.find('-', at + 1)) {
    const size_t end = mask.find('-', at + 1);
    const std::string value = mask.substr(at + 2, end == std::string::npos ? std::string::npos : end - at - 2);
    out += (mask[at + 1] == 'w' ? ", window " : ", paged ") + value;
  }
  return out;
}

template <size_t I>
bool varies(const std::vector<GroupKey>& keys) {
  std::set<std::tuple_element_t<I, GroupKey>> seen;
  for (const GroupKey& k : keys) seen.insert(std::get<I>(k));
  return seen.size() > 1;
}

}  // namespace

Table sweep_table(const std::vector<RunRecord>& points) {
  using S = NumberFormat::Style;
  Table t;
  t.missing = "";
  t.columns = {text_column("variant", "variant"),      number_column("batch", "batch"),
               number_column("heads_q", "heads_q"),    number_column("heads_kv", "heads_kv"),
               number_column("seq_q", "seq_q"),        number_column("seq_kv", "seq_kv"),
               number_column("head_dim", "head_dim"),  text_column("dtype", "dtype"),
               text_column("mask", "mask"),            number_column("window", "window"),
               number_column("page_size", "page_size"), text_column("pass", "pass"),
               text_column("status", "status"),        text_column("reason", "reason"),
               number_column("gpu_time_us", "gpu_time_us", {S::general, 6}),
               number_column("event_median_us", "event_median_us", {S::general, 6}),
               number_column("cpu_time_us", "cpu_time_us", {S::general, 6}),
               number_column("tflops", "tflops", {S::general, 6}),
               number_column("kernels_per_step", "kernels_per_step", {S::general, 6}),
               number_column("peak_memory_bytes", "peak_memory_bytes", {S::general, 6}),
               number_column("rel_error_vs_fp64", "rel_error_vs_fp64", {S::general, 3})};
  for (const RunRecord& r : points) {
    const Problem& p = r.problem;
    const bool ok = r.ok(), cuda = p.on_cuda();
    const Cell na;
    t.rows.push_back({r.variant, double(p.batch), double(p.heads_q), double(p.heads_kv), double(p.seq_q),
                      double(p.seq_kv), double(p.head_dim), dtype_name(p.dtype), mask_name(p.effective_mask()),
                      double(p.effective_window()), double(p.page_size), pass_name(p.pass), status_name(r.status),
                      r.reason,
                      ok && cuda ? number_cell(r.device_time_us()) : na,
                      ok && r.timing ? number_cell(r.timing->median_us) : na, ok ? number_cell(r.cpu_time_us()) : na,
                      ok ? number_cell(r.tflops) : na, ok && cuda ? number_cell(r.kernels_per_step()) : na,
                      ok ? number_cell(r.peak_memory_bytes) : na,
                      ok && r.accuracy ? number_cell(r.accuracy->rel_error) : na});
  }
  return t;
}

std::vector<std::string> stage_sweep_plots(io::StagedFiles& files, const std::vector<RunRecord>& points,
                                           const std::vector<std::string>& variant_order, const std::string& dir) {
  const bool cuda = !points.empty() && points.front().problem.on_cuda();
  const std::vector<const Metric*> metrics = {cuda ? &kGpuTime : &kCpuTime, &kTflops};
  std::map<GroupKey, std::vector<const RunRecord*>> groups;
  std::vector<GroupKey> order;
  for (const RunRecord& r : points) {
    const GroupKey k = group_of(r.problem);
    if (!groups.count(k)) order.push_back(k);
    groups[k].push_back(&r);
  }
  std::string device_name;
  for (const RunRecord& r : points)
    if (r.ok() && !r.env.device_name.empty()) device_name = r.env.device_name;
  const bool v_dtype = varies<0>(order), v_batch = varies<1>(order), v_hq = varies<2>(order),
             v_hkv = varies<3>(order), v_d = varies<4>(order), v_sq = varies<5>(order), v_mask = varies<6>(order),
             v_pass = varies<7>(order);
  std::vector<std::string> written;
  for (const GroupKey& k : order) {
    // A group none of whose points ran (e.g. the backward points of a paged sweep) gets no empty plot.
    if (std::none_of(groups[k].begin(), groups[k].end(), [](const RunRecord* r) { return r->ok(); })) continue;
    const auto& [dtype, b, hq, hkv, d, sq, mask, pass] = k;
    std::string suffix;
    if (v_dtype) suffix += "_" + dtype;
    if (v_batch) suffix += fmt::format("_b{}", b);
    if (v_hq) suffix += fmt::format("_h{}", hq);
    if (v_hkv) suffix += fmt::format("_hkv{}", hkv);
    if (v_d) suffix += fmt::format("_d{}", d);
    if (v_sq) suffix += sq < 0 ? "_qsame" : fmt::format("_q{}", sq);
    if (v_mask) suffix += "_" + mask;
    if (v_pass) suffix += "_" + std::string(pass == "fwd+bwd" ? "fwdbwd" : pass);
    const std::string heads = hq == hkv ? std::to_string(hq) : fmt::format("{}/{}", hq, hkv);
    const std::string queries = sq < 0 ? "" : fmt::format(" Sq={}", sq);
    for (const Metric* m : metrics) {
      LinePlot plot;
      std::string word = pass_word(pass), title = m->what, y_label = "TFLOP/s";
      if (m->unit) {
        title = word + " " + m->what;
        title[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(title[0])));
        const std::string what = m->what;
        y_label = fmt::format("{} {} ({})", word, what.substr(0, what.find(" (")), m->unit);
      }
      plot.title = fmt::format("{} vs sequence length: B={} H={}{} D={} {} {}{}", title, b, heads, queries, d, dtype,
                               mask == "full" ? "non-causal" : mask_words(mask),
                               device_name.empty() ? "" : ", " + device_name);
      plot.x_label = sq < 0 ? "sequence length" : "key/value sequence length";
      plot.y_label = y_label;
      plot.log_x = plot.log_y = true;
      for (const std::string& v : variant_order) {
        PlotSeries s{v, {}};
        for (const RunRecord* r : groups[k]) {
          if (r->variant != v) continue;
          const auto y = r->ok() ? m->value(*r) : std::nullopt;
          s.points.push_back({double(r->problem.seq_kv), y.value_or(std::numeric_limits<double>::quiet_NaN())});
        }
        plot.series.push_back(std::move(s));
      }
      const std::string path = io::join_path(dir, std::string(m->file) + suffix + ".svg");
      files.add(path, render_svg(plot));
      written.push_back(path);
    }
  }
  return written;
}

}  // namespace attnprof::report
