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

}  // namespace llmserve::structured_output
