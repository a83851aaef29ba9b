// Internal to json_schema*.cc: the JSON Schema compiler's combinators ($ref, allOf, anyOf,
// oneOf, enum) inline here; the type-specific parts are in json_schema_types.cc.
#pragma once

#include <algorithm>
#include <optional>
#include <set>
#include <unordered_map>

#include <fmt/format.h>

#include "structured_output/json_grammar_parts.h"
#include "structured_output/json_schema.h"
#include "structured_output/json_schema_keywords.h"
#include "structured_output/matcher.h"

namespace llmserve::structured_output::detail {

using json = nlohmann::ordered_json;

/// The element allowed between JSON tokens (JsonWhitespace); InvalidArgument for a
/// whitespace pattern that does not compile or may match anything but JSON whitespace.
Expected<Element> make_whitespace(GrammarBuilder& b, const JsonWhitespace& ws);

/// Compiles one schema (see json_schema.h); the type-specific parts are in json_schema_types.cc.
class SchemaCompiler {
 public:
  SchemaCompiler(const json& root, const JsonSchemaOptions& options)
      : root_(root),
        options_(options),
        ref_overrides_siblings_(ref_overrides_siblings(root)),
        whitespace_(make_whitespace(b_, options.whitespace)),
        parts_(b_, whitespace_.ok() ? *whitespace_ : b_.literal("")) {}

  /// Compiles `top` (default: the root schema); references resolve against the root.
  Expected<Grammar> run(const json* top = nullptr) {
    if (!whitespace_.ok()) return whitespace_.status();
    uint32_t top_rule = b_.add_rule("root");
    LLMS_ASSIGN_OR_RETURN(Element value, compile(top ? *top : root_, "", 0));
    b_.add_alternative(top_rule, {parts_.ws(), value, parts_.ws()});
    if (b_.num_elements() > options_.max_grammar_elements) return too_big();
    return b_.finish(top_rule);
  }

 private:
  // Whether the root's $schema is a draft before 2019-09 (draft-03 to draft-07), where a $ref
  // replaces its whole schema object: the meta-schema URIs exactly ("http://json-schema.org/
  // draft-07/schema", "#" optional), as validators (ajv, python-jsonschema) identify them.
  // Without $schema, or with another value, the current draft applies.
  static bool ref_overrides_siblings(const json& root) {
    if (!root.is_object() || !root.contains("$schema") || !root["$schema"].is_string()) return false;
    std::string uri = root["$schema"].get<std::string>();
    if (!uri.empty() && uri.back() == '#') uri.pop_back();
    for (const char* draft : {"03", "04", "06", "07"})
      if (uri == std::string("http://json-schema.org/draft-") + draft + "/schema") return true;
    return false;
  }

  Status too_big() const {
    return ResourceExhausted("JSON schema is too large: its grammar exceeds {} elements", options_.max_grammar_elements);
  }

  Status refuse(const std::string& keyword, const std::string& path, std::string_view why = "") const {
    return InvalidArgument("unsupported JSON Schema keyword '{}' at '{}'{}{}", keyword, path.empty() ? "/" : path,
                           why.empty() ? "" : ": ", why);
  }

