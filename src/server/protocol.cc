#include "server/protocol.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <set>

#include <fmt/format.h>

#include "server/request_policy.h"

namespace llmserve {

using nlohmann::json;

namespace {

/// `string "abc"`, `number 1.5`, `array [1,2]` (values cut at 60 characters) for messages.
std::string describe(const json& v) {
  if (v.is_null()) return "null";
  std::string text = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (text.size() > 60) text = text.substr(0, 57) + "...";
  return fmt::format("{} {}", v.type_name(), text);
}

ApiError type_error(const std::string& field, const char* expected, const json& v,
                    const std::string& param) {
  return bad_request(fmt::format("'{}' must be {}, got {}", field, expected, describe(v)),
                     param);
}

/// The field's value, or nullptr when absent or null (both mean "use the default").
const json* find_field(const json& body, const char* name) {
  auto it = body.find(name);
  if (it == body.end() || it->is_null()) return nullptr;
  return &*it;
}

/// An integer that fits int64 (integral floats such as 16.0 accepted); nullopt otherwise.
std::optional<int64_t> as_int64(const json& v) {
  if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    if (u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) return std::nullopt;
    return static_cast<int64_t>(u);
  }
  if (v.is_number_integer()) return v.get<int64_t>();
  if (v.is_number_float()) {
    const double d = v.get<double>();
    if (std::isfinite(d) && d == std::floor(d) && std::fabs(d) < 9.0e15)
      return static_cast<int64_t>(d);
  }
  return std::nullopt;
}

std::optional<ApiError> read_int32(const json& body, const char* name,
                                   std::optional<int32_t>* out) {
  const json* v = find_field(body, name);
  if (!v) return std::nullopt;
  std::optional<int64_t> i = as_int64(*v);
  if (!i) return type_error(name, "an integer", *v, name);
  if (*i < std::numeric_limits<int32_t>::min() || *i > std::numeric_limits<int32_t>::max())
    return bad_request(fmt::format("'{}' = {} is out of range", name, *i), name);
  *out = static_cast<int32_t>(*i);
  return std::nullopt;
}

std::optional<ApiError> read_float(const json& body, const char* name, float* out) {
  const json* v = find_field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_number()) return type_error(name, "a number", *v, name);
  const double d = v->get<double>();
  *out = static_cast<float>(d);  // out-of-range -> inf, rejected by validate()
  if (std::isfinite(d) && !std::isfinite(*out))  // 1e300 would be reported as inf
    return bad_request(fmt::format("'{}' = {} is too large for a 32-bit float (at most {})", name,
                                   d, std::numeric_limits<float>::max()),
                       name);
  if (d != 0 && *out == 0)  // 1e-50 would otherwise be read, and reported, as 0
    return bad_request(fmt::format("'{}' = {} is too small for a 32-bit float (the smallest "
                                   "magnitude it holds is {})",
                                   name, d, std::numeric_limits<float>::denorm_min()),
                       name);
  // The ranges validate() checks end at whole numbers (0, 1, 2, -2): a double just beyond one
  // (2.0000000001) rounds onto it and would pass. Step to the float on the double's side, so
  // the value keeps which side of the bound it is on (and 0.9999999999 stays below 1).
  if (std::isfinite(*out) && static_cast<double>(*out) != d && std::trunc(*out) == *out)
    *out = std::nextafter(*out, d > *out ? std::numeric_limits<float>::infinity()
                                         : -std::numeric_limits<float>::infinity());
  return std::nullopt;
}

/// The number as sent against a documented range, `(lo, hi]` when lo_open else `[lo, hi]`:
/// validate() checks the float it rounds to, and would name that (2.0000002 for 2.0000000001).
std::optional<ApiError> check_range(const json& body, const char* name, double lo, double hi,
                                    bool lo_open) {
  const json* v = find_field(body, name);
  if (!v || !v->is_number()) return std::nullopt;
  const double d = v->get<double>();
  if ((lo_open ? d > lo : d >= lo) && d <= hi) return std::nullopt;
  return bad_request(fmt::format("'{}' must be in {}{}, {}], got {}", name, lo_open ? "(" : "[",
                                 lo, hi, d),
                     name);
}

