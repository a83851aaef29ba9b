// Regular expressions -> Grammar: acceptance compared with std::regex (ECMAScript, an outside
// implementation) on every short string over each pattern's alphabet and on random longer
// ones, full match against std::regex_match and search mode (JSON Schema `pattern`) against
// std::regex_search; then the Unicode parts std::regex cannot check (it matches bytes), and
// every refusal naming its construct.
#include <gtest/gtest.h>

#include <random>
#include <regex>
#include <set>
#include <string>

#include "structured_output/gbnf.h"
#include "structured_output/matcher.h"
#include "structured_output/regex.h"

namespace llmserve::structured_output {
namespace {

std::shared_ptr<const CompiledGrammar> compile_pattern(std::string_view pattern, bool search) {
  auto g = regex_grammar(pattern, {.search = search});
  EXPECT_TRUE(g.ok()) << pattern << ": " << g.status().message();
  if (!g.ok()) return nullptr;
  auto c = CompiledGrammar::compile(std::move(g).value());
  EXPECT_TRUE(c.ok()) << pattern << ": " << c.status().message();
  return c.ok() ? *c : nullptr;
}

bool full(std::string_view pattern, std::string_view text) {
  auto g = compile_pattern(pattern, false);
  return g && grammar_accepts(g, text);
}

/// Whether the pattern compiles (Grammar::prune_unproductive refuses one that matches nothing).
bool compiles_to_something(std::string_view pattern) {
  auto g = regex_grammar(pattern, {});
  return g.ok() && CompiledGrammar::compile(std::move(g).value()).ok();
}

bool search(std::string_view pattern, std::string_view text) {
  auto g = compile_pattern(pattern, true);
  return g && grammar_accepts(g, text);
}

// Every string of length <= max_len over `alphabet`.
std::vector<std::string> all_strings(const std::string& alphabet, size_t max_len) {
  std::vector<std::string> out{""};
  for (size_t begin = 0, len = 0; len < max_len; ++len) {
    size_t end = out.size();
    for (size_t i = begin; i < end; ++i) {
      for (char c : alphabet) out.push_back(out[i] + c);
    }
    begin = end;
  }
  return out;
}

// The pattern's own ASCII letters, digits and punctuation plus a few characters every class
// and `.` treats differently (line terminators, space, digit, letter, underscore).
std::string alphabet_for(std::string_view pattern) {
  std::set<char> chars = {'\n', '\r', ' ', '0', 'a', '_'};
  for (size_t i = 0; i < pattern.size(); ++i) {
    char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      ++i;  // an escape: keep escaped punctuation, skip class letters like the d of \d
      if (!std::isalnum(static_cast<unsigned char>(pattern[i]))) chars.insert(pattern[i]);
      continue;
    }
    if (std::isalnum(static_cast<unsigned char>(c)) || std::string_view(".-]@").find(c) != std::string_view::npos) {
      chars.insert(c);
    }
  }
  return {chars.begin(), chars.end()};
}

const char* const kPatterns[] = {
    "a", "abc", "a|b", "", "a*", "a+b", "(ab)*", "(a|b)*abb", "a{2}", "a{2,}", "a{1,3}b",
    "[a-c]+", "[^a]*", "[a-]x", "\\d+", "\\w+", "\\s*a", "\\D\\W", "a.c", ".*", ".+a",
    "(a|)+", "(a*)*", "(a?b?)+c", "(?:ab|a)(bc|c)", "^ab", "ab$", "^a|b$", "^(a|b)$", "^$",
    "a*?b", "a+?", "a??", "x{0,2}?y", "[\\d.]+", "\\.", "a\\-b", "[\\]a]", "[\\-a]", "\\x61",
    "\\u0061b", "[^\\n]+", "(a|b|c){2}", "((a)|b)*", "a{0}", "a{0,0}b", "(ab|cd)*ef",
    "[\\s\\d]b", "[^\\d\\s]+", "(?:a|b?){2,3}", "((a|b)c?)*d",
    // repeats of repeats (collapsed by Expr::repeat)
    "(a+)*", "(a+)?b", "(a+)+", "(a?)*", "(a?)+b", "(a*){2,3}b", "(a+){0,2}", "([a-c/]*)*x",
    "(a?){2}", "(a+){2,}", "((a*)*)+"};

class AgainstStdRegex : public ::testing::TestWithParam<const char*> {};

TEST_P(AgainstStdRegex, FullMatchAndSearchOnEveryShortString) {
  std::string pattern = GetParam();
  std::regex reference(pattern, std::regex::ECMAScript);
  auto g_full = compile_pattern(pattern, false);
  auto g_search = compile_pattern(pattern, true);
  ASSERT_TRUE(g_full && g_search);
  std::string alphabet = alphabet_for(pattern);
  size_t max_len = alphabet.size() <= 7 ? 5 : 4;
  std::vector<std::string> texts = all_strings(alphabet, max_len);
  std::mt19937 rng(7);
  for (int i = 0; i < 300; ++i) {  // longer random strings
    std::string t(5 + rng() % 10, ' ');
    for (char& c : t) c = alphabet[rng() % alphabet.size()];
    texts.push_back(t);
  }
  for (const std::string& t : texts) {
    ASSERT_EQ(grammar_accepts(g_full, t), std::regex_match(t, reference)) << "full /" << pattern << "/ on '" << t << "'";
    ASSERT_EQ(grammar_accepts(g_search, t), std::regex_search(t, reference))
        << "search /" << pattern << "/ on '" << t << "'";
  }
}

INSTANTIATE_TEST_SUITE_P(Patterns, AgainstStdRegex, ::testing::ValuesIn(kPatterns));

// A repeat of an unbounded repeat is one repeat: the same grammar as the flat pattern (no
// extra rules, so no extra matcher heads per position).
TEST(Regex, RepeatsOfRepeatsCollapse) {
  for (auto [nested, flat] : {std::pair{"(a*)*", "a*"}, {"(a+)*", "a*"}, {"(a+)+", "a+"}, {"(a?)*", "a*"},
                              {"((a*)+)?", "a*"}, {"([/\\w .-]*)*", "[/\\w .-]*"}}) {
    auto g1 = regex_grammar(nested), g2 = regex_grammar(flat);
    ASSERT_TRUE(g1.ok() && g2.ok()) << nested;
    EXPECT_EQ(g1->num_elements(), g2->num_elements()) << nested << " vs " << flat;
    EXPECT_EQ(g1->rules.size(), g2->rules.size()) << nested << " vs " << flat;
  }
}

// Nested quantifiers multiply a text's derivations: deeper than max_repeat_nesting is refused
// (20 nested "( ?){0,2}" stalled the engine), collapsed repeats of repeats do not count.
TEST(Regex, NestedQuantifiersAreBounded) {
  auto nest = [](int levels) {
    std::string p = " ?";
    for (int i = 0; i < levels; ++i) p = "(" + p + "){0,2}";
    return p;
  };
  const int limit = GrammarLimits{}.max_repeat_nesting;
  EXPECT_TRUE(regex_grammar(nest(limit - 1)).ok());
  auto deep = regex_grammar(nest(limit));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.status().message().find("quantifiers nested deeper"), std::string::npos) << deep.status().message();
  std::string collapsed = "a";
  for (int i = 0; i < 20; ++i) collapsed = "(" + collapsed + ")*";
  EXPECT_TRUE(regex_grammar(collapsed).ok()) << "(((a)*)*)* is a*";
  std::string gbnf = "\"a\"?";
  for (int i = 0; i < limit; ++i) gbnf = "(" + gbnf + "){0,2}";
  auto g = parse_gbnf("root ::= " + gbnf);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("quantifiers nested deeper"), std::string::npos) << g.status().message();
}

