#include "structured_output/gbnf.h"

#include "structured_output/json_grammar_parts.h"

#include <algorithm>
#include <unordered_set>

#include <fmt/format.h>

namespace llmserve::structured_output {

// ---- expression trees --------------------------------------------------------------------------

Expr Expr::literal(std::string utf8) {
  Expr e;
  e.kind = Kind::kLiteral;
  e.text = std::move(utf8);
  return e;
}

Expr Expr::code_points(std::vector<CodepointRange> ranges, bool negated) {
  Expr e;
  e.kind = Kind::kClass;
  e.ranges = std::move(ranges);
  e.negated = negated;
  return e;
}

Expr Expr::any() {
  Expr e;
  e.kind = Kind::kAny;
  return e;
}

Expr Expr::ref(uint32_t rule) {
  Expr e;
  e.kind = Kind::kRef;
  e.rule = rule;
  return e;
}

Expr Expr::sequence(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::kSequence;
  e.children = std::move(items);
  return e;
}

Expr Expr::choice(std::vector<Expr> alternatives) {
  if (alternatives.size() == 1) return std::move(alternatives[0]);
  Expr e;
  e.kind = Kind::kChoice;
  e.children = std::move(alternatives);
  return e;
}

int repeat_depth(const Expr& e) {
  int deepest = 0;
  for (const Expr& c : e.children) deepest = std::max(deepest, repeat_depth(c));
  return deepest + (e.kind == Expr::Kind::kRepeat ? 1 : 0);
}

Expr Expr::repeat(Expr inner, int64_t min, int64_t max) {
  // Repeats of an unbounded repeat collapse (the same language, one derivation instead of
  // exponentially many: "([a-z/]*)*" in real schemas made every string position a few
  // hundred matcher heads): (R*){m,n} = R* and (R+){0|1,n} = R{0|1,inf} for n != 0, and
  // (R?){m,inf} = R*.
  if (inner.kind == Kind::kRepeat && max != 0) {
    if (inner.max < 0 && inner.min == 0) return inner;
    if (inner.max < 0 && inner.min == 1 && min <= 1) {
      inner.min = min;
      return inner;
    }
    if (inner.max == 1 && inner.min == 0 && max < 0) {
      inner.max = -1;
      return inner;
    }
  }
  Expr e;
  e.kind = Kind::kRepeat;
  e.min = min;
  e.max = max;
  e.children.push_back(std::move(inner));
  return e;
}

void append_utf8(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out += static_cast<char>(cp);
  } else if (cp < 0x800) {
    out += static_cast<char>(0xC0 | (cp >> 6));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else if (cp < 0x10000) {
    out += static_cast<char>(0xE0 | (cp >> 12));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (cp >> 18));
    out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (cp & 0x3F));
  }
}

bool decode_utf8(std::string_view s, size_t& pos, uint32_t& cp) {
  auto byte = [&](size_t i) { return static_cast<uint8_t>(s[i]); };
  uint8_t b0 = byte(pos);
  int n = b0 < 0x80 ? 1 : (b0 & 0xE0) == 0xC0 ? 2 : (b0 & 0xF0) == 0xE0 ? 3 : (b0 & 0xF8) == 0xF0 ? 4 : 0;
  if (n == 0 || pos + n > s.size()) return false;
  static const uint8_t kLeadMask[5] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  static const uint32_t kMin[5] = {0, 0, 0x80, 0x800, 0x10000};
  uint32_t v = b0 & kLeadMask[n];
  for (int i = 1; i < n; ++i) {
    if ((byte(pos + i) & 0xC0) != 0x80) return false;
    v = (v << 6) | (byte(pos + i) & 0x3F);
  }
  if (v < kMin[n] || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return false;
  cp = v;
  pos += n;
  return true;
}

// ---- lowering ----------------------------------------------------------------------------------

ExprLowering::ExprLowering(GrammarBuilder& b, std::vector<const Expr*> rules,
                           std::vector<uint32_t> rule_ids, size_t max_elements)
    : b_(b), rules_(std::move(rules)), rule_ids_(std::move(rule_ids)), max_elements_(max_elements) {
  // Nullable rules: a fixed point (a rule's nullability may depend on rules defined later).
  rule_nullable_.assign(rules_.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules_.size(); ++r) {
      if (!rule_nullable_[r] && nullable(*rules_[r])) rule_nullable_[r] = changed = true;
    }
  }
}