/// `param` names the field in errors when it differs from `name` (nested fields).
std::optional<ApiError> read_bool(const json& body, const char* name, bool* out,
                                  const char* param = nullptr) {
  const json* v = find_field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_boolean()) return type_error(name, "a boolean", *v, param ? param : name);
  *out = v->get<bool>();
  return std::nullopt;
}

/// A list of int32 token ids (each element checked).
std::optional<ApiError> read_token_ids(const json& list, const std::string& field,
                                       const std::string& param, std::vector<int32_t>* out) {
  out->clear();
  out->reserve(list.size());
  for (size_t i = 0; i < list.size(); ++i) {
    std::optional<int64_t> id = as_int64(list[i]);
    if (!id || *id < std::numeric_limits<int32_t>::min() ||
        *id > std::numeric_limits<int32_t>::max())
      return type_error(fmt::format("{}[{}]", field, i), "a token id (integer)", list[i], param);
    out->push_back(static_cast<int32_t>(*id));
  }
  return std::nullopt;
}

std::optional<ApiError> read_stop(const json& body, std::vector<std::string>* out) {
  const json* v = find_field(body, "stop");
  if (!v) return std::nullopt;
  if (v->is_string()) {
    out->assign(1, v->get<std::string>());
    return std::nullopt;
  }
  if (!v->is_array()) return type_error("stop", "a string or a list of strings", *v, "stop");
  if (v->size() > kMaxStopStrings)
    return bad_request(fmt::format("'stop' may hold at most {} strings, got {}", kMaxStopStrings,
                                   v->size()),
                       "stop");
  for (size_t i = 0; i < v->size(); ++i) {
    const json& s = (*v)[i];
    if (!s.is_string()) return type_error(fmt::format("stop[{}]", i), "a string", s, "stop");
    out->push_back(s.get<std::string>());
  }
  return std::nullopt;
}

/// "echo": a boolean. Completions with logprobs return the prompt tokens' logprobs too
/// (OpenAI/vLLM), so the engine is asked for prompt logprobs with at least the same k.
std::optional<ApiError> read_echo(const json& body, bool chat, GenerationOptions* out) {
  if (auto err = read_bool(body, "echo", &out->echo)) return err;
  SamplingParams& p = out->params;
  if (!chat && out->echo && p.logprobs >= 0)
    p.prompt_logprobs = std::max(p.prompt_logprobs, p.logprobs);
  return std::nullopt;
}

/// OpenAI's logit_bias: {"<token id>": bias}; ids as decimal strings (JSON keys), each once.
/// Ranges and the vocabulary are SamplingParams::validate's.
std::optional<ApiError> read_logit_bias(const json& body, SamplingParams* p) {
  const json* lb = find_field(body, "logit_bias");
  if (!lb) return std::nullopt;
  if (!lb->is_object())
    return type_error("logit_bias", "an object mapping token ids to biases", *lb, "logit_bias");
  // The count first: no per-entry work for a body of a million entries.
  if (lb->size() > kMaxLogitBiasEntries)
    return bad_request(fmt::format("'logit_bias' may hold at most {} entries (OpenAI's limit), "
                                   "got {}", kMaxLogitBiasEntries, lb->size()),
                       "logit_bias");
  std::set<int32_t> seen;
  for (auto it = lb->begin(); it != lb->end(); ++it) {
    const std::string& key = it.key();
    int64_t id = -1;
    const bool digits = !key.empty() && key.size() <= 10 &&
                        std::all_of(key.begin(), key.end(), [](char c) {
                          return c >= '0' && c <= '9';
                        });
    if (digits) id = std::stoll(key);
    if (!digits || id > std::numeric_limits<int32_t>::max())
      return bad_request(fmt::format("'logit_bias' keys must be token ids (decimal integers), "
                                     "got \"{}\"", key.substr(0, 40)),
                         "logit_bias");
    if (!it->is_number())
      return type_error(fmt::format("logit_bias[\"{}\"]", key), "a number", *it, "logit_bias");
    const auto tid = static_cast<int32_t>(id);
    if (!seen.insert(tid).second)
      return bad_request(fmt::format("'logit_bias' lists token {} twice", tid), "logit_bias");
    p->logit_bias.emplace_back(tid, static_cast<float>(it->get<double>()));
  }
  return std::nullopt;
}

