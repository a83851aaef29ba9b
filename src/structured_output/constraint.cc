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
      if (json_nesting_exceeds(schema, kMaxSchemaNesting))
        return InvalidArgument("JSON schema nests deeper than {} levels", kMaxSchemaNesting);
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
  if (const size_t n = g->num_elements(); n > spec.json.max_grammar_elements)
    return ResourceExhausted("the constraint needs a grammar of {} elements, more than the limit "
                             "of {}", n, spec.json.max_grammar_elements);
  return CompiledGrammar::compile(std::move(*g));
}

Expected<std::shared_ptr<const CompiledGrammar>> compile_constraint_cached(const ConstraintSpec& spec, size_t capacity,
                                                                           size_t max_cached_elements) {
  static std::mutex mu;
  static std::list<std::pair<std::string, std::shared_ptr<const CompiledGrammar>>> lru;
  static size_t cached_elements = 0;
  static std::unordered_map<std::string, decltype(lru)::iterator> index;
  // Every variable-length part is length-prefixed, so no two specs share a key.
  std::string key = std::to_string(static_cast<int>(spec.kind)) + ':' + std::to_string(spec.text.size()) + ':' +
                    spec.text + std::to_string(spec.json.whitespace.compact) + ':' +
                    std::to_string(spec.json.whitespace.max_indent) + ':' +
                    std::to_string(spec.json.whitespace.pattern.size()) + ':' + spec.json.whitespace.pattern;
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
  const size_t elements = (*compiled)->grammar().num_elements();
  std::lock_guard<std::mutex> lock(mu);
  if (index.count(key) == 0 && elements <= max_cached_elements) {
    lru.emplace_front(key, *compiled);
    index[key] = lru.begin();
    cached_elements += elements;
    while (lru.size() > capacity || cached_elements > max_cached_elements) {
      cached_elements -= lru.back().second->grammar().num_elements();
      index.erase(lru.back().first);
      lru.pop_back();
    }
  }
  return *compiled;
}

}  // namespace llmserve::structured_output
