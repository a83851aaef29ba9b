#include "server/openai_serving.h"

#include <algorithm>
#include <set>
#include <utility>

#include <fmt/format.h>
#include <spdlog/spdlog.h>

#include "common/timing.h"
#include "server/engine_bridge.h"
#include "server/tool_parsers/tool_parser_registry.h"
#include "server/generation.h"
#include "server/log_escape.h"
#include "server/request_policy.h"
#include "server/protocol.h"
#include "server/responses.h"
#include "server/sse.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {

using nlohmann::json;

namespace {

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

/// The X-Request-Id of the HTTP request this thread serves ("" outside the HTTP server).
std::string_view current_request_id() {
  const RequestRecord* rec = current_request_record();
  return rec ? std::string_view(rec->request_id) : std::string_view();
}

}  // namespace

void set_error_response(const ApiError& error, httplib::Response* res) {
  res->status = error.http_status;
  res->set_content(dump(error.to_json()), "application/json");
}

OpenAIServing::OpenAIServing(AsyncEngine& engine, ServerMetrics& metrics,
                             std::string served_model_name, ChatTemplate chat_template,
                             bool ignore_unknown_fields, ChatOutputConfig chat_output)
    : engine_(engine),
      metrics_(metrics),
      served_model_name_(std::move(served_model_name)),
      chat_template_(std::move(chat_template)),
      created_(unix_time_now()),
      ignore_unknown_fields_(ignore_unknown_fields),
      chat_output_(std::move(chat_output)) {
  tool_parser_ = chat_output_.tool_call_parser;
  if (tool_parser_.empty())
    tool_parser_ = tool_parsers::detect_tool_parser(chat_template_.source()).value_or("");
}

std::optional<ApiError> OpenAIServing::check_fields(const json& body, uint8_t endpoint,
                                                    httplib::Response* res) {
  std::vector<std::string> ignored;
  if (auto err = check_request_fields(body, static_cast<Endpoint>(endpoint),
                                      ignore_unknown_fields_, &ignored))
    return err;
  if (ignored.empty()) return std::nullopt;
  // The header lists the names (commas inside a name escaped as \x2c), at most ~4 KiB of
  // them (clients cap header lines at 8-64 KiB), then "... (+N more)".
  constexpr size_t kMaxHeaderBytes = 4096;
  std::string names;
  size_t listed = 0;
  for (const std::string& name : ignored) {
    std::string shown = escape_for_log(name);
    for (size_t at; (at = shown.find(',')) != std::string::npos;) shown.replace(at, 1, "\\x2c");
    if (names.size() + shown.size() + 2 <= kMaxHeaderBytes) {
      names += (names.empty() ? "" : ", ") + shown;
      ++listed;
    }
    std::lock_guard<std::mutex> lock(warned_mu_);
    if (warned_fields_.size() < 1000 && warned_fields_.insert(name).second)
      spdlog::warn("ignoring unknown request field '{}' (--ignore-unknown-fields; logged once "
                   "per name)", escape_for_log(name));
  }
  if (listed < ignored.size()) names += fmt::format(", ... (+{} more)", ignored.size() - listed);
  res->set_header("X-LLMServe-Ignored-Fields", names);
  return std::nullopt;
}

std::optional<ApiError> OpenAIServing::chat_prompt_ids(const std::string& raw_body,
                                                       const std::vector<ChatMessage>& messages,
                                                       bool add_special,
                                                       std::vector<int32_t>* ids,
                                                       std::string* rendered) const {
  // Parsed again keeping key order: tool schemas and message fields reach tojson as sent.
  const nlohmann::ordered_json body =
      nlohmann::ordered_json::parse(raw_body, nullptr, /*allow_exceptions=*/false);
  if (body.is_discarded() || !body.is_object()) return bad_request("invalid JSON body");
  ChatTemplateInputs in;
  if (auto err = read_chat_template_inputs(body, messages, &in)) return err;
  const Tokenizer& tok = engine_.engine().tokenizer();
  if (tok.bos_id() >= 0) in.bos_token = tok.piece(tok.bos_id());
  if (tok.eos_id() >= 0) in.eos_token = tok.piece(tok.eos_id());
  Expected<std::string> text = render_chat(chat_template_, in);
  if (!text.ok()) return bad_request(text.status().message());  // the template's own words
  EncodeOptions opt;
  opt.add_special = add_special;
  opt.parse_special = true;  // the template's own special tokens (<|im_start|>, <s>, ...)
  *ids = tok.encode(*text, opt);
  if (rendered) *rendered = std::move(*text);
  return std::nullopt;
}

