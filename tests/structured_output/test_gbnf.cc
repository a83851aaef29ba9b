// GBNF -> Grammar: grammars in the style of llama.cpp's grammars/*.gbnf (arithmetic, JSON,
// lists, chess, Japanese; written here, spec: llama.cpp grammars/README.md) on hand-picked
// strings; GBNF grammars against std::regex (an outside implementation) for the regular ones
// on every short string; repetition against counting; and each error naming its problem.
#include <gtest/gtest.h>

#include <regex>
#include <set>
#include <string>

#include "structured_output/gbnf.h"
#include "structured_output/matcher.h"

namespace llmserve::structured_output {
namespace {

std::shared_ptr<const CompiledGrammar> compile(std::string_view text) {
  auto g = parse_gbnf(text);
  EXPECT_TRUE(g.ok()) << g.status().message() << "\n" << text;
  if (!g.ok()) return nullptr;
  auto c = CompiledGrammar::compile(std::move(g).value());
  EXPECT_TRUE(c.ok()) << c.status().message();
  return c.ok() ? *c : nullptr;
}

void expect_language(std::string_view grammar, std::initializer_list<const char*> accept,
                     std::initializer_list<const char*> reject) {
  auto g = compile(grammar);
  ASSERT_TRUE(g);
  for (const char* t : accept) EXPECT_TRUE(grammar_accepts(g, t)) << "should accept: '" << t << "'";
  for (const char* t : reject) EXPECT_FALSE(grammar_accepts(g, t)) << "should reject: '" << t << "'";
}

TEST(Gbnf, Arithmetic) {
  const char* kGrammar = R"g(
    root  ::= (expr "=" ws term "\n")+
    expr  ::= term ([-+*/] term)*
    term  ::= ident | num | "(" ws expr ")" ws
    ident ::= [a-z] [a-z0-9_]* ws
    num   ::= [0-9]+ ws
    ws    ::= [ \t\n]*
  )g";
  expect_language(kGrammar, {"1+2=3\n", "x = 42\n", "(a +b)*c= d\n1=1\n", "foo_1 =bar\n"},
                  {"", "1+=2\n", "1=2", "A=1\n", "(1=2\n", "1+2\n", "(a + b)=1\n"});
}

const char* const kJson = R"g(# JSON, with whitespace after each value as llama.cpp's json.gbnf has it
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws

object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws

array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws

string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws

number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,4})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)g";

TEST(Gbnf, Json) {
  expect_language(kJson,
                  {R"g({})g", R"g({"a": 1})g", R"g({"a": [1, 2.5e3, true, null, "x\u00e9\n"], "b": {}})g",
                   "{\"k\":\n  -0.5E-2}", "{\"\xE6\x97\xA5\": \"\xF0\x9F\x98\x80\"}"},
                  {R"g([1])g", R"g({"a": 01})g", R"g({"a",})g", R"g({"a": [1,]})g", R"g({"a": "x)g", R"g({"a": "\q"})g",
                   "{\"a\": \"\x01\"}", R"g({"a": 1}})g", "{\"a\": 1}\n\n"});
}

TEST(Gbnf, ListWithUnicodeNegatedClass) {
  const char* kGrammar = R"g(
root ::= item+

# excludes line breaks, written with every escape form
item ::= "- " [^\r\n\x0b\x0c\x85\u2028\U00002029]+ "\n"
)g";
  expect_language(kGrammar, {"- h\xC3\xA9llo\n- \xE6\x97\xA5\xE6\x9C\xAC\n", "- \xF0\x9F\x98\x80\n"},
                  {"", "- \n", "- a\xE2\x80\xA8" "b\n", "- a\xC2\x85\n", "- a\x0b\n", "- a"});
}

