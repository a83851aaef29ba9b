#include "structured_output/constraint.h"

#include <list>
#include <mutex>
#include <unordered_map>

#include "common/timing.h"
#include "structured_output/gbnf.h"
#include "structured_output/regex.h"
#include "structured_output/stats.h"

namespace llmserve::structured_output {

Expected<std::shared_ptr<const CompiledGrammar>> compile_constraint(const ConstraintSpec& spec) {
  Expected<Grammar> g = Grammar{};
  switch (spec.kind) {
    case ConstraintSpec::Kind::kJsonSchema: {
      nlohmann::ordered_json schema;
      try {
        schema = nlohmann::ordered_json::parse(spec.text);
      } catch (const nlohmann::json::exception& e) {
        return InvalidArgument("JSON schema is not valid JSON: {}", e.what());
      }
      g = compile_json_schema(schema, spec.json);
      break;
    }
    case ConstraintSpec::Kind::kJsonObject:
      g = json_object_grammar(spec.json);
      break;
    case ConstraintSpec::Kind::kRegex:
      g = regex_grammar(spec.text);
      break;
    case ConstraintSpec::Kind::kGrammar:
      g = parse_gbnf(spec.text);
      break;
    case ConstraintSpec::Kind::kChoice: {
      if (spec.choices.empty()) return InvalidArgument("choice: no choices given");
      GrammarBuilder b;
      uint32_t root = b.add_rule("root");
      for (const std::string& c : spec.choices) {
        Sequence s;
        b.append_literal(c, s);
        b.add_alternative(root, std::move(s));
      }
      g = b.finish(root);
      break;
    }
  }
  if (!g.ok()) return g.status();
  return CompiledGrammar::compile(std::move(*g));
}

Expected<std::shared_ptr<const CompiledGrammar>> compile_constraint_cached(const ConstraintSpec& spec, size_t capacity) {
  static std::mutex mu;
  static std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru;
  static std::unordered_map<std::string, decltype(lru)::iterator> index;
  // Every variable-length part is length-prefixed, so no two specs share a key.
  std::string key = std::to_string(static_cast<int>(spec.kind)) + ':' + std::to_string(spec.text.size()) + ':' +
                    spec.text + std::to_string(spec.json.whitespace.compact) + ':' +
                    std::to_string(spec.json.whitespace.max_indent);
  for (const std::string& c : spec.choices) key += ':' + std::to_string(c.size()) + ':' + c;
  {
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = index.find(key); it != index.end()) {
      lru.splice(lru.begin(), lru, it->second);
      return it->second->second;
    }
  }
  const double start = now_seconds();
  auto compiled = compile_constraint(spec);
  record_compile_seconds(now_seconds() - start);
  if (!compiled.ok()) {
    static constexpr const char* kKinds[] = {"json_schema", "json_object", "regex", "choice", "grammar"};
    record_refusal(kKinds[static_cast<int>(spec.kind)], compiled.status().message());
    return compiled.status();
  }
  std::lock_guard<std::mutex> lock(mu);
  if (index.count(key) == 0) {
    lru.emplace_front(key, *compiled);
    index[key] = lru.begin();
    while (lru.size() > capacity) {
      index.erase(lru.back().first);
      lru.pop_back();
    }
  }
  return *compiled;
}

}  // namespace llmserve::structured_output
