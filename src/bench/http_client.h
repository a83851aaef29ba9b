// `bench serve`: the workload sent to an OpenAI-compatible /v1/completions endpoint with
// stream=true, one client thread per in-flight request, measured client-side.
#pragma once

#include <string>
#include <vector>

#include "bench/metrics.h"
#include "bench/runner.h"
#include "bench/workload.h"
#include "common/status.h"

namespace llmserve::bench {

struct ServeOptions {
  /// Server base URL, "http://host:port" (a trailing "/v1" or "/v1/completions" is accepted).
  std::string url;
  /// Model name sent in each request; empty = the first id of GET /v1/models.
  std::string model;
  float temperature = 0.0f;
  /// Requests in flight at once; 0 = unbounded (every arrived request is sent at once).
  int32_t max_concurrency = 0;
  /// Per-request read timeout, seconds.
  double timeout_s = 600;
  /// Sent as "Authorization: Bearer <key>" on every request when not empty (--api-key, else
  /// $OPENAI_API_KEY, as vLLM's bench does).
  std::string api_key;
  /// Seconds between scrapes of GET /metrics during the run (plus one before and one after);
  /// <= 0 = no scraping (the engine rows stay n/a).
  double metrics_interval_s = 0.25;
  ProgressFn progress;  // may be empty
};

/// "http://h:p/v1" -> {"http://h:p", "/v1/completions"}. Errors: not http(s)://host[:port].
struct Endpoint {
  std::string base;  // scheme://host[:port]
  std::string path;  // the completions path
};
Expected<Endpoint> parse_completions_url(const std::string& url);

/// GET {base}/v1/models, before anything else is sent: the model to benchmark (options.model,
/// else the first id listed). Errors, one line naming the URL: Unavailable "connection refused"
/// (or the socket's other reason) when nothing listens; InvalidArgument for 401 (naming
/// --api-key / OPENAI_API_KEY); Internal for other failures when the name was needed.
Expected<std::string> probe_server(const Endpoint& endpoint, const ServeOptions& options);

/// Sends every request at its arrival offset (prompt as token ids when known, else as text;
/// max_tokens = output_len, ignore_eos, stream with include_usage). TTFT = first chunk with
/// text; token_times = the times of chunks with text; output tokens from the usage chunk (else
/// the requested output_len, as vLLM does), cached_tokens from its
/// prompt_tokens_details.cached_tokens when present. Failed requests (HTTP error, no text,
/// broken stream) are recorded with success = false and their error. A follow-up turn
/// (BenchRequest::follows, text only) is sent by its conversation's thread as soon as the
/// previous reply has finished, with prompt = previous prompt text + reply text + its own
/// prompt_text; after a failed turn the rest of the conversation is recorded as failed, not
/// sent. max_concurrency counts conversations (each keeps its slot from first turn to last).
/// The engine rows come from GET /metrics scraped before, during and after the run
/// (RunResult::server_engine; see server_metrics.h).
/// Errors: InvalidArgument for a follow-up with token ids or a bad follows index (before
/// anything is sent); probe_server's (nothing is sent to a server that is not there).
Expected<RunResult> run_over_http(const std::vector<BenchRequest>& requests,
                                  const ServeOptions& options);

}  // namespace llmserve::bench
