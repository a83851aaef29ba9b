// Grammar-constrained generation in the engine (stories260K): every output that finishes with
// "stop" is a sentence of its grammar; a constrained sequence's tokens do not depend on its
// batch neighbours (alone == among others, preempted or not); the grammar starts after a
// reasoning end marker when asked; the matcher never lets the sequence run past the grammar.
#include <gtest/gtest.h>

#include <map>

#include "engine/llm_engine.h"
#include "reference_cases.h"
#include "structured_output/constraint.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {
namespace {

using structured_output::CompiledGrammar;
using structured_output::ConstraintSpec;

struct Result {
  std::vector<int32_t> ids;
  std::string text;
  FinishReason finish = FinishReason::kNone;
};

std::unique_ptr<LLMEngine> make_engine(int32_t num_kv_blocks = 64) {
  EngineConfig cfg;
  cfg.model_path = testing::stories_gguf();
  cfg.scheduler.max_model_len = 512;
  cfg.scheduler.check_invariants = true;
  cfg.num_threads = 1;
  cfg.cache.num_kv_blocks = num_kv_blocks;
  auto e = LLMEngine::create(cfg);
  EXPECT_TRUE(e.ok()) << e.status().message();
  return std::move(e).value();
}

std::shared_ptr<const CompiledGrammar> compile(ConstraintSpec spec) {
  auto g = structured_output::compile_constraint(spec);
  EXPECT_TRUE(g.ok()) << g.status().message();
  return *g;
}

ConstraintSpec regex(std::string r) {
  ConstraintSpec s;
  s.kind = ConstraintSpec::Kind::kRegex;
  s.text = std::move(r);
  return s;
}

ConstraintSpec schema(std::string text) {
  ConstraintSpec s;
  s.kind = ConstraintSpec::Kind::kJsonSchema;
  s.text = std::move(text);
  return s;
}

/// Runs `requests` together to completion; results by request id.
std::map<int64_t, Result> run_all(LLMEngine& e, std::vector<EngineRequest> requests,
                                  int64_t first_id) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const Status st = e.add_request(first_id + int64_t(i), std::move(requests[i]));
    EXPECT_TRUE(st.ok()) << st.message();
  }
  std::map<int64_t, Result> out;
  while (e.has_unfinished_requests())
    for (const RequestOutput& o : e.step()) {
      Result& r = out[o.request_id];
      r.ids.insert(r.ids.end(), o.new_token_ids.begin(), o.new_token_ids.end());
      r.text += o.new_text;
      if (o.finished) r.finish = o.finish_reason;
    }
  return out;
}

EngineRequest request(LLMEngine& e, const std::string& prompt, uint64_t seed,
                      std::shared_ptr<const CompiledGrammar> grammar, int32_t max_tokens = 120) {
  EngineRequest r;
  r.prompt_token_ids = e.tokenizer().encode(prompt, true);
  r.params.temperature = 1.0f;
  r.params.seed = seed;
  r.params.max_tokens = max_tokens;
  r.grammar = std::move(grammar);
  return r;
}

const char* kSchema = R"({"type": "object", "properties": {
    "hero": {"type": "string", "maxLength": 10},
    "mood": {"enum": ["happy", "sad"]},
    "friends": {"type": "integer", "minimum": 0, "maximum": 9}},
  "required": ["hero", "mood", "friends"], "additionalProperties": false})";

TEST(EngineStructuredOutput, StoppedOutputsAreSentencesOfTheirGrammar) {
  auto e = make_engine();
  const ConstraintSpec specs[] = {regex("[A-Z][a-z]{2,8} (ran|sat|sang)\\."), schema(kSchema)};
  int stops = 0;
  for (const ConstraintSpec& spec : specs) {
    auto g = compile(spec);
    std::vector<EngineRequest> reqs;
    for (uint64_t seed = 0; seed < 8; ++seed)
      reqs.push_back(request(*e, "Once upon a time", seed, g));
    for (auto& [id, r] : run_all(*e, std::move(reqs), 1000 * (&spec - specs + 1))) {
      ASSERT_NE(r.finish, FinishReason::kAbort) << r.text;
      if (r.finish != FinishReason::kStop) continue;
      ++stops;
      EXPECT_TRUE(structured_output::grammar_accepts(g, r.text)) << r.text;
    }
  }
  EXPECT_GE(stops, 8);
}

TEST(EngineStructuredOutput, TokensDoNotDependOnBatchNeighboursOrPreemption) {
  auto g = compile(schema(kSchema));
  auto alone_engine = make_engine();
  std::vector<Result> alone;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    auto r = run_all(*alone_engine, {request(*alone_engine, "Lily liked", seed, g)},
                     int64_t(100 + seed));
    alone.push_back(r.begin()->second);
  }
  // Together, with unconstrained neighbours, in a pool small enough to preempt.
  auto crowded = make_engine(/*num_kv_blocks=*/12);
  std::vector<EngineRequest> reqs;
  for (uint64_t seed = 0; seed < 4; ++seed) {
    reqs.push_back(request(*crowded, "Lily liked", seed, g));
    reqs.push_back(request(*crowded, "The dog ran to the park and", seed + 50, nullptr, 150));
  }
  auto together = run_all(*crowded, std::move(reqs), 1);
  for (uint64_t seed = 0; seed < 4; ++seed) {
    const Result& t = together.at(1 + 2 * int64_t(seed));
    EXPECT_EQ(t.ids, alone[seed].ids) << "seed " << seed;
    EXPECT_EQ(t.text, alone[seed].text);
    EXPECT_EQ(t.finish, alone[seed].finish);
  }
}