  // Resolves a local reference ("#", "#/definitions/x", "#/$defs/x", any JSON pointer).
  Expected<const json*> resolve(const std::string& ref, const std::string& path) const {
    if (ref.empty() || ref[0] != '#') return refuse("$ref", path, fmt::format("only local references (#/...) are supported, got '{}'", ref));
    std::string pointer = ref.substr(1);
    const json* node = &root_;
    if (pointer.empty()) return node;
    if (pointer[0] != '/') return refuse("$ref", path, fmt::format("'{}' is not a JSON pointer", ref));
    size_t pos = 1;
    while (pos <= pointer.size()) {
      size_t end = pointer.find('/', pos);
      if (end == std::string::npos) end = pointer.size();
      std::string token = pointer.substr(pos, end - pos);
      std::string key;
      for (size_t i = 0; i < token.size(); ++i) {  // ~1 -> /, ~0 -> ~, %xx decoding
        if (token[i] == '~' && i + 1 < token.size()) {
          key += token[i + 1] == '1' ? '/' : '~';
          ++i;
        } else if (token[i] == '%' && i + 2 < token.size() + 0 && i + 2 < token.size() + 1 && i + 2 <= token.size() - 1) {
          key += static_cast<char>(std::stoi(token.substr(i + 1, 2), nullptr, 16));
          i += 2;
        } else {
          key += token[i];
        }
      }
      if (node->is_object() && node->contains(key)) {
        node = &(*node)[key];
      } else if (node->is_array() && !key.empty() && key.find_first_not_of("0123456789") == std::string::npos &&
                 std::stoul(key) < node->size()) {
        node = &(*node)[std::stoul(key)];
      } else {
        return InvalidArgument("JSON Schema $ref '{}' at '{}' points to nothing", ref, path);
      }
      pos = end + 1;
    }
    return node;
  }

  Expected<Element> compile(const json& schema, const std::string& path, int depth) {
    if (depth > 64) return InvalidArgument("JSON schema nests deeper than 64 levels at '{}'", path);
    if (b_.num_elements() > options_.max_grammar_elements) return too_big();
    if (schema.is_boolean()) return schema.get<bool>() ? parts_.any_value() : b_.byte_set(ByteSet{});
    if (!schema.is_object()) return InvalidArgument("JSON schema at '{}' is not an object or boolean", path.empty() ? "/" : path);
    for (auto it = schema.begin(); it != schema.end(); ++it) {
      if (keyword_kind(it.key()) == KeywordKind::kRefused) return refuse(it.key(), path);
    }
    if (schema.contains("$ref")) return compile_ref(schema, path, depth);
    if (schema.contains("allOf")) {
      LLMS_ASSIGN_OR_RETURN(json merged, merge_all_of(schema, path, depth));
      return compile(merged, path, depth + 1);
    }
    if (schema.contains("anyOf") || schema.contains("oneOf")) return compile_union(schema, path, depth);
    if (schema.contains("enum") || schema.contains("const")) return compile_enum(schema, path, depth);
    return compile_types(schema, path, depth);
  }

  // ---- $ref, allOf, anyOf / oneOf, enum / const ------------------------------------------
  Expected<Element> compile_ref(const json& schema, const std::string& path, int depth) {
    if (!schema["$ref"].is_string()) return InvalidArgument("JSON Schema $ref at '{}' is not a string", path);
    std::string ref = schema["$ref"].get<std::string>();
    LLMS_ASSIGN_OR_RETURN(const json* target, resolve(ref, path));
    // $ref with sibling constraints: both apply (2019-09 on), or the siblings are ignored
    // (draft 4-7: "All other properties in a "$ref" object MUST be ignored", draft-07 core 8.3).
    if (!ref_overrides_siblings_ && has_constraints(schema, {"$ref"})) {
      json merged = json::object();
      merged["allOf"] = json::array({json{{"$ref", ref}}, without(schema, {"$ref"})});
      return compile(merged, path, depth + 1);
    }
    if (auto it = ref_rules_.find(target); it != ref_rules_.end()) return Element::rule(it->second);
    uint32_t rule = b_.add_rule("ref");
    ref_rules_[target] = rule;
    LLMS_ASSIGN_OR_RETURN(Element e, compile(*target, ref.substr(1), depth + 1));
    b_.add_alternative(rule, {e});
    return Element::rule(rule);
  }

  Expected<json> deref(const json& s, const std::string& path, int hops = 0) const {
    if (hops > 32) return InvalidArgument("JSON Schema $ref chain at '{}' is too long", path);
    if (s.is_object() && s.contains("$ref") && s["$ref"].is_string()) {
      LLMS_ASSIGN_OR_RETURN(const json* t, resolve(s["$ref"].get<std::string>(), path));
      json rest = without(s, {"$ref"});
      LLMS_ASSIGN_OR_RETURN(json target, deref(*t, path, hops + 1));
      if (rest.empty() || ref_overrides_siblings_) return target;
      return merge(target, rest, path);
    }
    return s;
  }

