// Request bodies: parse_json_object -> check_request_fields (with and without
// --ignore-unknown-fields) -> parse_completion_request / parse_chat_request ->
// SamplingParams::validate, as the server's handlers do, plus the chat-template inputs of a
// chat body rendered through a small ChatML template. Every error must serialise the way the
// server sends it.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "chat_template/chat_template.h"
#include "fuzz/fuzz_util.h"
#include "server/api_error.h"
#include "server/protocol.h"
#include "server/request_policy.h"

using namespace llmserve;
using nlohmann::json;

namespace {

constexpr int32_t kVocabSize = 32000;

void send(const ApiError& e) {
  FUZZ_CHECK(e.http_status >= 400 && e.http_status < 600, "status %d", e.http_status);
  FUZZ_CHECK(!e.message.empty(), "empty error message");
  (void)e.to_json().dump(-1, ' ', false, json::error_handler_t::replace);
}

void check_params(const SamplingParams& p) {
  const Status st = p.validate(kVocabSize);
  if (!st.ok()) {
    send(api_error_from_status(st));
    return;
  }
  for (int32_t id : p.stop_token_ids) {
    FUZZ_CHECK(id >= 0 && id < kVocabSize, "validated stop_token_id %d", id);
  }
  FUZZ_CHECK(p.top_p > 0.0f && p.top_p <= 1.0f, "validated top_p %g", p.top_p);
  FUZZ_CHECK(p.temperature >= 0.0f, "validated temperature %g", p.temperature);
}

const ChatTemplate& chatml() {
  static const ChatTemplate tpl = *ChatTemplate::parse(
      "{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
      "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\\n"
      "{% endif %}");
  return tpl;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const bool chat = data[0] & 1;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  json j;
  if (auto err = parse_json_object(body, &j)) {
    send(*err);
    return 0;
  }
  FUZZ_CHECK(j.is_object(), "parse_json_object accepted a non-object");
  const bool lenient = data[0] & 2;
  std::vector<std::string> ignored;
  if (auto err = check_request_fields(j, chat ? kEndpointChat : kEndpointCompletions, lenient,
                                      &ignored)) {
    FUZZ_CHECK(err->param.has_value(), "policy error without param: %s", err->message.c_str());
    send(*err);
    return 0;
  }
  FUZZ_CHECK(lenient || ignored.empty(), "strict policy ignored a field");
  if (!chat) {
    CompletionRequest req;
    if (auto err = parse_completion_request(j, &req)) {
      send(*err);
      return 0;
    }
    FUZZ_CHECK(!(req.prompt_text.has_value() && !req.prompt_token_ids.empty()),
               "completion request holds both prompt forms");
    check_params(req.options.params);
    return 0;
  }
  ChatCompletionRequest req;
  if (auto err = parse_chat_request(j, &req)) {
    send(*err);
    return 0;
  }
  FUZZ_CHECK(!req.messages.empty(), "chat request without messages accepted");
  check_params(req.options.params);
  ChatTemplateInputs inputs;
  const nlohmann::ordered_json ordered = nlohmann::ordered_json::parse(body);
  if (auto err = read_chat_template_inputs(ordered, req.messages, &inputs)) {
    send(*err);
    return 0;
  }
  inputs.bos_token = "<s>";
  inputs.eos_token = "</s>";
  RenderOptions opt;
  opt.now = [] { return std::tm{}; };
  opt.max_output_bytes = 1u << 20;
  opt.max_steps = 100000;
  auto text = render_chat(chatml(), inputs, opt);
  if (!text.ok()) send(api_error_from_status(text.status()));
  return 0;
}