/// A string field (user, safety_identifier).
std::optional<ApiError> read_string(const json& body, const char* name,
                                    std::optional<std::string>* out) {
  const json* v = find_field(body, name);
  if (!v) return std::nullopt;
  if (!v->is_string()) return type_error(name, "a string", *v, name);
  *out = v->get<std::string>();
  return std::nullopt;
}

/// Completions: "logprobs": k (0..kMaxLogprobs; false/null = none). Chat: "logprobs": bool and
/// "top_logprobs": k (0..kMaxLogprobs, only with logprobs true).
std::optional<ApiError> read_logprobs(const json& body, bool chat, SamplingParams* p) {
  const json* lp = find_field(body, "logprobs");
  if (chat) {
    bool want = false;
    if (auto err = read_bool(body, "logprobs", &want)) return err;
    std::optional<int32_t> top;
    if (auto err = read_int32(body, "top_logprobs", &top)) return err;
    if (top && (*top < 0 || *top > kMaxLogprobs))
      return bad_request(fmt::format("'top_logprobs' must be between 0 and {}, got {}",
                                     kMaxLogprobs, *top),
                         "top_logprobs");
    if (top && *top > 0 && !want)
      return bad_request("'top_logprobs' requires 'logprobs' to be true", "top_logprobs");
    p->logprobs = want ? top.value_or(0) : -1;
    return std::nullopt;
  }
  if (!lp || (lp->is_boolean() && !lp->get<bool>())) return std::nullopt;
  std::optional<int32_t> k;
  if (auto err = read_int32(body, "logprobs", &k)) return err;
  if (*k < 0 || *k > kMaxLogprobs)
    return bad_request(
        fmt::format("'logprobs' must be between 0 and {}, got {}", kMaxLogprobs, *k), "logprobs");
  p->logprobs = *k;
  return std::nullopt;
}