  Expected<json> merge_all_of(const json& schema, const std::string& path, int depth) {
    if (!schema["allOf"].is_array() || schema["allOf"].empty()) return InvalidArgument("JSON Schema allOf at '{}' is not a non-empty array", path);
    json acc = without(schema, {"allOf"});
    for (size_t i = 0; i < schema["allOf"].size(); ++i) {
      std::string p = fmt::format("{}/allOf/{}", path, i);
      LLMS_ASSIGN_OR_RETURN(json part, deref(schema["allOf"][i], p));
      if (part.is_boolean()) {
        if (!part.get<bool>()) return json(false);
        continue;
      }
      if (part.contains("allOf")) {
        LLMS_ASSIGN_OR_RETURN(part, merge_all_of(part, p, depth + 1));
      }
      LLMS_ASSIGN_OR_RETURN(acc, merge(acc, part, p));
    }
    return acc;
  }

  // The schema both `a` and `b` describe, for keywords whose conjunction is another keyword
  // value; anything else is refused as "allOf".
  Expected<json> merge(const json& a, const json& b, const std::string& path) const {
    if (a.is_boolean() || b.is_boolean()) return (a == false || b == false) ? json(false) : (a.is_boolean() ? b : a);
    json out = a;
    for (auto it = b.begin(); it != b.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      if (!out.contains(k) || keyword_kind(k) == KeywordKind::kAnnotation) {
        if (!out.contains(k)) out[k] = v;
        continue;
      }
      json& cur = out[k];
      if (cur == v) continue;
      if (k == "properties" && cur.is_object() && v.is_object()) {
        for (auto p = v.begin(); p != v.end(); ++p) {
          if (!cur.contains(p.key())) {
            cur[p.key()] = p.value();
          } else {
            cur[p.key()] = json{{"allOf", json::array({cur[p.key()], p.value()})}};
          }
        }
      } else if (k == "required" && cur.is_array() && v.is_array()) {
        for (const json& r : v) {
          if (std::find(cur.begin(), cur.end(), r) == cur.end()) cur.push_back(r);
        }
      } else if (k == "type") {
        std::set<std::string> x = type_set(cur), y = type_set(v), both;
        for (const auto& t : x) {
          if (y.count(t)) both.insert(t);
          if (t == "number" && y.count("integer")) both.insert("integer");
          if (t == "integer" && y.count("number")) both.insert("integer");
        }
        if (both.empty()) return json(false);
        json arr = json::array();
        for (const auto& t : both) arr.push_back(t);
        cur = arr;
      } else if ((k == "minimum" || k == "minLength" || k == "minItems") && cur.is_number() && v.is_number()) {
        cur = std::max(cur.get<double>(), v.get<double>());
      } else if ((k == "maximum" || k == "maxLength" || k == "maxItems") && cur.is_number() && v.is_number()) {
        cur = std::min(cur.get<double>(), v.get<double>());
      } else if (k == "additionalProperties" && (cur == false || v == false)) {
        cur = false;
      } else if (k == "anyOf" || k == "oneOf" || k == "enum") {
        // Two unions: nest the second under allOf of one alternative each is not expressible
        // simply; refuse.
        return refuse("allOf", path, fmt::format("both parts have '{}'", k));
      } else {
        return refuse("allOf", path, fmt::format("conflicting '{}' values", k));
      }
    }
    // additionalProperties covers only the properties of its own schema object: a property that
    // the other part declares must satisfy this part's additionalProperties too.
    for (auto [side, other] : {std::pair{&a, &b}, std::pair{&b, &a}}) {
      if (!side->contains("additionalProperties") || (*side)["additionalProperties"] == true) continue;
      if (!other->contains("properties") || !(*other)["properties"].is_object()) continue;
      const json none = json::object();
      const json& own = side->contains("properties") ? (*side)["properties"] : none;
      for (auto p = (*other)["properties"].begin(); p != (*other)["properties"].end(); ++p) {
        if (own.is_object() && own.contains(p.key())) continue;
        json& slot = out["properties"][p.key()];
        slot = json{{"allOf", json::array({slot, (*side)["additionalProperties"]})}};
      }
    }
    return out;
  }

