#include "structured_output/json_schema.h"

#include "structured_output/json_schema_compiler.h"

namespace llmserve::structured_output {

Expected<Grammar> compile_json_schema(const nlohmann::ordered_json& schema, const JsonSchemaOptions& options) {
  return detail::SchemaCompiler(schema, options).run();
}

Grammar json_object_grammar(const JsonSchemaOptions& options) {
  static const nlohmann::ordered_json kObject = {{"type", "object"}};
  return *detail::SchemaCompiler(kObject, options).run();
}

bool json_nesting_exceeds(const nlohmann::ordered_json& value, size_t max_depth) {
  std::vector<std::pair<const nlohmann::ordered_json*, size_t>> stack{{&value, 1}};
  while (!stack.empty()) {
    const auto [v, depth] = stack.back();
    stack.pop_back();
    if (!v->is_structured()) continue;
    if (depth > max_depth) return true;
    for (const auto& child : *v)
      if (child.is_structured()) stack.emplace_back(&child, depth + 1);
  }
  return false;
}

}  // namespace llmserve::structured_output