std::optional<ApiError> OpenAIServing::check_model(const std::optional<std::string>& model) const {
  if (!model || *model == served_model_name_) return std::nullopt;
  return not_found(fmt::format("The model `{}` does not exist. This server serves `{}`.", *model,
                               served_model_name_),
                   "model");
}

std::optional<ApiError> OpenAIServing::check_model_field(const json& body) const {
  const auto it = body.find("model");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_string()) return bad_request("'model' must be a string", "model");
  return check_model(it->get<std::string>());
}

int32_t OpenAIServing::context_room(size_t prompt_len) const {
  // Like vLLM: without max_tokens a reply may use the rest of the context window, here also
  // capped by what the whole KV pool can hold. At least 1 (a too-long prompt is then
  // rejected by the engine's length check).
  const LLMEngine& e = engine_.engine();
  const int64_t pool_blocks = e.config().cache.num_kv_blocks;
  // The longest total the pool can hold (LLMEngine::kv_blocks_needed grows with the total; with
  // a sliding window in every layer it stops growing at the window plus one step).
  int64_t limit = e.max_model_len();
  if (pool_blocks > 0 && e.kv_blocks_needed(limit) > pool_blocks) {
    int64_t lo = 0, hi = limit;  // kv_blocks_needed(lo) <= pool_blocks < kv_blocks_needed(hi)
    while (hi - lo > 1) {
      const int64_t mid = lo + (hi - lo) / 2;
      (e.kv_blocks_needed(mid) <= pool_blocks ? lo : hi) = mid;
    }
    limit = lo;
  }
  return static_cast<int32_t>(std::max<int64_t>(limit - static_cast<int64_t>(prompt_len), 1));
}

std::optional<ApiError> OpenAIServing::finish_params(const GenerationOptions& options,
                                                     const std::vector<int32_t>& prompt_ids,
                                                     const char* prompt_param,
                                                     SamplingParams* params) const {
  const LLMEngine& e = engine_.engine();
  const int64_t n = static_cast<int64_t>(prompt_ids.size());
  // Without max_tokens: the rest of the context, or the generation config's max_new_tokens
  // when smaller (vLLM's rule).
  int32_t room = context_room(prompt_ids.size());
  if (const std::optional<int32_t> d = e.default_max_tokens(); d && *d > 0) room = std::min(room, *d);
  params->max_tokens = options.max_tokens.value_or(room);
  const int32_t vocab = e.tokenizer().vocab_size();
  Status st = params->validate(vocab);
  if (!st.ok()) {
    ApiError err = api_error_from_status(st);
    if (err.param == "max_tokens" && options.max_tokens_param != "max_tokens") {
      err.param = options.max_tokens_param;  // the field the client actually sent
      if (err.message.rfind("max_tokens", 0) == 0)
        err.message.replace(0, std::string_view("max_tokens").size(), options.max_tokens_param);
    }
    return err;
  }
  if (options.top_k_sent && params->top_k > vocab)
    return bad_request(fmt::format("'top_k' = {} is larger than the vocabulary ({} tokens); "
                                   "use -1 to disable top-k",
                                   params->top_k, vocab),
                       "top_k");
  if (n == 0)
    return bad_request(fmt::format("'{}' is empty after tokenization (0 tokens)", prompt_param),
                       prompt_param);
  for (size_t i = 0; i < prompt_ids.size(); ++i)
    if (prompt_ids[i] < 0 || prompt_ids[i] >= vocab)
      return bad_request(fmt::format("prompt token id {} at position {} is outside the "
                                     "vocabulary [0, {})",
                                     prompt_ids[i], i, vocab),
                         prompt_param);
  if (options.cache_salt && !e.config().cache.enable_prefix_caching)
    return bad_request("'cache_salt' has no effect: this server runs with "
                       "--no-enable-prefix-caching, so no KV block is ever shared",
                       "cache_salt");
  if (options.priority != 0 && e.config().scheduler.policy != SchedulingPolicy::kPriority)
    return bad_request(fmt::format("'priority' = {} has no effect: this server schedules first "
                                   "come, first served (start it with --scheduling-policy "
                                   "priority), as vLLM refuses it",
                                   options.priority),
                       "priority");
  if (params->allowed_token_ids.empty() && params->min_tokens > 0) {
    // While min_tokens masks EOS and the stop tokens, some token must remain.
    std::set<int32_t> masked(params->stop_token_ids.begin(), params->stop_token_ids.end());
    if (!params->ignore_eos && e.tokenizer().eos_id() >= 0) masked.insert(e.tokenizer().eos_id());
    if (static_cast<int64_t>(masked.size()) >= vocab)
      return bad_request("'stop_token_ids' (with EOS) cover the whole vocabulary, which "
                         "'min_tokens' forbids: no token could be generated",
                         "stop_token_ids");
  }
  if (!params->allowed_token_ids.empty() && params->min_tokens > 0) {
    // While min_tokens masks EOS and the stop tokens, some allowed token must remain.
    const int32_t eos = e.tokenizer().eos_id();
    const bool any_left = std::any_of(
        params->allowed_token_ids.begin(), params->allowed_token_ids.end(), [&](int32_t id) {
          const bool stops = (id == eos && !params->ignore_eos) ||
                             std::find(params->stop_token_ids.begin(),
                                       params->stop_token_ids.end(),
                                       id) != params->stop_token_ids.end();
          return !stops;
        });
    if (!any_left)
      return bad_request("'allowed_token_ids' holds only EOS / stop tokens, which 'min_tokens' "
                         "forbids: no token could be generated",
                         "allowed_token_ids");
  }
  const int64_t max_len = e.max_model_len();
  // A prompt of max_model_len tokens leaves no room for the one token every request makes.
  if (n >= max_len)
    return bad_request(fmt::format("the prompt has {} tokens, but this model's maximum context "
                                   "length is {} tokens and at least 1 must be left for the "
                                   "completion (at most {} prompt tokens)",
                                   n, max_len, max_len - 1),
                       prompt_param);
  if (n + params->max_tokens > max_len)
    return bad_request(fmt::format("this model's maximum context length is {} tokens; the "
                                   "request asks for {} tokens ({} in the prompt, {} for "
                                   "max_tokens)",
                                   max_len, n + params->max_tokens, n, params->max_tokens),
                       options.max_tokens ? options.max_tokens_param.c_str() : prompt_param);
  const int64_t block_size = e.config().cache.block_size;
  const int64_t pool_blocks = e.config().cache.num_kv_blocks;
  if (block_size > 0 && pool_blocks > 0) {
    const int64_t need = e.kv_blocks_needed(n + params->max_tokens);
    if (need > pool_blocks)
      return bad_request(fmt::format("the request needs {} tokens of KV cache ({} blocks of {} at once{}), "
                                     "more than the whole pool of {} blocks ({} in the prompt, "
                                     "{} for max_tokens)",
                                     n + params->max_tokens, need, block_size,
                                     e.config().scheduler.sliding_window > 0 && !e.config().scheduler.hybrid_kv
                                         ? ": the sliding window plus one step of up to --max-num-batched-tokens"
                                         : "",
                                     pool_blocks, n, params->max_tokens),
                         options.max_tokens ? options.max_tokens_param.c_str() : prompt_param);
  }
  return std::nullopt;
}