  Expected<Element> compile_union(const json& schema, const std::string& path, int depth) {
    bool one_of = !schema.contains("anyOf");
    if (schema.contains("anyOf") && schema.contains("oneOf")) return refuse("oneOf", path, "together with anyOf");
    const char* key = one_of ? "oneOf" : "anyOf";
    const json& alts = schema[key];
    if (!alts.is_array() || alts.empty()) return InvalidArgument("JSON Schema {} at '{}' is not a non-empty array", key, path);
    json rest = without(schema, {key});
    bool plain = !has_constraints(rest, {});
    std::vector<json> branches;
    for (size_t i = 0; i < alts.size(); ++i) {
      std::string p = fmt::format("{}/{}/{}", path, key, i);
      if (plain) {
        branches.push_back(alts[i]);
      } else {
        LLMS_ASSIGN_OR_RETURN(json d, deref(alts[i], p));
        LLMS_ASSIGN_OR_RETURN(json m, merge(rest, d, p));
        branches.push_back(m);
      }
    }
    if (one_of) {
      LLMS_RETURN_IF_ERROR(check_disjoint(branches, path));
    }
    std::vector<Sequence> seqs;
    for (size_t i = 0; i < branches.size(); ++i) {
      LLMS_ASSIGN_OR_RETURN(Element e, compile(branches[i], fmt::format("{}/{}/{}", path, key, i), depth + 1));
      seqs.push_back({e});
    }
    return b_.choice(std::move(seqs), key);
  }

  // oneOf is anyOf when no instance can match two alternatives: their JSON types are disjoint,
  // or they are objects that require one property with disjoint const/enum values.
  Status check_disjoint(const std::vector<json>& branches, const std::string& path) const {
    std::vector<std::set<std::string>> types;
    for (const json& b : branches) {
      auto d = deref(b, path);
      if (!d.ok()) return d.status();
      types.push_back(possible_types(*d));
    }
    for (size_t i = 0; i < branches.size(); ++i) {
      for (size_t j = i + 1; j < branches.size(); ++j) {
        bool overlap = false;
        for (const auto& t : types[i]) overlap = overlap || types[j].count(t);
        if (!overlap) continue;
        if (!discriminated(*deref(branches[i], path), *deref(branches[j], path))) {
          return refuse("oneOf", path, fmt::format("alternatives {} and {} may both match", i, j));
        }
      }
    }
    return Status::Ok();
  }

  static std::set<std::string> possible_types(const json& s) {
    static const std::set<std::string> kAll = {"object", "array", "string", "number", "boolean", "null"};
    if (s.is_boolean()) return s.get<bool>() ? kAll : std::set<std::string>{};
    std::set<std::string> out;
    if (s.contains("const")) return {json_type(s["const"])};
    if (s.contains("enum") && s["enum"].is_array()) {
      for (const json& v : s["enum"]) out.insert(json_type(v));
      return out;
    }
    if (!s.contains("type")) return kAll;
    for (const auto& t : type_set(s["type"])) out.insert(t == "integer" ? "number" : t);
    return out;
  }

  static std::string json_type(const json& v) {
    if (v.is_object()) return "object";
    if (v.is_array()) return "array";
    if (v.is_string()) return "string";
    if (v.is_number()) return "number";
    if (v.is_boolean()) return "boolean";
    return "null";
  }

