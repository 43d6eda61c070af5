#include "attnprof/report/svg_plot.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>

#include "xml_checker.h"

namespace attnprof::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

using testing::Element;
using testing::elements_named;
using testing::has_text;
using testing::texts_of;
using testing::XmlChecker;

size_t count_moves(const std::string& d) { return static_cast<size_t>(std::count(d.begin(), d.end(), 'M')); }

LinePlot sweep_plot() {
  LinePlot plot;
  plot.title = "Forward GPU time vs sequence length";
  plot.x_label = "sequence length";
  plot.y_label = "forward GPU time (µs)";
  plot.log_x = plot.log_y = true;
  const double seqs[] = {512, 1024, 2048, 4096, 8192, 16384};
  PlotSeries naive{"naive", {}}, flash{"sdpa-flash", {}}, cudnn{"sdpa-cudnn", {}};
  for (double s : seqs) {
    naive.points.push_back({s, s <= 4096 ? 0.6 * s * s / 1000.0 : kNaN});  // OOM past 4k
    flash.points.push_back({s, 0.055 * s * s / 1000.0 + 10.0});
    cudnn.points.push_back({s, 0.03 * s * s / 1000.0 + 8.0});
  }
  plot.series = {naive, flash, cudnn};
  return plot;
}

TEST(SvgPlot, SweepPlotIsWellFormedAndComplete) {
  const std::string svg = render_svg(sweep_plot());
  const auto elements = XmlChecker(svg).parse();
  ASSERT_EQ(elements.front().name, "svg");
  EXPECT_EQ(elements.front().attributes.at("xmlns"), "http://www.w3.org/2000/svg");
  EXPECT_EQ(elements_named(elements, "path").size(), 3u) << "one path per series";
  EXPECT_TRUE(has_text(elements, "sequence length"));
  EXPECT_TRUE(has_text(elements, "forward GPU time (µs)"));
  EXPECT_TRUE(has_text(elements, "Forward GPU time vs sequence length"));
  for (const char* name : {"naive", "sdpa-flash", "sdpa-cudnn"}) EXPECT_TRUE(has_text(elements, name)) << name;
  for (const char* tick : {"512", "1k", "2k", "4k", "8k", "16k"}) EXPECT_TRUE(has_text(elements, tick)) << tick;
  for (const char* tick : {"100", "1k", "10k"}) EXPECT_TRUE(has_text(elements, tick)) << tick;
}

TEST(SvgPlot, SeriesColoursAreDistinct) {
  const auto paths = elements_named(XmlChecker(render_svg(sweep_plot())).parse(), "path");
  std::set<std::string> colours;
  for (const auto& p : paths) colours.insert(p.attributes.at("stroke"));
  EXPECT_EQ(colours.size(), paths.size());
}

TEST(SvgPlot, MissingPointsBreakTheLine) {
  LinePlot plot = sweep_plot();
  plot.series = {{"gappy", {{1, 1}, {2, 2}, {3, kNaN}, {4, 4}, {5, 5}}}};
  const auto paths = elements_named(XmlChecker(render_svg(plot)).parse(), "path");
  ASSERT_EQ(paths.size(), 1u);
  EXPECT_EQ(count_moves(paths[0].attributes.at("d")), 2u);
}

TEST(SvgPlot, NonPositiveValuesAreSkippedOnLogAxes) {
  LinePlot plot = sweep_plot();
  plot.series = {{"zeros", {{0, 5}, {1, 10}, {2, -3}, {4, 40}, {8, 80}}}};
  const std::string svg = render_svg(plot);
  const auto elements = XmlChecker(svg).parse();
  const auto paths = elements_named(elements, "path");
  ASSERT_EQ(paths.size(), 1u);
  const std::string d = paths[0].attributes.at("d");
  EXPECT_EQ(count_moves(d), 2u);
  EXPECT_EQ(d.find("nan"), std::string::npos);
  EXPECT_EQ(d.find("inf"), std::string::npos);
  EXPECT_EQ(elements_named(elements, "circle").size(), 3u + 1u) << "3 drawable points + legend";
}

