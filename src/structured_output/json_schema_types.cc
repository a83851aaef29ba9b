// The JSON Schema compiler's type-specific parts: strings, numbers, arrays, objects.
#include <algorithm>
#include <cmath>

#include "structured_output/json_schema_compiler.h"
#include "structured_output/regex.h"

namespace llmserve::structured_output::detail {
namespace {

bool is_integral(const json& v) {
  if (v.is_number_integer()) return true;
  if (!v.is_number_float()) return false;
  double d = v.get<double>();
  return std::isfinite(d) && std::floor(d) == d && std::fabs(d) < 9e15;
}

// A length/count keyword: a non-negative integer.
Expected<std::optional<int64_t>> count_keyword(const json& schema, const char* key, const std::string& path) {
  if (!schema.contains(key)) return std::optional<int64_t>{};
  const json& v = schema[key];
  if (!v.is_number() || !is_integral(v) || v.get<double>() < 0) {
    return InvalidArgument("JSON Schema {} at '{}' is not a non-negative integer", key, path.empty() ? "/" : path);
  }
  return std::optional<int64_t>{static_cast<int64_t>(v.get<double>())};
}

}  // namespace

Expected<Element> SchemaCompiler::compile_types(const json& schema, const std::string& path, int depth) {
  std::set<std::string> types = type_set(schema.value("type", json()));
  if (schema.contains("type") && types.empty()) return InvalidArgument("JSON Schema type at '{}' is not a type name or list", path.empty() ? "/" : path);
  if (!schema.contains("type")) types = {"object", "array", "string", "number", "boolean", "null"};
  std::vector<Sequence> alts;
  bool number = types.count("number") > 0;
  for (const std::string& t : types) {
    Expected<Element> e = Element{};
    if (t == "null") {
      e = b_.literal("null");
    } else if (t == "boolean") {
      e = b_.choice({{b_.literal("true")}, {b_.literal("false")}}, "boolean");
    } else if (t == "string") {
      e = compile_string(schema, path);
    } else if (t == "number") {
      e = compile_number(schema, path, false);
    } else if (t == "integer") {
      if (number) continue;  // "number" already admits every integer
      e = compile_number(schema, path, true);
    } else if (t == "array") {
      e = compile_array(schema, path, depth);
    } else if (t == "object") {
      e = compile_object(schema, path, depth);
    } else {
      return InvalidArgument("JSON Schema type '{}' at '{}' is not a JSON type", t, path.empty() ? "/" : path);
    }
    if (!e.ok()) return e.status();
    alts.push_back({*e});
  }
  if (alts.size() == 1) return alts[0][0];
  return b_.choice(std::move(alts), "types");
}

Expected<Element> SchemaCompiler::compile_string(const json& schema, const std::string& path) {
  LLMS_ASSIGN_OR_RETURN(auto min_length, count_keyword(schema, "minLength", path));
  LLMS_ASSIGN_OR_RETURN(auto max_length, count_keyword(schema, "maxLength", path));
  int64_t lo = min_length.value_or(0), hi = max_length.value_or(-1);
  if (hi >= 0 && hi < lo) return b_.byte_set(ByteSet{});
  if (lo > options_.max_repeat || hi > options_.max_repeat) {
    return refuse(lo > options_.max_repeat ? "minLength" : "maxLength", path,
                  fmt::format("bounds above {} are not supported", options_.max_repeat));
  }
  bool bounded = min_length || max_length;
  std::optional<Element> format;
  if (schema.contains("format") && schema["format"].is_string()) {
    std::string f = schema["format"].get<std::string>();
    if (is_checked_format(f)) {
      format = parts_.format_string(f);
      if (!format) return refuse("format", path, fmt::format("format '{}' has no grammar", f));
    }
  }
  if (schema.contains("pattern")) {
    if (!schema["pattern"].is_string()) return InvalidArgument("JSON Schema pattern at '{}' is not a string", path);
    if (bounded || format) return refuse("pattern", path, "together with minLength/maxLength/format");
    RegexOptions ro;
    ro.search = true;
    ro.json_string = true;
    auto body = compile_regex(schema["pattern"].get<std::string>(), b_, ro);
    if (!body.ok()) return refuse("pattern", path, body.status().message());
    return b_.group({b_.byte('"'), *body, b_.byte('"')}, "json-pattern");
  }
  if (format) {
    if (bounded) return refuse("format", path, "together with minLength/maxLength");
    return *format;
  }
  return parts_.string(lo, hi);
}

Expected<Element> SchemaCompiler::compile_number(const json& schema, const std::string& path, bool integer) {
  // Bounds: draft 6+ numeric exclusive bounds, or draft 4 boolean modifiers.
  std::optional<double> lo, hi;
  bool lo_ex = false, hi_ex = false;
  auto num = [&](const char* k) -> Expected<std::optional<double>> {
    if (!schema.contains(k) || schema[k].is_boolean()) return std::optional<double>{};
    if (!schema[k].is_number()) return InvalidArgument("JSON Schema {} at '{}' is not a number", k, path.empty() ? "/" : path);
    return std::optional<double>{schema[k].get<double>()};
  };
  LLMS_ASSIGN_OR_RETURN(auto minimum, num("minimum"));
  LLMS_ASSIGN_OR_RETURN(auto maximum, num("maximum"));
  LLMS_ASSIGN_OR_RETURN(auto ex_min, num("exclusiveMinimum"));
  LLMS_ASSIGN_OR_RETURN(auto ex_max, num("exclusiveMaximum"));
  lo = minimum;
  hi = maximum;
  if (schema.value("exclusiveMinimum", json()) == true) lo_ex = true;
  if (schema.value("exclusiveMaximum", json()) == true) hi_ex = true;
  if (ex_min && (!lo || *ex_min >= *lo)) {
    lo = ex_min;
    lo_ex = true;
  }
  if (ex_max && (!hi || *ex_max <= *hi)) {
    hi = ex_max;
    hi_ex = true;
  }
  if (schema.contains("multipleOf")) {
    const json& m = schema["multipleOf"];
    if (!m.is_number() || m.get<double>() <= 0) return InvalidArgument("JSON Schema multipleOf at '{}' is not a positive number", path);
    if (m.get<double>() != 1.0) return refuse("multipleOf", path, "only 1 is supported");
    integer = true;
  }
  constexpr double kLimit = 1e15;
  if ((lo && std::fabs(*lo) > kLimit) || (hi && std::fabs(*hi) > kLimit)) {
    // Bounds beyond what we expand: keep integers whose magnitude is below the bound's.
    return refuse(lo && std::fabs(*lo) > kLimit ? "minimum" : "maximum", path, "bounds beyond 1e15 are not supported");
  }
  if (integer) {
    std::optional<int64_t> a, b;
    if (lo) a = static_cast<int64_t>(lo_ex ? std::floor(*lo) + 1 : std::ceil(*lo));
    if (hi) b = static_cast<int64_t>(hi_ex ? std::ceil(*hi) - 1 : std::floor(*hi));
    if (a && b && *a > *b) return b_.byte_set(ByteSet{});
    return parts_.integer(a, b);
  }
  if (!lo && !hi) return parts_.number();
  for (auto [v, k] : {std::pair{lo, "minimum"}, std::pair{hi, "maximum"}}) {
    if (v && std::floor(*v) != *v) return refuse(k, path, "fractional bounds on numbers are not supported");
  }
  std::optional<int64_t> a, b;
  if (lo) a = static_cast<int64_t>(*lo);
  if (hi) b = static_cast<int64_t>(*hi);
  return parts_.bounded_number(a, lo_ex, b, hi_ex);
}

Expected<Element> SchemaCompiler::compile_array(const json& schema, const std::string& path, int depth) {
  LLMS_ASSIGN_OR_RETURN(auto min_items, count_keyword(schema, "minItems", path));
  LLMS_ASSIGN_OR_RETURN(auto max_items, count_keyword(schema, "maxItems", path));
  if (schema.value("uniqueItems", json(false)) == true && max_items.value_or(2) > 1) {
    return refuse("uniqueItems", path);
  }
  int64_t lo = min_items.value_or(0), hi = max_items.value_or(-1);
  if (hi >= 0 && hi < lo) return b_.byte_set(ByteSet{});
  if (lo > options_.max_repeat || hi > options_.max_repeat) return refuse(lo > options_.max_repeat ? "minItems" : "maxItems", path, "bound too large");
  // prefix: prefixItems (2020-12) or array-form items (draft 4-2019); rest: items / additionalItems.
  const json* prefix = nullptr;
  json rest = true;
  std::string rest_path = path + "/items";
  if (schema.contains("prefixItems")) {
    prefix = &schema["prefixItems"];
    if (schema.contains("items")) rest = schema["items"];
  } else if (schema.contains("items") && schema["items"].is_array()) {
    prefix = &schema["items"];
    if (schema.contains("additionalItems")) rest = schema["additionalItems"];
    rest_path = path + "/additionalItems";
  } else if (schema.contains("items")) {
    rest = schema["items"];
  }
  if (prefix && !prefix->is_array()) return InvalidArgument("JSON Schema prefixItems at '{}' is not an array", path);
  std::vector<Element> prefix_items;
  if (prefix) {
    for (size_t i = 0; i < prefix->size(); ++i) {
      LLMS_ASSIGN_OR_RETURN(Element e, compile((*prefix)[i], fmt::format("{}/prefixItems/{}", path, i), depth + 1));
      prefix_items.push_back(e);
    }
  }
  LLMS_ASSIGN_OR_RETURN(Element item, compile(rest, rest_path, depth + 1));
  Element ws = parts_.ws();
  Element comma = b_.group({ws, b_.byte(','), ws}, "comma");
  const int64_t k = static_cast<int64_t>(prefix_items.size());
  // T(j): what may follow j items: "" when j is an allowed count, or ", item_j" T(j+1).
  // Past the prefix: ("," item){max(0, lo-k), hi-k}.
  std::optional<Element> tail_after_prefix;
  if (hi < 0 || hi > k) {
    int64_t rmin = std::max<int64_t>(0, lo - k), rmax = hi < 0 ? -1 : hi - k;
    tail_after_prefix = b_.repeat(b_.group({comma, item}, "more-items"), rmin, rmax);
  }
  // Build from the end: after_[j] for j = k .. 1.
  std::optional<Element> after;  // T(j)
  if (tail_after_prefix) after = *tail_after_prefix;
  else after = b_.literal("");  // j == k == hi: nothing more
  for (int64_t j = k - 1; j >= 1; --j) {
    // T(j) = "" (if lo <= j <= hi) | "," item_j T(j+1)
    std::vector<Sequence> alts;
    if (j >= lo && (hi < 0 || j <= hi)) alts.push_back({});
    if (hi < 0 || j < hi) alts.push_back({comma, prefix_items[j], *after});
    after = b_.choice(std::move(alts), "tuple-tail");
  }
  std::vector<Sequence> body;
  if (lo == 0) body.push_back({b_.byte('['), ws, b_.byte(']')});
  if (hi != 0) {
    Element first = k > 0 ? prefix_items[0] : item;
    Element next = *after;
    if (k == 0) {  // no prefix: item ("," item){lo-1, hi-1}
      next = b_.repeat(b_.group({comma, item}, "more-items"), std::max<int64_t>(0, lo - 1), hi < 0 ? -1 : hi - 1);
    }
    body.push_back({b_.byte('['), ws, first, next, ws, b_.byte(']')});
  }
  if (body.empty()) return b_.byte_set(ByteSet{});
  return b_.choice(std::move(body), "array");
}

Expected<Element> SchemaCompiler::extra_key(const std::vector<std::string>& names) {
  // Keys of additional properties: printable ASCII without escapes that are none of `names`
  // (a trie over the ASCII names; a name with other characters can never equal such a key).
  ByteSet printable;
  for (int c = 0x20; c < 0x7F; ++c) {
    if (c != '"' && c != '\\') printable.set(c);
  }
  Element free_tail = b_.star(b_.byte_set(printable));
  struct Node {
    std::map<uint8_t, int> next;
    bool end = false;
  };
  std::vector<Node> trie(1);
  for (const std::string& n : names) {
    if (std::any_of(n.begin(), n.end(), [&](char c) { return !printable[static_cast<uint8_t>(c)]; })) continue;
    int at = 0;
    for (char c : n) {
      auto [it, inserted] = trie[at].next.try_emplace(static_cast<uint8_t>(c), static_cast<int>(trie.size()));
      if (inserted) trie.emplace_back();
      at = it->second;
    }
    trie[at].end = true;
  }
  std::vector<uint32_t> rules(trie.size());
  for (size_t i = 0; i < trie.size(); ++i) rules[i] = b_.add_rule("extra-key");
  for (size_t i = 0; i < trie.size(); ++i) {
    ByteSet others = printable;
    for (auto [c, child] : trie[i].next) {
      others.reset(c);
      b_.add_alternative(rules[i], {b_.byte(c), Element::rule(rules[child])});
    }
    if (others.any()) b_.add_alternative(rules[i], {b_.byte_set(others), free_tail, b_.byte('"')});
    if (!trie[i].end) b_.add_alternative(rules[i], {b_.byte('"')});
  }
  return b_.group({b_.byte('"'), Element::rule(rules[0])}, "extra-key");
}

Element SchemaCompiler::any_order_object(const std::vector<Element>& members,
                                         const std::vector<std::pair<std::string, json>>& list,
                                         const std::set<std::string>& required,
                                         const std::optional<Element>& extra_member) {
  // One rule per subset S of the declared properties already written (after[S]: something was
  // written, a comma comes next). Every declared property at most once, in any order, additional
  // ones anywhere between them; the object may close once S holds every required property. Key
  // strings are distinct literals (extra keys exclude the declared names), so each instance has
  // exactly one derivation. 2^n rules of at most n + 2 alternatives: n <= kMaxAnyOrderProperties.
  Element ws = parts_.ws();
  Element comma = b_.group({ws, b_.byte(','), ws}, "comma");
  const size_t n = list.size();
  uint32_t required_mask = 0;
  for (size_t i = 0; i < n; ++i) {
    if (required.count(list[i].first)) required_mask |= 1u << i;
  }
  const uint32_t num_subsets = 1u << n;
  std::vector<uint32_t> after(num_subsets);
  for (uint32_t s = 0; s < num_subsets; ++s) after[s] = b_.add_rule("props-any");
  for (uint32_t s = 0; s < num_subsets; ++s) {
    for (size_t i = 0; i < n; ++i) {
      if (!((s >> i) & 1u)) b_.add_alternative(after[s], {comma, members[i], Element::rule(after[s | (1u << i)])});
    }
    if (extra_member) b_.add_alternative(after[s], {comma, *extra_member, Element::rule(after[s])});
    if ((s & required_mask) == required_mask) b_.add_alternative(after[s], {});
  }
  uint32_t first = b_.add_rule("props-any-first");  // nothing written yet
  for (size_t i = 0; i < n; ++i) b_.add_alternative(first, {members[i], Element::rule(after[1u << i])});
  if (extra_member) b_.add_alternative(first, {*extra_member, Element::rule(after[0])});
  // The empty object is its own alternative: one whitespace gap between the braces, not two.
  std::vector<Sequence> object = {{b_.byte('{'), ws, Element::rule(first), ws, b_.byte('}')}};
  if (required_mask == 0) object.push_back({b_.byte('{'), ws, b_.byte('}')});
  return b_.choice(std::move(object), "object");
}

Expected<Element> SchemaCompiler::compile_object(const json& schema, const std::string& path, int depth) {
  json props = schema.value("properties", json::object());
  if (!props.is_object()) return InvalidArgument("JSON Schema properties at '{}' is not an object", path.empty() ? "/" : path);
  json required = schema.value("required", json::array());
  if (!required.is_array()) return InvalidArgument("JSON Schema required at '{}' is not an array", path.empty() ? "/" : path);
  std::set<std::string> req;
  for (const json& r : required) {
    if (!r.is_string()) return InvalidArgument("JSON Schema required at '{}' holds a non-string", path);
    req.insert(r.get<std::string>());
  }
  json additional = schema.value("additionalProperties", json(true));
  // Required names without a declared schema get the additionalProperties schema.
  std::vector<std::pair<std::string, json>> list;
  for (auto it = props.begin(); it != props.end(); ++it) list.push_back({it.key(), it.value()});
  for (const json& r : required) {
    std::string name = r.get<std::string>();
    if (!props.contains(name)) list.push_back({name, additional});
  }
  size_t num_required = 0;
  for (auto& [n, s] : list) num_required += req.count(n);
  LLMS_ASSIGN_OR_RETURN(auto min_props, count_keyword(schema, "minProperties", path));
  LLMS_ASSIGN_OR_RETURN(auto max_props, count_keyword(schema, "maxProperties", path));
  bool closed = additional == false;
  if (min_props && static_cast<size_t>(*min_props) > num_required) return refuse("minProperties", path, "more than the required properties");
  if (max_props && (!closed || static_cast<size_t>(*max_props) < list.size())) return refuse("maxProperties", path, "fewer than the possible properties");

  Element ws = parts_.ws();
  Element comma = b_.group({ws, b_.byte(','), ws}, "comma");
  std::vector<Element> members;
  std::vector<std::string> names;
  for (auto& [name, sub] : list) {
    LLMS_ASSIGN_OR_RETURN(Element value, compile(sub, path + "/properties/" + name, depth + 1));
    names.push_back(name);
    members.push_back(b_.group({b_.literal(json_string_literal(name)), ws, b_.byte(':'), ws, value}, "member"));
  }
  std::optional<Element> extra_member;  // a property not declared, when additionalProperties allows it
  if (!closed) {
    LLMS_ASSIGN_OR_RETURN(Element value, compile(additional, path + "/additionalProperties", depth + 1));
    LLMS_ASSIGN_OR_RETURN(Element key, extra_key(names));
    extra_member = b_.group({key, ws, b_.byte(':'), ws, value}, "extra-member");
  }
  if (list.size() >= 2 && list.size() <= kMaxAnyOrderProperties) {
    return any_order_object(members, list, req, extra_member);
  }
  // Too many declared properties for the subset construction: `properties` order, or the
  // `required` order (the required properties first, as `required` lists them, then the
  // others in `properties` order) where that differs: generators of JSON, models included,
  // often write an object in the order its `required` list gives. Additional properties come
  // after the declared ones.
  Element more_tail = b_.literal("");
  std::optional<Element> extras;  // one or more additional properties
  if (extra_member) {
    more_tail = b_.star(b_.group({comma, *extra_member}, "more-extra"));
    extras = b_.group({*extra_member, more_tail}, "extras");
  }
  // NF(i): the members from the i-th of `order` on, something written; C(i): the same after
  // something was written (a comma comes first). Built from the end. The empty object is a
  // separate alternative (one whitespace gap between the braces, not two).
  auto in_order = [&](const std::vector<size_t>& order) {
    std::optional<Element> nf = extras;
    Element c = more_tail;
    for (size_t k = order.size(); k-- > 0;) {
      const size_t i = order[k];
      bool must = req.count(list[i].first) > 0;
      std::vector<Sequence> fa = {{members[i], c}}, ca = {{comma, members[i], c}};
      if (!must) {
        if (nf) fa.push_back({*nf});
        ca.push_back({c});
      }
      nf = b_.choice(std::move(fa), "props");
      c = b_.choice(std::move(ca), "props-more");
    }
    return nf;
  };
  std::vector<size_t> properties_order(list.size()), required_order;
  for (size_t i = 0; i < list.size(); ++i) properties_order[i] = i;
  for (const json& r : required) {
    for (size_t i = 0; i < list.size(); ++i)
      if (list[i].first == r.get<std::string>() &&
          std::find(required_order.begin(), required_order.end(), i) == required_order.end())
        required_order.push_back(i);
  }
  for (size_t i = 0; i < list.size(); ++i)
    if (!req.count(list[i].first)) required_order.push_back(i);
  std::vector<Sequence> object;
  if (std::optional<Element> body = in_order(properties_order))
    object.push_back({b_.byte('{'), ws, *body, ws, b_.byte('}')});
  if (required_order != properties_order)
    if (std::optional<Element> body = in_order(required_order))
      object.push_back({b_.byte('{'), ws, *body, ws, b_.byte('}')});
  if (num_required == 0) object.push_back({b_.byte('{'), ws, b_.byte('}')});
  return b_.choice(std::move(object), "object");
}

}  // namespace llmserve::structured_output::detail
