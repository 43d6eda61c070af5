// A minimal XML well-formedness checker for the SVG writers' tests: balanced
// tags, one root, quoted attributes, no duplicate attributes, only the five
// predefined entities or character references, no raw '<' or '&' in text.
#pragma once

#include <algorithm>
#include <cctype>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace attnprof::testing {

struct Element {
  std::string name;
  std::map<std::string, std::string> attributes;
  std::string text;  // direct character data, entities decoded
  int parent = -1;   // index of the enclosing element, -1 for the root
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
        const bool self_closing = parse_start_tag(open.empty() ? -1 : static_cast<int>(open.back()));
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
  bool parse_start_tag(int parent) {
    ++pos_;
    Element e;
    e.parent = parent;
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

inline std::vector<Element> elements_named(const std::vector<Element>& all, const std::string& name) {
  std::vector<Element> out;
  for (const auto& e : all)
    if (e.name == name) out.push_back(e);
  return out;
}

inline std::vector<std::string> texts_of(const std::vector<Element>& all) {
  std::vector<std::string> out;
  for (const auto& e : elements_named(all, "text")) out.push_back(e.text);
  return out;
}

inline bool has_text(const std::vector<Element>& all, const std::string& text) {
  const auto texts = texts_of(all);
  return std::find(texts.begin(), texts.end(), text) != texts.end();
}

// Indices of the elements inside element `index` (children, grandchildren,
// ...), in document order: they follow it, up to the first that is not inside.
inline std::vector<size_t> descendants(const std::vector<Element>& all, size_t index) {
  std::vector<size_t> out;
  for (size_t i = index + 1; i < all.size(); ++i) {
    int p = all[i].parent;
    while (p > static_cast<int>(index)) p = all[static_cast<size_t>(p)].parent;
    if (p != static_cast<int>(index)) break;
    out.push_back(i);
  }
  return out;
}

}  // namespace attnprof::testing
