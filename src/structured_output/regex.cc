#include "structured_output/regex.h"

#include "structured_output/json_grammar_parts.h"

#include <algorithm>

#include <fmt/format.h>

namespace llmserve::structured_output {
namespace {

using Ranges = std::vector<CodepointRange>;

Ranges complement(Ranges r) {
  std::sort(r.begin(), r.end(), [](auto a, auto b) { return a.first < b.first; });
  Ranges out;
  uint32_t next = 0;
  for (auto x : r) {
    if (x.first > next) out.push_back({next, x.first - 1});
    next = std::max(next, x.last + 1);
  }
  if (next <= 0x10FFFF) out.push_back({next, 0x10FFFF});
  return out;
}

// ECMA-262 §22.2.2.9 CharacterClassEscape: \d, \w (without /i), \s (WhiteSpace and
// LineTerminator, §12.2 and §12.3).
Ranges digit_ranges() { return {{'0', '9'}}; }
Ranges word_ranges() { return {{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}}; }
Ranges space_ranges() {
  return {{0x09, 0x0D}, {0x20, 0x20}, {0xA0, 0xA0}, {0x1680, 0x1680}, {0x2000, 0x200A},
          {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F}, {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
}
Ranges line_terminators() { return {{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}}; }

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_alnum(char c) { return is_digit(c) || ((c | 0x20) >= 'a' && (c | 0x20) <= 'z'); }

bool is_surrogate(uint32_t cp) { return cp >= 0xD800 && cp <= 0xDFFF; }

// One code point as an expression (a lone surrogate becomes a class no UTF-8 text matches).
Expr code_point(uint32_t cp) {
  if (is_surrogate(cp)) return Expr::code_points({{cp, cp}}, false);
  std::string s;
  append_utf8(cp, s);
  return Expr::literal(std::move(s));
}

// A class atom: one code point or a set (\d, \W, ...).
struct ClassAtom {
  bool is_set = false;
  uint32_t cp = 0;
  Ranges set;
};

// One top-level alternative and its anchors.
struct Branch {
  Expr expr;
  bool anchored_start = false;
  bool anchored_end = false;
};

// What a '{' starts: a quantifier {m}, {m,}, {m,n}; the non-quantifier {,n}; or a literal '{'.
struct Brace {
  enum class Kind { kLiteral, kQuantifier, kCommaFirst } kind = Kind::kLiteral;
  size_t end = 0;  // one past '}'
  std::string_view min_text, max_text;
  bool has_comma = false;
};

class RegexParser {
 public:
  RegexParser(std::string_view pattern, const GrammarLimits& limits) : s_(pattern), limits_(limits) {}
  Status parse(std::vector<Branch>& out);

 private:
  bool at_end() const { return pos_ >= s_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  Status error(size_t at, const std::string& what) const;
  Brace brace_at(size_t at) const;
  bool quantifier_next() const;
  Status parse_disjunction(int depth, Expr& out);
  Status parse_alternative(int depth, Expr& out, Branch* top);
  Status parse_term(int depth, std::vector<Expr>& items);
  Status parse_quantifier(Expr& item);
  Status parse_bound(std::string_view text, size_t at, int64_t& value) const;
  Status parse_atom(int depth, Expr& out);
  Status parse_group(int depth, Expr& out);
  Status parse_class(Expr& out);
  Status parse_class_atom(ClassAtom& out);
  Status parse_escape(bool in_class, ClassAtom& out);
  Status parse_hex(size_t at, int digits, uint32_t& cp);
  Status parse_unicode(size_t at, uint32_t& cp);

  std::string_view s_;
  const GrammarLimits& limits_;
  size_t pos_ = 0;
};

Status RegexParser::error(size_t at, const std::string& what) const {
  size_t index = 0;  // in code points
  for (size_t i = 0; i < at && i < s_.size(); ++i) index += (static_cast<uint8_t>(s_[i]) & 0xC0) != 0x80;
  return InvalidArgument("regex: {} (at position {})", what, index);
}

Brace RegexParser::brace_at(size_t at) const {
  Brace b;
  size_t i = at + 1, start = i;
  while (i < s_.size() && is_digit(s_[i])) ++i;
  b.min_text = s_.substr(start, i - start);
  if (i < s_.size() && s_[i] == ',') {
    b.has_comma = true;
    start = ++i;
    while (i < s_.size() && is_digit(s_[i])) ++i;
    b.max_text = s_.substr(start, i - start);
  }
  if (i >= s_.size() || s_[i] != '}') return b;
  b.end = i + 1;
  if (!b.min_text.empty()) b.kind = Brace::Kind::kQuantifier;
  if (b.min_text.empty() && b.has_comma && !b.max_text.empty()) b.kind = Brace::Kind::kCommaFirst;
  return b;
}

bool RegexParser::quantifier_next() const {
  char c = peek();
  return c == '*' || c == '+' || c == '?' || (c == '{' && brace_at(pos_).kind != Brace::Kind::kLiteral);
}

Status RegexParser::parse(std::vector<Branch>& out) {
  while (true) {
    Branch br;
    LLMS_RETURN_IF_ERROR(parse_alternative(0, br.expr, &br));
    out.push_back(std::move(br));
    if (at_end()) return Status::Ok();
    ++pos_;  // '|'
  }
}

Status RegexParser::parse_disjunction(int depth, Expr& out) {
  std::vector<Expr> alts(1);
  LLMS_RETURN_IF_ERROR(parse_alternative(depth, alts.back(), nullptr));
  while (peek() == '|') {
    ++pos_;
    alts.emplace_back();
    LLMS_RETURN_IF_ERROR(parse_alternative(depth, alts.back(), nullptr));
  }
  out = Expr::choice(std::move(alts));
  return Status::Ok();
}

// `top` is the branch being parsed at the top level (where anchors are allowed), else null.
Status RegexParser::parse_alternative(int depth, Expr& out, Branch* top) {
  std::vector<Expr> items;
  if (top && peek() == '^') {
    top->anchored_start = true;
    ++pos_;
  }
  while (!at_end() && peek() != '|') {
    char c = peek();
    if (c == ')') {
      if (depth == 0) return error(pos_, "unmatched ')'");
      break;
    }
    if (c == '$') {
      if (top && (pos_ + 1 == s_.size() || s_[pos_ + 1] == '|')) {
        top->anchored_end = true;
        ++pos_;
        break;
      }
      return error(pos_, "anchor '$' is only supported at the end of the pattern or of a top-level alternative");
    }
    if (c == '^') {
      return error(pos_, "anchor '^' is only supported at the start of the pattern or of a top-level alternative");
    }
    LLMS_RETURN_IF_ERROR(parse_term(depth, items));
  }
  out = Expr::sequence(std::move(items));
  return Status::Ok();
}

Status RegexParser::parse_term(int depth, std::vector<Expr>& items) {
  if (quantifier_next()) return error(pos_, fmt::format("nothing to repeat before '{}'", peek()));
  Expr atom;
  LLMS_RETURN_IF_ERROR(parse_atom(depth, atom));
  LLMS_RETURN_IF_ERROR(parse_quantifier(atom));
  if (quantifier_next()) return error(pos_, fmt::format("quantifier '{}' follows another quantifier", peek()));
  items.push_back(std::move(atom));
  return Status::Ok();
}

Status RegexParser::parse_quantifier(Expr& item) {
  char c = peek();
  size_t at = pos_;
  int64_t min = 0, max = -1;
  if (c == '*' || c == '+' || c == '?') {
    min = c == '+' ? 1 : 0;
    max = c == '?' ? 1 : -1;
    ++pos_;
  } else if (c == '{') {
    Brace b = brace_at(pos_);
    if (b.kind == Brace::Kind::kLiteral) return Status::Ok();
    if (b.kind == Brace::Kind::kCommaFirst) {
      return error(at, "'{,n}' is not an ECMAScript quantifier (write {0,n})");
    }
    LLMS_RETURN_IF_ERROR(parse_bound(b.min_text, at, min));
    max = min;
    if (b.has_comma) max = -1;
    if (!b.max_text.empty()) LLMS_RETURN_IF_ERROR(parse_bound(b.max_text, at, max));
    if (max >= 0 && max < min) return error(at, fmt::format("numbers out of order in quantifier {{{},{}}}", min, max));
    pos_ = b.end;
  } else {
    return Status::Ok();
  }
  if (peek() == '?') ++pos_;  // lazy: the same language
  item = Expr::repeat(std::move(item), min, max);
  if (repeat_depth(item) > limits_.max_repeat_nesting)
    return error(at, fmt::format("quantifiers nested deeper than the limit of {}", limits_.max_repeat_nesting));
  return Status::Ok();
}

Status RegexParser::parse_bound(std::string_view text, size_t at, int64_t& value) const {
  value = 0;
  for (char d : text) value = std::min<int64_t>(value * 10 + (d - '0'), int64_t{1} << 40);
  if (value > limits_.max_repetition) {
    return error(at, fmt::format("repetition bound {} is over the limit of {}", text, limits_.max_repetition));
  }
  return Status::Ok();
}

Status RegexParser::parse_atom(int depth, Expr& out) {
  char c = peek();
  if (c == '(') return parse_group(depth, out);
  if (c == '[') return parse_class(out);
  if (c == '.') {
    ++pos_;
    out = Expr::code_points(line_terminators(), true);
    return Status::Ok();
  }
  if (c == '\\') {
    ClassAtom a;
    LLMS_RETURN_IF_ERROR(parse_escape(false, a));
    out = a.is_set ? Expr::code_points(std::move(a.set), false) : code_point(a.cp);
    return Status::Ok();
  }
  uint32_t cp = 0;
  if (!decode_utf8(s_, pos_, cp)) return error(pos_, "invalid UTF-8 in the pattern");
  out = code_point(cp);
  return Status::Ok();
}

Status RegexParser::parse_group(int depth, Expr& out) {
  size_t open = pos_;
  if (depth + 1 > limits_.max_nesting) {
    return error(open, fmt::format("groups nested deeper than the limit of {}", limits_.max_nesting));
  }
  std::string_view rest = s_.substr(pos_);
  if (rest.starts_with("(?:")) {
    pos_ += 3;
  } else if (rest.starts_with("(?=") || rest.starts_with("(?!")) {
    return error(open, fmt::format("lookahead '{}' is not supported", rest.substr(0, 3)));
  } else if (rest.starts_with("(?<=") || rest.starts_with("(?<!")) {
    return error(open, fmt::format("lookbehind '{}' is not supported", rest.substr(0, 4)));
  } else if (rest.starts_with("(?<")) {
    size_t end = rest.find('>');
    std::string_view name = rest.substr(3, end == std::string_view::npos ? 0 : end - 3);
    bool ok = !name.empty() && !is_digit(name[0]) && std::all_of(name.begin(), name.end(), [](char ch) {
      return is_alnum(ch) || ch == '_' || ch == '$' || static_cast<uint8_t>(ch) >= 0x80;
    });
    if (!ok) return error(open, "bad group name in '(?<name>...)'");
    pos_ += end + 1;
  } else if (rest.starts_with("(?")) {
    return error(open, fmt::format("group modifier or inline flags '{}' are not supported",
                                   rest.substr(0, std::min<size_t>(rest.size(), 3))));
  } else {
    ++pos_;
  }
  LLMS_RETURN_IF_ERROR(parse_disjunction(depth + 1, out));
  if (at_end()) return error(open, "unterminated group '('");
  ++pos_;  // ')'
  return Status::Ok();
}

Status RegexParser::parse_class(Expr& out) {
  size_t open = pos_++;
  bool negated = peek() == '^';
  if (negated) ++pos_;
  Ranges ranges;
  while (true) {
    if (at_end()) return error(open, "unterminated character class '['");
    if (peek() == ']') break;
    size_t item = pos_;
    ClassAtom a;
    LLMS_RETURN_IF_ERROR(parse_class_atom(a));
    if (peek() == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
      ++pos_;
      ClassAtom b;
      LLMS_RETURN_IF_ERROR(parse_class_atom(b));
      if (a.is_set || b.is_set) return error(item, "a class escape (\\d, \\w, \\s, ...) cannot bound a range");
      if (b.cp < a.cp) return error(item, "range out of order in character class");
      ranges.push_back({a.cp, b.cp});
    } else if (a.is_set) {
      ranges.insert(ranges.end(), a.set.begin(), a.set.end());
    } else {
      ranges.push_back({a.cp, a.cp});
    }
  }
  ++pos_;
  out = Expr::code_points(std::move(ranges), negated);
  return Status::Ok();
}

Status RegexParser::parse_class_atom(ClassAtom& out) {
  if (peek() == '\\') return parse_escape(true, out);
  if (!decode_utf8(s_, pos_, out.cp)) return error(pos_, "invalid UTF-8 in the pattern");
  return Status::Ok();
}

Status RegexParser::parse_escape(bool in_class, ClassAtom& out) {
  size_t at = pos_++;
  if (at_end()) return error(at, "pattern ends with '\\'");
  if (static_cast<uint8_t>(peek()) >= 0x80) {  // an escaped non-ASCII character is itself
    if (!decode_utf8(s_, pos_, out.cp)) return error(pos_, "invalid UTF-8 in the pattern");
    return Status::Ok();
  }
  char c = s_[pos_++];
  auto set = [&](Ranges r, bool negate) {
    out.is_set = true;
    out.set = negate ? complement(std::move(r)) : std::move(r);
    return Status::Ok();
  };
  switch (c) {
    case 'd': case 'D': return set(digit_ranges(), c == 'D');
    case 'w': case 'W': return set(word_ranges(), c == 'W');
    case 's': case 'S': return set(space_ranges(), c == 'S');
    case 't': out.cp = '\t'; return Status::Ok();
    case 'n': out.cp = '\n'; return Status::Ok();
    case 'r': out.cp = '\r'; return Status::Ok();
    case 'f': out.cp = '\f'; return Status::Ok();
    case 'v': out.cp = '\v'; return Status::Ok();
    case 'x': return parse_hex(at, 2, out.cp);
    case 'u': return parse_unicode(at, out.cp);
    case 'b':
      if (!in_class) return error(at, "word boundary '\\b' is not supported");
      out.cp = 0x08;
      return Status::Ok();
    case 'B': return error(at, "word boundary '\\B' is not supported");
    case 'k': return error(at, "named backreference '\\k<...>' is not supported");
    case 'p': case 'P': return error(at, fmt::format("Unicode property escape '\\{}{{...}}' is not supported", c));
    case 'c':
      if (!((peek() | 0x20) >= 'a' && (peek() | 0x20) <= 'z')) return error(at, "bad control escape '\\c'");
      out.cp = static_cast<uint32_t>(s_[pos_++]) % 32;
      return Status::Ok();
    case '0':
      if (is_digit(peek())) return error(at, "octal escape '\\0...' is not supported");
      out.cp = 0;
      return Status::Ok();
    default: break;
  }
  if (is_digit(c)) {
    return error(at, in_class ? fmt::format("octal escape '\\{}' is not supported", c)
                              : fmt::format("backreference '\\{}' is not supported", c));
  }
  if (is_alnum(c)) return error(at, fmt::format("unknown escape '\\{}'", c));
  out.cp = static_cast<uint8_t>(c);  // identity escape: \. \/ \- \\ ...
  return Status::Ok();
}

Status RegexParser::parse_hex(size_t at, int digits, uint32_t& cp) {
  cp = 0;
  for (int i = 0; i < digits; ++i) {
    int v = hex_value(peek());
    if (v < 0) return error(at, fmt::format("bad escape '\\{}': expected {} hex digits", s_[at + 1], digits));
    cp = cp * 16 + static_cast<uint32_t>(v);
    ++pos_;
  }
  return Status::Ok();
}

// \uHHHH (a high surrogate followed by \uLOW combines into one code point) or \u{H...}.
Status RegexParser::parse_unicode(size_t at, uint32_t& cp) {
  if (peek() == '{') {
    size_t start = ++pos_;
    cp = 0;
    while (hex_value(peek()) >= 0 && cp <= 0x10FFFF) cp = cp * 16 + static_cast<uint32_t>(hex_value(s_[pos_++]));
    if (pos_ == start || peek() != '}' || cp > 0x10FFFF) return error(at, "bad escape '\\u{...}'");
    ++pos_;
    return Status::Ok();
  }
  LLMS_RETURN_IF_ERROR(parse_hex(at, 4, cp));
  if (cp >= 0xD800 && cp <= 0xDBFF && peek() == '\\' && peek(1) == 'u') {
    size_t saved = pos_;
    uint32_t low = 0;
    pos_ += 2;
    if (parse_hex(at, 4, low).ok() && low >= 0xDC00 && low <= 0xDFFF) {
      cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
    } else {
      pos_ = saved;
    }
  }
  return Status::Ok();
}

}  // namespace

Expected<Element> compile_regex(std::string_view pattern, GrammarBuilder& b, const RegexOptions& options) {
  std::vector<Branch> branches;
  RegexParser parser(pattern, options.limits);
  LLMS_RETURN_IF_ERROR(parser.parse(branches));
  ExprLowering lowering(b, {}, {}, options.limits.max_elements);
  lowering.set_hint("regex");
  lowering.set_json_string(options.json_string);
  Element any = options.json_string ? json_string_class(b, {}, true) : b.any_codepoint();
  // Branches with the same anchors share one .* prefix / suffix (search mode).
  std::vector<Sequence> alts;
  for (int anchors = 0; anchors < 4; ++anchors) {
    bool start = anchors & 1, end = anchors & 2;
    std::vector<Expr> group;
    for (Branch& br : branches) {
      bool same = !options.search || (br.anchored_start == start && br.anchored_end == end);
      if (same) group.push_back(std::move(br.expr));
    }
    if (group.empty()) continue;
    Sequence seq;
    if (options.search && !start) seq.push_back(b.star(any));
    lowering.lower_into(Expr::choice(std::move(group)), seq);
    if (options.search && !end) seq.push_back(b.star(any));
    alts.push_back(std::move(seq));
    if (!options.search) break;
  }
  if (Status st = lowering.status(); !st.ok()) return InvalidArgument("regex: {}", st.message());
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  return b.choice(std::move(alts), "regex");
}

Expected<Grammar> regex_grammar(std::string_view pattern, const RegexOptions& options) {
  GrammarBuilder b;
  LLMS_ASSIGN_OR_RETURN(Element e, compile_regex(pattern, b, options));
  uint32_t root = b.add_rule("root");
  b.add_alternative(root, {e});
  Grammar g = b.finish(root);
  if (g.num_elements() > options.limits.max_elements) {
    return InvalidArgument("regex: grammar too large: {} elements, over the limit of {}", g.num_elements(),
                           options.limits.max_elements);
  }
  LLMS_RETURN_IF_ERROR(g.validate());
  return g;
}

}  // namespace llmserve::structured_output