TEST(Regex, QuantifierOnQuantifierIsRefused) {
  auto g = regex_grammar("a{1,2}{0}x");
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("follows another quantifier"), std::string::npos) << g.status().message();
}

TEST(Regex, DotIsOneCodePointButNoLineTerminator) {
  EXPECT_TRUE(full(".", "a"));
  EXPECT_TRUE(full(".", "\xC3\xA9"));          // é
  EXPECT_TRUE(full(".", "\xF0\x9F\x98\x80"));  // U+1F600, one code point (u flag)
  EXPECT_FALSE(full(".", "\xC3"));             // a truncated sequence
  for (const char* t : {"\n", "\r", "\xE2\x80\xA8", "\xE2\x80\xA9"}) EXPECT_FALSE(full(".", t)) << t;
  EXPECT_TRUE(full("[^a]", "\xE2\x80\xA8"));
  EXPECT_TRUE(full("[^]", "\n"));
  EXPECT_FALSE(compiles_to_something("[]"));  // matches no string: refused at compile time
  EXPECT_TRUE(full("a[]?", "a"));
}

TEST(Regex, UnicodeEscapesAndClasses) {
  EXPECT_TRUE(full("\\u{1F600}", "\xF0\x9F\x98\x80"));
  EXPECT_TRUE(full("\\uD83D\\uDE00", "\xF0\x9F\x98\x80"));  // a surrogate pair is one code point
  EXPECT_TRUE(full("[\\uD83D\\uDE00-\\u{1F64F}]+", "\xF0\x9F\x98\x80\xF0\x9F\x99\x8F"));
  // A lone surrogate matches no UTF-8 text: a pattern of only that matches nothing, refused.
  EXPECT_FALSE(compiles_to_something("\\uD800"));
  EXPECT_TRUE(full("a\\uD800?", "a"));
  EXPECT_TRUE(full("\\u00e9", "\xC3\xA9"));
  EXPECT_TRUE(full("\\xe9", "\xC3\xA9"));  // \xHH is a code point, not a byte
  EXPECT_TRUE(full("[\\u00e0-\\u00ff]{2}", "\xC3\xA0\xC3\xBF"));
  EXPECT_FALSE(full("[\\u00e0-\\u00ff]", "\xC3\x9F"));
  EXPECT_TRUE(full("\\s", "\xE3\x80\x80"));   // U+3000
  EXPECT_TRUE(full("\\s", "\xEF\xBB\xBF"));   // U+FEFF
  EXPECT_FALSE(full("\\s", "\xE2\x80\x8B"));  // U+200B is not White_Space
  EXPECT_TRUE(full("\\S\\W", "\xC3\xA9\xC3\xA9"));
  EXPECT_FALSE(full("\\w", "\xC3\xA9"));  // \w is ASCII in ECMAScript
  EXPECT_TRUE(full("\\cJ\\t\\v\\f\\0", std::string("\n\t\v\f\0", 5)));
  EXPECT_TRUE(full("[\\b]", "\b"));
  EXPECT_TRUE(full("日本+", "日本本"));
  EXPECT_TRUE(full("\\日", "日"));
}

