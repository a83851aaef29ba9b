#include "structured_output/json_schema_keywords.h"

#include <algorithm>
#include <cstring>

namespace llmserve::structured_output {

KeywordKind keyword_kind(const std::string& k) {
  static const std::set<std::string> kValidation = {
      "type", "enum", "const", "properties", "required", "additionalProperties", "items", "prefixItems",
      "additionalItems", "minItems", "maxItems", "minLength", "maxLength", "pattern", "format", "minimum",
      "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf", "anyOf", "oneOf", "allOf", "$ref",
      "uniqueItems", "minProperties", "maxProperties"};
  static const std::set<std::string> kRefused = {
      "not", "if", "then", "else", "dependencies", "dependentRequired", "dependentSchemas",
      "patternProperties", "propertyNames", "contains", "minContains", "maxContains",
      "unevaluatedProperties", "unevaluatedItems", "$dynamicRef", "$recursiveRef", "extends", "disallow",
      "divisibleBy"};
  if (kValidation.count(k)) return KeywordKind::kValidation;
  if (kRefused.count(k)) return KeywordKind::kRefused;
  return KeywordKind::kAnnotation;
}

bool has_constraints(const nlohmann::ordered_json& schema, std::initializer_list<const char*> ignore) {
  if (!schema.is_object()) return schema.is_boolean() && !schema.get<bool>();
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    if (keyword_kind(it.key()) != KeywordKind::kValidation) continue;
    bool skip = std::any_of(ignore.begin(), ignore.end(), [&](const char* i) { return it.key() == i; });
    if (!skip) return true;
  }
  return false;
}

nlohmann::ordered_json without(const nlohmann::ordered_json& schema, std::initializer_list<const char*> keys) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (!schema.is_object()) return out;
  for (auto it = schema.begin(); it != schema.end(); ++it) {
    bool drop = std::any_of(keys.begin(), keys.end(), [&](const char* k) { return it.key() == k; });
    if (!drop) out[it.key()] = it.value();
  }
  return out;
}

std::set<std::string> type_set(const nlohmann::ordered_json& type) {
  std::set<std::string> out;
  if (type.is_string()) out.insert(type.get<std::string>());
  if (type.is_array()) {
    for (const auto& t : type) {
      if (t.is_string()) out.insert(t.get<std::string>());
    }
  }
  return out;
}

bool is_checked_format(const std::string& f) {
  // python-jsonschema's FORMAT_CHECKER (jsonschema/_format.py): the names it registers.
  static const std::set<std::string> kChecked = {
      "email", "idn-email", "hostname", "idn-hostname", "ipv4", "ipv6", "uri", "uri-reference", "iri",
      "iri-reference", "date-time", "time", "date", "regex", "json-pointer", "relative-json-pointer",
      "uri-template", "duration", "uuid", "color"};
  return kChecked.count(f) > 0;
}

}  // namespace llmserve::structured_output
