// llmserve serve: load the model, start the engine thread and the OpenAI-compatible HTTP
// server; SIGINT/SIGTERM stop it cleanly.
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "common/logging.h"
#include "engine/async_engine.h"
#include "server/builtin_chat_template.h"
#include "server/http_server.h"

namespace llmserve::cli {

/// Seconds between SIGINT/SIGTERM and a forced exit if connections do not close.
constexpr int kShutdownTimeoutSeconds = 10;

ServeCommand::ServeCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("serve", "Serve a model over an OpenAI-compatible HTTP API");
  add_engine_flags(*cmd_, config_, flags_);
  cmd_->add_option("--host", host_, "Address to listen on")->capture_default_str();
  cmd_->add_option("--port", port_, "TCP port (0 = any free port)")->capture_default_str();
  cmd_->add_option("--http-threads", http_threads_, "HTTP worker threads (concurrent clients)")
      ->capture_default_str();
  cmd_->add_option("--chat-template", chat_template_,
                   "Jinja chat template for /v1/chat/completions: a file, or the template text "
                   "(default: the model's, else a built-in one)");
}

int ServeCommand::run() {
  if (Status st = finish_engine_flags(config_, flags_); !st.ok()) return fail(st);
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
  if (Status st = sc.validate(); !st.ok()) return fail(st);  // before the (slow) model load

  sc.chat_template = chat_template_;
  auto engine = LLMEngine::create(config_);
  if (!engine.ok()) return fail(engine.status());
  // A template that does not parse is a start-up error, not a 400 on every chat request.
  if (auto tpl = resolve_chat_template(chat_template_, **engine, nullptr); !tpl.ok())
    return fail(tpl.status());
  AsyncEngine async_engine(std::move(*engine));
  HttpServer server(async_engine, sc);
  if (Status st = server.bind(); !st.ok()) return fail(st);

  std::atomic<bool> listen_returned{false};
  std::thread signal_thread([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (listen_returned.load()) return;  // woken by main after listen() failed
    spdlog::info("signal {} received, shutting down", sig);
    // A client trickling a request can keep an HTTP thread busy indefinitely; do not let it
    // hold the process hostage.
    std::thread([] {
      std::this_thread::sleep_for(std::chrono::seconds(kShutdownTimeoutSeconds));
      spdlog::warn("shutdown took longer than {} s; exiting", kShutdownTimeoutSeconds);
      std::_Exit(0);
    }).detach();
    server.stop();
  });
  Status st = server.listen();
  listen_returned.store(true);
  pthread_kill(signal_thread.native_handle(), SIGTERM);  // no-op if it already returned
  signal_thread.join();
  if (!st.ok()) return fail(st);
  return 0;
}

}  // namespace llmserve::cli