TEST(Regex, GroupsAndLiteralBraces) {
  EXPECT_TRUE(full("(?<year>\\d{4})-(?<month>\\d{2})", "2024-01"));
  EXPECT_FALSE(full("(?<year>\\d{4})-(?<month>\\d{2})", "2024-1"));
  EXPECT_TRUE(full("a{", "a{"));      // not a quantifier: a literal (Annex B)
  EXPECT_TRUE(full("a{x}", "a{x}"));
  EXPECT_TRUE(full("a{1,x}", "a{1,x}"));
  EXPECT_TRUE(full("}]", "}]"));
  EXPECT_TRUE(full("(?:)", ""));
  EXPECT_TRUE(full("(|a)b", "b"));
}

TEST(Regex, SearchModeIsContainsWithAnchors) {
  EXPECT_TRUE(search("ab", "\n\nxaby\n"));
  EXPECT_TRUE(search("^ab", "ab\n\xC3\xA9"));
  EXPECT_FALSE(search("^ab", "\nab"));
  EXPECT_TRUE(search("ab$", "\xF0\x9F\x98\x80\nab"));
  EXPECT_FALSE(search("ab$", "ab\n"));
  EXPECT_TRUE(search("^ab$", "ab"));
  EXPECT_FALSE(search("^ab$", "abab"));
  EXPECT_TRUE(search(".", "\n\xE2\x80\xA8x"));
  EXPECT_FALSE(search(".", "\n\r\xE2\x80\xA8"));
  EXPECT_TRUE(search("", "anything \n at all"));
  EXPECT_TRUE(search("^$", ""));
  EXPECT_FALSE(search("^$", "\n"));
  EXPECT_TRUE(search("^a|b$", "a\n\n"));
  EXPECT_TRUE(search("^a|b$", "\n\nb"));
  EXPECT_FALSE(search("^a|b$", "ba"));
  // Full-match mode: anchors are no-ops.
  EXPECT_TRUE(full("^ab$", "ab"));
  EXPECT_FALSE(full("ab", "xab"));
}

TEST(Regex, EmbedsIntoACallersBuilder) {
  GrammarBuilder b;
  auto date = compile_regex("\\d{4}-\\d{2}", b);
  auto word = compile_regex("[a-z]+", b, {.search = true});
  ASSERT_TRUE(date.ok() && word.ok());
  uint32_t root = b.add_rule("root");
  Sequence seq{*date};
  b.append_literal(",", seq);
  seq.push_back(*word);
  b.add_alternative(root, seq);
  auto g = CompiledGrammar::compile(b.finish(root));
  ASSERT_TRUE(g.ok()) << g.status().message();
  EXPECT_TRUE(grammar_accepts(*g, "2024-05,12 x 3"));
  EXPECT_FALSE(grammar_accepts(*g, "2024-05,123"));
}