std::optional<ApiError> read_options(const json& body, bool chat, GenerationOptions* out) {
  if (const json* model = find_field(body, "model")) {
    if (!model->is_string()) return type_error("model", "a string", *model, "model");
    out->model = model->get<std::string>();
  }
  SamplingParams& p = out->params;
  if (const json* t = find_field(body, "temperature")) {
    // OpenAI's range on the number as sent first (-1e-50 is below it, not a float problem).
    if (t->is_number() && !(t->get<double>() >= 0.0 && t->get<double>() <= kMaxApiTemperature))
      return bad_request(fmt::format("'temperature' must be between 0 and {} (OpenAI's range), "
                                     "got {}", kMaxApiTemperature, t->get<double>()),
                         "temperature");
    // (A double in the range rounds to a float in it; 1e400 overflows the double itself:
    // parse_json_object's error.)
    if (auto err = read_float(body, "temperature", &p.temperature)) return err;
  }
  if (auto err = check_range(body, "top_p", 0, 1, true)) return err;
  if (auto err = read_float(body, "top_p", &p.top_p)) return err;
  if (auto err = read_logprobs(body, chat, &p)) return err;
  if (auto err = check_range(body, "min_p", 0, 1, false)) return err;
  if (auto err = read_float(body, "min_p", &p.min_p)) return err;
  if (auto err = check_range(body, "presence_penalty", -2, 2, false)) return err;
  if (auto err = read_float(body, "presence_penalty", &p.presence_penalty)) return err;
  if (auto err = check_range(body, "frequency_penalty", -2, 2, false)) return err;
  if (auto err = read_float(body, "frequency_penalty", &p.frequency_penalty)) return err;
  // vLLM's repetition_penalty: > 0, 1 = off (CTRL's division of seen tokens' logits); checked
  // on the number as sent, as the ranges above.
  if (const json* r = find_field(body, "repetition_penalty"); r && r->is_number() && !(r->get<double>() > 0))
    return bad_request(fmt::format("'repetition_penalty' must be > 0 (1 = off), got {}", r->get<double>()),
                       "repetition_penalty");
  if (auto err = read_float(body, "repetition_penalty", &p.repetition_penalty)) return err;
  std::optional<int32_t> min_tokens;
  if (auto err = read_int32(body, "min_tokens", &min_tokens)) return err;
  if (min_tokens) p.min_tokens = *min_tokens;
  std::optional<int32_t> n;
  if (auto err = read_int32(body, "n", &n)) return err;
  if (n) {
    if (*n < 1 || *n > kMaxN)
      return bad_request(fmt::format("'n' must be between 1 and {}, got {}", kMaxN, *n), "n");
    out->n = *n;
  }
  std::optional<int32_t> top_k;
  if (auto err = read_int32(body, "top_k", &top_k)) return err;
  if (top_k) {
    p.top_k = *top_k;
    out->top_k_sent = true;
  }
  if (const json* seed = find_field(body, "seed")) {
    std::optional<int64_t> s = as_int64(*seed);
    if (!s) return type_error("seed", "an integer", *seed, "seed");
    p.seed = static_cast<uint64_t>(*s);
  }
  if (auto err = read_stop(body, &p.stop)) return err;
  if (const json* ids = find_field(body, "stop_token_ids")) {
    if (!ids->is_array())
      return type_error("stop_token_ids", "a list of token ids", *ids, "stop_token_ids");
    if (auto err = read_token_ids(*ids, "stop_token_ids", "stop_token_ids", &p.stop_token_ids))
      return err;
  }
  if (auto err = read_bool(body, "ignore_eos", &p.ignore_eos)) return err;
  if (auto err = read_bool(body, "skip_special_tokens", &p.skip_special_tokens)) return err;
  if (auto err = read_bool(body, "add_special_tokens", &out->add_special_tokens)) return err;
  if (const json* prio = find_field(body, "priority")) {
    std::optional<int64_t> v = as_int64(*prio);
    if (!v || *v < INT32_MIN || *v > INT32_MAX)
      return type_error("priority", "a 32-bit integer", *prio, "priority");
    out->priority = static_cast<int32_t>(*v);
  }
  if (auto err = read_string(body, "user", &out->user)) return err;
  if (auto err = read_string(body, "safety_identifier", &out->safety_identifier)) return err;
  if (auto err = read_string(body, "cache_salt", &out->cache_salt)) return err;
  if (out->cache_salt && out->cache_salt->empty())
    return bad_request("'cache_salt' must be a non-empty string", "cache_salt");
  if (auto err = read_string(body, "prompt_cache_key", &out->prompt_cache_key)) return err;
  if (auto err = read_bool(body, "cache_prompt", &out->cache_prompt)) return err;
  if (auto err = read_logit_bias(body, &p)) return err;
  if (const json* ids = find_field(body, "allowed_token_ids")) {
    if (!ids->is_array())
      return type_error("allowed_token_ids", "a list of token ids", *ids, "allowed_token_ids");
    if (ids->empty())
      return bad_request("'allowed_token_ids' must not be empty (it would allow no token)",
                         "allowed_token_ids");
    if (auto err = read_token_ids(*ids, "allowed_token_ids", "allowed_token_ids",
                                  &p.allowed_token_ids))
      return err;
  }
  if (auto err = read_bool(body, "include_stop_str_in_output", &p.include_stop_str_in_output))
    return err;
  if (auto err = read_bool(body, "return_tokens_as_token_ids", &out->return_tokens_as_token_ids))
    return err;
  if (auto err = read_bool(body, "return_token_ids", &out->return_token_ids)) return err;
  if (auto err = read_int32(body, "prompt_logprobs", &out->prompt_logprobs)) return err;
  if (out->prompt_logprobs) {
    if (*out->prompt_logprobs < 0 || *out->prompt_logprobs > kMaxLogprobs)
      return bad_request(fmt::format("'prompt_logprobs' must be between 0 and {}, got {}",
                                     kMaxLogprobs, *out->prompt_logprobs),
                         "prompt_logprobs");
    p.prompt_logprobs = std::max(p.prompt_logprobs, *out->prompt_logprobs);
  }
  if (auto err = read_int32(body, "truncate_prompt_tokens", &out->truncate_prompt_tokens))
    return err;
  if (out->truncate_prompt_tokens && *out->truncate_prompt_tokens < 1 &&
      *out->truncate_prompt_tokens != -1)
    return bad_request(fmt::format("'truncate_prompt_tokens' must be >= 1 (keep the last N "
                                   "prompt tokens) or -1 (max_model_len), got {}",
                                   *out->truncate_prompt_tokens),
                       "truncate_prompt_tokens");
  if (chat) {
    if (const json* ptc = find_field(body, "parallel_tool_calls"); ptc && !ptc->is_boolean())
      return type_error("parallel_tool_calls", "a boolean", *ptc, "parallel_tool_calls");
  }

  if (auto err = read_int32(body, "max_tokens", &out->max_tokens)) return err;
  if (chat) {
    std::optional<int32_t> max_completion_tokens;
    if (auto err = read_int32(body, "max_completion_tokens", &max_completion_tokens)) return err;
    if (max_completion_tokens) {
      out->max_tokens = max_completion_tokens;
      out->max_tokens_param = "max_completion_tokens";
    }
  }
  // llama.cpp's n_predict: max_tokens by another name (-1 = no limit but the context).
  std::optional<int32_t> n_predict;
  if (auto err = read_int32(body, "n_predict", &n_predict)) return err;
  if (n_predict) {
    if (*n_predict < -1 || *n_predict == 0)
      return bad_request(fmt::format("'n_predict' must be >= 1, or -1 for the rest of the "
                                     "context, got {}", *n_predict),
                         "n_predict");
    const std::optional<int32_t> as_max = *n_predict == -1 ? std::nullopt : n_predict;
    if (out->max_tokens && out->max_tokens != as_max)
      return bad_request(fmt::format("'n_predict' ({}) and '{}' ({}) disagree; send one of them",
                                     *n_predict, chat && body.contains("max_completion_tokens")
                                                     ? "max_completion_tokens" : "max_tokens",
                                     *out->max_tokens),
                         "n_predict");
    out->max_tokens = as_max;
    out->max_tokens_param = "n_predict";
  }

  if (auto err = read_bool(body, "stream", &out->stream)) return err;
  if (const json* so = find_field(body, "stream_options")) {
    if (!so->is_object())
      return type_error("stream_options", "an object", *so, "stream_options");
    if (!out->stream)
      return bad_request("'stream_options' can only be set when 'stream' is true",
                         "stream_options");
    if (auto err = check_stream_options_keys(*so)) return err;
    if (auto err = read_bool(*so, "include_usage", &out->include_usage, "stream_options"))
      return err;
    if (auto err = read_bool(*so, "continuous_usage_stats", &out->continuous_usage_stats,
                             "stream_options"))
      return err;
    if (out->continuous_usage_stats && !out->include_usage)
      return bad_request("'stream_options.continuous_usage_stats' needs 'include_usage': true "
                         "(as in vLLM)",
                         "stream_options");
  }
  if (out->stream && out->return_token_ids)
    return bad_request("'return_token_ids' is not available with 'stream': true yet",
                       "return_token_ids");
  // vLLM: "prompt_logprobs are not available when stream=True".
  if (out->stream && out->prompt_logprobs)
    return bad_request("'prompt_logprobs' is not available with 'stream': true (as in vLLM)",
                       "prompt_logprobs");
  return read_echo(body, chat, out);
}

