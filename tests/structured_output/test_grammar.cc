// Grammar IR, GrammarBuilder and Matcher: code point classes checked exhaustively against a
// direct UTF-8 encoder, repetition bounds against counting, and the matcher's save/restore.
#include <gtest/gtest.h>

#include <random>
#include <string>

#include "structured_output/grammar.h"
#include "structured_output/matcher.h"

namespace llmserve::structured_output {
namespace {

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xF0 | (cp >> 18));
    s += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

std::shared_ptr<const CompiledGrammar> compile(Grammar g) {
  auto c = CompiledGrammar::compile(std::move(g));
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : nullptr;
}

TEST(CodepointClass, EveryCodePointAgainstMembership) {
  const std::vector<CodepointRange> ranges = {{'a', 'z'}, {0xE9, 0x3A9}, {0x7FF, 0x801},
                                              {0xD000, 0xE100}, {0xFFFF, 0x10010}, {0x10FFF0, 0x10FFFF}};
  for (bool negated : {false, true}) {
    GrammarBuilder b;
    Element c = b.codepoint_class(ranges, negated);
    uint32_t root = b.add_rule("root");
    b.add_alternative(root, {c});
    auto g = compile(b.finish(root));
    Matcher m(g);
    for (uint32_t cp = 0; cp <= 0x10FFFF; ++cp) {
      bool in = false;
      for (auto r : ranges) in = in || (cp >= r.first && cp <= r.last);
      bool surrogate = cp >= 0xD800 && cp <= 0xDFFF;
      bool want = !surrogate && (negated ? !in : in);
      m.reset();
      bool got = m.advance(utf8(cp)) && m.can_finish();
      ASSERT_EQ(got, want) << std::hex << "U+" << cp << " negated=" << negated;
    }
  }
}

TEST(CodepointClass, RefusesIllFormedUtf8) {
  GrammarBuilder b;
  Element any = b.any_codepoint();
  uint32_t root = b.add_rule("root");
  b.add_alternative(root, {b.star(any)});
  auto g = compile(b.finish(root));
  for (std::string bad : {"\xC0\xAF", "\xE0\x80\xAF", "\xED\xA0\x80", "\xF4\x90\x80\x80", "\x80",
                          "\xF8\x88\x80\x80\x80", "a\xC3"}) {
    EXPECT_FALSE(grammar_accepts(g, bad)) << bad.size();
  }
  EXPECT_TRUE(grammar_accepts(g, "h\xC3\xA9llo \xF0\x9F\x98\x80"));
}

TEST(Repeat, BoundsAgainstCounting) {
  for (int64_t lo : {0, 1, 3}) {
    for (int64_t hi : {-1, 0, 1, 3, 7}) {
      if (hi >= 0 && hi < lo) continue;
      GrammarBuilder b;
      uint32_t root = b.add_rule("root");
      b.add_alternative(root, {b.repeat(b.byte('x'), lo, hi), b.byte(';')});
      auto g = compile(b.finish(root));
      for (int n = 0; n < 12; ++n) {
        bool want = n >= lo && (hi < 0 || n <= hi);
        EXPECT_EQ(grammar_accepts(g, std::string(n, 'x') + ";"), want) << lo << "," << hi << " n=" << n;
      }
    }
  }
}

TEST(Matcher, AmbiguousGrammarStaysSmallAndPrefixesAreTracked) {
  // root ::= (a | a)* "b" — two equal branches must not double the stacks every byte.
  GrammarBuilder b;
  Element a1 = b.group({b.byte('a')}, "a1");
  Element a2 = b.group({b.byte('a')}, "a2");
  Element either = b.choice({{a1}, {a2}}, "either");
  uint32_t root = b.add_rule("root");
  b.add_alternative(root, {b.star(either), b.byte('b')});
  auto g = compile(b.finish(root));
  Matcher m(g);
  for (int i = 0; i < 200; ++i) ASSERT_TRUE(m.advance_byte('a'));
  EXPECT_LE(m.num_stacks(), 4u);
  EXPECT_FALSE(m.can_finish());
  EXPECT_FALSE(m.advance_byte('c'));
  EXPECT_TRUE(m.advance_byte('b'));
  EXPECT_TRUE(m.can_finish());
  EXPECT_TRUE(m.is_terminated());
}

TEST(Matcher, FailedAdvanceLeavesStateUnchanged) {
  GrammarBuilder b;
  uint32_t root = b.add_rule("root");
  Sequence s;
  b.append_literal("hello", s);
  b.add_alternative(root, s);
  auto g = compile(b.finish(root));
  Matcher m(g);
  ASSERT_TRUE(m.advance("he"));
  EXPECT_FALSE(m.advance("lp"));
  EXPECT_TRUE(m.advance("llo"));
  EXPECT_TRUE(m.can_finish());
}

TEST(Grammar, ValidateRefusesLeftRecursion) {
  GrammarBuilder b;
  uint32_t expr = b.add_rule("expr");
  uint32_t opt = b.add_rule("maybe");
  b.add_alternative(opt, {});
  b.add_alternative(opt, {b.byte('-')});
  b.add_alternative(expr, {Element::rule(opt), Element::rule(expr), b.byte('+')});
  b.add_alternative(expr, {b.byte('1')});
  Grammar g = b.finish(expr);
  Status st = g.validate();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("'expr' is left-recursive"), std::string::npos) << st.message();
}

TEST(Grammar, RandomStringsOverDyckLanguage) {
  // root ::= pair* ; pair ::= "(" pair* ")" — balanced parentheses, checked by a counter.
  GrammarBuilder b;
  uint32_t pair = b.add_rule("pair");
  Element inner = b.star(Element::rule(pair));
  b.add_alternative(pair, {b.byte('('), inner, b.byte(')')});
  uint32_t root = b.add_rule("root");
  b.add_alternative(root, {inner});
  auto g = compile(b.finish(root));
  std::mt19937 rng(7);
  for (int t = 0; t < 2000; ++t) {
    std::string s;
    int len = rng() % 14;
    for (int i = 0; i < len; ++i) s += (rng() & 1) ? '(' : ')';
    int depth = 0;
    bool ok = true;
    for (char c : s) {
      depth += c == '(' ? 1 : -1;
      ok = ok && depth >= 0;
    }
    ok = ok && depth == 0;
    EXPECT_EQ(grammar_accepts(g, s), ok) << s;
  }
}

}  // namespace
}  // namespace llmserve::structured_output

#include "structured_output/regex.h"

namespace llmserve::structured_output {
namespace {

TEST(Matcher, SearchPatternStacksMergeAcrossSteps) {
  // .*(x+).* : stacks that reach the same frames in different steps must merge (frames are
  // unique by content), or the state grows with every byte.
  RegexOptions o;
  o.search = true;
  auto g = regex_grammar("x+", o);
  ASSERT_TRUE(g.ok());
  auto c = CompiledGrammar::compile(std::move(*g));
  ASSERT_TRUE(c.ok());
  Matcher m(*c);
  for (int i = 0; i < 100; ++i) ASSERT_TRUE(m.advance_byte('x'));
  const size_t after_100 = m.num_stacks();
  for (int i = 0; i < 5000; ++i) ASSERT_TRUE(m.advance_byte('x'));
  EXPECT_EQ(m.num_stacks(), after_100);  // constant, not growing with the input
  EXPECT_LE(m.num_stacks(), 64u);
  EXPECT_TRUE(m.can_finish());
}

}  // namespace
}  // namespace llmserve::structured_output
