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

namespace attnprof::report {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

struct Element {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::string text;  // direct character data, entities decoded
};

// A minimal XML checker: balanced tags, one root, quoted attributes, no
// duplicate attributes, only the five predefined entities or character
// references, no raw '<' or '&' in text. Collects every element in order.
class XmlChecker {
 public:
  explicit XmlChecker(std::string doc) : doc_(std::move(doc)) {}

  std::vector<Element> parse() {
    skip_prolog();
    std::vector<size_t> open;  // indices into elements_
    int roots = 0;
    while (pos_ < doc_.size()) {
      if (doc_.compare(pos_, 4, "<!--") == 0) {
        const size_t end = doc_.find("-->", pos_);
        if (end == std::string::npos) fail("unterminated comment");
        pos_ = end + 3;
      } else if (doc_.compare(pos_, 2, "</") == 0) {
        const size_t end = doc_.find('>', pos_);
        if (end == std::string::npos) fail("unterminated end tag");
        const std::string name = doc_.substr(pos_ + 2, end - pos_ - 2);
        if (open.empty() || elements_[open.back()].name != name) fail("mismatched </" + name + ">");
        open.pop_back();
        pos_ = end + 1;
      } else if (doc_[pos_] == '<') {
        if (open.empty() && roots++ > 0) fail("second root element");
        const bool self_closing = parse_start_tag();
        if (!self_closing) open.push_back(elements_.size() - 1);
      } else {
        const size_t end = doc_.find('<', pos_);
        std::string text = decode(doc_.substr(pos_, end - pos_));
        if (open.empty() && text.find_first_not_of(" \t\r\n") != std::string::npos)
          fail("text outside the root");
        if (!open.empty()) elements_[open.back()].text += text;
        pos_ = end == std::string::npos ? doc_.size() : end;
      }
    }
    if (!open.empty()) fail("unclosed <" + elements_[open.back()].name + ">");
    if (roots != 1) fail("no root element");
    return elements_;
  }

 private:
  [[noreturn]] void fail(const std::string& why) {
    throw std::runtime_error("malformed XML at byte " + std::to_string(pos_) + ": " + why);
  }

  void skip_prolog() {
    if (doc_.compare(0, 5, "<?xml") == 0) {
      const size_t end = doc_.find("?>");
      if (end == std::string::npos) fail("unterminated XML declaration");
      pos_ = end + 2;
    }
  }

  static bool is_name_char(char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ':' ||
           c == '.';
  }

  std::string read_name() {
    const size_t start = pos_;
    while (pos_ < doc_.size() && is_name_char(doc_[pos_])) ++pos_;
    if (pos_ == start) fail("expected a name");
    return doc_.substr(start, pos_ - start);
  }

  void skip_space() {
    while (pos_ < doc_.size() && std::isspace(static_cast<unsigned char>(doc_[pos_]))) ++pos_;
  }

  // Returns true for <x/>.
  bool parse_start_tag() {
    ++pos_;
    Element e;
    e.name = read_name();
    for (;;) {
      skip_space();
      if (pos_ >= doc_.size()) fail("unterminated start tag");
      if (doc_.compare(pos_, 2, "/>") == 0) {
        pos_ += 2;
        elements_.push_back(std::move(e));
        return true;
      }
      if (doc_[pos_] == '>') {
        ++pos_;
        elements_.push_back(std::move(e));
        return false;
      }
      const std::string attr = read_name();
      skip_space();
      if (pos_ >= doc_.size() || doc_[pos_] != '=') fail("attribute without '='");
      ++pos_;
      skip_space();
      const char quote = doc_[pos_];
      if (quote != '"' && quote != '\'') fail("unquoted attribute");
      const size_t end = doc_.find(quote, pos_ + 1);
      if (end == std::string::npos) fail("unterminated attribute");
      const std::string raw = doc_.substr(pos_ + 1, end - pos_ - 1);
      if (raw.find('<') != std::string::npos) fail("'<' in attribute");
      if (!e.attributes.emplace(attr, decode(raw)).second) fail("duplicate attribute " + attr);
      pos_ = end + 1;
    }
  }

  std::string decode(const std::string& raw) {
    static const std::map<std::string, std::string> entities{
        {"amp", "&"}, {"lt", "<"}, {"gt", ">"}, {"quot", "\""}, {"apos", "'"}};
    std::string out;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (raw[i] != '&') {
        out += raw[i];
        continue;
      }
      const size_t semi = raw.find(';', i);
      if (semi == std::string::npos) fail("bare '&'");
      const std::string name = raw.substr(i + 1, semi - i - 1);
      if (auto it = entities.find(name); it != entities.end()) out += it->second;
      else if (name.empty() || name[0] != '#') fail("unknown entity &" + name + ";");
      i = semi;
    }
    return out;
  }

  std::string doc_;
  size_t pos_ = 0;
  std::vector<Element> elements_;
};

std::vector<Element> elements_named(const std::vector<Element>& all, const std::string& name) {
  std::vector<Element> out;
  for (const auto& e : all)
    if (e.name == name) out.push_back(e);
  return out;
}

std::vector<std::string> texts_of(const std::vector<Element>& all) {
  std::vector<std::string> out;
  for (const auto& e : elements_named(all, "text")) out.push_back(e.text);
  return out;
}

bool has_text(const std::vector<Element>& all, const std::string& text) {
  const auto texts = texts_of(all);
  return std::find(texts.begin(), texts.end(), text) != texts.end();
}

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