std::optional<ApiError> read_prompt(const json& body, CompletionRequest* out) {
  const json* prompt = find_field(body, "prompt");
  if (!prompt) return bad_request("'prompt' is required", "prompt");
  if (prompt->is_string()) {
    out->prompt_text = prompt->get<std::string>();
    if (out->prompt_text->empty()) return bad_request("'prompt' must not be empty", "prompt");
    return std::nullopt;
  }
  constexpr const char* kShape = "a string, a list of token ids, or a list holding one of those";
  if (!prompt->is_array()) return type_error("prompt", kShape, *prompt, "prompt");
  if (prompt->empty()) return bad_request("'prompt' must not be an empty list", "prompt");
  const json& first = prompt->front();
  if (first.is_string() || first.is_array()) {  // a batch: a list of prompts
    if (prompt->size() != 1)
      return bad_request(fmt::format("batched prompts are not supported: got {} prompts in "
                                     "'prompt'; send one prompt per request",
                                     prompt->size()),
                         "prompt");
    if (first.is_string()) {
      out->prompt_text = first.get<std::string>();
      if (out->prompt_text->empty())
        return bad_request("'prompt[0]' must not be empty", "prompt");
      return std::nullopt;
    }
    if (first.empty()) return bad_request("'prompt[0]' must not be an empty list", "prompt");
    return read_token_ids(first, "prompt[0]", "prompt", &out->prompt_token_ids);
  }
  return read_token_ids(*prompt, "prompt", "prompt", &out->prompt_token_ids);
}