  static bool discriminated(const json& a, const json& b) {
    if (!a.contains("properties") || !b.contains("properties")) return false;
    auto values = [](const json& s, const std::string& k) -> std::optional<std::vector<json>> {
      const json& req = s.value("required", json::array());
      if (std::find(req.begin(), req.end(), k) == req.end()) return std::nullopt;
      const json& p = s["properties"][k];
      if (!p.is_object()) return std::nullopt;
      if (p.contains("const")) return std::vector<json>{p["const"]};
      if (p.contains("enum") && p["enum"].is_array()) return std::vector<json>(p["enum"].begin(), p["enum"].end());
      return std::nullopt;
    };
    for (auto it = a["properties"].begin(); it != a["properties"].end(); ++it) {
      if (!b["properties"].contains(it.key())) continue;
      auto va = values(a, it.key()), vb = values(b, it.key());
      if (!va || !vb) continue;
      bool common = false;
      for (const json& x : *va) common = common || std::find(vb->begin(), vb->end(), x) != vb->end();
      if (!common) return true;
    }
    return false;
  }

  Expected<Element> compile_enum(const json& schema, const std::string& path, int depth) {
    std::vector<json> values;
    if (schema.contains("const")) values.push_back(schema["const"]);
    if (schema.contains("enum")) {
      if (!schema["enum"].is_array()) return InvalidArgument("JSON Schema enum at '{}' is not an array", path);
      std::vector<json> kept;
      for (const json& v : schema["enum"]) {
        if (values.empty() || schema.contains("const") == false || v == values[0]) kept.push_back(v);
      }
      if (schema.contains("const")) {
        if (kept.empty()) values.clear();
      } else {
        values = kept;
      }
    }
    // Other constraints beside enum/const: keep the values they accept (checked by running the
    // rest of the schema's own grammar over each value's text).
    json rest = without(schema, {"enum", "const"});
    std::vector<Sequence> seqs;
    std::shared_ptr<const CompiledGrammar> rest_grammar;
    if (has_constraints(rest, {})) {
      JsonSchemaOptions o = options_;
      o.whitespace.compact = true;
      auto g = SchemaCompiler(root_, o).run(&rest);
      if (!g.ok()) return g.status();
      auto c = CompiledGrammar::compile(std::move(*g));
      if (!c.ok()) return c.status();
      rest_grammar = *c;
    }
    for (const json& v : values) {
      if (rest_grammar && !grammar_accepts(rest_grammar, compact_text(v))) continue;
      seqs.push_back({parts_.value_literal(v)});
    }
    if (seqs.empty()) return b_.byte_set(ByteSet{});
    (void)depth;
    return b_.choice(std::move(seqs), "enum");
  }

  static std::string compact_text(const json& v) {
    if (v.is_string()) return json_string_literal(v.get<std::string>());
    if (v.is_object()) {
      std::string s = "{";
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (s.size() > 1) s += ",";
        s += json_string_literal(it.key()) + ":" + compact_text(it.value());
      }
      return s + "}";
    }
    if (v.is_array()) {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? "," : "") + compact_text(v[i]);
      return s + "]";
    }
    return v.dump();
  }

  // ---- types ----------------------------------------------------------------------------------
  Expected<Element> compile_types(const json& schema, const std::string& path, int depth);
  Expected<Element> compile_string(const json& schema, const std::string& path);
  Expected<Element> compile_number(const json& schema, const std::string& path, bool integer);
  Expected<Element> compile_array(const json& schema, const std::string& path, int depth);
  Expected<Element> compile_object(const json& schema, const std::string& path, int depth);
  Expected<Element> extra_key(const std::vector<std::string>& names);
  /// `{ ... }` with the declared `members` (one per `list` entry) in any order, each at most
  /// once, every `required` one present, and `extra_member` (when set) anywhere between them.
  Element any_order_object(const std::vector<Element>& members, const std::vector<std::pair<std::string, json>>& list,
                           const std::set<std::string>& required, const std::optional<Element>& extra_member);

  const json& root_;
  JsonSchemaOptions options_;
  bool ref_overrides_siblings_ = false;  // ref_overrides_siblings(root_)
  GrammarBuilder b_;
  Expected<Element> whitespace_;  // before parts_, which holds it
  JsonParts parts_;
  std::unordered_map<const json*, uint32_t> ref_rules_;
};

}  // namespace llmserve::structured_output::detail
