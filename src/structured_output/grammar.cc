#include "structured_output/grammar.h"

#include <algorithm>

#include <fmt/format.h>

namespace llmserve::structured_output {
namespace {

std::string element_key(const Element& e) {
  return fmt::format("{}{},", e.kind == Element::Kind::kBytes ? 'b' : 'r', e.index);
}

std::string byte_set_text(const ByteSet& set) {
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!set[b]) {
      ++b;
      continue;
    }
    int e = b;
    while (e + 1 < 256 && set[e + 1]) ++e;
    auto one = [](int c) {
      return (c >= 0x21 && c < 0x7f && c != '\\' && c != ']' && c != '-' && c != '^')
                 ? std::string(1, static_cast<char>(c))
                 : fmt::format("\\x{:02X}", c);
    };
    out += one(b);
    if (e > b) out += "-" + one(e);
    b = e + 1;
  }
  return out + "]";
}

}  // namespace

Status Grammar::validate() const {
  if (root >= rules.size()) return InvalidArgument("grammar has no root rule");
  for (const Rule& r : rules) {
    if (r.alternatives.empty()) return InvalidArgument("grammar rule '{}' has no alternatives", r.name);
    for (const Sequence& seq : r.alternatives) {
      for (const Element& e : seq) {
        size_t limit = e.kind == Element::Kind::kBytes ? byte_sets.size() : rules.size();
        if (e.index >= limit) return InvalidArgument("grammar rule '{}' refers to a missing element", r.name);
      }
    }
  }
  // Nullable rules (fixed point), then left recursion: an edge r -> s when s can be reached at the
  // start of one of r's alternatives through nullable prefixes.
  std::vector<char> nullable(rules.size(), 0);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const Sequence& seq : rules[r].alternatives) {
        bool all = std::all_of(seq.begin(), seq.end(), [&](const Element& e) {
          return e.kind == Element::Kind::kRule && nullable[e.index];
        });
        if (all) {
          nullable[r] = 1;
          changed = true;
          break;
        }
      }
    }
  }
  std::vector<std::vector<uint32_t>> first(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) {
    for (const Sequence& seq : rules[r].alternatives) {
      for (const Element& e : seq) {
        if (e.kind != Element::Kind::kRule) break;
        first[r].push_back(e.index);
        if (!nullable[e.index]) break;
      }
    }
  }
  // Iterative DFS for a cycle in `first`.
  std::vector<uint8_t> color(rules.size(), 0);  // 0 new, 1 on stack, 2 done
  for (size_t start = 0; start < rules.size(); ++start) {
    if (color[start]) continue;
    std::vector<std::pair<uint32_t, size_t>> stack{{static_cast<uint32_t>(start), 0}};
    color[start] = 1;
    while (!stack.empty()) {
      auto& [r, i] = stack.back();
      if (i < first[r].size()) {
        uint32_t s = first[r][i++];
        if (color[s] == 1) return InvalidArgument("grammar rule '{}' is left-recursive", rules[s].name);
        if (color[s] == 0) {
          color[s] = 1;
          stack.push_back({s, 0});
        }
      } else {
        color[r] = 2;
        stack.pop_back();
      }
    }
  }
  return Status::Ok();
}

size_t Grammar::num_elements() const {
  size_t n = 0;
  for (const Rule& r : rules) {
    for (const Sequence& seq : r.alternatives) n += seq.size() + 1;
  }
  return n;
}

std::string Grammar::dump() const {
  std::string out;
  for (size_t r = 0; r < rules.size(); ++r) {
    out += fmt::format("{}{} ::=", r == root ? "*" : "", rules[r].name);
    for (size_t a = 0; a < rules[r].alternatives.size(); ++a) {
      if (a) out += " |";
      if (rules[r].alternatives[a].empty()) out += " \"\"";
      for (const Element& e : rules[r].alternatives[a]) {
        out += " ";
        out += e.kind == Element::Kind::kBytes ? byte_set_text(byte_sets[e.index]) : rules[e.index].name;
      }
    }
    out += "\n";
  }
  return out;
}

std::string GrammarBuilder::unique_name(std::string_view hint) {
  std::string base(hint.empty() ? "rule" : hint);
  uint32_t& n = name_counts_[base];
  return n++ == 0 ? base : fmt::format("{}-{}", base, n - 1);
}