/// content: a string, null (""), or a list of {"type": "text", "text": "..."} parts.
std::optional<ApiError> read_content(const json& msg, size_t idx, std::string* out) {
  const json* content = find_field(msg, "content");
  if (!content) return std::nullopt;
  if (content->is_string()) {
    *out = content->get<std::string>();
    return std::nullopt;
  }
  const std::string field = fmt::format("messages[{}].content", idx);
  if (!content->is_array())
    return type_error(field, "a string or a list of text parts", *content, "messages");
  for (size_t j = 0; j < content->size(); ++j) {
    const json& part = (*content)[j];
    const std::string part_field = fmt::format("{}[{}]", field, j);
    if (!part.is_object()) return type_error(part_field, "an object", part, "messages");
    const json* type = find_field(part, "type");
    if (!type || !type->is_string() || type->get<std::string>() != "text")
      return bad_request(fmt::format("{}: only parts of type \"text\" are supported, got type {}",
                                     part_field, type ? describe(*type) : "null"),
                         "messages");
    for (auto k = part.begin(); k != part.end(); ++k)
      if (k.key() != "type" && k.key() != "text")
        return bad_request(fmt::format("Unrecognized request argument supplied: {}.{} (text "
                                       "parts take 'type' and 'text')",
                                       part_field, k.key().substr(0, 64)),
                           "messages");
    const json* text = find_field(part, "text");
    if (!text || !text->is_string())
      return type_error(part_field + ".text", "a string", text ? *text : json(nullptr),
                        "messages");
    if (j > 0) *out += "\n";
    *out += text->get<std::string>();
  }
  return std::nullopt;
}

std::optional<ApiError> read_messages(const json& body, std::vector<ChatMessage>* out) {
  const json* messages = find_field(body, "messages");
  if (!messages) return bad_request("'messages' is required", "messages");
  if (!messages->is_array())
    return type_error("messages", "a list of {role, content} objects", *messages, "messages");
  if (messages->empty()) return bad_request("'messages' must not be empty", "messages");
  if (messages->size() > kMaxMessages)
    return bad_request(fmt::format("'messages' has {} entries; at most {} are accepted",
                                   messages->size(), kMaxMessages),
                       "messages");
  for (size_t i = 0; i < messages->size(); ++i) {
    const json& msg = (*messages)[i];
    if (!msg.is_object())
      return type_error(fmt::format("messages[{}]", i), "an object", msg, "messages");
    const json* role = find_field(msg, "role");
    if (!role) return bad_request(fmt::format("'messages[{}].role' is required", i), "messages");
    if (!role->is_string() || role->get<std::string>().empty())
      return type_error(fmt::format("messages[{}].role", i), "a non-empty string", *role,
                        "messages");
    ChatMessage m;
    m.role = role->get<std::string>();
    if (auto err = read_content(msg, i, &m.content)) return err;
    out->push_back(std::move(m));
  }
  return std::nullopt;
}

