#include "server/tool_parsers/tool_parser_registry.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "server/tool_parsers/formats.h"

namespace llmserve::tool_parsers {
namespace {

using Factory = std::unique_ptr<ToolParser> (*)(const ToolParserOptions&);

struct Entry {
  std::string_view name;
  Factory make;
};

constexpr Entry kParsers[] = {
    {"deepseek_v3", make_deepseek_v3_tool_parser},
    {"deepseek_v31", make_deepseek_v31_tool_parser},
    {"granite", make_granite_tool_parser},
    {"hermes", make_hermes_tool_parser},
    {"kimi_k2", make_kimi_k2_tool_parser},
    {"llama3_json", make_llama3_json_tool_parser},
    {"llama4_json", make_llama3_json_tool_parser},
    {"mistral", make_mistral_tool_parser},
    {"qwen3_coder", make_qwen3_coder_tool_parser},
    {"qwen3_xml", make_qwen3_coder_tool_parser},
};

bool has(std::string_view text, std::string_view needle) {
  return text.find(needle) != std::string_view::npos;
}

}  // namespace

std::vector<std::string> tool_parser_names() {
  std::vector<std::string> names;
  for (const Entry& e : kParsers) names.emplace_back(e.name);
  std::sort(names.begin(), names.end());
  return names;
}

Expected<std::unique_ptr<ToolParser>> make_tool_parser(std::string_view name,
                                                       const ToolParserOptions& options) {
  for (const Entry& e : kParsers) {
    if (e.name == name) return e.make(options);
  }
  return InvalidArgument("unknown tool call parser '{}'; valid names: {}", name,
                         fmt::join(tool_parser_names(), ", "));
}

std::optional<std::string> detect_tool_parser(std::string_view t) {
  // Formats close to a supported one but not parsed by it: better no parser than a wrong one.
  if (has(t, "<arg_key>") ||                             // GLM-4.5+ and Laguna XML arguments
      has(t, "<seed:tool_call>") ||                      // ByteDance Seed-OSS
      has(t, "<invoke ") || has(t, "<invoke name") ||    // MiniMax
      (has(t, "<function=") && !has(t, "<parameter="))) {  // functionary v3.1
    return std::nullopt;
  }
  if (has(t, "<｜tool▁calls▁begin｜>") || has(t, "<｜tool▁call▁begin｜>")) {
    return has(t, "```json") ? "deepseek_v3" : "deepseek_v31";
  }
  if (has(t, "<|tool_calls_section_begin|>")) return "kimi_k2";
  if (has(t, "[TOOL_CALLS]")) return "mistral";
  if (has(t, "<function=") && has(t, "<parameter=")) return "qwen3_coder";
  if (has(t, "<|tool_call|>")) return "granite";
  if (has(t, "<tool_call>")) return "hermes";
  if (has(t, "<|python_tag|>") ||
      (has(t, "<|start_header_id|>") && has(t, "\"parameters\"") && has(t, "tools"))) {
    return "llama3_json";
  }
  return std::nullopt;
}

}  // namespace llmserve::tool_parsers
