#include "attnprof/report/svg_plot.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdint>

#include <fmt/format.h>

#include "attnprof/report/svg_text.h"

namespace attnprof::report {
namespace {

using svg::nice_step;
using svg::px;
using svg::series_colour;
using svg::xml_escape;

constexpr int kMarkerShapes = 4;  // with 8 colours, 32 series stay distinct

struct Tick {
  double value;
  std::string label;
};

struct Axis {
  bool log = false;
  bool powers_of_two = false;
  double lo = 0.0;  // shown range, data units
  double hi = 1.0;
  std::vector<Tick> ticks;

  double transform(double v) const { return log ? std::log10(v) : v; }
  // 0 at `lo`, 1 at `hi`.
  double unit(double v) const {
    return (transform(v) - transform(lo)) / (transform(hi) - transform(lo));
  }
};

struct Frame {  // plot area, pixels
  double left, right, top, bottom;
};

bool drawable(double v, bool log) { return std::isfinite(v) && (!log || v > 0.0); }

bool drawable(const PlotPoint& p, const LinePlot& plot) {
  return drawable(p.x, plot.log_x) && drawable(p.y, plot.log_y);
}

std::vector<double> drawable_values(const LinePlot& plot, double PlotPoint::*coordinate) {
  std::vector<double> values;
  for (const auto& s : plot.series)
    for (const auto& p : s.points)
      if (drawable(p, plot)) values.push_back(p.*coordinate);
  return values;
}

bool is_power_of_two(double v) {
  if (v < 1.0 || v > 9.0e15 || v != std::floor(v)) return false;
  const auto n = static_cast<uint64_t>(v);
  return (n & (n - 1)) == 0;
}

std::vector<Tick> linear_ticks(double lo, double hi, bool powers_of_two) {
  const double step = nice_step((hi - lo) / 5.0);
  std::vector<Tick> ticks;
  for (double k = std::ceil(lo / step - 1e-9); k * step <= hi + step * 1e-9; k += 1.0) {
    const double v = k * step == 0.0 ? 0.0 : k * step;  // no "-0"
    ticks.push_back({v, format_tick_label(v, powers_of_two)});
  }
  return ticks;
}

// Sequence lengths are powers of two: ticks at each one (every other one past
// ten ticks), labelled 512, 1k, 2k rather than 10^3.
std::vector<Tick> power_of_two_ticks(double lo, double hi) {
  const int first = static_cast<int>(std::ceil(std::log2(lo) - 1e-9));
  const int last = static_cast<int>(std::floor(std::log2(hi) + 1e-9));
  const int stride = std::max(1, (last - first + 10) / 10);
  std::vector<Tick> ticks;
  for (int e = first; e <= last; e += stride) {
    const double v = std::ldexp(1.0, e);
    ticks.push_back({v, format_tick_label(v, true)});
  }
  return ticks;
}

// Decades, with 2x and 5x added when fewer than three decades are in view;
// linear ticks when even those give fewer than two.
std::vector<Tick> decimal_log_ticks(double lo, double hi) {
  std::vector<Tick> ticks;
  for (double v : svg::log_tick_values(lo, hi)) ticks.push_back({v, format_tick_label(v, false)});
  return ticks.size() >= 2 ? ticks : linear_ticks(lo, hi, false);
}

// The shown range is the data range plus 4% each side, so markers at the
// extremes are not cut by the frame.
void pad_range(Axis& axis) {
  const double t_lo = axis.transform(axis.lo), t_hi = axis.transform(axis.hi);
  const double margin = (t_hi - t_lo) * 0.04;
  axis.lo = axis.log ? std::pow(10.0, t_lo - margin) : t_lo - margin;
  axis.hi = axis.log ? std::pow(10.0, t_hi + margin) : t_hi + margin;
}

Axis make_axis(const std::vector<double>& values, bool log) {
  Axis axis;
  axis.log = log;
  if (values.empty()) {
    axis.lo = log ? 1.0 : 0.0;
    axis.hi = 10.0;
  } else {
    axis.lo = *std::min_element(values.begin(), values.end());
    axis.hi = *std::max_element(values.begin(), values.end());
  }
  if (axis.lo == axis.hi) {  // one point, or all equal: give it a span to sit in
    if (log) {
      axis.lo /= 2.0;
      axis.hi *= 2.0;
    } else {
      const double half = std::max(1.0, std::abs(axis.lo) * 0.1);
      axis.lo -= half;
      axis.hi += half;
    }
  }
  axis.powers_of_two = log && !values.empty() &&
                       std::all_of(values.begin(), values.end(), is_power_of_two);
  if (!log) {
    axis.ticks = linear_ticks(axis.lo, axis.hi, false);
    axis.lo = std::min(axis.lo, axis.ticks.front().value);
    axis.hi = std::max(axis.hi, axis.ticks.back().value);
    return axis;
  }
  axis.ticks = axis.powers_of_two ? power_of_two_ticks(axis.lo, axis.hi)
                                  : decimal_log_ticks(axis.lo, axis.hi);
  pad_range(axis);
  return axis;
}

double x_pixel(const Axis& x, const Frame& f, double v) {
  return f.left + x.unit(v) * (f.right - f.left);
}
double y_pixel(const Axis& y, const Frame& f, double v) {
  return f.bottom - y.unit(v) * (f.bottom - f.top);
}

std::string render_grid_and_ticks(const Axis& x, const Axis& y, const Frame& f) {
  std::string grid = "<g stroke=\"#e0e0e0\" stroke-width=\"1\">\n";
  std::string labels = "<g fill=\"#333\">\n";
  for (const auto& t : x.ticks) {
    const std::string cx = px(x_pixel(x, f, t.value));
    grid += fmt::format("<line x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n", cx, px(f.top),
                        px(f.bottom));
    labels += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"middle\">{}</text>\n", cx,
                          px(f.bottom + 18), xml_escape(t.label));
  }
  for (const auto& t : y.ticks) {
    const std::string cy = px(y_pixel(y, f, t.value));
    grid += fmt::format("<line x1=\"{1}\" y1=\"{0}\" x2=\"{2}\" y2=\"{0}\"/>\n", cy, px(f.left),
                        px(f.right));
    labels += fmt::format("<text x=\"{}\" y=\"{}\" text-anchor=\"end\">{}</text>\n",
                          px(f.left - 8), px(y_pixel(y, f, t.value) + 4), xml_escape(t.label));
  }
  return grid + "</g>\n" + labels + "</g>\n";
}

std::string render_axes(const LinePlot& plot, const Frame& f) {
  std::string out = fmt::format(
      "<g stroke=\"#333\" stroke-width=\"1.2\">\n"
      "<line x1=\"{0}\" y1=\"{2}\" x2=\"{1}\" y2=\"{2}\"/>\n"
      "<line x1=\"{0}\" y1=\"{3}\" x2=\"{0}\" y2=\"{2}\"/>\n</g>\n",
      px(f.left), px(f.right), px(f.bottom), px(f.top));
  const double mid_x = (f.left + f.right) / 2, mid_y = (f.top + f.bottom) / 2;
  out += fmt::format(
      "<text class=\"x-label\" x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"13\">{}</text>\n",
      px(mid_x), px(f.bottom + 42), xml_escape(plot.x_label));
  out += fmt::format(
      "<text class=\"y-label\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\" font-size=\"13\" "
      "transform=\"rotate(-90 {0} {1})\">{2}</text>\n",
      px(f.left - 58), px(mid_y), xml_escape(plot.y_label));
  // Left-aligned and shrunk to the canvas: a centred 16 px title of ~90
  // characters ran off both edges of the 860 px plot (seen in the H200 sweep).
  const double title_px = svg::fitting_font_px(plot.title, plot.width - 2 * 12.0, 9.0, 16.0);
  out += fmt::format(
      "<text class=\"title\" x=\"12\" y=\"28\" text-anchor=\"start\" font-size=\"{}\" "
      "font-weight=\"bold\">{}</text>\n",
      px(title_px), xml_escape(plot.title));
  return out;
}

std::string render_marker(int shape, double cx, double cy, std::string_view colour) {
  constexpr double r = 3.5;
  switch (shape % kMarkerShapes) {
    case 0:
      return fmt::format("<circle cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\"/>\n", px(cx), px(cy), r,
                         colour);
    case 1:
      return fmt::format("<rect x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\"/>\n",
                         px(cx - r), px(cy - r), 2 * r, 2 * r, colour);
    case 2:
      return fmt::format("<polygon points=\"{},{} {},{} {},{}\" fill=\"{}\"/>\n", px(cx),
                         px(cy - r - 1), px(cx - r - 1), px(cy + r), px(cx + r + 1), px(cy + r),
                         colour);
    default:
      return fmt::format("<polygon points=\"{},{} {},{} {},{} {},{}\" fill=\"{}\"/>\n", px(cx),
                         px(cy - r - 1), px(cx + r + 1), px(cy), px(cx), px(cy + r + 1),
                         px(cx - r - 1), px(cy), colour);
  }
}

// One <path>, restarted with "M" after each point that cannot be drawn.
std::string render_series(const LinePlot& plot, size_t index, const Axis& x, const Axis& y,
                          const Frame& f) {
  const PlotSeries& series = plot.series[index];
  const std::string_view colour = series_colour(index);
  std::string d, markers;
  bool pen_down = false;
  for (const auto& p : series.points) {
    if (!drawable(p, plot)) {
      pen_down = false;
      continue;
    }
    const double cx = x_pixel(x, f, p.x), cy = y_pixel(y, f, p.y);
    d += fmt::format("{}{} {} ", pen_down ? "L" : "M", px(cx), px(cy));
    pen_down = true;
    markers += render_marker(static_cast<int>(index), cx, cy, colour);
  }
  if (!d.empty()) d.pop_back();
  return fmt::format(
      "<g class=\"series\">\n<path d=\"{}\" fill=\"none\" stroke=\"{}\" stroke-width=\"2\" "
      "stroke-linejoin=\"round\"><title>{}</title></path>\n{}</g>\n",
      d, colour, xml_escape(series.name), markers);
}

std::string render_legend(const LinePlot& plot, double left, double top) {
  std::string out = "<g class=\"legend\">\n";
  for (size_t i = 0; i < plot.series.size(); ++i) {
    const double cy = top + 20.0 * static_cast<double>(i);
    const std::string_view colour = series_colour(i);
    out += fmt::format(
        "<line x1=\"{}\" y1=\"{}\" x2=\"{}\" y2=\"{}\" stroke=\"{}\" stroke-width=\"2\"/>\n",
        px(left), px(cy), px(left + 24), px(cy), colour);
    out += render_marker(static_cast<int>(i), left + 12, cy, colour);
    out += fmt::format("<text x=\"{}\" y=\"{}\">{}</text>\n", px(left + 30), px(cy + 4),
                       xml_escape(plot.series[i].name));
  }
  return out + "</g>\n";
}

// Wide enough for the longest series name at ~7 px per character of 12 px sans.
double legend_width(const LinePlot& plot) {
  size_t longest = 0;
  for (const auto& s : plot.series) longest = std::max(longest, s.name.size());
  return std::clamp(48.0 + 7.0 * static_cast<double>(longest), 120.0, 320.0);
}

}  // namespace

