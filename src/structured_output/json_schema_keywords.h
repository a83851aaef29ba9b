// JSON Schema keyword vocabulary (2020-12 plus draft-4..7 spellings) and small helpers on
// schema objects, for the JSON Schema compiler.
#pragma once

#include <initializer_list>
#include <set>
#include <string>

#include <nlohmann/json.hpp>

namespace llmserve::structured_output {

enum class KeywordKind {
  kValidation,  // constrains instances and is honoured by the compiler
  kAnnotation,  // no constraint (title, description, ...); unknown keywords count as these, as the
                // specification says of keywords outside the vocabulary
  kRefused,     // constrains instances in a way the compiler cannot enforce exactly
};

/// The kind of `keyword`.
KeywordKind keyword_kind(const std::string& keyword);

/// True if `schema` (an object) has a validation keyword other than those in `ignore`.
bool has_constraints(const nlohmann::ordered_json& schema, std::initializer_list<const char*> ignore);

/// `schema` without the listed keys.
nlohmann::ordered_json without(const nlohmann::ordered_json& schema, std::initializer_list<const char*> keys);

/// The names in a `type` value (a string or an array of strings); other shapes give {}.
std::set<std::string> type_set(const nlohmann::ordered_json& type);

/// Formats the jsonschema validator checks (its format checker), which therefore constrain
/// instances; other format names are annotations.
bool is_checked_format(const std::string& format);

}  // namespace llmserve::structured_output
