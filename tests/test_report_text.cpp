// io/text.h: what reaches a terminal is made visible, and integers are read
// as typed. Property tests on random bytes against plain reference rules.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>

#include "attnprof/io/text.h"

using attnprof::io::parse_decimal;
using attnprof::io::visible;

namespace {
// A byte a terminal could act on, or one that is not text.
bool is_control(unsigned char c) { return c < 0x20 || c == 0x7f; }
}  // namespace

TEST(Visible, NoControlByteSurvivesAndTextIsKept) {
  EXPECT_EQ(visible("plain µs text"), "plain µs text");
  EXPECT_EQ(visible("a\x1b[31mred"), "a\\x1b[31mred");
  EXPECT_EQ(visible("two\nlines\r"), "two\\x0alines\\x0d");
  EXPECT_EQ(visible("two\nlines\tok", /*keep_line_breaks=*/true), "two\nlines\tok");
  EXPECT_EQ(visible("csi \xc2\x9b" "31m"), "csi \\xc2\\x9b31m");  // U+009B, the one-byte CSI
  EXPECT_EQ(visible("bad \xff\xc3"), "bad \\xff\\xc3");
  EXPECT_EQ(visible("naive \xE2\x80\x94 A"), "naive \xE2\x80\x94 A");  // an em dash stays
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  for (int i = 0; i < 20000; ++i) {
    std::string s(rng() % 24, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 4 == 0 ? 0xC2 : rng());
    for (bool keep : {false, true}) {
      const std::string v = visible(s, keep);
      SCOPED_TRACE(::testing::Message() << "seed " << seed << " input " << ::testing::PrintToString(s));
      for (size_t k = 0; k < v.size(); ++k) {
        const unsigned char c = static_cast<unsigned char>(v[k]);
        if (keep && (c == '\n' || c == '\t')) continue;
        ASSERT_FALSE(is_control(c)) << "byte " << k << " of " << ::testing::PrintToString(v);
        if (c == 0xC2 && k + 1 < v.size()) ASSERT_GT(static_cast<unsigned char>(v[k + 1]), 0x9F);
      }
      ASSERT_EQ(visible(v, keep), v) << "escaping twice changes nothing";
    }
  }
}

TEST(ParseDecimal, AcceptsExactlyPlainDecimalIntegers) {
  for (const char* bad : {"010", "08", "0x10", "+5", " 5", "5 ", "5.0", "1e3", "", "-", "--5", "-0x1", "٣"}) {
    const auto r = parse_decimal(bad);
    EXPECT_FALSE(r.error.empty()) << bad;
    EXPECT_NE(r.error.find(std::string("'") + visible(bad) + "'"), std::string::npos) << r.error;
  }
  EXPECT_NE(parse_decimal("010").error.find("leading zero"), std::string::npos);
  EXPECT_EQ(parse_decimal("0").value, 0);
  EXPECT_EQ(parse_decimal("-0").value, 0);
  EXPECT_EQ(parse_decimal("-7").value, -7);
  EXPECT_EQ(parse_decimal("9223372036854775807").value, INT64_MAX);
  EXPECT_EQ(parse_decimal("-9223372036854775808").value, INT64_MIN);
  EXPECT_NE(parse_decimal("9223372036854775808").error.find("'9223372036854775808' is out of range"), std::string::npos);
  EXPECT_NE(parse_decimal("99999999999999999999").error.find("'99999999999999999999'"), std::string::npos);
  // Property: against a reference built from the rules, on random strings of
  // digits, signs and look-alikes; values checked by printing them back.
  const uint64_t seed = std::random_device{}();
  std::mt19937_64 rng(seed);
  const std::string alphabet = "0123456789-+ .ex";
  for (int i = 0; i < 50000; ++i) {
    std::string s(1 + rng() % 21, ' ');
    for (char& c : s) c = alphabet[rng() % (rng() % 3 ? 10 : alphabet.size())];
    const bool neg = s[0] == '-';
    const std::string digits = s.substr(neg ? 1 : 0);
    bool shape = !digits.empty() && digits.find_first_not_of("0123456789") == std::string::npos &&
                 !(digits.size() > 1 && digits[0] == '0');
    const auto r = parse_decimal(s);
    SCOPED_TRACE("seed " + std::to_string(seed) + " input '" + s + "'");
    if (!shape) {
      ASSERT_FALSE(r.error.empty());
      continue;
    }
    const bool fits = digits.size() < 19 || (digits.size() == 19 && digits <= (neg ? "9223372036854775808"
                                                                                    : "9223372036854775807"));
    if (!fits) {
      ASSERT_NE(r.error.find("out of range"), std::string::npos) << r.error;
      continue;
    }
    ASSERT_TRUE(r.error.empty()) << r.error;
    ASSERT_EQ(std::to_string(r.value), digits == "0" ? "0" : s);
  }
}