namespace {

/// vLLM's truncate_prompt_tokens: keeps the last N tokens (-1 = max_model_len). True when
/// tokens were dropped. N above max_model_len is a 400 (vLLM's rule).
std::optional<ApiError> truncate_prompt(const GenerationOptions& options, int64_t max_model_len,
                                        std::vector<int32_t>* ids, bool* truncated) {
  *truncated = false;
  if (!options.truncate_prompt_tokens) return std::nullopt;
  int64_t keep = *options.truncate_prompt_tokens;
  if (keep == -1) keep = max_model_len;
  if (keep > max_model_len)
    return bad_request(fmt::format("'truncate_prompt_tokens' = {} is greater than "
                                   "max_model_len ({}); select a smaller truncation size",
                                   keep, max_model_len),
                       "truncate_prompt_tokens");
  if (static_cast<int64_t>(ids->size()) > keep) {
    ids->erase(ids->begin(), ids->end() - keep);
    *truncated = true;
  }
  return std::nullopt;
}

}  // namespace

void OpenAIServing::completions(const httplib::Request& req, httplib::Response* res,
                                const CancelCheck& should_cancel) {
  const double arrival_time = now_seconds();  // before parsing and tokenizing
  json body;
  CompletionRequest parsed;
  parsed.options.params = engine_.engine().default_sampling_params();
  if (auto err = parse_json_object(req.body, &body)) return set_error_response(*err, res);
  if (auto err = check_fields(body, kEndpointCompletions, res))
    return set_error_response(*err, res);
  if (auto err = parse_completion_request(body, &parsed)) return set_error_response(*err, res);
  if (auto err = check_model(parsed.options.model)) return set_error_response(*err, res);

  Generation gen;
  gen.meta = {ApiKind::kCompletion, make_response_id(ApiKind::kCompletion, current_request_id()), unix_time_now(),
              served_model_name_};
  gen.request.arrival_time = arrival_time;
  gen.request.prompt_token_ids =
      parsed.prompt_text
          ? engine_.engine().tokenizer().encode(*parsed.prompt_text,
                                                parsed.options.add_special_tokens)
          : std::move(parsed.prompt_token_ids);
  bool truncated = false;
  if (auto err = truncate_prompt(parsed.options, engine_.engine().max_model_len(),
                                 &gen.request.prompt_token_ids, &truncated))
    return set_error_response(*err, res);
  gen.request.params = std::move(parsed.options.params);
  gen.request.priority = parsed.options.priority;
  gen.request.cache_salt = parsed.options.cache_salt.value_or("");
  gen.request.use_prefix_cache = parsed.options.cache_prompt;
  if (auto err = finish_params(parsed.options, gen.request.prompt_token_ids, "prompt",
                               &gen.request.params))
    return set_error_response(*err, res);
  if (auto err = prepare_output(req.body, nullptr, &gen)) return set_error_response(*err, res);
  if (parsed.options.echo) {
    // The prompt as sent; a token-id (or truncated) prompt is detokenized like generated
    // text is rendered.
    if (parsed.prompt_text && !truncated) {
      gen.echo_text = std::move(*parsed.prompt_text);
      gen.echo_skips_special = true;
    } else {
      DecodeOptions opt;
      opt.skip_special_tokens = gen.request.params.skip_special_tokens;
      gen.echo_text = engine_.engine().tokenizer().decode(gen.request.prompt_token_ids, opt);
      gen.echo_skips_special = opt.skip_special_tokens;
    }
    gen.echo_logprobs = gen.request.params.logprobs >= 0;
  }
  set_output_options(parsed.options, &gen);
  generate(std::move(gen), res, should_cancel);
}

