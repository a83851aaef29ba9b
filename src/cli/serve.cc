// llmserve serve: load the model, start the engine thread and the OpenAI-compatible HTTP
// server. SIGINT/SIGTERM drain it (HttpServer::shutdown): new requests get 503, requests in
// flight get --shutdown-timeout seconds to finish, the rest is aborted, exit status 0. A
// second signal stops at once. See docs/operations.md.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cli/commands.h"
#include "cli/human_int.h"
#include "common/logging.h"
#include "engine/async_engine.h"
#include "server/builtin_chat_template.h"
#include "server/http_server.h"
#include "server/tool_parsers/reasoning_parser.h"
#include "server/tool_parsers/tool_parser_registry.h"

namespace llmserve::cli {

/// Seconds past --shutdown-timeout after which a drain that has not finished (a client that
/// neither reads nor closes) is cut short with exit status 1.
constexpr double kForcedExitGraceSeconds = 15;

ServeCommand::ServeCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  config_.cache.kv_cache_prefault = true;  // a long-running server commits its KV up front
  add_engine_flags(*cmd_, config_, flags_);
  cmd_->add_option("--host", host_, "Address to listen on")->capture_default_str();
  cmd_->add_option("--port", port_, "TCP port (0 = any free port)")->capture_default_str();
  cmd_->add_option("--http-threads", http_threads_,
                   "HTTP worker threads, i.e. connections served at once; a streaming request "
                   "holds one while it runs (0 = max-num-seqs + max-waiting + 64)")
      ->capture_default_str();
  cmd_->add_option("--chat-template", chat_template_,
                   "Jinja chat template for /v1/chat/completions: a file, or the template text "
                   "(default: the model's, else a built-in one)");
  cmd_->add_option("--api-key", api_key_,
                   "Require 'Authorization: Bearer <key>' on /v1/* (default: $LLMSERVE_API_KEY; "
                   "unset = no authentication)");
  cmd_->add_option("--max-request-body-bytes", max_request_body_bytes_,
                   "Larger request bodies get 413")
      ->transform(human_int(1, INT64_MAX))  // an int64: out of range is an error, not clamped
      ->capture_default_str();
  cmd_->add_option("--max-waiting", max_waiting_,
                   "Requests that must wait (not running, beyond the free --max-num-seqs slots) "
                   "before new ones get 429 with "
                   "Retry-After (0 = unlimited)")
      ->capture_default_str();
  cmd_->add_option("--shutdown-timeout", shutdown_timeout_s_,
                   "Seconds SIGTERM/SIGINT lets requests in flight finish before aborting them")
      ->capture_default_str();
  cmd_->add_option("--replica-id", replica_id_,
                   "This replica's name behind a load balancer: the X-Replica-Id header of "
                   "every response, \"replica_id\" in /v1/models, llmserve:replica_info in "
                   "/metrics (default: <hostname>:<port>)");
  cmd_->add_flag("--disable-log-requests", disable_log_requests_,
                 "Do not write one access-log line per HTTP request");
  cmd_->add_flag("--disable-ui", disable_ui_,
                 "Do not serve the live dashboard (GET /ui and its event stream /ui/events)");
  cmd_->add_flag("--ui-show-prompts", ui_show_prompts_,
                 "Let the dashboard show each request's prompt text (off: prompts are never "
                 "sent to it)");
  cmd_->add_flag("--ignore-unknown-fields", ignore_unknown_fields_,
                 "Accept request fields in no schema llmserve knows (a warning per name, once, "
                 "and the names in the X-LLMServe-Ignored-Fields response header) instead of "
                 "answering 400 'Unrecognized request argument supplied'");
  cmd_->add_option("--tool-call-parser", tool_call_parser_,
                   "Tool-call format of the model's output for tool_choice \"auto\" (vLLM's "
                   "names: " + fmt::format("{}", fmt::join(tool_parsers::tool_parser_names(), ", ")) +
                   "); default: detected from the chat template");
  cmd_->add_flag("--enable-auto-tool-choice", enable_auto_tool_choice_,
                 "Require a tool-call format (--tool-call-parser or one detected from the chat "
                 "template) at start-up; tool_choice \"auto\" works whenever one is known");
  cmd_->add_option("--reasoning-parser", reasoning_parser_,
                   "Split <think>...</think> (or [THINK]) reasoning into "
                   "message.reasoning_content: " +
                       fmt::format("{}", fmt::join(tool_parsers::reasoning_parser_names(), ", ")));
}

