// Helpers shared by the SVG writers (svg_plot, timeline_svg): escaping text
// for XML, pixel formatting and "nice" axis steps. Pure functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace attnprof::report::svg {

// Text and attribute values: the five XML entities escaped; control characters
// other than tab and newline (not allowed in XML 1.0) become spaces.
std::string xml_escape(std::string_view s);

// A coordinate with one decimal, the precision every attnprof SVG uses.
std::string px(double v);

// The smallest 1, 2 or 5 times a power of ten that is >= raw (raw > 0).
double nice_step(double raw);

// Pixel width of `text` in a sans-serif font of `font_px`: about 0.6 em per
// character (bold sans averages that; regular is a little narrower), so a
// label sized by it never overflows.
double text_width_px(std::string_view text, double font_px);

// The font size, within [min_px, max_px], at which `text` fits in `room_px`
// (by text_width_px): titles shrink to the canvas instead of running off it.
double fitting_font_px(std::string_view text, double room_px, double min_px, double max_px);

// Tick values on a log axis from lo to hi (both > 0): each power of ten, with
// the 2x and 5x steps added when fewer than three decades are in view.
std::vector<double> log_tick_values(double lo, double hi);

// The colour of series `index`: Okabe-Ito, distinguishable under the common
// colour-vision deficiencies, yellow last (faint on white); repeats after 8.
std::string_view series_colour(size_t index);

}  // namespace attnprof::report::svg