TEST(Gbnf, ChessAndJapanese) {
  const char* kChess = R"g(
# moves in algebraic notation
root    ::= "1. " move " " move "\n" ([1-9] [0-9]? ". " move " " move "\n")+
move    ::= (pawn | nonpawn | castle) [+#]?
nonpawn ::= [NBKQR] [a-h]? [1-8]? "x"? [a-h] [1-8]
pawn    ::= ([a-h] "x")? [a-h] [1-8] ("=" [NBKQR])?
castle  ::= "O-O" "-O"?
)g";
  expect_language(kChess, {"1. e4 e5\n2. Nf3 Nc6\n", "1. d4 d5\n2. c4 dxc4\n10. O-O-O Qxd8#\n"},
                  {"1. e4 e5\n", "1. e9 e5\n2. a3 a6\n", "1. e4 e5\n2. Zf3 Nc6\n"});
  const char* kJapanese = R"g(
root     ::= jp-char+ ([ \t\n] jp-char+)*
jp-char  ::= hiragana | katakana | cjk
hiragana ::= [ぁ-ゟ]
katakana ::= [ァ-ヿ]
cjk      ::= [一-鿿]
)g";
  expect_language(kJapanese, {"ひらがな", "カタカナ 日本語"}, {"", "abc", "ひら  がな", "ひら "});
}

TEST(Gbnf, LiteralEscapesAndAny) {
  expect_language(R"g(root ::= "\x41\u00e9\U0001F600\"\\\[\]\t\r\n\-")g",
                  {"A\xC3\xA9\xF0\x9F\x98\x80\"\\[]\t\r\n-"}, {"A"});
  expect_language(R"g(root ::= . . "|")g", {"a\n|", "\xF0\x9F\x98\x80\xC3\xA9|"}, {"a|", "abc|", "\xC3|"});
  expect_language(R"g(root ::= "" | "x" "" )g", {"", "x"}, {"xx"});
  expect_language(R"g(root ::= [] "a" | "b")g", {"b"}, {"a", ""});  // [] matches nothing
  expect_language(R"g(root ::= [^]+)g", {"\n", "\xC3\xA9"}, {""});
  expect_language(R"g(root ::= [a-c-] [\]\\^])g", {"a]", "-\\", "c^"}, {"d]", "a["});
}

TEST(Gbnf, LayoutCommentsAndContinuations) {
  const char* kGrammar = "root ::= ( # a comment inside a group\n"
                         "  \"a\"\n"
                         "  | \"b\" ) tail   # trailing comment\n"
                         "tail ::= \"x\" |\n"
                         "  \"y\"\r\n"
                         "  | \"z\"\n"  // a leading bar continues the rule (extension)
                         "\n"
                         "# the end\n";
  expect_language(kGrammar, {"ax", "by", "az"}, {"a", "x", "abx"});
  expect_language("root::=\"a\"{2}b\nb::=\"b\"", {"aab"}, {"ab"});
  expect_language("root ::= x+?\nx ::= \"ab\"", {"", "ab", "abab"}, {"a"});  // (x+)?
  expect_language("root ::= \"a\" { 1 , 2 }", {"a", "aa"}, {"", "aaa"});
  expect_language("root ::= dataType_1\ndataType_1 ::= \"int\"", {"int"}, {""});
}

TEST(Gbnf, RepetitionBoundsAgainstCounting) {
  struct Case {
    const char* suffix;
    int64_t min, max;
  };
  const Case kCases[] = {{"{3}", 3, 3}, {"{2,}", 2, -1}, {"{0,4}", 0, 4}, {"{1,1}", 1, 1}, {"{0}", 0, 0},
                         {"{2,5}", 2, 5}, {"*", 0, -1}, {"+", 1, -1}, {"?", 0, 1}};
  for (const Case& c : kCases) {
    auto g = compile(std::string("root ::= \"ab\"") + c.suffix + " \"!\"");
    ASSERT_TRUE(g);
    for (int64_t n = 0; n <= 8; ++n) {
      std::string t;
      for (int64_t i = 0; i < n; ++i) t += "ab";
      bool want = n >= c.min && (c.max < 0 || n <= c.max);
      EXPECT_EQ(grammar_accepts(g, t + "!"), want) << c.suffix << " n=" << n;
    }
  }
}