int ServeCommand::run() {
  if (Status st = finish_engine_flags(config_, flags_); !st.ok()) return fail(st);
  if (max_waiting_ < 0) return fail(InvalidArgument("--max-waiting must be >= 0, got {}",
                                                    max_waiting_));
  if (!(shutdown_timeout_s_ >= 0) || shutdown_timeout_s_ > 86400)
    return fail(InvalidArgument("--shutdown-timeout must be in [0, 86400] seconds, got {}",
                                shutdown_timeout_s_));
  if (max_request_body_bytes_ <= 0)
    return fail(InvalidArgument("--max-request-body-bytes must be > 0, got {}",
                                max_request_body_bytes_));
  // Block SIGINT/SIGTERM in every thread; a dedicated thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ServerConfig sc;
  sc.host = host_;
  sc.port = port_;
  sc.num_http_threads = http_threads_;
  if (cmd_->count("--replica-id") > 0 && replica_id_.empty())
    return fail(InvalidArgument("--replica-id must not be empty (leave the flag out for "
                                "<hostname>:<port>)"));
  sc.replica_id = replica_id_;
  if (cmd_->count("--chat-template") > 0 && chat_template_.empty())
    return fail(InvalidArgument("--chat-template must not be empty (leave the flag out for the "
                                "model's template)"));
  if (cmd_->count("--api-key") > 0 && api_key_.empty())
    return fail(InvalidArgument("--api-key must not be empty (leave the flag out to serve "
                                "without authentication)"));
  sc.api_key = api_key_;
  if (sc.api_key.empty())
    if (const char* env = std::getenv("LLMSERVE_API_KEY")) sc.api_key = env;
  sc.max_request_body_bytes = static_cast<size_t>(max_request_body_bytes_);
  sc.log_requests = !disable_log_requests_;
  if (disable_ui_ && ui_show_prompts_)
    return fail(InvalidArgument("--ui-show-prompts has no effect with --disable-ui; pass one"));
  sc.enable_ui = !disable_ui_;
  sc.ui_show_prompts = ui_show_prompts_;
  sc.ignore_unknown_fields = ignore_unknown_fields_;
  if (cmd_->count("--tool-call-parser") > 0)
    if (auto p = tool_parsers::make_tool_parser(tool_call_parser_); !p.ok())
      return fail(InvalidArgument("--tool-call-parser: {}", p.status().message()));
  if (cmd_->count("--reasoning-parser") > 0)
    if (auto p = tool_parsers::make_reasoning_parser(reasoning_parser_); !p.ok())
      return fail(InvalidArgument("--reasoning-parser: {}", p.status().message()));
  sc.chat_output.tool_call_parser = tool_call_parser_;
  sc.chat_output.enable_auto_tool_choice = enable_auto_tool_choice_;
  sc.chat_output.reasoning_parser = reasoning_parser_;
  if (Status st = sc.validate(); !st.ok()) return fail(st);  // before the (slow) model load

  sc.chat_template = chat_template_;
  auto engine = LLMEngine::create(config_);
  if (!engine.ok()) return fail(engine.status());
  // A template that does not parse is a start-up error, not a 400 on every chat request.
  auto tpl = resolve_chat_template(chat_template_, **engine, nullptr);
  if (!tpl.ok()) return fail(tpl.status());
  if (enable_auto_tool_choice_ && tool_call_parser_.empty() &&
      !tool_parsers::detect_tool_parser(tpl->source()))
    return fail(InvalidArgument("--enable-auto-tool-choice needs a tool-call format: the chat "
                                "template shows none llmserve recognises; add "
                                "--tool-call-parser NAME"));
  AsyncEngine async_engine(std::move(*engine), max_waiting_);
  HttpServer server(async_engine, sc);
  if (Status st = server.bind(); !st.ok()) return fail(st);
  spdlog::info("replica id: {}", server.replica_id());

  std::atomic<bool> listen_returned{false};
  std::thread drain_thread;
  const double timeout_s = shutdown_timeout_s_;
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (listen_returned.load()) return;  // woken by main after listen() returned
    spdlog::info("signal {} received: draining (--shutdown-timeout {} s; send it again to stop "
                 "at once)", sig, timeout_s);
    // A client that neither reads nor closes can hold an HTTP thread; do not let it hold the
    // process hostage.
    std::thread([timeout_s] {
      std::this_thread::sleep_for(std::chrono::duration<double>(timeout_s +
                                                                kForcedExitGraceSeconds));
      spdlog::error("shutdown did not finish within {} s; exiting",
                    timeout_s + kForcedExitGraceSeconds);
      std::_Exit(1);
    }).detach();
    drain_thread = std::thread([&server, timeout_s] { server.shutdown(timeout_s); });
    sigwait(&signals, &sig);
    if (listen_returned.load()) return;
    spdlog::warn("signal {} received again: stopping now", sig);
    server.stop();
  });
  Status st = server.listen();
  listen_returned.store(true);
  pthread_kill(signal_thread.native_handle(), SIGTERM);  // no-op if it already returned
  signal_thread.join();
  if (drain_thread.joinable()) drain_thread.join();
  if (!st.ok()) return fail(st);
  spdlog::info("llmserve: stopped");
  return 0;
}

}  // namespace llmserve::cli
