#include "attnprof/report/roofline_svg.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "attnprof/io/files.h"
#include "attnprof/report/at_a_glance.h"
#include "attnprof/report/kernel_names.h"
#include "attnprof/report/svg_plot.h"
#include "attnprof/report/svg_text.h"

namespace attnprof::report {
namespace {

using svg::px;
using svg::xml_escape;

constexpr double kLeft = 80.0, kTop = 74.0, kPlotHeight = 430.0, kLegendWidth = 220.0;
constexpr double kLabelFont = 10.5;
constexpr size_t kMaxNotDrawnLines = 12;
constexpr double kPi = 3.14159265358979323846;

struct LogAxis {
  double lo = 1, hi = 10;        // data units
  double p0 = 0, p1 = 1;         // pixels of lo and hi
  double pixel(double v) const { return p0 + (std::log10(v) - std::log10(lo)) / (std::log10(hi) - std::log10(lo)) * (p1 - p0); }
};

LogAxis log_axis(std::vector<double> values, double pad_below, double pad_above, double p0, double p1) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !(v > 0.0) || !std::isfinite(v); }),
               values.end());
  LogAxis a;
  a.p0 = p0, a.p1 = p1;
  if (values.empty()) return a;
  const auto [mn, mx] = std::minmax_element(values.begin(), values.end());
  a.lo = *mn / pad_below;
  a.hi = *mx * pad_above;
  if (a.hi / a.lo < 10.0) {  // at least a decade in view
    const double mid = std::sqrt(a.lo * a.hi);
    a.lo = mid / std::sqrt(10.0), a.hi = mid * std::sqrt(10.0);
  }
  return a;
}

struct Box {
  double x0, y0, x1, y1;
  bool overlaps(const Box& o) const { return x0 < o.x1 && o.x0 < x1 && y0 < o.y1 && o.y0 < y1; }
};

double dot_radius(double share) { return 3.0 + 13.0 * std::sqrt(std::clamp(share, 0.0, 1.0)); }

std::string axis_ticks(const LogAxis& x, const LogAxis& y, double top, double bottom, double left, double right) {
  std::string grid = "<g class=\"grid\" stroke=\"#e6e6e6\" stroke-width=\"1\">\n";
  std::string labels = "<g class=\"ticks\" fill=\"#333\">\n";
  for (double v : svg::log_tick_values(x.lo, x.hi)) {
    const std::string cx = px(x.pixel(v));
    grid += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n", cx, px(top), px(bottom));
    labels += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", cx, px(bottom + 18),
                          xml_escape(format_tick_label(v, false)));
  }
  for (double v : svg::log_tick_values(y.lo, y.hi)) {
    const double cy = y.pixel(v);
    grid += fmt::format("<line x1=\"{1}\" y1=\"{0}\" x2=\"{2}\" y2=\"{0}\"/>\n", px(cy), px(left), px(right));
    labels += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n", px(left - 8), px(cy + 4),
                          xml_escape(format_tick_label(v, false)));
  }
  return grid + "</g>\n" + labels + "</g>\n";
}

}  // namespace

bool has_counted_kernels(const RunRecord& r) {
  return r.counters && r.counters->state == CounterPass::State::collected && !r.counters->kernels.empty();
}

std::string roofline_title(const std::vector<RunRecord>& records) {
  if (records.empty()) return "attnprof roofline";
  const RunRecord& r = records.front();
  std::string device = r.problem.device;
  for (const RunRecord& x : records)
    if (!x.env.device_name.empty() && x.env.device_name != "CPU") {
      device += " (" + x.env.device_name + ")";
      break;
    }
  const char* unit = r.problem.pass == Pass::fwd ? "forward" : r.problem.pass == Pass::bwd ? "backward" : "step";
  return fmt::format("attnprof roofline: every kernel of one {}, {} {} on {}", unit, r.problem.shape_string(),
                     r.problem.config_string(), device);
}

