#include "structured_output/json_schema.h"

#include "structured_output/json_schema_compiler.h"
#include "structured_output/regex.h"

namespace llmserve::structured_output {

Status check_whitespace_pattern(const std::string& pattern) {
  // Compiled alone: every byte it may match must be JSON whitespace (RFC 8259 ws), or the
  // output would not be JSON. Conservative: every byte set of a terminal reachable from the
  // root (the regex compiler builds some rules and sets, e.g. UTF-8 ranges, that a given
  // pattern never references).
  LLMS_ASSIGN_OR_RETURN(Grammar alone, regex_grammar(pattern));
  ByteSet json_ws;
  for (char c : {' ', '\t', '\n', '\r'}) json_ws.set(static_cast<uint8_t>(c));
  ByteSet used;
  std::vector<uint8_t> seen(alone.rules.size(), 0);
  std::vector<uint32_t> todo{alone.root};
  seen[alone.root] = 1;
  while (!todo.empty()) {
    const Rule& rule = alone.rules[todo.back()];
    todo.pop_back();
    for (const Sequence& alt : rule.alternatives)
      for (const Element& e : alt) {
        if (e.kind == Element::Kind::kBytes) {
          used |= alone.byte_sets[e.index];
        } else if (!seen[e.index]) {
          seen[e.index] = 1;
          todo.push_back(e.index);
        }
      }
  }
  if ((used & ~json_ws).any())
    return InvalidArgument("whitespace pattern '{}' may match characters other than JSON whitespace "
                           "(space, \\t, \\n, \\r); write e.g. [ \\n\\t]{{0,4}}",
                           pattern);
  return Status();
}

namespace detail {

Expected<Element> make_whitespace(GrammarBuilder& b, const JsonWhitespace& ws) {
  if (ws.compact) return b.literal("");
  if (!ws.pattern.empty()) {
    LLMS_RETURN_IF_ERROR(check_whitespace_pattern(ws.pattern));
    return compile_regex(ws.pattern, b);
  }
  ByteSet indent;
  indent.set(' ');
  indent.set('\t');
  Element tail = b.repeat(b.byte_set(indent), 0, ws.max_indent);
  return b.choice({{}, {b.byte(' ')}, {b.byte('\n'), tail}}, "ws");
}

}  // namespace detail

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
