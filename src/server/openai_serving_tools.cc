// OpenAIServing::prepare_output: a request's structured-output constraint and tool calls,
// from its fields to the engine's grammar and the reply's parsing.
#include <fmt/format.h>

#include "server/generation.h"
#include "server/openai_serving.h"
#include "server/structured_output_request.h"
#include "structured_output/constraint.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {

using ojson = nlohmann::ordered_json;
using structured_output::ConstraintSpec;

namespace {
constexpr size_t kMaxRequestGrammarElements = 500'000;
}  // namespace

std::optional<ApiError> OpenAIServing::prepare_output(const std::string& raw_body,
                                                      const std::string* rendered_prompt,
                                                      Generation* gen) const {
  const ojson body = ojson::parse(raw_body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) return bad_request("invalid JSON body");
  std::optional<OutputConstraint> constraint;
  if (auto err = read_output_constraint(body, &constraint)) return err;
  const bool chat = rendered_prompt != nullptr;
  ChatParsing& parsing = gen->parsing;
  parsing = ChatParsing{};
  if (chat) {
    ToolChoice tools;
    if (auto err = read_tool_choice(body, &tools)) return err;
    using Mode = ToolChoice::Mode;
    if (tools.mode != Mode::kNone) parsing.tools_json = nlohmann::json::parse(tools.tools.dump());
    if (tools.mode == Mode::kAuto) {
      if (tool_parser_.empty())
        return bad_request("tool_choice \"auto\" (OpenAI's default when 'tools' are given) needs "
                           "the model's tool-call format, and this model's chat template shows "
                           "none llmserve recognises: start the server with --tool-call-parser "
                           "NAME, or send tool_choice \"required\", a named function, or "
                           "\"none\" (tools reach the template only)",
                           "tool_choice");
      parsing.tools = ChatParsing::Tools::kFormat;
      parsing.tool_parser = tool_parser_;
      // Markers such as [TOOL_CALLS] and <|python_tag|> are special tokens: the parser must
      // see them (vLLM does the same for Mistral). End-of-sequence tokens never reach the
      // text either way.
      gen->request.params.skip_special_tokens = false;
    } else if (tools.mode == Mode::kRequired || tools.mode == Mode::kNamed) {
      if (constraint)
        return bad_request(fmt::format("tool_choice \"{}\" constrains the output to tool calls, "
                                       "so it cannot be combined with '{}'",
                                       tools.mode == Mode::kRequired ? "required" : "a function",
                                       constraint->param),
                           "tool_choice");
      // Each tool's parameters on its own first, so a refusal names the tool and its own path
      // (not the path inside the forced array schema).
      for (size_t i = 0; i < tools.tools.size(); ++i) {
        const ojson& f = tools.tools[i]["function"];
        if (!f.contains("parameters") || f["parameters"].is_null()) continue;
        ConstraintSpec one;
        one.kind = ConstraintSpec::Kind::kJsonSchema;
        one.text = f["parameters"].dump();
        one.json.max_grammar_elements = kMaxRequestGrammarElements;
        if (auto c = structured_output::compile_constraint_cached(one); !c.ok())
          return bad_request(fmt::format("tools[{}].function.parameters cannot be enforced: {}", i,
                                         c.status().message()),
                             "tools");
      }
      ConstraintSpec spec;
      spec.kind = ConstraintSpec::Kind::kJsonSchema;
      spec.text = forced_tool_call_schema(tools);
      constraint = OutputConstraint{std::move(spec), "tools"};
      parsing.tools = tools.mode == Mode::kRequired ? ChatParsing::Tools::kRequired
                                                    : ChatParsing::Tools::kNamed;
      parsing.function = tools.function;
    }
    if (!chat_output_.reasoning_parser.empty()) {
      parsing.reasoning_parser = chat_output_.reasoning_parser;
      parsing.reasoning_start =
          tool_parsers::reasoning_start_from_prompt(parsing.reasoning_parser, *rendered_prompt);
    }
  }
  if (!constraint) return std::nullopt;
  // A request's grammar is bounded (time and memory: a 100,000-value enum is ~1M elements and
  // hundreds of MB once masked); MaskBench's largest schemas need well under this.
  constraint->spec.json.max_grammar_elements = kMaxRequestGrammarElements;
  auto compiled = structured_output::compile_constraint_cached(constraint->spec);
  if (!compiled.ok())
    return bad_request(fmt::format("'{}' cannot be used: {}", constraint->param,
                                   compiled.status().message()),
                       constraint->param);
  gen->request.grammar = std::move(*compiled);
  // With a reasoning parser, the grammar constrains what follows the reasoning span: from the
  // end tag on, unless the prompt already closed it (thinking disabled).
  if (!parsing.reasoning_parser.empty() &&
      parsing.reasoning_start != tool_parsers::ReasoningStart::kInContent) {
    auto parser = tool_parsers::make_reasoning_parser(parsing.reasoning_parser);
    if (parser.ok()) {
      EncodeOptions opt;
      opt.add_special = false;
      opt.parse_special = true;
      const Tokenizer& tok = engine_.engine().tokenizer();
      gen->request.grammar_start_after_ids = tok.encode(std::string((*parser)->end_tag()), opt);
      // A parser that reasons only when the output opens with its tag (qwen3, mistral): the
      // model either opens it or writes the constrained answer at once.
      if (parsing.reasoning_start == tool_parsers::ReasoningStart::kDefault &&
          !(*parser)->starts_in_reasoning() && !(*parser)->start_tag().empty())
        gen->request.grammar_reasoning_open_ids =
            tok.encode(std::string((*parser)->start_tag()), opt);
    }
  }
  return std::nullopt;
}

}  // namespace llmserve