/// Deepest array/object nesting in a JSON text (strings skipped), stopping past `limit`.
int json_nesting_depth(std::string_view text, int limit) {
  int depth = 0, max_depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      max_depth = std::max(max_depth, ++depth);
      if (max_depth > limit) break;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return max_depth;
}

}  // namespace

std::optional<ApiError> parse_json_object(std::string_view body, json* out) {
  // nlohmann::json serialises (and we describe) values recursively: bound the nesting so a
  // small body of 100k brackets cannot overflow the stack. Real requests nest < 10 levels.
  constexpr int kMaxJsonDepth = 64;
  if (json_nesting_depth(body, kMaxJsonDepth) > kMaxJsonDepth)
    return bad_request(fmt::format("request body nests arrays/objects deeper than {} levels",
                                   kMaxJsonDepth));
  // The top-level key being read, so that a number too large for a double (1e400: JSON has
  // no infinity and nlohmann refuses to round it to one) is blamed on its field.
  std::string top_key;
  // Keys per object are bounded (kMaxObjectKeys): the chat path re-reads the body keeping key
  // order (ordered_json, whose objects insert in linear time), and a few MB of keys would
  // otherwise cost minutes of CPU.
  struct TooManyKeys {};
  std::vector<size_t> keys;  // per open object, innermost last
  const json::parser_callback_t track_key = [&](int depth, json::parse_event_t event,
                                                json& parsed) {
    if (event == json::parse_event_t::object_start) keys.push_back(0);
    if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == json::parse_event_t::key) {
      if (depth == 1 && parsed.is_string()) top_key = parsed.get<std::string>();
      if (!keys.empty() && ++keys.back() > kMaxObjectKeys) throw TooManyKeys{};
    }
    return true;
  };
  try {
    *out = json::parse(body, track_key);
  } catch (const TooManyKeys&) {
    std::optional<std::string> param;
    if (!top_key.empty() && top_key.size() <= 256) param = top_key;
    return bad_request(fmt::format("request body has an object with more than {} keys{}",
                                   kMaxObjectKeys,
                                   param ? fmt::format(" (in '{}')", *param) : std::string()),
                       param);
  } catch (const json::out_of_range& e) {  // number overflow: "... parsing '1e999'"
    std::optional<std::string> param;
    if (!top_key.empty()) param = top_key;
    const std::string what = e.what();
    const size_t at = what.find("parsing '");
    const std::string number =
        at == std::string::npos ? what : what.substr(at + 9, what.size() - at - 10);
    return bad_request(
        fmt::format("request body has a number beyond a 64-bit float's range: {}{}", number,
                    top_key.empty() ? "" : fmt::format(" (in '{}')", top_key)),
        param);
  } catch (const json::exception& e) {  // parse_error: syntax, invalid UTF-8
    return bad_request(fmt::format("request body is not valid JSON: {}", e.what()));
  }
  if (!out->is_object())
    return bad_request(fmt::format("request body must be a JSON object, got {}", describe(*out)));
  return std::nullopt;
}

std::optional<ApiError> parse_completion_request(const json& body, CompletionRequest* out) {
  if (auto err = read_prompt(body, out)) return err;
  return read_options(body, /*chat=*/false, &out->options);
}

std::optional<ApiError> parse_messages(const json& body, std::vector<ChatMessage>* out) {
  return read_messages(body, out);
}