void OpenAIServing::chat_completions(const httplib::Request& req, httplib::Response* res,
                                     const CancelCheck& should_cancel) {
  const double arrival_time = now_seconds();
  json body;
  ChatCompletionRequest parsed;
  parsed.options.params = engine_.engine().default_sampling_params();
  if (auto err = parse_json_object(req.body, &body)) return set_error_response(*err, res);
  if (auto err = check_fields(body, kEndpointChat, res)) return set_error_response(*err, res);
  if (auto err = parse_chat_request(body, &parsed)) return set_error_response(*err, res);
  if (auto err = check_model(parsed.options.model)) return set_error_response(*err, res);

  Generation gen;
  gen.meta = {ApiKind::kChat, make_response_id(ApiKind::kChat, current_request_id()), unix_time_now(),
              served_model_name_};
  gen.request.arrival_time = arrival_time;
  // add_special_tokens (vLLM's default false for chat): the tokenizer's BOS/EOS around the
  // rendering, never a second BOS when the template wrote one.
  std::string rendered_prompt;
  if (auto err = chat_prompt_ids(req.body, parsed.messages, parsed.options.add_special_tokens,
                                 &gen.request.prompt_token_ids, &rendered_prompt))
    return set_error_response(*err, res);
  bool truncated = false;
  if (auto err = truncate_prompt(parsed.options, engine_.engine().max_model_len(),
                                 &gen.request.prompt_token_ids, &truncated))
    return set_error_response(*err, res);
  gen.request.params = std::move(parsed.options.params);
  gen.request.priority = parsed.options.priority;
  gen.request.cache_salt = parsed.options.cache_salt.value_or("");
  gen.request.use_prefix_cache = parsed.options.cache_prompt;
  if (auto err = finish_params(parsed.options, gen.request.prompt_token_ids, "messages",
                               &gen.request.params))
    return set_error_response(*err, res);
  if (auto err = prepare_output(req.body, &rendered_prompt, &gen))
    return set_error_response(*err, res);
  // vLLM's chat echo: the reply continues the last message when it has the reply's role.
  if (parsed.options.echo && parsed.messages.back().role == "assistant")
    gen.echo_text = parsed.messages.back().content;
  set_output_options(parsed.options, &gen);
  generate(std::move(gen), res, should_cancel);
}

void OpenAIServing::set_output_options(const GenerationOptions& options, Generation* gen) {
  gen->n = options.n;
  gen->stream = options.stream;
  gen->include_usage = options.include_usage;
  gen->continuous_usage = options.continuous_usage_stats;
  gen->prompt_logprobs = options.prompt_logprobs;
  gen->tokens_as_ids = options.return_tokens_as_token_ids;
  gen->token_ids = options.return_token_ids;
  if (RequestRecord* rec = current_request_record()) {
    if (options.user) rec->user = *options.user;
    if (options.safety_identifier) rec->safety_identifier = *options.safety_identifier;
  }
}