uint32_t GrammarBuilder::add_rule(std::string_view hint) {
  grammar_.rules.push_back({unique_name(hint), {}});
  return static_cast<uint32_t>(grammar_.rules.size() - 1);
}

void GrammarBuilder::add_alternative(uint32_t rule, Sequence sequence) {
  grammar_.rules[rule].alternatives.push_back(std::move(sequence));
}

Element GrammarBuilder::byte_set(const ByteSet& set) {
  auto [it, inserted] = interned_sets_.try_emplace(set, static_cast<uint32_t>(grammar_.byte_sets.size()));
  if (inserted) grammar_.byte_sets.push_back(set);
  return Element::bytes(it->second);
}

Element GrammarBuilder::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return byte_set(s);
}

void GrammarBuilder::append_literal(std::string_view text, Sequence& out) {
  for (char c : text) out.push_back(byte(static_cast<uint8_t>(c)));
}

Element GrammarBuilder::literal(std::string_view text) {
  std::string key = "lit:" + std::string(text);
  if (auto it = interned_rules_.find(key); it != interned_rules_.end()) return Element::rule(it->second);
  Sequence seq;
  append_literal(text, seq);
  uint32_t r = add_rule("lit");
  add_alternative(r, std::move(seq));
  interned_rules_[key] = r;
  return Element::rule(r);
}

namespace {

// Normalised, sorted, merged code point ranges without surrogates; negation taken.
std::vector<CodepointRange> normalise(std::vector<CodepointRange> ranges, bool negated) {
  std::vector<CodepointRange> in;
  for (auto r : ranges) {
    if (r.first > r.last || r.first > 0x10FFFF) continue;
    r.last = std::min<uint32_t>(r.last, 0x10FFFF);
    in.push_back(r);
  }
  std::sort(in.begin(), in.end(), [](auto a, auto b) { return a.first < b.first; });
  std::vector<CodepointRange> merged;
  for (auto r : in) {
    if (!merged.empty() && r.first <= merged.back().last + 1) {
      merged.back().last = std::max(merged.back().last, r.last);
    } else {
      merged.push_back(r);
    }
  }
  if (negated) {
    std::vector<CodepointRange> neg;
    uint32_t next = 0;
    for (auto r : merged) {
      if (r.first > next) neg.push_back({next, r.first - 1});
      next = r.last + 1;
    }
    if (next <= 0x10FFFF) neg.push_back({next, 0x10FFFF});
    merged = std::move(neg);
  }
  std::vector<CodepointRange> out;  // cut out surrogates
  for (auto r : merged) {
    if (r.last < 0xD800 || r.first > 0xDFFF) {
      out.push_back(r);
      continue;
    }
    if (r.first < 0xD800) out.push_back({r.first, 0xD7FF});
    if (r.last > 0xDFFF) out.push_back({0xE000, r.last});
  }
  return out;
}

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode_utf8(uint32_t cp, uint8_t* out) {
  int n = utf8_length(cp);
  if (n == 1) {
    out[0] = static_cast<uint8_t>(cp);
    return;
  }
  static const uint8_t kLead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
  for (int i = n - 1; i > 0; --i) {
    out[i] = static_cast<uint8_t>(0x80 | (cp & 0x3F));
    cp >>= 6;
  }
  out[0] = static_cast<uint8_t>(kLead[n] | cp);
}

}  // namespace

