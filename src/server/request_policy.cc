#include "server/request_policy.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "common/edit_distance.h"
#include "server/protocol.h"

namespace llmserve {

using nlohmann::json;

namespace {

constexpr uint8_t C = kEndpointCompletions;
constexpr uint8_t Ch = kEndpointChat;
constexpr uint8_t T = kEndpointTokenize;
constexpr uint8_t D = kEndpointDetokenize;
constexpr FieldFate kHonoured = FieldFate::kHonoured;
constexpr FieldFate kRefused = FieldFate::kRefused;

// One row per field. Keep docs/api.md's Parameters table in step (tests/server check it).
constexpr RequestField kFields[] = {
    // --- the prompt -------------------------------------------------------------------------
    {"model", C | Ch | T | D, "OpenAI", kHonoured, "", ""},
    {"prompt", C | T, "OpenAI", kHonoured, "", ""},
    {"messages", Ch | T, "OpenAI", kHonoured, "", ""},
    {"tokens", D, "vLLM", kHonoured, "", ""},
    {"suffix", C, "OpenAI", kRefused, R"("")",
     "there is no fill-in-the-middle; put the text before the insertion point in 'prompt'"},
    {"echo", C | Ch, "OpenAI", kHonoured, "", ""},
    {"add_special_tokens", C | Ch | T, "vLLM", kHonoured, "", ""},
    {"truncate_prompt_tokens", C | Ch, "vLLM", kHonoured, "", ""},
    {"prompt_embeds", C, "vLLM", kRefused, "", "prompts are token ids or text"},
    // --- chat templates ---------------------------------------------------------------------
    {"add_generation_prompt", Ch | T, "vLLM", kHonoured, "", ""},
    {"continue_final_message", Ch | T, "vLLM", kHonoured, "", ""},
    {"documents", Ch | T, "vLLM", kHonoured, "", ""},
    {"chat_template_kwargs", Ch | T, "vLLM", kHonoured, "", ""},
    {"chat_template", Ch | T, "vLLM", kRefused, "",
     "a per-request template is not accepted (as vLLM without --trust-request-chat-template); "
     "start the server with --chat-template"},
    {"mm_processor_kwargs", Ch | T, "vLLM", kRefused, "", "this server serves text-only models"},
    {"tools", Ch | T, "OpenAI", kHonoured, "", ""},
    {"tool_choice", Ch, "OpenAI", kHonoured, "", ""},
    {"parallel_tool_calls", Ch, "OpenAI", kHonoured, "", ""},
    {"functions", Ch, "OpenAI", kRefused, "",
     "deprecated by OpenAI in favour of 'tools'; send 'tools'"},
    {"function_call", Ch, "OpenAI", kRefused, "",
     "deprecated by OpenAI in favour of 'tool_choice'; send 'tool_choice'"},
    // --- length -----------------------------------------------------------------------------
    {"max_tokens", C | Ch, "OpenAI", kHonoured, "", ""},
    {"max_completion_tokens", Ch, "OpenAI", kHonoured, "", ""},
    {"n_predict", C | Ch, "llama.cpp", kHonoured, "", ""},
    {"min_tokens", C | Ch, "vLLM", kHonoured, "", ""},
    {"stop", C | Ch, "OpenAI", kHonoured, "", ""},
    {"stop_token_ids", C | Ch, "vLLM", kHonoured, "", ""},
    {"ignore_eos", C | Ch, "vLLM", kHonoured, "", ""},
    {"include_stop_str_in_output", C | Ch, "vLLM", kHonoured, "", ""},
    // --- sampling ---------------------------------------------------------------------------
    {"temperature", C | Ch, "OpenAI", kHonoured, "", ""},
    {"top_p", C | Ch, "OpenAI", kHonoured, "", ""},
    {"top_k", C | Ch, "vLLM", kHonoured, "", ""},
    {"min_p", C | Ch, "vLLM", kHonoured, "", ""},
    {"presence_penalty", C | Ch, "OpenAI", kHonoured, "", ""},
    {"frequency_penalty", C | Ch, "OpenAI", kHonoured, "", ""},
    {"repetition_penalty", C | Ch, "vLLM", kHonoured, "", ""},
    {"logit_bias", C | Ch, "OpenAI", kHonoured, "", ""},
    {"allowed_token_ids", C | Ch, "vLLM", kHonoured, "", ""},
    {"bad_words", C | Ch, "vLLM", kRefused, "[]",
     "not implemented; ban single tokens with 'logit_bias' (-100)"},
    {"seed", C | Ch, "OpenAI", kHonoured, "", ""},
    {"n", C | Ch, "OpenAI", kHonoured, "", ""},
    {"best_of", C, "OpenAI", kRefused, "1",
     "not supported, as in vLLM V1; use 'n' for several samples"},
    {"use_beam_search", C | Ch, "vLLM", kRefused, "false", "beam search is not implemented"},
    {"length_penalty", C | Ch, "vLLM", kRefused, "1",
     "it only applies to beam search, which is not implemented"},
    {"logits_processors", C | Ch, "vLLM", kRefused, "[]",
     "custom logits processors are not supported; see 'logit_bias' and 'allowed_token_ids'"},
    {"priority", C | Ch, "vLLM", kHonoured, "", ""},
    // --- output -----------------------------------------------------------------------------
    {"stream", C | Ch, "OpenAI", kHonoured, "", ""},
    {"stream_options", C | Ch, "OpenAI", kHonoured, "", ""},
    {"logprobs", C | Ch, "OpenAI", kHonoured, "", ""},
    {"top_logprobs", Ch, "OpenAI", kHonoured, "", ""},
    {"prompt_logprobs", C | Ch, "vLLM", kHonoured, "", ""},
    {"return_tokens_as_token_ids", C | Ch, "vLLM", kHonoured, "", ""},
    {"skip_special_tokens", C | Ch, "vLLM", kHonoured, "", ""},
    {"spaces_between_special_tokens", C | Ch, "vLLM", kRefused, "",
     "special tokens are rendered as the tokenizer decodes them (Hugging Face fast tokenizers' "
     "behaviour); use skip_special_tokens"},
    {"return_token_strs", T, "vLLM", kHonoured, "", ""},
    {"parse_special", T, "llmserve", kHonoured, "", ""},
    {"response_format", C | Ch, "OpenAI", kHonoured, "", ""},
    {"modalities", Ch, "OpenAI", kRefused, R"(["text"])", "this server produces text only"},
    {"audio", Ch, "OpenAI", kRefused, "", "this server produces text only"},
    {"prediction", Ch, "OpenAI", kRefused, "", "predicted outputs are not implemented"},
    {"reasoning_effort", Ch, "OpenAI", kRefused, "",
     "there is no reasoning-effort control; pass template variables in 'chat_template_kwargs' "
     "(e.g. {\"enable_thinking\": false})"},
    {"verbosity", Ch, "OpenAI", kRefused, "", "there is no verbosity control"},
    {"web_search_options", Ch, "OpenAI", kRefused, "", "this server has no web search"},
    // --- structured outputs (server/structured_output_request.h) -----------------------------
    {"guided_json", C | Ch, "vLLM", kHonoured, "", ""},
    {"guided_regex", C | Ch, "vLLM", kHonoured, "", ""},
    {"guided_choice", C | Ch, "vLLM", kHonoured, "", ""},
    {"guided_grammar", C | Ch, "vLLM", kHonoured, "", ""},
    {"guided_decoding_backend", C | Ch, "vLLM", kRefused, R"("auto")",
     "there is one structured-output backend, llmserve's own (src/structured_output)"},
    {"guided_whitespace_pattern", C | Ch, "vLLM", kHonoured, "", ""},
    {"structured_outputs", C | Ch, "vLLM", kHonoured, "", ""},
    {"grammar", C | Ch, "llama.cpp", kHonoured, "", ""},
    {"json_schema", C | Ch, "llama.cpp", kHonoured, "", ""},
    // --- caching, identity, bookkeeping -----------------------------------------------------
    {"cache_salt", C | Ch, "vLLM", kHonoured, "", ""},
    {"prompt_cache_key", C | Ch, "OpenAI", kHonoured, "", ""},
    {"cache_prompt", C | Ch, "llama.cpp", kHonoured, "", ""},
    {"user", C | Ch, "OpenAI", kHonoured, "", ""},
    {"safety_identifier", C | Ch, "OpenAI", kHonoured, "", ""},
    {"request_id", C | Ch, "vLLM", kRefused, "",
     "send the id in the X-Request-Id header (the response id is cmpl-<X-Request-Id>)"},
    {"store", Ch, "OpenAI", kRefused, "false", "this server stores no completions"},
    {"metadata", Ch, "OpenAI", kRefused, "{}", "this server stores no completions to tag"},
    {"service_tier", Ch, "OpenAI", kRefused, R"("auto"|"default")",
     "this server has one service tier"},
    {"kv_transfer_params", C | Ch, "vLLM", kRefused, "",
     "disaggregated prefill (KV transfer) is not implemented"},
    {"vllm_xargs", C | Ch, "vLLM", kRefused, "", "there are no custom extensions to pass them to"},
    // --- llama.cpp sampler spellings --------------------------------------------------------
    {"n_probs", C | Ch, "llama.cpp", kRefused, "0", "use 'logprobs' (and 'top_logprobs' in chat)"},
    {"repeat_penalty", C | Ch, "llama.cpp", kRefused, "1",
     "use 'repetition_penalty' (applied over the whole prompt and output, vLLM's rule, not "
     "llama.cpp's last repeat_last_n tokens)"},
    {"typical_p", C | Ch, "llama.cpp", kRefused, "1", "locally typical sampling is not implemented"},
    {"mirostat", C | Ch, "llama.cpp", kRefused, "0", "Mirostat sampling is not implemented"},
    {"samplers", C | Ch, "llama.cpp", kRefused, "",
     "the sampler order is fixed (vLLM V1's; docs/api.md)"},
    {"repeat_last_n", C | Ch, "llama.cpp", kRefused, "",
     "'repetition_penalty' applies over the whole prompt and output"},
    {"dry_multiplier", C | Ch, "llama.cpp", kRefused, "0", "DRY sampling is not implemented"},
    {"xtc_probability", C | Ch, "llama.cpp", kRefused, "0", "XTC sampling is not implemented"},
    {"top_n_sigma", C | Ch, "llama.cpp", kRefused, "-1", "top-n-sigma sampling is not implemented"},
    {"dynatemp_range", C | Ch, "llama.cpp", kRefused, "0",
     "dynamic temperature is not implemented"},
    {"n_keep", C | Ch, "llama.cpp", kRefused, "0",
     "a prompt is never shifted out of the context; see 'truncate_prompt_tokens'"},
    {"id_slot", C | Ch, "llama.cpp", kRefused, "-1", "there are no slots to pin a request to"},
    {"t_max_predict_ms", C | Ch, "llama.cpp", kRefused, "0",
     "there is no time limit on generation; bound it with 'max_tokens'"},
    {"post_sampling_probs", C | Ch, "llama.cpp", kRefused, "false",
     "logprobs are of the raw logits (after logit_bias); see 'logprobs'"},
    {"return_token_ids", C | Ch, "vLLM", kHonoured, "", ""},
};

/// "/v1/completions and /v1/chat/completions" for a field's endpoint bits.
std::string endpoint_paths(uint8_t endpoints) {
  std::vector<std::string_view> paths;
  if (endpoints & C) paths.push_back("/v1/completions");
  if (endpoints & Ch) paths.push_back("/v1/chat/completions");
  if (endpoints & T) paths.push_back("/tokenize");
  if (endpoints & D) paths.push_back("/detokenize");
  std::string out;
  for (size_t i = 0; i < paths.size(); ++i)
    out += fmt::format("{}{}", i == 0 ? "" : i + 1 == paths.size() ? " and " : ", ", paths[i]);
  return out;
}

/// A field name as errors and logs show it: at most 128 bytes (a 7 MB key must not come back
/// twice in a 14 MB error body).
std::string shown_name(const std::string& name) {
  return name.size() <= 128 ? name : name.substr(0, 125) + "...";
}

ApiError unknown_field(const std::string& full_name, Endpoint endpoint) {
  const std::string name = shown_name(full_name);
  std::string hint;
  if (const RequestField* f = find_request_field(full_name)) {
    hint = fmt::format(" ({} is a field of {} only)", name, endpoint_paths(f->endpoints));
  } else if (full_name.size() <= 64) {  // longer names are no typo of ours
    // The closest field of this endpoint within a third of the name's length.
    size_t best = std::max<size_t>(2, name.size() / 3) + 1;
    std::string_view closest;
    for (const RequestField& f : kFields) {
      if (!(f.endpoints & endpoint)) continue;
      const size_t d = edit_distance(name, f.name);
      if (d < best) best = d, closest = f.name;
    }
    if (!closest.empty()) hint = fmt::format(" (did you mean '{}'?)", closest);
  }
  return bad_request(fmt::format("Unrecognized request argument supplied: {}{}", name, hint),
                     name);
}

std::string describe(const json& v) {
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return text;
}

/// Whether `v` equals one of the '|'-separated JSON texts of `neutral` (numbers compare by
/// value: 1 == 1.0).
bool is_neutral(const json& v, std::string_view neutral) {
  while (!neutral.empty()) {
    const size_t bar = neutral.find('|');
    const std::string_view one = neutral.substr(0, bar);
    if (json::parse(one) == v) return true;
    neutral = bar == std::string_view::npos ? std::string_view() : neutral.substr(bar + 1);
  }
  return false;
}

ApiError refused(const RequestField& f, const json& v) {
  if (f.neutral.empty())
    return bad_request(fmt::format("'{}' is not supported: {}", f.name, f.why),
                       std::string(f.name));
  std::string accepted(f.neutral);
  std::replace(accepted.begin(), accepted.end(), '|', '/');
  return bad_request(fmt::format("'{}' = {} is not supported: {} (only {} is accepted, which "
                                 "asks for nothing)",
                                 f.name, describe(v), f.why, accepted),
                     std::string(f.name));
}

}  // namespace

std::span<const RequestField> request_fields() { return kFields; }

const RequestField* find_request_field(std::string_view name) {
  for (const RequestField& f : kFields)
    if (f.name == name) return &f;
  return nullptr;
}

std::optional<ApiError> check_request_fields(const json& body, Endpoint endpoint,
                                             bool ignore_unknown,
                                             std::vector<std::string>* ignored) {
  for (auto it = body.begin(); it != body.end(); ++it) {
    const RequestField* f = find_request_field(it.key());
    // A field we know, sent to an endpoint it does not belong to, is a mistake to report even
    // with --ignore-unknown-fields (which is for vendor extras we have never heard of).
    if (f && !(f->endpoints & endpoint)) return unknown_field(it.key(), endpoint);
    if (!f) {
      if (!ignore_unknown) return unknown_field(it.key(), endpoint);
      if (ignored) ignored->push_back(shown_name(it.key()));
      continue;
    }
    const json& v = it.value();
    if (v.is_null()) continue;  // null always means "the default"
    if (f->fate == FieldFate::kRefused && !is_neutral(v, f->neutral)) return refused(*f, v);
  }
  return std::nullopt;
}

std::optional<ApiError> check_stream_options_keys(const json& so) {
  for (auto it = so.begin(); it != so.end(); ++it)
    if (it.key() != "include_usage" && it.key() != "continuous_usage_stats")
      return bad_request(fmt::format("Unrecognized request argument supplied: stream_options.{} "
                                     "(stream_options takes include_usage and "
                                     "continuous_usage_stats)",
                                     it.key()),
                         "stream_options");
  return std::nullopt;
}

}  // namespace llmserve