std::optional<ApiError> read_chat_template_inputs(const nlohmann::ordered_json& body,
                                                  const std::vector<ChatMessage>& messages,
                                                  ChatTemplateInputs* out) {
  using ojson = nlohmann::ordered_json;
  const ojson& msgs = body.at("messages");  // validated by read_messages
  out->messages = ojson::array();
  for (size_t i = 0; i < msgs.size() && i < messages.size(); ++i) {
    ojson m = msgs[i];
    if (m.contains("content") && m["content"].is_array()) m["content"] = messages[i].content;
    // A past call's arguments arrive as JSON text (OpenAI's shape); templates iterate them as
    // a mapping (Qwen's `tool_call.arguments | tojson`, Llama's `arguments | tojson`), so the
    // text becomes the object it holds, as vLLM does before rendering. Text that is not a JSON
    // object stays text.
    if (m.contains("tool_calls") && m["tool_calls"].is_array())
      for (ojson& call : m["tool_calls"]) {
        if (!call.is_object() || !call.contains("function") || !call["function"].is_object())
          continue;
        ojson& f = call["function"];
        if (!f.contains("arguments") || !f["arguments"].is_string()) continue;
        ojson parsed = ojson::parse(f["arguments"].get<std::string>(), nullptr,
                                    /*allow_exceptions=*/false);
        if (!parsed.is_discarded() && parsed.is_object()) f["arguments"] = std::move(parsed);
      }
    out->messages.push_back(std::move(m));
  }
  auto list_or_null = [&](const char* name, ojson* dst) -> std::optional<ApiError> {
    if (!body.contains(name) || body[name].is_null()) return std::nullopt;
    if (!body[name].is_array())
      return bad_request(fmt::format("'{}' must be a list or null, got {}", name,
                                     describe(json::parse(body[name].dump()))),
                         std::string(name));
    *dst = body[name];
    return std::nullopt;
  };
  if (auto err = list_or_null("tools", &out->tools)) return err;
  // OpenAI's shape: {"type": "function", "function": {"name": ..., ...}}, as OpenAI refuses
  // anything else with a 400 even when no tool is called.
  for (size_t i = 0; i < out->tools.size(); ++i) {
    if (!is_function_tool(out->tools[i]))
      return bad_request(fmt::format("tools[{}] must be {{\"type\": \"function\", \"function\": "
                                     "{{\"name\": <non-empty string>, ...}}}}, got {}",
                                     i, describe(json::parse(out->tools[i].dump()))),
                         "tools");
  }
  if (auto err = list_or_null("documents", &out->documents)) return err;
  if (body.contains("chat_template_kwargs") && !body["chat_template_kwargs"].is_null()) {
    if (!body["chat_template_kwargs"].is_object())
      return bad_request("'chat_template_kwargs' must be an object", "chat_template_kwargs");
    out->chat_template_kwargs = body["chat_template_kwargs"];
  }
  auto flag = [&](const char* name, bool fallback, bool* dst) -> std::optional<ApiError> {
    *dst = fallback;
    if (!body.contains(name) || body[name].is_null()) return std::nullopt;
    if (!body[name].is_boolean())
      return bad_request(fmt::format("'{}' must be a boolean", name), std::string(name));
    *dst = body[name].get<bool>();
    return std::nullopt;
  };
  if (auto err = flag("add_generation_prompt", true, &out->add_generation_prompt)) return err;
  if (auto err = flag("continue_final_message", false, &out->continue_final_message))
    return err;
  if (out->add_generation_prompt && out->continue_final_message)
    return bad_request("'add_generation_prompt' and 'continue_final_message' cannot both be "
                       "true (send add_generation_prompt: false to continue the last message)",
                       "continue_final_message");
  return std::nullopt;
}

std::optional<ApiError> parse_chat_request(const json& body, ChatCompletionRequest* out) {
  out->options.add_special_tokens = false;  // vLLM's chat default (the template writes BOS)
  if (auto err = read_messages(body, &out->messages)) return err;
  if (auto err = read_bool(body, "add_generation_prompt", &out->add_generation_prompt))
    return err;
  if (auto err = read_bool(body, "continue_final_message", &out->continue_final_message))
    return err;
  return read_options(body, /*chat=*/true, &out->options);
}

}  // namespace llmserve