bool ExprLowering::nullable(const Expr& e) const {
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.text.empty();
    case Expr::Kind::kClass:
    case Expr::Kind::kAny: return false;
    case Expr::Kind::kRef: return rule_nullable_[e.rule] != 0;
    case Expr::Kind::kSequence:
      return std::all_of(e.children.begin(), e.children.end(), [&](const Expr& c) { return nullable(c); });
    case Expr::Kind::kChoice:
      return std::any_of(e.children.begin(), e.children.end(), [&](const Expr& c) { return nullable(c); });
    case Expr::Kind::kRepeat: return e.min == 0 || e.max == 0 || nullable(e.children[0]);
  }
  return false;
}

Status ExprLowering::status() const {
  if (num_charged_ <= max_elements_) return Status::Ok();
  return InvalidArgument("grammar too large: more than the limit of {} elements", max_elements_);
}

void ExprLowering::charge(size_t num_elements) { num_charged_ += num_elements; }

void ExprLowering::define_rule(uint32_t rule, const Expr& body) {
  auto add = [&](const Expr& alt) {
    Sequence seq;
    lower_into(alt, seq);
    charge(seq.size() + 1);
    b_.add_alternative(rule, std::move(seq));
  };
  if (body.kind == Expr::Kind::kChoice) {
    for (const Expr& alt : body.children) add(alt);
  } else {
    add(body);
  }
}

void ExprLowering::lower_into(const Expr& e, Sequence& out) {
  bool over = num_charged_ > max_elements_;  // past the limit: add nothing more that is large
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      charge(e.text.size());
      if (!over) {
        if (json_string_) {
          append_json_string_literal(b_, e.text, out);
        } else {
          b_.append_literal(e.text, out);
        }
      }
      return;
    case Expr::Kind::kClass:
      charge(8 * (e.ranges.size() + 1));
      out.push_back(over ? nothing()
                         : json_string_ ? json_string_class(b_, e.ranges, e.negated)
                                        : b_.codepoint_class(e.ranges, e.negated));
      return;
    case Expr::Kind::kAny:
      out.push_back(json_string_ ? json_string_class(b_, {}, true) : b_.any_codepoint());
      return;
    case Expr::Kind::kRef: out.push_back(Element::rule(rule_ids_[e.rule])); return;
    case Expr::Kind::kSequence:
      for (const Expr& c : e.children) lower_into(c, out);
      return;
    case Expr::Kind::kChoice: {
      std::vector<Sequence> alts(e.children.size());
      for (size_t i = 0; i < alts.size(); ++i) lower_into(e.children[i], alts[i]);
      charge(alts.size());
      out.push_back(b_.choice(std::move(alts), hint_));
      return;
    }
    case Expr::Kind::kRepeat: break;
  }
  const Expr& inner = e.children[0];
  if (e.max == 0) return;
  if (e.min == 1 && e.max == 1) return lower_into(inner, out);
  if (nullable(inner)) {  // e{m,n} = (e \ "")^{0..n}
    out.push_back(repetition(nonempty(inner), 0, e.max));
  } else {
    out.push_back(repetition(lower_element(inner), e.min, e.max));
  }
}

Element ExprLowering::lower_element(const Expr& e) {
  Sequence seq;
  lower_into(e, seq);
  if (seq.size() == 1) return seq[0];
  if (seq.empty()) return b_.literal("");
  charge(seq.size() + 1);
  return b_.group(std::move(seq), hint_);
}

Element ExprLowering::repetition(Element e, int64_t min, int64_t max) {
  // GrammarBuilder::repeat: min references plus a chain of (max - min) optional tails.
  charge(static_cast<size_t>(min) + 6 * static_cast<size_t>(std::max<int64_t>(max - min, 0)) + 8);
  if (num_charged_ > max_elements_) return nothing();
  return b_.repeat(e, min, max);
}

Element ExprLowering::nothing() { return b_.codepoint_class({}, false); }

// L(e) \ {""}, as one element (nothing() when L(e) = {""}).
Element ExprLowering::nonempty(const Expr& e) {
  if (!nullable(e)) return lower_element(e);
  switch (e.kind) {
    case Expr::Kind::kRef: return nonempty_rule(e.rule);
    case Expr::Kind::kRepeat: {
      const Expr& inner = e.children[0];
      if (e.max == 0) return nothing();
      Element x = nullable(inner) ? nonempty(inner) : lower_element(inner);
      return repetition(x, 1, e.max);
    }
    default: break;
  }
  std::vector<Sequence> alts;
  nonempty_alternatives(e, alts);
  if (alts.empty()) return nothing();
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  charge(alts.size());
  return b_.choice(std::move(alts), hint_);
}