Roofline roofline_of(const std::vector<RunRecord>& records, const std::string& title) {
  Roofline out;
  out.title = title;
  std::optional<DeviceCeilings> ceilings;
  for (const RunRecord& r : records)
    if (has_counted_kernels(r) && r.counters->ceilings) {
      ceilings = r.counters->ceilings;
      break;
    }
  const std::string dtype = records.empty() ? "bf16" : dtype_name(records.front().problem.dtype);
  if (ceilings) {
    if (ceilings->copy_gbps > 0) {
      out.dram_gbps = ceilings->copy_gbps;
      out.dram_label = fmt::format("DRAM copy {:.0f} GB/s", ceilings->copy_gbps);
    }
    if (dtype != "fp32")
      if (const auto t = gemm_ceiling_tflops(*ceilings, dtype))
        out.roofs.push_back({fmt::format("{} GEMM {:.0f} TFLOP/s", dtype, *t), *t});
    if (ceilings->gemm_fp32_tflops > 0)
      out.roofs.push_back({fmt::format("fp32 GEMM {:.1f} TFLOP/s", ceilings->gemm_fp32_tflops), ceilings->gemm_fp32_tflops});
    out.subtitle = fmt::format("x: FLOP per DRAM byte; y: achieved TFLOP/s (hardware counters of one counter pass); "
                               "roofs measured on this GPU ({}, {})",
                               ceilings->device, ceilings->measured_at);
  } else {
    out.subtitle = "x: FLOP per DRAM byte; y: achieved TFLOP/s (hardware counters); no ceilings measured: no roofs";
  }
  for (const RunRecord& r : records) {
    if (!has_counted_kernels(r)) continue;
    const size_t run = out.runs.size();
    out.runs.push_back(r.variant);
    double total = 0;
    for (const KernelCounters& k : r.counters->kernels) total += k.values.duration_ns.value_or(0.0);
    for (const KernelCounters& k : r.counters->kernels) {
      const KernelFigures f = kernel_figures(k, r.counters->ceilings);
      const double share = total > 0 ? k.values.duration_ns.value_or(0.0) / total : 0.0;
      const std::string label = r.variant + " \u00b7 " + kernel_symbol(k.kernel, 40);
      std::string missing;
      if (!f.flops || *f.flops <= 0) missing = "no FLOPs counted";
      else if (!f.dram_bytes || *f.dram_bytes <= 0) missing = "no DRAM bytes counted";
      else if (!f.tflops) missing = "no duration counted";
      if (!missing.empty()) {
        out.not_drawn.push_back(fmt::format("{} ({:.0f}% of its time): {}", label, 100.0 * share, missing));
        continue;
      }
      out.dots.push_back({run, k.kernel, label, *f.flop_per_byte, *f.tflops, share, f.flops_analytic, f.verdict.text});
    }
  }
  std::sort(out.roofs.begin(), out.roofs.end(), [](const RooflineRoof& a, const RooflineRoof& b) { return a.tflops > b.tflops; });
  return out;
}

