#include "server/structured_output_request.h"

#include <cctype>
#include <set>

#include <fmt/format.h>

#include "server/protocol.h"

namespace llmserve {

using ojson = nlohmann::ordered_json;
using structured_output::ConstraintSpec;

namespace {

std::string describe(const ojson& v) {
  std::string text = v.dump(-1, ' ', false, ojson::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

/// The constraints found so far; a second one is an error naming both.
class Collector {
 public:
  explicit Collector(std::optional<OutputConstraint>* out) : out_(out) {}

  std::optional<ApiError> add(ConstraintSpec spec, std::string param) {
    if (*out_)
      return bad_request(fmt::format("'{}' and '{}' both constrain the output; send only one",
                                     (*out_)->param, param),
                         param);
    *out_ = OutputConstraint{std::move(spec), std::move(param)};
    return std::nullopt;
  }

 private:
  std::optional<OutputConstraint>* out_;
};

ConstraintSpec schema_spec(const ojson& schema) {
  ConstraintSpec s;
  s.kind = ConstraintSpec::Kind::kJsonSchema;
  s.text = schema.dump();
  return s;
}

/// A schema given as an object (or, vLLM, as JSON text).
std::optional<ApiError> read_schema(const ojson& v, const std::string& param, ConstraintSpec* out) {
  if (v.is_object() || v.is_boolean()) {
    *out = schema_spec(v);
    return std::nullopt;
  }
  if (v.is_string()) {
    ojson parsed;
    try {
      parsed = ojson::parse(v.get<std::string>());
    } catch (const ojson::exception& e) {
      return bad_request(fmt::format("'{}' must be a JSON Schema (an object, or its JSON text); "
                                     "the string does not parse: {}",
                                     param, e.what()),
                         param);
    }
    if (!(parsed.is_object() || parsed.is_boolean()))
      return bad_request(fmt::format("'{}' must be a JSON Schema (an object, or its JSON text); "
                                     "the string holds {}",
                                     param, parsed.type_name()),
                         param);
    // Checked before anything walks it recursively (dump(), the compiler).
    if (structured_output::json_nesting_exceeds(parsed, structured_output::kMaxSchemaNesting))
      return bad_request(fmt::format("'{}': the JSON schema nests deeper than {} levels", param,
                                     structured_output::kMaxSchemaNesting),
                         param);
    *out = schema_spec(parsed);
    return std::nullopt;
  }
  return bad_request(fmt::format("'{}' must be a JSON Schema object, got {}", param, describe(v)),
                     param);
}

std::optional<ApiError> read_string(const ojson& v, const std::string& param, std::string* out) {
  if (!v.is_string() || v.get_ref<const std::string&>().empty())
    return bad_request(fmt::format("'{}' must be a non-empty string, got {}", param, describe(v)),
                       param);
  *out = v.get<std::string>();
  return std::nullopt;
}

std::optional<ApiError> read_choices(const ojson& v, const std::string& param,
                                     ConstraintSpec* out) {
  if (!v.is_array() || v.empty())
    return bad_request(fmt::format("'{}' must be a non-empty list of strings, got {}", param,
                                   describe(v)),
                       param);
  out->kind = ConstraintSpec::Kind::kChoice;
  for (const ojson& c : v) {
    if (!c.is_string())
      return bad_request(fmt::format("'{}' must hold strings only, got {}", param, describe(c)),
                         param);
    out->choices.push_back(c.get<std::string>());
  }
  return std::nullopt;
}

bool is_json(const ConstraintSpec& spec) {
  return spec.kind == ConstraintSpec::Kind::kJsonSchema ||
         spec.kind == ConstraintSpec::Kind::kJsonObject;
}

/// vLLM's whitespace_pattern: a regex of JSON whitespace only (checked here, so the 400 names
/// the field rather than the schema).
std::optional<ApiError> read_whitespace_pattern(const ojson& v, const std::string& param,
                                                std::string* out) {
  if (auto err = read_string(v, param, out)) return err;
  if (Status st = structured_output::check_whitespace_pattern(*out); !st.ok())
    return bad_request(fmt::format("'{}': {}", param, st.message()), param);
  return std::nullopt;
}

std::optional<ApiError> read_response_format(const ojson& v, Collector& found) {
  const std::string p = "response_format";
  if (!v.is_object())
    return bad_request(fmt::format("'response_format' must be an object such as "
                                   "{{\"type\": \"json_object\"}}, got {}",
                                   describe(v)),
                       p);
  const auto type = v.find("type");
  if (type == v.end() || !type->is_string())
    return bad_request("'response_format.type' is required: \"text\", \"json_object\" or "
                       "\"json_schema\"",
                       p);
  const std::string t = type->get<std::string>();
  auto only_keys = [&](std::initializer_list<std::string_view> keys,
                       const ojson& obj, const std::string& where) -> std::optional<ApiError> {
    for (auto it = obj.begin(); it != obj.end(); ++it) {
      bool known = false;
      for (std::string_view k : keys) known = known || it.key() == k;
      if (!known)
        return bad_request(fmt::format("Unrecognized request argument supplied: {}.{}", where,
                                       it.key()),
                           p);
    }
    return std::nullopt;
  };
  if (t == "text") return only_keys({"type"}, v, p);
  if (t == "json_object") {
    if (auto err = only_keys({"type"}, v, p)) return err;
    ConstraintSpec s;
    s.kind = ConstraintSpec::Kind::kJsonObject;
    return found.add(std::move(s), p);
  }
  if (t == "json_schema") {
    if (auto err = only_keys({"type", "json_schema"}, v, p)) return err;
    const auto js = v.find("json_schema");
    if (js == v.end() || !js->is_object())
      return bad_request("'response_format.json_schema' is required with type \"json_schema\": "
                         "{\"name\": ..., \"schema\": {...}}",
                         p);
    if (auto err = only_keys({"name", "schema", "strict", "description"}, *js,
                             "response_format.json_schema"))
      return err;
    // OpenAI requires a name ([a-zA-Z0-9_-], at most 64); it labels the schema only.
    const auto name = js->find("name");
    auto valid_name = [](const std::string& n) {
      if (n.empty() || n.size() > 64) return false;
      for (unsigned char c : n)
        if (!std::isalnum(c) && c != '_' && c != '-') return false;
      return true;
    };
    if (name == js->end() || !name->is_string() ||
        !valid_name(name->get_ref<const std::string&>()))
      return bad_request("'response_format.json_schema.name' must be 1 to 64 characters of "
                         "a-z, A-Z, 0-9, '_' and '-' (OpenAI's rule)",
                         p);
    if (const auto strict = js->find("strict");
        strict != js->end() && !strict->is_null() && !strict->is_boolean())
      return bad_request("'response_format.json_schema.strict' must be a boolean", p);
    if (const auto d = js->find("description");
        d != js->end() && !d->is_null() && !d->is_string())
      return bad_request("'response_format.json_schema.description' must be a string", p);
    // strict true or false: the output always follows the schema exactly (never less).
    const auto schema = js->find("schema");
    ConstraintSpec s;
    if (schema == js->end() || schema->is_null()) {
      s = schema_spec(ojson::object());  // OpenAI: no schema = any JSON value
    } else if (auto err = read_schema(*schema, "response_format", &s)) {
      return err;
    }
    return found.add(std::move(s), p);
  }
  return bad_request(fmt::format("'response_format.type' must be \"text\", \"json_object\" or "
                                 "\"json_schema\", got {}",
                                 describe(*type)),
                     p);
}

/// Errors inside structured_outputs name the top-level field as param (the message names the
/// key), as for response_format.
std::optional<ApiError> in_structured_outputs(ApiError err) {
  err.param = "structured_outputs";
  return err;
}

std::optional<ApiError> read_structured_outputs(const ojson& v, Collector& found) {
  const std::string p = "structured_outputs";
  if (!v.is_object())
    return bad_request(fmt::format("'structured_outputs' must be an object such as "
                                   "{{\"json\": {{...}}}}, got {}",
                                   describe(v)),
                       p);
  bool compact = false;
  std::string whitespace_pattern;
  std::optional<ConstraintSpec> spec;
  std::string which;
  auto set = [&](ConstraintSpec s, const std::string& key) -> std::optional<ApiError> {
    if (spec)
      return bad_request(fmt::format("'structured_outputs' has both '{}' and '{}'; send only one",
                                     which, key),
                         p);
    spec = std::move(s);
    which = key;
    return std::nullopt;
  };
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    const ojson& x = it.value();
    const std::string param = "structured_outputs." + k;  // named in messages
    if (x.is_null()) continue;
    if (k == "json") {
      ConstraintSpec s;
      if (auto err = read_schema(x, param, &s)) return in_structured_outputs(*err);
      if (auto err = set(std::move(s), k)) return err;
    } else if (k == "regex" || k == "grammar") {
      ConstraintSpec s;
      s.kind = k == "regex" ? ConstraintSpec::Kind::kRegex : ConstraintSpec::Kind::kGrammar;
      if (auto err = read_string(x, param, &s.text)) return in_structured_outputs(*err);
      if (auto err = set(std::move(s), k)) return err;
    } else if (k == "choice") {
      ConstraintSpec s;
      if (auto err = read_choices(x, param, &s)) return in_structured_outputs(*err);
      if (auto err = set(std::move(s), k)) return err;
    } else if (k == "json_object") {
      if (!x.is_boolean())
        return bad_request(fmt::format("'{}' must be a boolean", param), p);
      if (!x.get<bool>()) continue;
      ConstraintSpec s;
      s.kind = ConstraintSpec::Kind::kJsonObject;
      if (auto err = set(std::move(s), k)) return err;
    } else if (k == "disable_any_whitespace") {
      if (!x.is_boolean()) return bad_request(fmt::format("'{}' must be a boolean", param), p);
      compact = x.get<bool>();
    } else if (k == "whitespace_pattern") {
      if (auto err = read_whitespace_pattern(x, param, &whitespace_pattern))
        return in_structured_outputs(*err);
    } else if (k == "disable_fallback" || k == "disable_additional_properties") {
      // vLLM's backend switches: there is one backend, which never falls back and honours
      // additionalProperties as written.
      if (!x.is_boolean()) return bad_request(fmt::format("'{}' must be a boolean", param), p);
      if (k == "disable_additional_properties" && x.get<bool>())
        return bad_request("'structured_outputs.disable_additional_properties' is not "
                           "supported: write \"additionalProperties\": false in the schema",
                           p);
    } else if (k == "structural_tag") {
      return bad_request("'structured_outputs.structural_tag' is not supported; use 'json', "
                         "'regex', 'choice' or 'grammar'",
                         p);
    } else {
      return bad_request(fmt::format("Unrecognized request argument supplied: {} "
                                     "(structured_outputs takes json, regex, choice, grammar, "
                                     "json_object, disable_any_whitespace and whitespace_pattern)",
                                     param),
                         p);
    }
  }
  if (compact && !whitespace_pattern.empty())
    return bad_request("'structured_outputs.disable_any_whitespace' and "
                       "'structured_outputs.whitespace_pattern' conflict; send one",
                       p);
  const char* ws_option = compact ? "disable_any_whitespace" : "whitespace_pattern";
  if (!spec) {
    if (compact || !whitespace_pattern.empty())
      return bad_request(fmt::format("'structured_outputs.{}' needs 'json' or 'json_object' in "
                                     "the same object",
                                     ws_option),
                         p);
    return std::nullopt;
  }
  if ((compact || !whitespace_pattern.empty()) && !is_json(*spec))
    return bad_request(fmt::format("'structured_outputs.{}' applies to JSON only, not to '{}'",
                                   ws_option, which),
                       p);
  spec->json.whitespace.compact = compact;
  spec->json.whitespace.pattern = whitespace_pattern;
  return found.add(std::move(*spec), p);
}

}  // namespace

std::optional<ApiError> read_output_constraint(const ojson& body,
                                               std::optional<OutputConstraint>* out) {
  out->reset();
  Collector found(out);
  auto field = [&](const char* name) -> const ojson* {
    const auto it = body.find(name);
    return it == body.end() || it->is_null() ? nullptr : &*it;
  };
  if (const ojson* v = field("response_format"))
    if (auto err = read_response_format(*v, found)) return err;
  if (const ojson* v = field("structured_outputs"))
    if (auto err = read_structured_outputs(*v, found)) return err;
  if (const ojson* v = field("guided_json")) {
    ConstraintSpec s;
    if (auto err = read_schema(*v, "guided_json", &s)) return err;
    if (auto err = found.add(std::move(s), "guided_json")) return err;
  }
  for (const char* name : {"guided_regex", "guided_grammar", "grammar"})
    if (const ojson* v = field(name)) {
      ConstraintSpec s;
      s.kind = std::string_view(name) == "guided_regex" ? ConstraintSpec::Kind::kRegex
                                                        : ConstraintSpec::Kind::kGrammar;
      if (auto err = read_string(*v, name, &s.text)) return err;
      if (auto err = found.add(std::move(s), name)) return err;
    }
  if (const ojson* v = field("guided_choice")) {
    ConstraintSpec s;
    if (auto err = read_choices(*v, "guided_choice", &s)) return err;
    if (auto err = found.add(std::move(s), "guided_choice")) return err;
  }
  if (const ojson* v = field("json_schema")) {  // llama.cpp: the schema itself
    ConstraintSpec s;
    if (auto err = read_schema(*v, "json_schema", &s)) return err;
    if (auto err = found.add(std::move(s), "json_schema")) return err;
  }
  if (const ojson* v = field("guided_whitespace_pattern")) {  // vLLM's older spelling
    const std::string param = "guided_whitespace_pattern";
    std::string pattern;
    if (auto err = read_whitespace_pattern(*v, param, &pattern)) return err;
    if (!*out || !is_json((*out)->spec))
      return bad_request(fmt::format("'{}' applies to a JSON constraint (guided_json, "
                                     "response_format json_schema / json_object){}",
                                     param,
                                     *out ? ", not to '" + (*out)->param + "'" : std::string()),
                         param);
    auto& ws = (*out)->spec.json.whitespace;
    if (ws.compact || !ws.pattern.empty())
      return bad_request(fmt::format("'{}' conflicts with structured_outputs' own whitespace "
                                     "option; send one",
                                     param),
                         param);
    ws.pattern = std::move(pattern);
  }
  return std::nullopt;
}

std::optional<ApiError> read_tool_choice(const ojson& body, ToolChoice* out) {
  *out = ToolChoice{};
  if (const auto t = body.find("tools"); t != body.end() && t->is_array()) out->tools = *t;
  const bool has_tools = !out->tools.empty();
  std::set<std::string> names;
  for (size_t i = 0; i < out->tools.size(); ++i) {
    const ojson& t = out->tools[i];
    if (!is_function_tool(t)) continue;  // protocol.cc names the shape error
    const std::string& name = t["function"]["name"].get_ref<const std::string&>();
    if (!names.insert(name).second)
      return bad_request(fmt::format("tools[{}]: the function name '{}' is given twice", i,
                                     name.size() > 64 ? name.substr(0, 61) + "..." : name),
                         "tools");
    const ojson& f = t["function"];
    if (f.contains("parameters") && !f["parameters"].is_null()) {
      const ojson& p = f["parameters"];
      // OpenAI: parameters is a JSON Schema object describing an object (arguments are a
      // JSON object); a non-object type could never be a call's arguments.
      if (!p.is_object() || (p.contains("type") && p["type"] != "object"))
        return bad_request(fmt::format("tools[{}].function.parameters must be a JSON Schema of "
                                       "an object ({{\"type\": \"object\", ...}}), got {}",
                                       i, describe(p)),
                           "tools");
    }
  }
  if (const auto p = body.find("parallel_tool_calls"); p != body.end() && !p->is_null()) {
    if (!p->is_boolean())
      return bad_request(fmt::format("'parallel_tool_calls' must be a boolean, got {}",
                                     describe(*p)),
                         "parallel_tool_calls");
    out->parallel_tool_calls = p->get<bool>();
  }
  const auto choice = body.find("tool_choice");
  if (choice == body.end() || choice->is_null()) {
    out->mode = has_tools ? ToolChoice::Mode::kAuto : ToolChoice::Mode::kNone;
    return std::nullopt;
  }
  const char* shape = "\"none\", \"auto\", \"required\" or {\"type\": \"function\", "
                      "\"function\": {\"name\": ...}}";
  if (choice->is_string()) {
    const std::string c = choice->get<std::string>();
    if (c == "none") {
      out->mode = ToolChoice::Mode::kNone;
    } else if (c == "auto" || c == "required") {
      if (!has_tools)
        return bad_request(fmt::format("'tool_choice' \"{}\" needs 'tools' (none were given)", c),
                           "tool_choice");
      out->mode = c == "auto" ? ToolChoice::Mode::kAuto : ToolChoice::Mode::kRequired;
    } else {
      return bad_request(fmt::format("'tool_choice' must be {}, got {}", shape, describe(*choice)),
                         "tool_choice");
    }
    return std::nullopt;
  }
  if (!choice->is_object() || !choice->contains("function") || !(*choice)["function"].is_object() ||
      !(*choice)["function"].contains("name") || !(*choice)["function"]["name"].is_string() ||
      (choice->contains("type") && (*choice)["type"] != "function"))
    return bad_request(fmt::format("'tool_choice' must be {}, got {}", shape, describe(*choice)),
                       "tool_choice");
  out->function = (*choice)["function"]["name"].get<std::string>();
  for (const ojson& t : out->tools)
    if (is_function_tool(t) && t["function"]["name"] == out->function) {
      out->mode = ToolChoice::Mode::kNamed;
      return std::nullopt;
    }
  return bad_request(fmt::format("'tool_choice' names the function '{}', which is not in "
                                 "'tools'",
                                 out->function.size() > 64 ? out->function.substr(0, 61) + "..."
                                                           : out->function),
                     "tool_choice");
}

std::string forced_tool_call_schema(const ToolChoice& choice) {
  auto parameters = [](const ojson& tool) -> ojson {
    const ojson& f = tool["function"];
    if (f.contains("parameters") && !f["parameters"].is_null()) return f["parameters"];
    return ojson{{"type", "object"}};
  };
  if (choice.mode == ToolChoice::Mode::kNamed) {
    for (const ojson& t : choice.tools)
      if (is_function_tool(t) && t["function"]["name"] == choice.function)
        return parameters(t).dump();
    return ojson{{"type", "object"}}.dump();
  }
  ojson any_of = ojson::array();
  for (const ojson& t : choice.tools) {
    if (!is_function_tool(t)) continue;
    ojson props = ojson::object();
    props["name"] = {{"const", t["function"]["name"]}};
    props["parameters"] = parameters(t);
    ojson one = ojson::object();
    one["type"] = "object";
    one["properties"] = std::move(props);
    one["required"] = ojson::array({"name", "parameters"});
    one["additionalProperties"] = false;
    any_of.push_back(std::move(one));
  }
  ojson schema = ojson::object();
  schema["type"] = "array";
  schema["items"] = {{"anyOf", std::move(any_of)}};
  schema["minItems"] = 1;
  if (!choice.parallel_tool_calls) schema["maxItems"] = 1;
  return schema.dump();
}

}  // namespace llmserve