void OpenAIServing::generate(Generation gen, httplib::Response* res,
                             const CancelCheck& should_cancel) {
  gen.num_prompt_tokens = static_cast<int32_t>(gen.request.prompt_token_ids.size());
  gen.logprobs = gen.request.params.logprobs >= 0;
  if (!gen.request.prompt_token_ids.empty())
    gen.last_prompt_token = gen.request.prompt_token_ids.back();
  // n samples are n engine requests of the same prompt (each checked like a single request).
  // With a seed, sample i uses seed + i (vLLM's choice): distinct but reproducible; without
  // one each gets the engine's per-request default seed.
  // n samples beyond what --max-num-seqs + --max-waiting admit at once could never all be
  // queued: a 400 naming n, not a 429 that no retry can pass.
  if (const int32_t max_waiting = engine_.max_waiting(); max_waiting > 0) {
    const int64_t room = int64_t{engine_.engine().config().scheduler.max_num_seqs} + max_waiting;
    if (gen.n > room)
      return set_error_response(
          bad_request(fmt::format("n = {} samples cannot be queued at once: this server holds "
                                  "at most {} requests (--max-num-seqs {} + --max-waiting {})",
                                  gen.n, room, engine_.engine().config().scheduler.max_num_seqs,
                                  max_waiting),
                      "n"),
          res);
  }
  std::vector<std::unique_ptr<InflightRequest>> inflight;
  for (int32_t i = 0; i < gen.n; ++i) {
    EngineRequest request = gen.request;
    request.external_id = gen.meta.id;
    if (request.params.seed) request.params.seed = *request.params.seed + uint64_t(i);
    Expected<std::shared_ptr<RequestStream>> stream = engine_.submit(std::move(request));
    // A rejected sample: the ones already submitted are aborted by ~InflightRequest.
    if (!stream.ok()) return set_error_response(api_error_from_status(stream.status()), res);
    inflight.push_back(
        std::make_unique<InflightRequest>(engine_, metrics_, std::move(*stream)));
  }
  if (gen.stream)
    respond_stream(std::move(gen), std::move(inflight), res, should_cancel);
  else
    respond_whole(std::move(gen), std::move(inflight), res, should_cancel);
}

namespace {

ApiError cancelled_error() {
  return ApiError{503, "ServiceUnavailableError",
                  "request aborted: the client disconnected or the server is shutting down",
                  std::nullopt};
}

}  // namespace

void OpenAIServing::respond_whole(Generation gen, InflightList inflight, httplib::Response* res,
                                  const CancelCheck& should_cancel) {
  // The samples run concurrently in the engine; reading them one after the other only orders
  // the waiting here. A cancel returns early and ~InflightRequest aborts every sample.
  std::vector<ChoiceResult> choices(inflight.size());
  Usage usage{gen.num_prompt_tokens, 0};
  const Tokenizer* tok = &engine_.engine().tokenizer();
  for (size_t i = 0; i < inflight.size(); ++i) {
    int32_t tokens = 0;
    FinishReason& finish_reason = choices[i].finish_reason;
    LogprobsBuilder logprobs(gen.meta.kind, tok, gen.last_prompt_token, gen.tokens_as_ids,
                             gen.request.params.skip_special_tokens);
    bool first_output = true;
    std::vector<int32_t> ids;
    while (finish_reason == FinishReason::kNone) {
      std::optional<RequestOutput> out = inflight[i]->next(should_cancel);
      if (!out) return set_error_response(cancelled_error(), res);
      if (first_output) {  // prompt logprobs come with the first output only
        first_output = false;
        if (gen.echo_logprobs)  // echo + logprobs: the prompt's entries come first
          logprobs.add_prompt(gen.request.prompt_token_ids, out->prompt_logprobs,
                              gen.request.params.logprobs, gen.echo_skips_special);
        if (gen.prompt_logprobs)
          choices[i].prompt_logprobs =
              prompt_logprobs_json(*tok, gen.request.prompt_token_ids, out->prompt_logprobs,
                                   *gen.prompt_logprobs, gen.tokens_as_ids);
      }
      choices[i].text += out->new_text;
      if (gen.token_ids) ids.insert(ids.end(), out->new_token_ids.begin(), out->new_token_ids.end());
      for (size_t k = 0; k < out->logprobs.size() && k < out->new_token_ids.size(); ++k)
        logprobs.add(out->new_token_ids[k], out->logprobs[k]);
      tokens = std::max(tokens, out->num_output_tokens);
      if (out->num_prompt_tokens > 0) usage.prompt_tokens = out->num_prompt_tokens;
      if (i == 0) usage.cached_tokens = std::max(usage.cached_tokens, out->num_cached_tokens);
      if (out->finished) finish_reason = out->finish_reason;
      if (out->finished && finish_reason == FinishReason::kNone)
        finish_reason = FinishReason::kAbort;
    }
    usage.completion_tokens += tokens;
    if (auto parser = make_chat_output_parser(gen.parsing)) {
      // The same parser as streaming, fed the whole text: both give the same message.
      parser->push(choices[i].text);
      parser->finish();
      tool_parsers::ChatOutput message = parser->result();
      choices[i].parsed = true;
      choices[i].reasoning = !gen.parsing.reasoning_parser.empty();
      choices[i].text = std::move(message.content);
      choices[i].reasoning_content = std::move(message.reasoning_content);
      for (const tool_parsers::ToolCall& call : message.tool_calls)
        choices[i].tool_calls.push_back(tool_parsers::to_openai_json(call));
      if (finish_reason == FinishReason::kStop && !message.tool_calls.empty())
        finish_reason = FinishReason::kToolCalls;
    }
    if (gen.echo_text) choices[i].text.insert(0, *gen.echo_text);
    if (gen.logprobs) choices[i].logprobs = logprobs.take();
    if (gen.token_ids) {
      choices[i].token_ids = ids;
      choices[i].prompt_token_ids = gen.request.prompt_token_ids;
    }
  }
  res->set_content(dump(full_response(gen.meta, choices, usage)), "application/json");
}