// Sequences whose union is L(e) \ {""}: for X1..Xn, (X1 \ "") X2..Xn, then (if X1 is nullable)
// the same for X2..Xn, and so on.
void ExprLowering::nonempty_alternatives(const Expr& e, std::vector<Sequence>& out) {
  if (e.kind == Expr::Kind::kChoice) {
    for (const Expr& c : e.children) nonempty_alternatives(c, out);
    return;
  }
  if (e.kind != Expr::Kind::kSequence) {
    Sequence seq;
    if (nullable(e)) {
      if (e.kind != Expr::Kind::kLiteral) seq.push_back(nonempty(e));  // "" has no non-empty part
    } else {
      lower_into(e, seq);
    }
    if (!seq.empty()) out.push_back(std::move(seq));
    return;
  }
  const std::vector<Expr>& items = e.children;
  std::vector<Sequence> parts(items.size());  // each item lowered once, copied into the tails
  for (size_t i = 1; i < items.size(); ++i) lower_into(items[i], parts[i]);
  for (size_t i = 0; i < items.size(); ++i) {
    Sequence alt;
    if (nullable(items[i])) {
      alt.push_back(nonempty(items[i]));
    } else if (i == 0) {
      lower_into(items[0], alt);
    } else {
      alt = parts[i];
    }
    for (size_t j = i + 1; j < items.size(); ++j) alt.insert(alt.end(), parts[j].begin(), parts[j].end());
    charge(alt.size() + 1);
    out.push_back(std::move(alt));
    if (!nullable(items[i])) break;
  }
}

Element ExprLowering::nonempty_rule(uint32_t rule) {
  if (auto it = nonempty_rules_.find(rule); it != nonempty_rules_.end()) return Element::rule(it->second);
  uint32_t r = b_.add_rule(hint_ + "-nonempty");
  nonempty_rules_[rule] = r;  // before the body: the rule may refer to itself
  std::vector<Sequence> alts;
  nonempty_alternatives(*rules_[rule], alts);
  if (alts.empty()) alts.push_back({nothing()});
  for (Sequence& s : alts) b_.add_alternative(r, std::move(s));
  return Element::rule(r);
}

// ---- the GBNF parser ---------------------------------------------------------------------------

namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

struct RuleDef {
  std::string name;
  Expr body;
  bool defined = false;
  size_t def_pos = 0;
  size_t first_ref = 0;
};

// Recursive descent over the text; every error is "GBNF line:column: what".
class Parser {
 public:
  Parser(std::string_view text, const GrammarLimits& limits) : s_(text), limits_(limits) {}

  Status parse();
  std::vector<RuleDef>& rules() { return rules_; }
  Status error(size_t at, const std::string& what) const;
  std::string where(size_t at) const;  // "line:column", 1-based, columns in code points

 private:
  bool at_end() const { return pos_ >= s_.size(); }
  char peek(size_t ahead = 0) const { return pos_ + ahead < s_.size() ? s_[pos_ + ahead] : '\0'; }
  std::string found() const;
  void skip_space(bool newlines);
  bool continues_with_bar();
  uint32_t rule_index(const std::string& name, size_t at);
  Status parse_rule();
  Status parse_alternatives(bool nested, int depth, Expr& out);
  Status parse_sequence(bool nested, int depth, Expr& out);
  Status parse_symbol(int depth, Expr& out);
  Status parse_group(int depth, Expr& out);
  Status parse_postfix(Expr& item);
  Status check_repeat_nesting(const Expr& item, size_t at) const {
    if (repeat_depth(item) > limits_.max_repeat_nesting)
      return error(at, fmt::format("quantifiers nested deeper than the limit of {}", limits_.max_repeat_nesting));
    return Status::Ok();
  }
  Status parse_bound(int64_t& value);
  Status parse_literal(Expr& out);
  Status parse_class(Expr& out);
  Status parse_char(uint32_t& cp);
  Status parse_escape(uint32_t& cp);

  std::string_view s_;
  const GrammarLimits& limits_;
  size_t pos_ = 0;
  std::vector<RuleDef> rules_;
  std::unordered_map<std::string, uint32_t> index_;
};