std::string format_tick_label(double value, bool powers_of_two) {
  const double magnitude = std::abs(value);
  if (powers_of_two && magnitude >= 1024.0) {
    const bool mebi = magnitude >= 1048576.0;
    return fmt::format("{:.4g}{}", value / (mebi ? 1048576.0 : 1024.0), mebi ? "M" : "k");
  }
  static constexpr std::array<std::pair<double, std::string_view>, 3> kSuffixes{
      {{1e9, "G"}, {1e6, "M"}, {1e3, "k"}}};
  for (auto [scale, suffix] : kSuffixes)
    if (magnitude >= scale) return fmt::format("{:.4g}{}", value / scale, suffix);
  return fmt::format("{:.4g}", value);
}

std::string render_svg(const LinePlot& plot) {
  const double width = plot.width, height = plot.height;
  const Frame frame{80.0, width - legend_width(plot) - 20.0, 50.0, height - 60.0};
  const Axis x = make_axis(drawable_values(plot, &PlotPoint::x), plot.log_x);
  const Axis y = make_axis(drawable_values(plot, &PlotPoint::y), plot.log_y);

  std::string svg = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" font-family=\"sans-serif\" font-size=\"12\">\n"
      "<title>{2}</title>\n<rect width=\"{0}\" height=\"{1}\" fill=\"white\"/>\n",
      plot.width, plot.height, xml_escape(plot.title));
  svg += render_grid_and_ticks(x, y, frame);
  svg += render_axes(plot, frame);
  for (size_t i = 0; i < plot.series.size(); ++i) svg += render_series(plot, i, x, y, frame);
  svg += render_legend(plot, frame.right + 20.0, frame.top + 6.0);
  return svg + "</svg>\n";
}

}  // namespace attnprof::report