namespace {

/// State of one SSE response, shared with httplib's content provider.
struct StreamState {
  explicit StreamState(std::vector<std::unique_ptr<InflightRequest>> samples)
      : inflight(std::move(samples)) {}

  /// Writes every event of the stream; false when the client is gone (requests aborted).
  bool pump(httplib::DataSink& sink);
  void abort_all() {
    for (auto& r : inflight) r->abort();
  }

  std::vector<std::unique_ptr<InflightRequest>> inflight;  // one per choice index
  std::vector<LogprobsBuilder> logprobs;  // one per choice index when requested, else empty
  /// One per choice index when the reply is parsed (reasoning / tool calls), else empty.
  std::vector<std::unique_ptr<tool_parsers::ChatOutputParser>> parsers;
  ResponseMeta meta;
  bool include_usage = false;
  bool continuous_usage = false;  // running usage in every chunk (with include_usage)
  std::optional<std::string> echo_text;  // prefixed to each choice's first chunk
  /// echo + logprobs: the prompt, whose entries open each choice's logprobs.
  std::vector<int32_t> echo_prompt_ids;
  int32_t echo_logprobs_k = 0;
  bool echo_skips_special = true;  // Generation::echo_skips_special
  Usage usage;
  CancelCheck should_cancel;
};

/// Appends `more` to `d` (one chunk's delta when the last text and finish() both give some).
void append_delta(tool_parsers::ChatDelta& d, tool_parsers::ChatDelta more) {
  d.reasoning_content += more.reasoning_content;
  d.content += more.content;
  for (tool_parsers::ToolCallDelta& c : more.tool_calls) d.tool_calls.push_back(std::move(c));
}

bool StreamState::pump(httplib::DataSink& sink) {
  auto write = [&sink](std::string_view data) { return sink.write(data.data(), data.size()); };
  const auto cancel = [&] {
    return (should_cancel && should_cancel()) || (sink.is_writable && !sink.is_writable());
  };
  const int32_t n = static_cast<int32_t>(inflight.size());
  std::vector<int32_t> tokens(n, 0);
  // continuous_usage_stats: the totals so far ride in every chunk.
  const auto running = [&]() -> const Usage* {
    if (!continuous_usage) return nullptr;
    usage.completion_tokens = 0;
    for (int32_t t : tokens) usage.completion_tokens += t;
    return &usage;
  };
  for (int32_t i = 0; i < n; ++i)
    if (std::optional<nlohmann::json> open = opening_chunk(meta, include_usage, i, running())) {
      if (!write(sse_event(*open))) return false;  // ~InflightRequest aborts
    }
  // Outputs of the n samples are interleaved as they come: each sample is polled for a slice
  // of kStreamPollSeconds, and whether to give up is asked at least every kStreamPollSeconds.
  std::vector<uint8_t> done(n, 0);
  std::vector<uint8_t> echoed(n, echo_text ? 0 : 1);
  std::vector<uint8_t> prompt_logprobs_added(n, echo_prompt_ids.empty() ? 1 : 0);
  int32_t remaining = n;
  double last_cancel_check = now_seconds();
  while (remaining > 0) {
    bool got_any = false;
    for (int32_t i = 0; i < n; ++i) {
      if (done[i]) continue;
      std::optional<RequestOutput> out = inflight[i]->poll(kStreamPollSeconds / remaining);
      if (!out) continue;
      got_any = true;
      tokens[i] = std::max(tokens[i], out->num_output_tokens);
      if (!prompt_logprobs_added[i]) {
        logprobs[i].add_prompt(echo_prompt_ids, out->prompt_logprobs, echo_logprobs_k,
                               echo_skips_special);
        prompt_logprobs_added[i] = 1;
      }
      if (!logprobs.empty())
        for (size_t k = 0; k < out->logprobs.size() && k < out->new_token_ids.size(); ++k)
          logprobs[i].add(out->new_token_ids[k], out->logprobs[k]);
      if (out->num_prompt_tokens > 0) usage.prompt_tokens = out->num_prompt_tokens;
      if (i == 0) usage.cached_tokens = std::max(usage.cached_tokens, out->num_cached_tokens);
      if (out->finished || !out->new_text.empty()) {
        FinishReason reason = FinishReason::kNone;
        if (out->finished)
          reason = out->finish_reason == FinishReason::kNone ? FinishReason::kAbort
                                                             : out->finish_reason;
        // Logprobs of tokens whose text is still held back ride with the next chunk.
        nlohmann::json lp = logprobs.empty() ? nlohmann::json(nullptr) : logprobs[i].take();
        nlohmann::json chat_delta = nullptr;
        if (!parsers.empty()) {
          tool_parsers::ChatDelta d = parsers[i]->push(out->new_text);
          if (out->finished) append_delta(d, parsers[i]->finish());
          if (reason == FinishReason::kStop && parsers[i]->has_tool_calls())
            reason = FinishReason::kToolCalls;
          if (!echoed[i]) d.content.insert(0, *echo_text);
          echoed[i] = 1;
          chat_delta = chat_delta_json(d);
        } else if (!echoed[i]) {
          out->new_text.insert(0, *echo_text);
          echoed[i] = 1;
        }
        // A parser may hold the text back (a possible tool-call marker): no empty chunk then,
        // unless logprobs ride on it.
        const bool empty = chat_delta.is_object() && chat_delta.empty() &&
                           reason == FinishReason::kNone && (lp.is_null() || lp.empty() ||
                           (lp.contains("content") && lp["content"].empty()));
        if (!empty && !write(sse_event(delta_chunk(meta, out->new_text, reason, include_usage, i,
                                                   std::move(lp), running(),
                                                   std::move(chat_delta))))) {
          abort_all();
          return false;
        }
      }
      if (out->finished) {
        done[i] = 1;
        --remaining;
      }
    }
    const double now = now_seconds();
    if (remaining > 0 && (!got_any || now - last_cancel_check >= kStreamPollSeconds)) {
      last_cancel_check = now;
      if (cancel()) {
        abort_all();
        return false;
      }
    }
  }
  usage.completion_tokens = 0;
  for (int32_t t : tokens) usage.completion_tokens += t;
  if (include_usage && !write(sse_event(usage_chunk(meta, usage)))) return false;
  if (!write(kSseDone)) return false;
  sink.done();
  return true;
}

}  // namespace