Element GrammarBuilder::codepoint_class(std::vector<CodepointRange> ranges, bool negated) {
  std::vector<CodepointRange> cps = normalise(std::move(ranges), negated);
  std::string key = "cp:";
  for (auto r : cps) key += fmt::format("{:x}-{:x},", r.first, r.last);
  if (auto it = interned_rules_.find(key); it != interned_rules_.end()) return Element::rule(it->second);
  uint32_t rule = add_rule("char");
  interned_rules_[key] = rule;
  // Split each range at UTF-8 length boundaries, then recursively into byte-range sequences
  // whose trailing bytes span the full continuation range (the standard construction of a
  // UTF-8 automaton from code point ranges, as in RE2 and Rust's regex-syntax utf8 module).
  ByteSet ascii;
  std::vector<Sequence> alts;
  struct Item { uint32_t lo, hi; };
  std::vector<Item> work;
  static const uint32_t kBounds[] = {0x7F, 0x7FF, 0xFFFF, 0x10FFFF};
  for (auto r : cps) {
    uint32_t lo = r.first;
    for (uint32_t bound : kBounds) {
      if (lo > r.last) break;
      if (lo > bound) continue;
      work.push_back({lo, std::min(r.last, bound)});
      lo = std::min(r.last, bound) + 1;
    }
  }
  while (!work.empty()) {
    Item it = work.back();
    work.pop_back();
    int n = utf8_length(it.lo);
    if (n == 1) {
      for (uint32_t c = it.lo; c <= it.hi; ++c) ascii.set(c);
      continue;
    }
    // Find the first continuation position where lo and hi differ in a way that is not full.
    bool split = false;
    for (int i = 1; i < n && !split; ++i) {
      uint32_t m = (1u << (6 * i)) - 1;  // low 6*i bits
      if ((it.lo & ~m) != (it.hi & ~m)) {
        if ((it.lo & m) != 0) {
          work.push_back({it.lo, it.lo | m});
          work.push_back({(it.lo | m) + 1, it.hi});
          split = true;
        } else if ((it.hi & m) != m) {
          work.push_back({it.lo, (it.hi & ~m) - 1});
          work.push_back({it.hi & ~m, it.hi});
          split = true;
        }
      }
    }
    if (split) continue;
    uint8_t a[4], b[4];
    encode_utf8(it.lo, a);
    encode_utf8(it.hi, b);
    Sequence seq;
    for (int i = 0; i < n; ++i) {
      ByteSet s;
      for (int c = a[i]; c <= b[i]; ++c) s.set(c);
      seq.push_back(byte_set(s));
    }
    alts.push_back(std::move(seq));
  }
  if (ascii.any()) alts.insert(alts.begin(), Sequence{byte_set(ascii)});
  // Merge alternatives that differ only in their first byte set (common after splitting).
  for (Sequence& s : alts) add_alternative(rule, std::move(s));
  if (grammar_.rules[rule].alternatives.empty()) {
    // An empty class matches nothing: one alternative over an empty byte set.
    add_alternative(rule, Sequence{byte_set(ByteSet{})});
  }
  return Element::rule(rule);
}

Element GrammarBuilder::any_codepoint() { return codepoint_class({{0, 0x10FFFF}}, false); }

Element GrammarBuilder::group(Sequence sequence, std::string_view hint) {
  uint32_t r = add_rule(hint);
  add_alternative(r, std::move(sequence));
  return Element::rule(r);
}

Element GrammarBuilder::choice(std::vector<Sequence> alternatives, std::string_view hint) {
  uint32_t r = add_rule(hint);
  for (Sequence& s : alternatives) add_alternative(r, std::move(s));
  return Element::rule(r);
}

Element GrammarBuilder::star(Element e) {
  std::string key = "star:" + element_key(e);
  if (auto it = interned_rules_.find(key); it != interned_rules_.end()) return Element::rule(it->second);
  uint32_t r = add_rule("star");
  interned_rules_[key] = r;
  add_alternative(r, Sequence{e, Element::rule(r)});
  add_alternative(r, Sequence{});
  return Element::rule(r);
}

Element GrammarBuilder::plus(Element e) {
  std::string key = "plus:" + element_key(e);
  if (auto it = interned_rules_.find(key); it != interned_rules_.end()) return Element::rule(it->second);
  Element s = star(e);
  uint32_t r = add_rule("plus");
  interned_rules_[key] = r;
  add_alternative(r, Sequence{e, s});
  return Element::rule(r);
}

Element GrammarBuilder::optional(Element e) {
  std::string key = "opt:" + element_key(e);
  if (auto it = interned_rules_.find(key); it != interned_rules_.end()) return Element::rule(it->second);
  uint32_t r = add_rule("opt");
  interned_rules_[key] = r;
  add_alternative(r, Sequence{e});
  add_alternative(r, Sequence{});
  return Element::rule(r);
}