Status Parser::error(size_t at, const std::string& what) const {
  return InvalidArgument("GBNF {}: {}", where(at), what);
}

std::string Parser::where(size_t at) const {
  size_t line = 1, col = 1;
  for (size_t i = 0; i < at && i < s_.size(); ++i) {
    if (s_[i] == '\n') {
      ++line;
      col = 1;
    } else if ((static_cast<uint8_t>(s_[i]) & 0xC0) != 0x80) {
      ++col;
    }
  }
  return fmt::format("{}:{}", line, col);
}

std::string Parser::found() const {
  if (at_end()) return "end of input";
  auto c = static_cast<uint8_t>(s_[pos_]);
  if (c == '\n') return "end of line";
  if (c < 0x20 || c >= 0x7F) return fmt::format("byte \\x{:02X}", c);
  return fmt::format("'{}'", static_cast<char>(c));
}

void Parser::skip_space(bool newlines) {
  while (!at_end()) {
    char c = s_[pos_];
    if (c == ' ' || c == '\t' || c == '\r' || (c == '\n' && newlines)) {
      ++pos_;
    } else if (c == '#') {
      while (!at_end() && s_[pos_] != '\n') ++pos_;
    } else {
      break;
    }
  }
}

// At the end of a rule's line: does the next non-blank line start with '|'? (Then it continues
// the rule; positions pos_ at the bar.)
bool Parser::continues_with_bar() {
  size_t saved = pos_;
  skip_space(true);
  if (peek() == '|') return true;
  pos_ = saved;
  return false;
}

uint32_t Parser::rule_index(const std::string& name, size_t at) {
  auto [it, inserted] = index_.try_emplace(name, static_cast<uint32_t>(rules_.size()));
  if (inserted) rules_.push_back({name, Expr{}, false, 0, at});
  return it->second;
}

Status Parser::parse() {
  skip_space(true);
  while (!at_end()) {
    LLMS_RETURN_IF_ERROR(parse_rule());
    skip_space(true);
  }
  for (const RuleDef& r : rules_) {
    if (!r.defined) return error(r.first_ref, fmt::format("undefined rule '{}'", r.name));
  }
  if (!index_.count("root")) return InvalidArgument("GBNF: missing rule 'root' (the start rule)");
  return Status::Ok();
}

Status Parser::parse_rule() {
  size_t start = pos_;
  while (!at_end() && is_name_char(s_[pos_])) ++pos_;
  if (pos_ == start) return error(pos_, fmt::format("expected a rule name, found {}", found()));
  std::string name(s_.substr(start, pos_ - start));
  skip_space(false);
  if (s_.substr(pos_, 3) != "::=") {
    return error(pos_, fmt::format("expected '::=' after rule name '{}', found {}", name, found()));
  }
  pos_ += 3;
  skip_space(true);
  Expr body;
  LLMS_RETURN_IF_ERROR(parse_alternatives(false, 0, body));
  if (!at_end() && peek() != '\n') {
    if (s_.substr(pos_, 3) == "::=") {
      return error(pos_, fmt::format("unexpected '::=' in rule '{}' (a rule's body must not be empty: "
                                     "write \"\" for the empty string)", name));
    }
    if (peek() == ')') return error(pos_, fmt::format("unmatched ')' in rule '{}'", name));
    return error(pos_, fmt::format("unexpected {} in rule '{}'", found(), name));
  }
  RuleDef& r = rules_[rule_index(name, start)];
  if (r.defined) {
    return error(start, fmt::format("rule '{}' is defined twice (first at {})", name, where(r.def_pos)));
  }
  r.defined = true;
  r.def_pos = start;
  r.body = std::move(body);
  return Status::Ok();
}

Status Parser::parse_alternatives(bool nested, int depth, Expr& out) {
  std::vector<Expr> alts(1);
  LLMS_RETURN_IF_ERROR(parse_sequence(nested, depth, alts.back()));
  while (peek() == '|' || (!nested && continues_with_bar())) {
    ++pos_;
    skip_space(true);
    alts.emplace_back();
    LLMS_RETURN_IF_ERROR(parse_sequence(nested, depth, alts.back()));
  }
  out = Expr::choice(std::move(alts));
  return Status::Ok();
}