struct Refusal {
  const char* pattern;
  const char* message;
};

const Refusal kRefusals[] = {
    {"(a)\\1", "backreference '\\1' is not supported (at position 3)"},
    {"(?<x>a)\\k<x>", "named backreference"},
    {"a(?=b)", "lookahead '(?='"},
    {"a(?!b)", "lookahead '(?!'"},
    {"(?<=a)b", "lookbehind '(?<='"},
    {"(?<!a)b", "lookbehind '(?<!'"},
    {"\\bword", "word boundary '\\b'"},
    {"a\\B", "word boundary '\\B'"},
    {"a^b", "anchor '^' is only supported at the start"},
    {"a$b", "anchor '$' is only supported at the end"},
    {"(^a)", "anchor '^'"},
    {"(a$)", "anchor '$'"},
    {"(?i)abc", "inline flags '(?i'"},
    {"(?i:a)", "inline flags"},
    {"\\p{L}+", "Unicode property escape '\\p{...}'"},
    {"\\P{Lu}", "Unicode property escape '\\P{...}'"},
    {"a{,3}", "'{,n}' is not an ECMAScript quantifier"},
    {"[\\d-z]", "cannot bound a range"},
    {"\\e", "unknown escape '\\e'"},
    {"\\01", "octal escape"},
    {"[\\1]", "octal escape"},
    {"*a", "nothing to repeat before '*'"},
    {"a|+", "nothing to repeat before '+'"},
    {"a**", "follows another quantifier"},
    {"a{2}{3}", "follows another quantifier"},
    {"^*", "nothing to repeat"},
    {"(a", "unterminated group '(' (at position 0)"},
    {"a)", "unmatched ')' (at position 1)"},
    {"[a", "unterminated character class"},
    {"[z-a]", "range out of order"},
    {"a{3,1}", "numbers out of order"},
    {"a{20000}", "repetition bound 20000 is over the limit of 10000"},
    {"a{1,99999999999999999999}", "over the limit of 10000"},
    {"\\x4", "expected 2 hex digits"},
    {"\\u12", "expected 4 hex digits"},
    {"\\u{110000}", "bad escape '\\u{...}'"},
    {"\\c1", "bad control escape"},
    {"ab\\", "pattern ends with '\\'"},
    {"(?<1a>x)", "bad group name"},
    {"\xC3", "invalid UTF-8"},
    {"日(?=x)", "(at position 1)"},
};

TEST(Regex, RefusalsNameTheConstruct) {
  for (const Refusal& r : kRefusals) {
    auto g = regex_grammar(r.pattern);
    ASSERT_FALSE(g.ok()) << r.pattern;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find(r.message), std::string::npos)
        << "/" << r.pattern << "/ gave: " << g.status().message();
    EXPECT_EQ(g.status().message().find('\n'), std::string::npos);
  }
}

TEST(Regex, SizeAndNestingLimits) {
  std::string deep = std::string(201, '(') + "a" + std::string(201, ')');
  auto g = regex_grammar(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("nested deeper than the limit of 200"), std::string::npos);
  EXPECT_TRUE(regex_grammar(std::string(200, '(') + "a" + std::string(200, ')')).ok());

  auto small = regex_grammar("a{0,400}b{0,400}", {.limits = {.max_elements = 1000}});
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("limit of 1000 elements"), std::string::npos) << small.status().message();
  std::string many;  // 20 bounded repetitions of distinct classes: past the default 1,000,000
  for (char c = 'a'; c < 'a' + 20; ++c) many += fmt::format("[{}-z]{{0,10000}}", c);
  auto big = regex_grammar(many);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("limit of 1000000 elements"), std::string::npos) << big.status().message();
  EXPECT_TRUE(regex_grammar("[a-z]{0,10000}").ok());
}

TEST(Regex, LongRepetitionMatchesExactCounts) {
  auto g = compile_pattern("x{3,1000}", false);
  ASSERT_TRUE(g);
  for (size_t n : {0, 2, 3, 4, 999, 1000, 1001}) {
    EXPECT_EQ(grammar_accepts(g, std::string(n, 'x')), n >= 3 && n <= 1000) << n;
  }
}

}  // namespace
}  // namespace llmserve::structured_output