Element GrammarBuilder::repeat(Element e, int64_t min, int64_t max) {
  if (max >= 0 && max < min) max = min;
  if (min == 0 && max < 0) return star(e);
  if (min == 1 && max < 0) return plus(e);
  if (min == 0 && max == 1) return optional(e);
  std::string key = fmt::format("rep:{}{}:{}", element_key(e), min, max);
  if (auto it = interned_rules_.find(key); it != interned_rules_.end()) return Element::rule(it->second);
  Sequence seq(static_cast<size_t>(min), e);
  if (max < 0) {
    seq.push_back(star(e));
  } else if (max > min) {
    // up_to(k) ::= "" | e up_to(k-1): the optional tail, right-recursive.
    Element tail = optional(e);
    for (int64_t k = 2; k <= max - min; ++k) {
      std::string tk = fmt::format("upto:{}{}", element_key(e), k);
      if (auto it = interned_rules_.find(tk); it != interned_rules_.end()) {
        tail = Element::rule(it->second);
        continue;
      }
      uint32_t r = add_rule("upto");
      interned_rules_[tk] = r;
      add_alternative(r, Sequence{e, tail});
      add_alternative(r, Sequence{});
      tail = Element::rule(r);
    }
    seq.push_back(tail);
  }
  uint32_t r = add_rule("rep");
  interned_rules_[key] = r;
  add_alternative(r, std::move(seq));
  return Element::rule(r);
}

Grammar GrammarBuilder::finish(uint32_t root) {
  grammar_.root = root;
  Grammar g = std::move(grammar_);
  grammar_ = Grammar{};
  interned_rules_.clear();
  interned_sets_.clear();
  name_counts_.clear();
  return g;
}

Status Grammar::prune_unproductive() {
  const size_t n = rules.size();
  if (root >= n) return Status::Ok();  // validate() reports it
  // Productive rules by a worklist: each alternative counts its elements not yet known
  // productive; a rule is productive once one of its alternatives reaches 0.
  std::vector<std::vector<std::pair<uint32_t, uint32_t>>> users(n);  // rule -> (rule, alt)
  std::vector<std::vector<uint32_t>> pending(n);
  std::vector<char> productive(n, 0);
  std::vector<uint32_t> work;
  for (uint32_t r = 0; r < n; ++r) {
    pending[r].assign(rules[r].alternatives.size(), 0);
    for (uint32_t a = 0; a < rules[r].alternatives.size(); ++a) {
      uint32_t count = 0;
      bool dead = false;  // an empty byte set: never productive
      for (const Element& e : rules[r].alternatives[a]) {
        if (e.kind == Element::Kind::kRule) {
          if (e.index < n) users[e.index].emplace_back(r, a);
          ++count;
        } else if (e.index >= byte_sets.size() || byte_sets[e.index].none()) {
          dead = true;
        }
      }
      pending[r][a] = dead ? count + (1u << 31) : count;
      if (pending[r][a] == 0 && !productive[r]) {
        productive[r] = 1;
        work.push_back(r);
      }
    }
  }
  while (!work.empty()) {
    const uint32_t r = work.back();
    work.pop_back();
    for (const auto& [user, alt] : users[r]) {
      // One decrement per occurrence of r in the alternative (users lists each occurrence).
      if (--pending[user][alt] == 0 && !productive[user]) {
        productive[user] = 1;
        work.push_back(user);
      }
    }
  }
  if (!productive[root])
    return InvalidArgument("the constraint matches no string at all (rule '{}' has no finite "
                           "derivation: an empty enum, a false schema, contradictory bounds, an "
                           "empty character class, or recursion without a base case)",
                           rules[root].name);
  for (uint32_t r = 0; r < n; ++r) {
    if (!productive[r]) continue;  // unreachable once the alternatives using it are gone
    std::vector<Sequence>& alts = rules[r].alternatives;
    size_t kept = 0;
    for (size_t a = 0; a < alts.size(); ++a)
      if (pending[r][a] == 0) {
        if (kept != a) alts[kept] = std::move(alts[a]);  // never a self-move (it would empty it)
        ++kept;
      }
    alts.resize(kept);
  }
  return Status::Ok();
}

}  // namespace llmserve::structured_output