// Regular GBNF grammars and the same language as an ECMAScript regex.
struct Equivalent {
  const char* gbnf;
  const char* regex;
};

const Equivalent kEquivalents[] = {
    {R"g(root ::= [a-c]{2,3} ("x" | "y"+)?)g", "[a-c]{2,3}(x|y+)?"},
    {R"g(root ::= ("a"? "b"?)* "c")g", "(a?b?)*c"},  // a repetition of a nullable group
    {R"g(root ::= item* "."
        item ::= "a" | "" | "bc")g", "(a|bc)*\\."},  // through a nullable rule
    {R"g(root ::= (x "," ?){2,3}
        x ::= [ab]* )g", "([ab]*,?){2,3}"},
    {R"g(root ::= (("a" | "b")* "c"?)+)g", "((a|b)*c?)+"},
    {R"g(root ::= [^a\n]+ | "a" "b"{0,2})g", "[^a\\n]+|ab{0,2}"},
    {"root ::= ws (\"a\" ws)*\nws ::= [ ]*", " *(a *)*"},
    {"root ::= e* (\"b\" e)+\ne ::= \"\" | ()", "b+"},  // a rule matching only ""
};

TEST(Gbnf, RegularGrammarsAgainstStdRegex) {
  const std::string alphabet = "abcxy,. \n";
  std::vector<std::string> texts{""};
  for (size_t begin = 0, len = 0; len < 5; ++len) {
    size_t end = texts.size();
    for (size_t i = begin; i < end; ++i) {
      for (char ch : alphabet) texts.push_back(texts[i] + ch);
    }
    begin = end;
  }
  for (const Equivalent& e : kEquivalents) {
    auto g = compile(e.gbnf);
    ASSERT_TRUE(g);
    std::regex reference(e.regex, std::regex::ECMAScript);
    for (const std::string& t : texts) {
      ASSERT_EQ(grammar_accepts(g, t), std::regex_match(t, reference)) << e.gbnf << " on '" << t << "'";
    }
  }
}

TEST(Gbnf, RuleNamesStayUniqueAndRootIsTheStart) {
  // Helper rules must not take the names of the grammar's own rules (root-1, star, ...).
  auto g = parse_gbnf(R"g(
    item ::= "i"
    root ::= ("a" | "b")* root-1 star
    root-1 ::= "c"?
    star ::= item+
  )g");
  ASSERT_TRUE(g.ok()) << g.status().message();
  std::set<std::string> names;
  for (const Rule& r : g->rules) EXPECT_TRUE(names.insert(r.name).second) << "duplicate " << r.name;
  EXPECT_EQ(g->rules[g->root].name, "root");
  auto c = CompiledGrammar::compile(std::move(g).value());
  ASSERT_TRUE(c.ok());
  EXPECT_TRUE(grammar_accepts(*c, "abci"));
  EXPECT_TRUE(grammar_accepts(*c, "ii"));
  EXPECT_FALSE(grammar_accepts(*c, "i"  "c"));
}

struct Error {
  const char* text;
  const char* message;
};