TEST(SvgPlot, SinglePointGetsAMarkerAndFiniteCoordinates) {
  LinePlot plot;
  plot.title = "one";
  plot.log_x = true;
  plot.series = {{"only", {{1024, 42}}}};
  const std::string svg = render_svg(plot);
  const auto elements = XmlChecker(svg).parse();
  EXPECT_EQ(elements_named(elements, "path").size(), 1u);
  EXPECT_EQ(elements_named(elements, "circle").size(), 2u);  // the point and its legend marker
  EXPECT_EQ(svg.find("nan"), std::string::npos);
  EXPECT_EQ(svg.find("inf"), std::string::npos);
  EXPECT_TRUE(has_text(elements, "1k"));
}

TEST(SvgPlot, EmptyAndAllMissingSeriesStillRender) {
  LinePlot plot;
  plot.log_x = plot.log_y = true;
  plot.series = {{"empty", {}}, {"missing", {{512, kNaN}, {-1, 3}}}};
  const std::string svg = render_svg(plot);
  const auto elements = XmlChecker(svg).parse();
  EXPECT_EQ(elements_named(elements, "path").size(), 2u);
  EXPECT_EQ(svg.find("nan"), std::string::npos);
}

TEST(SvgPlot, NamesAndLabelsAreEscaped) {
  LinePlot plot;
  plot.title = "a <b> & \"c\"";
  plot.x_label = "x's";
  plot.y_label = "y </text>";
  plot.series = {{"<script>alert(1)</script> & co", {{1, 1}, {2, 2}}}};
  const std::string svg = render_svg(plot);
  const auto elements = XmlChecker(svg).parse();
  EXPECT_TRUE(elements_named(elements, "script").empty());
  EXPECT_TRUE(has_text(elements, "a <b> & \"c\""));
  EXPECT_TRUE(has_text(elements, "x's"));
  EXPECT_TRUE(has_text(elements, "y </text>"));
  EXPECT_TRUE(has_text(elements, "<script>alert(1)</script> & co"));
}

TEST(SvgPlot, SelfContained) {
  const std::string svg = render_svg(sweep_plot());
  for (const char* banned : {"<script", "href", "@import", "url(", "<image", "<foreignObject"})
    EXPECT_EQ(svg.find(banned), std::string::npos) << banned;
  // The namespace URI is a name, not a fetch; it is the only URL allowed.
  EXPECT_EQ(svg.find("http"), svg.rfind("http"));
}

TEST(SvgPlot, WrittenFileParsesBack) {
  const auto path = std::filesystem::temp_directory_path() / "attnprof_svg_plot_test.svg";
  const std::string svg = render_svg(sweep_plot());
  std::ofstream(path, std::ios::binary) << svg;
  std::stringstream back;
  back << std::ifstream(path, std::ios::binary).rdbuf();
  std::filesystem::remove(path);
  EXPECT_EQ(back.str(), svg);
  EXPECT_NO_THROW(XmlChecker(back.str()).parse());
}

TEST(SvgPlot, CheckerRejectsMalformedXml) {
  for (const char* bad : {"<svg><g></svg>", "<svg a=1/>", "<svg>&foo;</svg>", "<a/><b/>",
                          "<svg a=\"1\" a=\"2\"/>", "<svg>"}) {
    EXPECT_THROW(XmlChecker(bad).parse(), std::runtime_error) << bad;
  }
}

TEST(SvgPlot, TickLabels) {
  EXPECT_EQ(format_tick_label(512, true), "512");
  EXPECT_EQ(format_tick_label(1024, true), "1k");
  EXPECT_EQ(format_tick_label(16384, true), "16k");
  EXPECT_EQ(format_tick_label(1048576, true), "1M");
  EXPECT_EQ(format_tick_label(10, false), "10");
  EXPECT_EQ(format_tick_label(1000, false), "1k");
  EXPECT_EQ(format_tick_label(2500, false), "2.5k");
  EXPECT_EQ(format_tick_label(2e6, false), "2M");
  EXPECT_EQ(format_tick_label(0.05, false), "0.05");
  EXPECT_EQ(format_tick_label(0, false), "0");
}

}  // namespace
}  // namespace attnprof::report