Status Parser::parse_sequence(bool nested, int depth, Expr& out) {
  std::vector<Expr> items;
  while (!at_end()) {
    char c = peek();
    if (c == '*' || c == '+' || c == '?' || c == '{') {
      if (items.empty()) return error(pos_, fmt::format("'{}' has nothing to repeat", c));
      LLMS_RETURN_IF_ERROR(parse_postfix(items.back()));
    } else if (c == '"' || c == '[' || c == '.' || c == '(' || is_name_char(c)) {
      items.emplace_back();
      LLMS_RETURN_IF_ERROR(parse_symbol(depth, items.back()));
    } else if (c == '<' || (c == '!' && peek(1) == '<')) {
      return error(pos_, "token references (<...>, <[id]>, !<...>) are not supported: this grammar "
                         "constrains text");
    } else {
      break;
    }
    skip_space(nested);
  }
  out = Expr::sequence(std::move(items));
  return Status::Ok();
}

Status Parser::parse_symbol(int depth, Expr& out) {
  char c = peek();
  if (c == '"') return parse_literal(out);
  if (c == '[') return parse_class(out);
  if (c == '(') return parse_group(depth, out);
  if (c == '.') {
    ++pos_;
    out = Expr::any();
    return Status::Ok();
  }
  size_t start = pos_;
  while (!at_end() && is_name_char(s_[pos_])) ++pos_;
  out = Expr::ref(rule_index(std::string(s_.substr(start, pos_ - start)), start));
  return Status::Ok();
}

Status Parser::parse_group(int depth, Expr& out) {
  size_t open = pos_++;
  if (depth + 1 > limits_.max_nesting) {
    return error(open, fmt::format("parentheses nested deeper than the limit of {}", limits_.max_nesting));
  }
  skip_space(true);
  LLMS_RETURN_IF_ERROR(parse_alternatives(true, depth + 1, out));
  skip_space(true);
  if (at_end()) return error(open, "unclosed '('");
  if (peek() != ')') return error(pos_, fmt::format("expected ')', found {}", found()));
  ++pos_;
  return Status::Ok();
}

Status Parser::parse_postfix(Expr& item) {
  char c = peek();
  int64_t min = 0, max = -1;
  if (c == '+') min = 1;
  if (c == '?') max = 1;
  if (c != '{') {
    ++pos_;
    item = Expr::repeat(std::move(item), min, max);
    return check_repeat_nesting(item, pos_ - 1);
  }
  size_t open = pos_++;
  skip_space(false);
  LLMS_RETURN_IF_ERROR(parse_bound(min));
  max = min;
  skip_space(false);
  if (peek() == ',') {
    ++pos_;
    skip_space(false);
    max = -1;
    if (peek() != '}') LLMS_RETURN_IF_ERROR(parse_bound(max));
    skip_space(false);
  }
  if (peek() != '}') return error(pos_, fmt::format("expected '}}' to close the repetition, found {}", found()));
  ++pos_;
  if (max >= 0 && max < min) {
    return error(open, fmt::format("repetition {{{},{}}} has its minimum above its maximum", min, max));
  }
  item = Expr::repeat(std::move(item), min, max);
  return check_repeat_nesting(item, open);
}

Status Parser::parse_bound(int64_t& value) {
  size_t start = pos_;
  value = 0;
  while (!at_end() && s_[pos_] >= '0' && s_[pos_] <= '9') {
    value = std::min<int64_t>(value * 10 + (s_[pos_] - '0'), int64_t{1} << 40);
    ++pos_;
  }
  if (pos_ == start) return error(pos_, fmt::format("expected a number in the repetition, found {}", found()));
  if (value > limits_.max_repetition) {
    return error(start, fmt::format("repetition bound {} is over the limit of {}",
                                    s_.substr(start, pos_ - start), limits_.max_repetition));
  }
  return Status::Ok();
}

Status Parser::parse_literal(Expr& out) {
  size_t open = pos_++;
  std::string text;
  while (true) {
    if (at_end()) return error(open, "unterminated string literal");
    if (peek() == '"') break;
    uint32_t cp = 0;
    LLMS_RETURN_IF_ERROR(parse_char(cp));
    if (cp >= 0xD800 && cp <= 0xDFFF) {
      return error(open, fmt::format("string literal holds surrogate U+{:04X}, which UTF-8 cannot encode", cp));
    }
    append_utf8(cp, text);
  }
  ++pos_;
  out = Expr::literal(std::move(text));
  return Status::Ok();
}

