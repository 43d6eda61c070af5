#include "attnprof/report/svg_text.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>

namespace attnprof::report::svg {

std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') out += ' ';
        else out += c;
    }
  }
  return out;
}

std::string px(double v) { return fmt::format("{:.1f}", v); }

double nice_step(double raw) {
  const double decade = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0})
    if (m * decade >= raw) return m * decade;
  return 10.0 * decade;
}

double text_width_px(std::string_view text, double font_px) {
  // UTF-8 continuation bytes do not start a character.
  size_t chars = 0;
  for (char c : text) chars += (static_cast<unsigned char>(c) & 0xC0) != 0x80;
  return 0.6 * font_px * static_cast<double>(chars);
}

double fitting_font_px(std::string_view text, double room_px, double min_px, double max_px) {
  const double width_at_1px = std::max(text_width_px(text, 1.0), 0.6);
  return std::clamp(room_px / width_at_1px, min_px, max_px);
}

std::vector<double> log_tick_values(double lo, double hi) {
  const int first = static_cast<int>(std::floor(std::log10(lo)));
  const int last = static_cast<int>(std::ceil(std::log10(hi)));
  const bool add_2_and_5 = last - first < 3;
  std::vector<double> ticks;
  for (int e = first; e <= last; ++e) {
    for (double m : {1.0, 2.0, 5.0}) {
      if (m != 1.0 && !add_2_and_5) continue;
      const double v = m * std::pow(10.0, e);
      if (v >= lo * (1 - 1e-9) && v <= hi * (1 + 1e-9)) ticks.push_back(v);
    }
  }
  return ticks;
}

std::string_view series_colour(size_t index) {
  // Okabe-Ito's eight, then four of Tol's muted set: `--variant all` draws ten
  // series, and with eight colours naive and custom-flash shared one.
  static constexpr std::array<std::string_view, 12> kPalette{"#0072B2", "#E69F00", "#009E73", "#D55E00",
                                                              "#CC79A7", "#56B4E9", "#000000", "#F0E442",
                                                              "#882255", "#44AA99", "#999933", "#332288"};
  return kPalette[index % kPalette.size()];
}

}  // namespace attnprof::report::svg