TEST(EngineStructuredOutput, GrammarStartsAfterTheReasoningEnd) {
  auto e = make_engine();
  // A grammar that becomes active only once "." has been written; before it, free text.
  auto g = compile(regex("[0-9]{3}"));
  std::vector<int32_t> dot;
  for (int32_t id = 0; id < e->tokenizer().vocab_size() && dot.empty(); ++id)
    if (e->tokenizer().piece(id) == ".") dot.push_back(id);
  ASSERT_FALSE(dot.empty());
  EngineRequest r = request(*e, "Once upon a time", 3, g, 200);
  r.grammar_start_after_ids = dot;
  const Result out = run_all(*e, {std::move(r)}, 1).begin()->second;
  ASSERT_EQ(out.finish, FinishReason::kStop) << out.text;
  // The text up to the last '.' is free; what follows is exactly three digits.
  const size_t at = out.text.rfind('.');
  ASSERT_NE(at, std::string::npos) << out.text;
  const std::string rest = out.text.substr(at + 1);
  EXPECT_TRUE(structured_output::grammar_accepts(g, rest)) << "'" << rest << "'";
}

TEST(EngineStructuredOutput, WithoutAnOpeningTagTheGrammarAppliesFromTheFirstToken) {
  // qwen3's rule: reasoning only when the output opens with <think>. Here the "tag" is a token
  // the request bans, so the model cannot open it: the grammar must apply from token one.
  auto e = make_engine();
  auto g = compile(regex("[0-9]{3}"));
  int32_t open = -1, close = -1;
  for (int32_t id = 0; id < e->tokenizer().vocab_size(); ++id) {
    if (e->tokenizer().piece(id) == "<") open = id;
    if (e->tokenizer().piece(id) == ">") close = id;
  }
  ASSERT_GE(open, 0);
  ASSERT_GE(close, 0);
  for (uint64_t seed = 0; seed < 4; ++seed) {
    EngineRequest r = request(*e, "Once upon a time", seed, g);
    r.grammar_start_after_ids = {close};
    r.grammar_reasoning_open_ids = {open};
    r.params.logit_bias = {{open, -100.0f}};
    const Result out = run_all(*e, {std::move(r)}, int64_t(10 + seed)).begin()->second;
    EXPECT_EQ(out.finish, FinishReason::kStop) << out.text;
    EXPECT_TRUE(structured_output::grammar_accepts(g, out.text)) << "'" << out.text << "'";
  }
}

TEST(EngineStructuredOutput, TupleWithoutMoreItemsNeverAllowsAnotherComma) {
  // prefixItems + items: false (QA): the grammar must not let ", " follow the last item.
  auto g = compile(schema(R"({"type": "array", "prefixItems": [{"type": "string", "maxLength": 5},
                              {"type": "integer"}], "items": false})"));
  auto e = make_engine();
  std::vector<EngineRequest> reqs;
  for (uint64_t seed = 0; seed < 8; ++seed) reqs.push_back(request(*e, "Once", seed, g, 60));
  for (auto& [id, r] : run_all(*e, std::move(reqs), 300)) {
    EXPECT_NE(r.finish, FinishReason::kAbort) << r.text;
    if (r.finish == FinishReason::kStop) {
      EXPECT_TRUE(structured_output::grammar_accepts(g, r.text));
    }
  }
  structured_output::Matcher m(g);
  ASSERT_TRUE(m.advance("[\"a\", 1"));
  EXPECT_FALSE(m.advance(","));
}

TEST(EngineStructuredOutput, TerminatedGrammarStopsWithoutEosAndLengthCutsAreLength) {
  auto e = make_engine();
  ConstraintSpec choice;
  choice.kind = ConstraintSpec::Kind::kChoice;
  choice.choices = {" yes", " no"};
  auto g = compile(choice);
  EngineRequest r = request(*e, "Is the sky blue?", 1, g);
  r.params.ignore_eos = true;  // even so: nothing can follow a finished choice
  const Result out = run_all(*e, {std::move(r)}, 1).begin()->second;
  EXPECT_EQ(out.finish, FinishReason::kStop);
  EXPECT_TRUE(out.text == " yes" || out.text == " no") << out.text;

  auto json = compile(schema(kSchema));
  const Result cut = run_all(*e, {request(*e, "Once", 2, json, 4)}, 2).begin()->second;
  EXPECT_EQ(cut.finish, FinishReason::kLength);
  EXPECT_EQ(cut.ids.size(), 4u);
}

}  // namespace
}  // namespace llmserve