Status Parser::parse_class(Expr& out) {
  size_t open = pos_++;
  bool negated = peek() == '^';
  if (negated) ++pos_;
  std::vector<CodepointRange> ranges;
  while (true) {
    if (at_end()) return error(open, "unterminated character class");
    if (peek() == ']') break;
    size_t item = pos_;
    uint32_t lo = 0, hi = 0;
    LLMS_RETURN_IF_ERROR(parse_char(lo));
    hi = lo;
    if (peek() == '-' && pos_ + 1 < s_.size() && s_[pos_ + 1] != ']') {
      ++pos_;
      LLMS_RETURN_IF_ERROR(parse_char(hi));
      if (hi < lo) return error(item, fmt::format("character range U+{:04X}-U+{:04X} is reversed", lo, hi));
    }
    ranges.push_back({lo, hi});
  }
  ++pos_;
  out = Expr::code_points(std::move(ranges), negated);
  return Status::Ok();
}

Status Parser::parse_char(uint32_t& cp) {
  if (peek() == '\\') return parse_escape(cp);
  if (!decode_utf8(s_, pos_, cp)) return error(pos_, "invalid UTF-8 in the grammar text");
  return Status::Ok();
}

Status Parser::parse_escape(uint32_t& cp) {
  size_t at = pos_++;
  if (at_end()) return error(at, "unterminated escape '\\'");
  char c = s_[pos_++];
  int digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
  if (digits) {
    cp = 0;
    for (int i = 0; i < digits; ++i) {
      int v = hex_value(peek());
      if (v < 0) return error(at, fmt::format("bad escape '\\{}': expected {} hex digits", c, digits));
      cp = cp * 16 + static_cast<uint32_t>(v);
      ++pos_;
    }
    if (cp > 0x10FFFF) return error(at, fmt::format("escape '\\{}' is beyond U+10FFFF", s_.substr(at + 1, 9)));
    return Status::Ok();
  }
  if (c == 'n' || c == 'r' || c == 't') {
    cp = c == 'n' ? '\n' : c == 'r' ? '\r' : '\t';
    return Status::Ok();
  }
  bool punct = c > 0x20 && c < 0x7F && !(c >= '0' && c <= '9') && !((c | 0x20) >= 'a' && (c | 0x20) <= 'z');
  if (!punct) {
    uint8_t u = static_cast<uint8_t>(c);
    return error(at, u > 0x20 && u < 0x7F ? fmt::format("bad escape '\\{}'", c) : "bad escape '\\'");
  }
  cp = static_cast<uint8_t>(c);
  return Status::Ok();
}

}  // namespace

Expected<Grammar> parse_gbnf(std::string_view text, const GrammarLimits& limits) {
  Parser parser(text, limits);
  LLMS_RETURN_IF_ERROR(parser.parse());
  std::vector<RuleDef>& defs = parser.rules();
  GrammarBuilder b;
  std::vector<const Expr*> bodies;
  std::vector<uint32_t> ids;
  for (const RuleDef& d : defs) {
    bodies.push_back(&d.body);
    ids.push_back(b.add_rule(d.name));  // first, so that every rule keeps its own name
  }
  ExprLowering lowering(b, bodies, ids, limits.max_elements);
  for (size_t i = 0; i < defs.size(); ++i) {
    lowering.set_hint(defs[i].name);
    lowering.define_rule(ids[i], defs[i].body);
    if (!lowering.status().ok()) break;
  }
  if (Status st = lowering.status(); !st.ok()) return InvalidArgument("GBNF: {}", st.message());
  std::unordered_set<std::string> names;
  for (const RuleDef& d : defs) names.insert(d.name);
  Grammar g = b.finish(ids[0]);
  for (size_t i = 0; i < defs.size(); ++i) {
    if (defs[i].name == "root") g.root = ids[i];
  }
  for (size_t r = defs.size(); r < g.rules.size(); ++r) {  // helper names never shadow a rule's
    if (names.count(g.rules[r].name)) g.rules[r].name += fmt::format("~{}", r);
  }
  if (g.num_elements() > limits.max_elements) {
    return InvalidArgument("GBNF: grammar too large: {} elements, over the limit of {}", g.num_elements(),
                           limits.max_elements);
  }
  if (Status st = g.validate(); !st.ok()) return InvalidArgument("GBNF: {}", st.message());
  return g;
}

}  // namespace llmserve::structured_output