std::string render_roofline_svg(const Roofline& rf) {
  const double right = rf.width - kLegendWidth - 20.0;
  const double bottom = kTop + kPlotHeight;
  std::vector<double> xs, ys;
  for (const RooflineDot& d : rf.dots) xs.push_back(d.flop_per_byte), ys.push_back(d.tflops);
  for (const RooflineRoof& r : rf.roofs) {
    ys.push_back(r.tflops);
    if (rf.dram_gbps) xs.push_back(1000.0 * r.tflops / *rf.dram_gbps);  // the ridge point
  }
  if (ys.size() == rf.roofs.size() && !ys.empty()) ys.push_back(*std::min_element(ys.begin(), ys.end()) / 1000.0);
  const LogAxis x = log_axis(xs, 3.0, 3.0, kLeft, right);
  const LogAxis y = log_axis(ys, 3.0, 2.0, bottom, kTop);
  const size_t note_lines = std::min(rf.not_drawn.size(), kMaxNotDrawnLines) + (rf.not_drawn.empty() ? 0 : 1) +
                            (rf.not_drawn.size() > kMaxNotDrawnLines ? 1 : 0);
  const double height = std::max<double>(rf.height, bottom + 64.0 + 15.0 * double(note_lines) + 10.0);

  std::string out = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"sans-serif\" font-size=\"12\">\n<title>{2}</title>\n"
      "<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      rf.width, px(height), xml_escape(rf.title));
  out += fmt::format("<text class=\"title\" x=\"12\" y=\"26\" font-size=\"{}\" font-weight=\"bold\">{}</text>\n",
                     px(svg::fitting_font_px(rf.title, rf.width - 24.0, 9.0, 15.0)), xml_escape(rf.title));
  out += fmt::format("<text class=\"subtitle\" x=\"12\" y=\"46\" font-size=\"{}\" fill=\"#555\">{}</text>\n",
                     px(svg::fitting_font_px(rf.subtitle, rf.width - 24.0, 8.0, 11.5)), xml_escape(rf.subtitle));
  out += axis_ticks(x, y, kTop, bottom, kLeft, right);
  out += fmt::format(
      "<g stroke=\"#333\" stroke-width=\"1.2\">\n<line x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\"/>\n"
      "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{2}\"/>\n</g>\n",
      px(kLeft), px(right), px(bottom), px(kTop));
  out += fmt::format("<text class=\"x-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\">FLOP per DRAM "
                     "byte (read + written)</text>\n",
                     px((kLeft + right) / 2), px(bottom + 40));
  out += fmt::format("<text class=\"y-label\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" font-size=\"13\" "
                     "transform=\"rotate(-90 {0} {1})\">achieved TFLOP/s</text>\n",
                     px(kLeft - 56), px((kTop + bottom) / 2));

  // Roofs: the bandwidth slope up to the highest ridge, each flat roof from its ridge on.
  out += "<g class=\"roofs\" fill=\"none\">\n";
  const auto clip_x = [&](double v) { return std::clamp(v, x.lo, x.hi); };
  if (rf.dram_gbps && !rf.roofs.empty()) {
    const double bw = *rf.dram_gbps;
    const double x_start = clip_x(std::max(x.lo, 1000.0 * y.lo / bw));
    const double x_end = clip_x(1000.0 * rf.roofs.front().tflops / bw);
    const double x0 = x.pixel(x_start), y0 = y.pixel(bw * x_start / 1000.0);
    const double x1 = x.pixel(x_end), y1 = y.pixel(bw * x_end / 1000.0);
    out += fmt::format("<line class=\"roof slope\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#444\" "
                       "stroke-width=\"2\"><title>{}</title></line>\n",
                       px(x0), px(y0), px(x1), px(y1), xml_escape(rf.dram_label));
    const double angle = std::atan2(y1 - y0, x1 - x0) * 180.0 / kPi;
    const double lx = x0 + (x1 - x0) * 0.12, ly = y0 + (y1 - y0) * 0.12 - 6.0;
    out += fmt::format("<text class=\"roof-label\" x=\"{0}\" y=\"{1}\" fill=\"#444\" font-size=\"11\" "
                       "transform=\"rotate({2:.1f} {0} {1})\">{3}</text>\n",
                       px(lx), px(ly), angle, xml_escape(rf.dram_label));
  }
  for (const RooflineRoof& r : rf.roofs) {
    const double from = rf.dram_gbps ? clip_x(1000.0 * r.tflops / *rf.dram_gbps) : x.lo;
    const double cy = y.pixel(r.tflops);
    out += fmt::format("<line class=\"roof\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"#444\" stroke-width=\"2\">"
                       "<title>{}</title></line>\n",
                       px(x.pixel(from)), px(cy), px(right), px(cy), xml_escape(r.label));
    out += fmt::format("<text class=\"roof-label\" x=\"{}\" y=\"{}\" text-anchor=\"end\" fill=\"#444\" "
                       "font-size=\"11\">{}</text>\n",
                       px(right - 4), px(cy - 5), xml_escape(r.label));
  }
  out += "</g>\n";

  // Dots, largest first so small ones stay visible on top; labels placed
  // greedily where they overlap no label placed before (else only the tooltip).
  std::vector<size_t> order(rf.dots.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return rf.dots[a].share > rf.dots[b].share; });
  std::string dots = "<g class=\"dots\">\n", labels = "<g class=\"dot-labels\" font-size=\"10.5\">\n";
  std::vector<Box> placed;
  for (size_t i : order) {
    const RooflineDot& d = rf.dots[i];
    const double cx = x.pixel(d.flop_per_byte), cy = y.pixel(d.tflops), r = dot_radius(d.share);
    const std::string_view colour = svg::series_colour(d.run);
    dots += fmt::format(
        "<circle class=\"dot\" data-run=\"{}\" data-kernel=\"{}\" cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" "
        "fill-opacity=\"{}\" stroke=\"{}\" stroke-width=\"{}\"><title>{}</title></circle>\n",
        xml_escape(d.run < rf.runs.size() ? rf.runs[d.run] : ""), xml_escape(d.kernel), px(cx), px(cy), px(r),
        d.analytic ? "white" : colour, d.analytic ? "0" : "0.7", d.analytic ? colour : "white",
        d.analytic ? "2" : "1",
        xml_escape(fmt::format("{}\n{}\n{:.3g} TFLOP/s{} at {:.3g} FLOP/byte; {:.0f}% of its time\n{}", d.label,
                               d.kernel, d.tflops, d.analytic ? " (analytic FLOPs)" : "", d.flop_per_byte,
                               100.0 * d.share, d.verdict)));
    const double w = svg::text_width_px(d.label, kLabelFont);
    for (double dy : {0.0, -12.0, 12.0, -24.0, 24.0}) {
      const bool left_side = cx + r + 3.0 + w > right;
      const double lx = left_side ? cx - r - 3.0 - w : cx + r + 3.0;
      const Box b{lx, cy + dy - 8.0, lx + w, cy + dy + 4.0};
      if (b.x0 < kLeft || b.y0 < kTop || b.y1 > bottom) continue;
      if (std::any_of(placed.begin(), placed.end(), [&](const Box& o) { return o.overlaps(b); })) continue;
      placed.push_back(b);
      // A label away from its dot (pushed up or down past a neighbour) gets a leader line to it.
      if (dy != 0.0)
        labels += fmt::format("<line class=\"dot-leader\" x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" "
                              "stroke-width=\"0.8\"/>\n",
                              px(left_side ? lx + w : lx), px(cy + dy - 3.0), px(left_side ? cx - r : cx + r), px(cy),
                              colour);
      labels += fmt::format("<text class=\"dot-label\" x=\"{}\" y=\"{}\" fill=\"#222\">{}</text>\n", px(lx),
                            px(cy + dy), xml_escape(d.label));
      break;
    }
  }
  out += dots + "</g>\n" + labels + "</g>\n";

  // Legend: one colour per run, then what the dot sizes and hollow dots mean.
  const double lx = right + 24.0;
  double ly = kTop + 6.0;
  out += "<g class=\"legend\">\n";
  for (size_t i = 0; i < rf.runs.size(); ++i, ly += 20.0)
    out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"6\" fill=\"{}\" fill-opacity=\"0.7\"/>\n<text x=\"{}\" "
                       "y=\"{}\">{}</text>\n",
                       px(lx + 6), px(ly), svg::series_colour(i), px(lx + 18), px(ly + 4), xml_escape(rf.runs[i]));
  ly += 10.0;
  out += fmt::format("<text x=\"{}\" y=\"{}\" font-size=\"10.5\" fill=\"#555\">dot area: share of the run's</text>\n"
                     "<text x=\"{}\" y=\"{}\" font-size=\"10.5\" fill=\"#555\">counted kernel time</text>\n",
                     px(lx), px(ly), px(lx), px(ly + 13));
  ly += 34.0;
  out += fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"6\" fill=\"white\" stroke=\"#555\" stroke-width=\"2\"/>\n"
                     "<text x=\"{}\" y=\"{}\" font-size=\"10.5\" fill=\"#555\">analytic FLOPs (none counted)</text>\n",
                     px(lx + 6), px(ly), px(lx + 18), px(ly + 4));
  out += "</g>\n";

  if (!rf.not_drawn.empty()) {
    double ny = bottom + 64.0;
    out += "<g class=\"not-drawn\" font-size=\"10.5\" fill=\"#555\">\n";
    out += fmt::format("<text x=\"12\" y=\"{}\" font-weight=\"bold\">Not on the roofline:</text>\n", px(ny));
    for (size_t i = 0; i < rf.not_drawn.size() && i < kMaxNotDrawnLines; ++i)
      out += fmt::format("<text class=\"not-drawn-kernel\" x=\"24\" y=\"{}\">{}</text>\n", px(ny += 15.0),
                         xml_escape(rf.not_drawn[i]));
    if (rf.not_drawn.size() > kMaxNotDrawnLines)
      out += fmt::format("<text x=\"24\" y=\"{}\">and {} more</text>\n", px(ny += 15.0),
                         rf.not_drawn.size() - kMaxNotDrawnLines);
    out += "</g>\n";
  }
  return out + "</svg>\n";
}

bool stage_roofline(io::StagedFiles& files, const std::vector<RunRecord>& records, const std::string& path) {
  if (std::none_of(records.begin(), records.end(), has_counted_kernels)) {
    files.remove_at_publish(path);  // an earlier run's picture must not sit beside this set
    return false;
  }
  files.add(path, render_roofline_svg(roofline_of(records, roofline_title(records))));
  return true;
}

}  // namespace attnprof::report