const Error kErrors[] = {
    {"root ::= foo", "GBNF 1:10: undefined rule 'foo'"},
    {"root ::= \"a\"\n  x ::= foo\nfoo2 ::= \"b\"", "GBNF 2:9: undefined rule 'foo'"},
    {"root ::= \"\xC3\xA9\" foo", "GBNF 1:14: undefined rule 'foo'"},  // columns count code points
    {"item ::= \"a\"", "missing rule 'root'"},
    {"", "missing rule 'root'"},
    {"root ::= \"abc", "GBNF 1:10: unterminated string literal"},
    {"root ::= [a-z", "GBNF 1:10: unterminated character class"},
    {"root ::= \"\\q\"", "bad escape '\\q'"},
    {"root ::= \"\\x4\"", "bad escape '\\x': expected 2 hex digits"},
    {"root ::= \"\\U00110000\"", "beyond U+10FFFF"},
    {"root ::= \"\\uD800\"", "surrogate U+D800"},
    {"root ::= [z-a]", "character range U+007A-U+0061 is reversed"},
    {"root ::= (\"a\" | \"b\"", "GBNF 1:10: unclosed '('"},
    {"root ::= \"a\")", "unmatched ')'"},
    {"root ::= root \"a\" | \"b\"", "grammar rule 'root' is left-recursive"},
    {"root ::= x\nx ::= e x \"a\" | \"b\"\ne ::= \"c\"?", "grammar rule 'x' is left-recursive"},
    {"root ::= \"a\"{3,1}", "repetition {3,1} has its minimum above its maximum"},
    {"root ::= \"a\"{20000}", "GBNF 1:14: repetition bound 20000 is over the limit of 10000"},
    {"root ::= \"a\"{1,99999999999999999999999}", "over the limit of 10000"},
    {"root ::= \"a\"{x}", "expected a number in the repetition"},
    {"root ::= \"a\"{2", "expected '}' to close the repetition"},
    {"root ::= <think> \"x\"", "token references (<...>, <[id]>, !<...>) are not supported"},
    {"root ::= !<[1000]>*", "token references"},
    {"root ::= \"a\"\nroot ::= \"b\"", "GBNF 2:1: rule 'root' is defined twice (first at 1:1)"},
    {"root ::= * \"a\"", "'*' has nothing to repeat"},
    {"root \"a\"", "GBNF 1:6: expected '::=' after rule name 'root', found '\"'"},
    {"::= \"a\"", "GBNF 1:1: expected a rule name, found ':'"},
    {"root ::= \"a\" ; \"b\"", "GBNF 1:14: unexpected ';' in rule 'root'"},
    {"root ::=\nx ::= \"a\"", "unexpected '::=' in rule 'root'"},
    {"root ::= \"\xFF\"", "invalid UTF-8"},
    {"root ::= \"\\", "unterminated escape"},
};

TEST(Gbnf, ErrorsNameTheProblem) {
  for (const Error& e : kErrors) {
    auto g = parse_gbnf(e.text);
    ASSERT_FALSE(g.ok()) << e.text;
    EXPECT_EQ(g.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(g.status().message().find(e.message), std::string::npos)
        << "grammar: " << e.text << "\ngave: " << g.status().message() << "\nwanted: " << e.message;
    EXPECT_EQ(g.status().message().find('\n'), std::string::npos) << g.status().message();
  }
}

TEST(Gbnf, SizeAndNestingLimits) {
  std::string deep = "root ::= " + std::string(201, '(') + "\"a\"" + std::string(201, ')');
  auto g = parse_gbnf(deep);
  ASSERT_FALSE(g.ok());
  EXPECT_NE(g.status().message().find("parentheses nested deeper than the limit of 200"), std::string::npos);
  EXPECT_TRUE(parse_gbnf("root ::= " + std::string(200, '(') + "\"a\"" + std::string(200, ')')).ok());

  auto small = parse_gbnf("root ::= \"a\"{0,400} \"b\"{0,400}", {.max_elements = 1000});
  ASSERT_FALSE(small.ok());
  EXPECT_NE(small.status().message().find("limit of 1000 elements"), std::string::npos) << small.status().message();
  std::string many = "root ::=";  // 20 bounded repetitions of distinct rules: past 1,000,000
  for (int i = 0; i < 20; ++i) many += fmt::format(" r{}{{0,10000}}", i);
  for (int i = 0; i < 20; ++i) many += fmt::format("\nr{} ::= \"{}\"", i, static_cast<char>('a' + i));
  auto big = parse_gbnf(many);
  ASSERT_FALSE(big.ok());
  EXPECT_NE(big.status().message().find("limit of 1000000 elements"), std::string::npos) << big.status().message();
  EXPECT_TRUE(parse_gbnf("root ::= [a-z]{0,10000}").ok());
  EXPECT_TRUE(parse_gbnf("root ::= [a-z]{0,10000}", {.max_repetition = 9999}).status().message().find(
                  "over the limit of 9999") != std::string::npos);
}

}  // namespace
}  // namespace llmserve::structured_output