void OpenAIServing::respond_stream(Generation gen, InflightList inflight, httplib::Response* res,
                                   const CancelCheck& should_cancel) {
  auto state = std::make_shared<StreamState>(std::move(inflight));
  state->meta = std::move(gen.meta);
  state->include_usage = gen.include_usage;
  state->continuous_usage = gen.continuous_usage;
  state->echo_text = std::move(gen.echo_text);
  if (gen.echo_logprobs) {
    state->echo_prompt_ids = gen.request.prompt_token_ids;
    state->echo_logprobs_k = gen.request.params.logprobs;
    state->echo_skips_special = gen.echo_skips_special;
  }
  if (gen.logprobs)
    for (int32_t i = 0; i < gen.n; ++i)
      state->logprobs.emplace_back(state->meta.kind, &engine_.engine().tokenizer(),
                                   gen.last_prompt_token, gen.tokens_as_ids,
                                   gen.request.params.skip_special_tokens);
  if (gen.parsing.active())
    for (int32_t i = 0; i < gen.n; ++i)
      state->parsers.push_back(make_chat_output_parser(gen.parsing));
  state->usage.prompt_tokens = gen.num_prompt_tokens;
  state->should_cancel = should_cancel;
  res->set_header("Cache-Control", "no-cache");
  // The provider runs on this thread after the handler returns. If httplib never calls it
  // (the client left before the headers went out), destroying `state` aborts the request.
  res->set_chunked_content_provider(
      "text/event-stream",
      [state](size_t /*offset*/, httplib::DataSink& sink) { return state->pump(sink); });
}

json OpenAIServing::model_card() const {
  return {{"id", served_model_name_},
          {"object", "model"},
          {"created", created_},
          {"owned_by", "llmserve"},
          {"root", served_model_name_},
          {"parent", nullptr},
          {"max_model_len", engine_.engine().max_model_len()}};
}

json OpenAIServing::models() const {
  return {{"object", "list"}, {"data", json::array({model_card()})}};
}

