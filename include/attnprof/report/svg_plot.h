// A self-contained SVG line plot: no scripts, no network, no external fonts,
// so a browser opens the file from disk as it is. Data in, markup out.
#pragma once

#include <string>
#include <vector>

namespace attnprof::report {

struct PlotPoint {
  double x = 0.0;
  double y = 0.0;  // NaN marks a missing point: the line breaks there
};

struct PlotSeries {
  std::string name;
  std::vector<PlotPoint> points;  // drawn in the given order
};

struct LinePlot {
  std::string title;
  std::string x_label;
  std::string y_label;
  bool log_x = false;
  bool log_y = false;
  std::vector<PlotSeries> series;
  int width = 860;   // px, legend included
  int height = 520;  // px
};

// One <path> per series (and no other <path>), markers as circles, squares,
// triangles and diamonds, a legend, and log ticks labelled 512, 1k, 2k, ...
// or 10, 100, 1k. Points that cannot be drawn (NaN or infinite values, and
// values <= 0 on a log axis) break the line like a missing point.
std::string render_svg(const LinePlot& plot);

// Tick labels: 1024 -> "1k" on a power-of-two axis, 1000 -> "1k" and
// 2500 -> "2.5k" on a decimal one, 0.05 -> "0.05".
std::string format_tick_label(double value, bool powers_of_two);

}  // namespace attnprof::report
