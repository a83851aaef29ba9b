#include "structured_output/json_grammar_parts.h"

#include <fmt/format.h>

namespace llmserve::structured_output {
namespace {

ByteSet range_set(char lo, char hi) {
  ByteSet s;
  for (int c = static_cast<uint8_t>(lo); c <= static_cast<uint8_t>(hi); ++c) s.set(c);
  return s;
}

}  // namespace

std::string json_string_literal(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          out += fmt::format("\\u{:04x}", c);
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

Element json_string_class(GrammarBuilder& b, const std::vector<CodepointRange>& ranges, bool negated) {
  auto member = [&](uint32_t c) {
    bool in = false;
    for (auto r : ranges) in = in || (c >= r.first && c <= r.last);
    return negated ? !in : in;
  };
  // Raw part: the class without control characters, '"' and '\'.
  const std::vector<CodepointRange> specials = {{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
  std::vector<CodepointRange> raw_ranges;
  bool raw_negated = negated;
  if (negated) {
    raw_ranges = ranges;
    raw_ranges.insert(raw_ranges.end(), specials.begin(), specials.end());
  } else {
    for (auto r : ranges) {  // subtract the specials
      uint32_t lo = r.first;
      for (auto x : specials) {
        if (x.last < lo || x.first > r.last) continue;
        if (x.first > lo) raw_ranges.push_back({lo, x.first - 1});
        lo = std::max(lo, x.last + 1);
      }
      if (lo <= r.last) raw_ranges.push_back({lo, r.last});
    }
  }
  std::vector<Sequence> alts = {{b.codepoint_class(raw_ranges, raw_negated)}};
  for (uint32_t c = 0; c < 0x20; ++c) {
    if (!member(c)) continue;
    const char* short_form = c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : c == '\b' ? "\\b" : c == '\f' ? "\\f" : nullptr;
    Sequence s;
    if (short_form) {
      b.append_literal(short_form, s);
    } else {
      b.append_literal(fmt::format("\\u00{:02x}", c), s);
    }
    alts.push_back(std::move(s));
    if (!short_form && fmt::format("{:02x}", c) != fmt::format("{:02X}", c)) {
      Sequence u;
      b.append_literal(fmt::format("\\u00{:02X}", c), u);
      alts.push_back(std::move(u));
    }
  }
  if (member('"')) alts.push_back({b.byte('\\'), b.byte('"')});
  if (member('\\')) alts.push_back({b.byte('\\'), b.byte('\\')});
  if (alts.size() == 1) return alts[0][0];
  return b.choice(std::move(alts), "json-class");
}

void append_json_string_literal(GrammarBuilder& b, std::string_view text, Sequence& out) {
  std::string quoted = json_string_literal(std::string(text));
  b.append_literal(std::string_view(quoted).substr(1, quoted.size() - 2), out);
}

Element JsonParts::string_char(bool no_surrogate_escapes) {
  GrammarBuilder& b = b_;
  Element plain = b.codepoint_class({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, /*negated=*/true);
  ByteSet simple;
  for (char c : std::string("\"\\/bfnrt")) simple.set(static_cast<uint8_t>(c));
  Element hex = b.byte_set(range_set('0', '9') | range_set('a', 'f') | range_set('A', 'F'));
  std::vector<Sequence> escapes = {{b.byte('\\'), b.byte_set(simple)}};
  if (!no_surrogate_escapes) {
    escapes.push_back({b.byte('\\'), b.byte('u'), hex, hex, hex, hex});
  } else {
    // \uXXXX outside D800-DFFF: first digit not d/D, or d/D followed by 0-7.
    ByteSet not_d = range_set('0', '9') | range_set('a', 'c') | range_set('A', 'C') |
                    range_set('e', 'f') | range_set('E', 'F');
    ByteSet d;
    d.set('d');
    d.set('D');
    escapes.push_back({b.byte('\\'), b.byte('u'), b.byte_set(not_d), hex, hex, hex});
    escapes.push_back({b.byte('\\'), b.byte('u'), b.byte_set(d), b.byte_set(range_set('0', '7')), hex, hex});
  }
  std::vector<Sequence> alts = {{plain}};
  for (auto& e : escapes) alts.push_back(e);
  return b.choice(std::move(alts), no_surrogate_escapes ? "json-char-counted" : "json-char");
}

Element JsonParts::string(int64_t min_length, int64_t max_length) {
  bool bounded = min_length > 0 || max_length >= 0;
  Element body = b_.repeat(string_char(bounded), min_length, max_length);
  return b_.group({b_.byte('"'), body, b_.byte('"')}, "json-string");
}

Element JsonParts::plain_string_content() {
  Element plain = b_.codepoint_class({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true);
  return b_.star(plain);
}

Element JsonParts::number() {
  if (number_) return *number_;
  GrammarBuilder& b = b_;
  Element digit = b.byte_set(range_set('0', '9'));
  Element digits = b.plus(digit);
  Element int_part = b.choice({{b.byte('0')}, {b.byte_set(range_set('1', '9')), b.star(digit)}}, "json-int");
  Element frac = b.optional(b.group({b.byte('.'), digits}, "json-frac"));
  ByteSet e;
  e.set('e');
  e.set('E');
  ByteSet sign;
  sign.set('+');
  sign.set('-');
  Element exp = b.optional(b.group({b.byte_set(e), b.optional(b.byte_set(sign)), digits}, "json-exp"));
  number_ = b.group({b.optional(b.byte('-')), int_part, frac, exp}, "json-number");
  return *number_;
}

Element JsonParts::digits_range(const std::string& lo, const std::string& hi) {
  // Decimal strings of equal length, lo <= hi: the usual split into a fixed first digit with a
  // recursive tail, a free middle, and the upper edge.
  GrammarBuilder& b = b_;
  size_t n = lo.size();
  if (n == 1) return b.byte_set(range_set(lo[0], hi[0]));
  Element any = b.byte_set(range_set('0', '9'));
  std::string t_lo = lo.substr(1), t_hi = hi.substr(1);
  bool lo_min = t_lo.find_first_not_of('0') == std::string::npos;
  bool hi_max = t_hi.find_first_not_of('9') == std::string::npos;
  if (lo[0] == hi[0]) return b.group({b.byte(lo[0]), digits_range(t_lo, t_hi)}, "digits");
  std::vector<Sequence> alts;
  char first_free = lo[0], last_free = hi[0];
  if (!lo_min) {
    alts.push_back({b.byte(lo[0]), digits_range(t_lo, std::string(n - 1, '9'))});
    ++first_free;
  }
  if (!hi_max) --last_free;
  if (first_free <= last_free) {
    Sequence s{b.byte_set(range_set(first_free, last_free))};
    for (size_t i = 1; i < n; ++i) s.push_back(any);
    alts.push_back(std::move(s));
  }
  if (!hi_max) alts.push_back({b.byte(hi[0]), digits_range(std::string(n - 1, '0'), t_hi)});
  return b.choice(std::move(alts), "digits");
}

Element JsonParts::nonneg_range(uint64_t lo, std::optional<uint64_t> hi) {
  GrammarBuilder& b = b_;
  std::string slo = std::to_string(lo);
  std::vector<Sequence> alts;
  size_t max_len = hi ? std::to_string(*hi).size() : slo.size();
  for (size_t len = slo.size(); len <= max_len; ++len) {
    std::string from = len == slo.size() ? slo : "1" + std::string(len - 1, '0');
    if (len == 1 && len != slo.size()) from = "0";
    std::string to = std::string(len, '9');
    if (hi && len == max_len) to = std::to_string(*hi);
    if (from.size() == to.size() && from <= to) alts.push_back({digits_range(from, to)});
  }
  if (!hi) {  // and every longer number: [1-9][0-9]{len,}
    Element digit = b.byte_set(range_set('0', '9'));
    alts.push_back({b.byte_set(range_set('1', '9')), b.repeat(digit, static_cast<int64_t>(slo.size()), -1)});
  }
  if (alts.empty()) return b.byte_set(ByteSet{});
  return b.choice(std::move(alts), "uint-range");
}

Element JsonParts::integer(std::optional<int64_t> lo, std::optional<int64_t> hi) {
  GrammarBuilder& b = b_;
  std::vector<Sequence> alts;
  // Non-negative part: [max(lo, 0), hi].
  if (!hi || *hi >= 0) {
    uint64_t from = lo && *lo > 0 ? static_cast<uint64_t>(*lo) : 0;
    std::optional<uint64_t> to;
    if (hi) to = static_cast<uint64_t>(*hi);
    alts.push_back({nonneg_range(from, to)});
  }
  // Negative part: magnitudes [max(1, -hi), -lo].
  if (!lo || *lo < 0) {
    uint64_t from = hi && *hi < 0 ? static_cast<uint64_t>(-(*hi + 1)) + 1 : 1;
    std::optional<uint64_t> to;
    if (lo) to = static_cast<uint64_t>(-(*lo + 1)) + 1;
    if (!to || from <= *to) alts.push_back({b.byte('-'), nonneg_range(from, to)});
  }
  if (alts.empty()) return b.byte_set(ByteSet{});
  return b.choice(std::move(alts), "json-integer");
}

Element JsonParts::fraction(int kind) {
  GrammarBuilder& b = b_;
  Element digit = b.byte_set(range_set('0', '9'));
  if (kind == 0) return b.optional(b.group({b.byte('.'), b.plus(digit)}, "frac-any"));
  if (kind == 1) return b.optional(b.group({b.byte('.'), b.plus(b.byte('0'))}, "frac-zero"));
  return b.group({b.byte('.'), b.star(digit), b.byte_set(range_set('1', '9')), b.star(digit)}, "frac-nonzero");
}

Element JsonParts::bounded_number(std::optional<int64_t> lo, bool lo_exclusive, std::optional<int64_t> hi,
                                  bool hi_exclusive) {
  // x = +-(I.F). A constraint on one side becomes pieces (range of I, fraction kind), e.g. for
  // x >= 0: x > a  <=>  I >= a+1, or I == a with a non-zero fraction. Pieces of the two bounds
  // are intersected pairwise. Fraction kinds: 0 any, 1 zero, 2 non-zero.
  struct Piece {
    uint64_t lo;
    std::optional<uint64_t> hi;
    int frac;
  };
  auto meet = [](int a, int b) { return a == 0 ? b : b == 0 ? a : a == b ? a : -1; };
  auto intersect = [&](const std::vector<Piece>& p, const std::vector<Piece>& q) {
    std::vector<Piece> out;
    for (const Piece& x : p) {
      for (const Piece& y : q) {
        int f = meet(x.frac, y.frac);
        uint64_t l = std::max(x.lo, y.lo);
        std::optional<uint64_t> h = x.hi;
        if (y.hi && (!h || *y.hi < *h)) h = y.hi;
        if (f >= 0 && (!h || l <= *h)) out.push_back({l, h, f});
      }
    }
    return out;
  };
  // Magnitude pieces for "m >= a" (strict: m > a) and "m <= c" (strict: m < c), a, c >= 0.
  auto at_least = [](uint64_t a, bool strict) {
    return strict ? std::vector<Piece>{{a + 1, std::nullopt, 0}, {a, a, 2}}
                  : std::vector<Piece>{{a, std::nullopt, 0}};
  };
  auto at_most = [](uint64_t c, bool strict) {
    std::vector<Piece> v;
    if (c >= 1) v.push_back({0, c - 1, 0});
    if (!strict) v.push_back({c, c, 1});
    return v;
  };
  GrammarBuilder& b = b_;
  std::vector<Sequence> alts;
  auto emit = [&](const std::vector<Piece>& pieces, bool negative) {
    for (const Piece& p : pieces) {
      Sequence s;
      if (negative) s.push_back(b.byte('-'));
      s.push_back(nonneg_range(p.lo, p.hi));
      s.push_back(fraction(p.frac));
      alts.push_back(std::move(s));
    }
  };
  // Non-negative side (m = x).
  if (!hi || *hi > 0 || (*hi == 0 && !hi_exclusive)) {
    std::vector<Piece> p = {{0, std::nullopt, 0}};
    if (lo && *lo >= 0) p = intersect(p, at_least(static_cast<uint64_t>(*lo), lo_exclusive));
    if (hi) p = intersect(p, at_most(static_cast<uint64_t>(*hi), hi_exclusive));
    emit(p, false);
  }
  // Negative side (m = -x > 0; "-0..." is not produced).
  if (!lo || *lo < 0) {
    std::vector<Piece> p = {{1, std::nullopt, 0}, {0, 0, 2}};
    if (lo) p = intersect(p, at_most(static_cast<uint64_t>(-(*lo + 1)) + 1, lo_exclusive));
    if (hi && *hi < 0) p = intersect(p, at_least(static_cast<uint64_t>(-(*hi + 1)) + 1, hi_exclusive));
    emit(p, true);
  }
  if (alts.empty()) return b.byte_set(ByteSet{});
  return b.choice(std::move(alts), "json-bounded-number");
}

std::optional<Element> JsonParts::format_string(const std::string& format) {
  GrammarBuilder& b = b_;
  Element d = b.byte_set(range_set('0', '9'));
  auto lit = [&](std::string_view s) { return b.literal(s); };
  auto two = [&](char a_lo, char a_hi, char b_lo, char b_hi) {
    return Sequence{b.byte_set(range_set(a_lo, a_hi)), b.byte_set(range_set(b_lo, b_hi))};
  };
  auto date = [&]() {
    // YYYY-MM-DD with the month's real length; Feb 29 only in leap years. Year 0000 excluded.
    Element year = b.choice({{b.byte_set(range_set('1', '9')), d, d, d},
                             {b.byte('0'), b.byte_set(range_set('1', '9')), d, d},
                             {b.byte('0'), b.byte('0'), b.byte_set(range_set('1', '9')), d},
                             {b.byte('0'), b.byte('0'), b.byte('0'), b.byte_set(range_set('1', '9'))}},
                            "year");
    Element day28 = b.choice({two('0', '0', '1', '9'), two('1', '1', '0', '9'), two('2', '2', '0', '8')}, "day28");
    Element day30 = b.choice({{day28}, {lit("29")}, {lit("30")}}, "day30");
    Element day31 = b.choice({{day30}, {lit("31")}}, "day31");
    std::vector<Sequence> md;
    for (const char* m : {"01", "03", "05", "07", "08", "10", "12"}) md.push_back({lit(m), b.byte('-'), day31});
    for (const char* m : {"04", "06", "09", "11"}) md.push_back({lit(m), b.byte('-'), day30});
    md.push_back({lit("02-"), day28});
    Element month_day = b.choice(std::move(md), "month-day");
    // Leap years: YY[04..96 step 4] (not 00) for any century, or centuries divisible by 4 + "00"
    // (year 0000 is not a valid year, so the centuries start at 04).
    std::vector<Sequence> yy, cc;
    for (int v = 4; v < 100; v += 4) yy.push_back({lit(fmt::format("{:02d}", v))});
    for (int v = 4; v < 100; v += 4) cc.push_back({lit(fmt::format("{:02d}00", v))});
    Element leap = b.choice({{d, d, b.choice(std::move(yy), "leap-yy")}, {b.choice(std::move(cc), "leap-cc")}}, "leap-year");
    return b.choice({{year, b.byte('-'), month_day}, {leap, lit("-02-29")}}, "date");
  };
  auto time = [&]() {
    Element hh = b.choice({two('0', '1', '0', '9'), two('2', '2', '0', '3')}, "hour");
    Element mm = b.group(two('0', '5', '0', '9'), "minute");
    Element frac = b.optional(b.group({b.byte('.'), b.plus(d)}, "sec-frac"));
    Element offset = b.choice({{b.byte('Z')}, {b.byte_set(range_set('+', '+') | range_set('-', '-')), hh, b.byte(':'), mm}}, "offset");
    return b.group({hh, b.byte(':'), mm, b.byte(':'), mm, frac, offset}, "time");
  };
  auto quoted = [&](Element inner) { return b.group({b.byte('"'), inner, b.byte('"')}, "json-format"); };
  if (format == "date") return quoted(date());
  if (format == "time") return quoted(time());
  if (format == "date-time") return quoted(b.group({date(), b.byte('T'), time()}, "date-time"));
  if (format == "uuid") {
    Element h = b.byte_set(range_set('0', '9') | range_set('a', 'f') | range_set('A', 'F'));
    Sequence s;
    for (int n : {8, 4, 4, 4, 12}) {
      if (!s.empty()) s.push_back(b.byte('-'));
      for (int i = 0; i < n; ++i) s.push_back(h);
    }
    return quoted(b.group(std::move(s), "uuid"));
  }
  if (format == "ipv4") {
    Element octet = b.choice({{d}, {b.byte_set(range_set('1', '9')), d}, {b.byte('1'), d, d},
                              {b.byte('2'), b.byte_set(range_set('0', '4')), d}, {b.byte('2'), b.byte('5'), b.byte_set(range_set('0', '5'))}},
                             "octet");
    return quoted(b.group({octet, b.byte('.'), octet, b.byte('.'), octet, b.byte('.'), octet}, "ipv4"));
  }
  if (format == "email" || format == "idn-email") {
    // jsonschema's check is "contains @"; this is that, with plain (unescaped) characters.
    Element plain = b.codepoint_class({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true);
    Element star = b.star(plain);
    return quoted(b.group({star, b.byte('@'), star}, "email"));
  }
  return std::nullopt;
}

Element JsonParts::value_literal(const nlohmann::ordered_json& v) {
  GrammarBuilder& b = b_;
  if (v.is_object()) {
    Sequence s{b.byte('{'), ws_};
    bool first = true;
    for (auto it = v.begin(); it != v.end(); ++it) {
      if (!first) s.insert(s.end(), {b.byte(','), ws_});
      first = false;
      s.push_back(b.literal(json_string_literal(it.key())));
      s.insert(s.end(), {ws_, b.byte(':'), ws_, value_literal(it.value()), ws_});
    }
    s.push_back(b.byte('}'));
    return b.group(std::move(s), "const-object");
  }
  if (v.is_array()) {
    Sequence s{b.byte('['), ws_};
    for (size_t i = 0; i < v.size(); ++i) {
      if (i) s.insert(s.end(), {b.byte(','), ws_});
      s.insert(s.end(), {value_literal(v[i]), ws_});
    }
    s.push_back(b.byte(']'));
    return b.group(std::move(s), "const-array");
  }
  if (v.is_string()) return b.literal(json_string_literal(v.get<std::string>()));
  return b.literal(v.dump());
}

Element JsonParts::any_value() {
  if (any_value_) return *any_value_;
  GrammarBuilder& b = b_;
  uint32_t value = b.add_rule("json-value");
  any_value_ = Element::rule(value);
  Element str = string(0, -1);
  Element member = b.group({str, ws_, b.byte(':'), ws_, Element::rule(value)}, "json-member");
  Element more_members = b.star(b.group({ws_, b.byte(','), ws_, member}, "json-more-members"));
  Element object = b.choice({{b.byte('{'), ws_, b.byte('}')}, {b.byte('{'), ws_, member, more_members, ws_, b.byte('}')}}, "json-object");
  Element more_items = b.star(b.group({ws_, b.byte(','), ws_, Element::rule(value)}, "json-more-items"));
  Element array = b.choice({{b.byte('['), ws_, b.byte(']')}, {b.byte('['), ws_, Element::rule(value), more_items, ws_, b.byte(']')}}, "json-array");
  b.add_alternative(value, {object});
  b.add_alternative(value, {array});
  b.add_alternative(value, {str});
  b.add_alternative(value, {number()});
  b.add_alternative(value, {b.literal("true")});
  b.add_alternative(value, {b.literal("false")});
  b.add_alternative(value, {b.literal("null")});
  return *any_value_;
}

}  // namespace llmserve::structured_output