void OpenAIServing::model(const std::string& id, httplib::Response* res) const {
  if (auto err = check_model(id)) return set_error_response(*err, res);
  res->set_content(dump(model_card()), "application/json");
}

std::string OpenAIServing::metrics_page() const {
  return metrics_.render(engine_.stats(), served_model_name_);
}

}  // namespace llmserve

namespace llmserve {

void OpenAIServing::tokenize(const httplib::Request& req, httplib::Response* res) {
  json body;
  if (auto err = parse_json_object(req.body, &body)) return set_error_response(*err, res);
  if (auto err = check_fields(body, kEndpointTokenize, res)) return set_error_response(*err, res);
  if (auto err = check_model_field(body)) return set_error_response(*err, res);
  auto read_flag = [&](const char* name, bool fallback, bool* out) -> std::optional<ApiError> {
    *out = fallback;
    if (!body.contains(name) || body[name].is_null()) return std::nullopt;
    if (!body[name].is_boolean())
      return bad_request(fmt::format("'{}' must be a boolean", name), std::string(name));
    *out = body[name].get<bool>();
    return std::nullopt;
  };
  const Tokenizer& tok = engine_.engine().tokenizer();
  std::vector<int32_t> ids;
  const bool chat = body.contains("messages");
  if (chat == body.contains("prompt"))
    return set_error_response(
        bad_request("send exactly one of 'prompt' (text) and 'messages' (chat)", "prompt"), res);
  // Each form's own fields only: chat fields with a text prompt (or parse_special with
  // messages) would have no effect.
  for (const char* name : {"add_generation_prompt", "continue_final_message", "tools",
                           "documents", "chat_template_kwargs"})
    if (!chat && body.contains(name) && !body[name].is_null())
      return set_error_response(
          bad_request(fmt::format("'{}' applies to 'messages' only, not to a text 'prompt'", name),
                      std::string(name)),
          res);
  if (chat && body.contains("parse_special") && !body["parse_special"].is_null())
    return set_error_response(bad_request("'parse_special' applies to a text 'prompt' only (the "
                                          "rendered 'messages' always parse special tokens)",
                                          "parse_special"),
                              res);
  bool add_special = false, return_strs = false;
  if (auto err = read_flag("add_special_tokens", !chat, &add_special))
    return set_error_response(*err, res);
  if (auto err = read_flag("return_token_strs", false, &return_strs))
    return set_error_response(*err, res);
  if (chat) {
    std::vector<ChatMessage> messages;
    if (auto err = parse_messages(body, &messages)) return set_error_response(*err, res);
    if (auto err = chat_prompt_ids(req.body, messages, add_special, &ids))
      return set_error_response(*err, res);
  } else {
    if (!body["prompt"].is_string())
      return set_error_response(bad_request("'prompt' must be a string", "prompt"), res);
    bool parse_special = false;
    if (auto err = read_flag("parse_special", false, &parse_special))
      return set_error_response(*err, res);
    EncodeOptions opt;
    opt.add_special = add_special;
    opt.parse_special = parse_special;
    ids = tok.encode(body["prompt"].get<std::string>(), opt);
  }
  json out = {{"count", ids.size()},
              {"max_model_len", engine_.engine().max_model_len()},
              {"tokens", ids},
              {"token_strs", nullptr}};
  if (return_strs) {
    json strs = json::array();
    for (int32_t id : ids) strs.push_back(tok.piece(id));
    out["token_strs"] = std::move(strs);
  }
  res->set_content(dump(out), "application/json");
}

void OpenAIServing::detokenize(const httplib::Request& req, httplib::Response* res) {
  json body;
  if (auto err = parse_json_object(req.body, &body)) return set_error_response(*err, res);
  if (auto err = check_fields(body, kEndpointDetokenize, res))
    return set_error_response(*err, res);
  if (auto err = check_model_field(body)) return set_error_response(*err, res);
  if (!body.contains("tokens") || !body["tokens"].is_array())
    return set_error_response(bad_request("'tokens' must be a list of token ids", "tokens"), res);
  const Tokenizer& tok = engine_.engine().tokenizer();
  std::vector<int32_t> ids;
  for (size_t i = 0; i < body["tokens"].size(); ++i) {
    const json& v = body["tokens"][i];
    if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() >= tok.vocab_size())
      return set_error_response(
          bad_request(fmt::format("'tokens[{}]' = {} is not a token id of this model (0..{})", i,
                                  v.dump(), tok.vocab_size() - 1),
                      "tokens"),
          res);
    ids.push_back(v.get<int32_t>());
  }
  DecodeOptions opt;
  opt.skip_special_tokens = false;  // vLLM's /detokenize keeps special tokens
  res->set_content(dump(json{{"prompt", tok.decode(ids, opt)}}), "application/json");
}

}  // namespace llmserve
