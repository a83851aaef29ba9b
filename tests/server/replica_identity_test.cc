// Replica identity behind a load balancer (docs/deployment.md): --replica-id (or the default
// "<hostname>:<port>") in the X-Replica-Id header of every response, success or error, in the
// "replica_id" field of /v1/models entries (OpenAI's fields unchanged) and in the
// llmserve:replica_info gauge of /metrics. Fake engine over real loopback HTTP.
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>
#include <nlohmann/json.hpp>

#include "prometheus_text.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server_test_util.h"

namespace llmserve::testing {
namespace {

ServerConfig with_replica(const std::string& id) {
  ServerConfig c;
  c.replica_id = id;
  return c;
}

TEST(ReplicaIdentity, HeaderOnEverySuccessfulResponse) {
  TestServer s(FakeEngineOptions{}, with_replica("replica-a"));
  EXPECT_EQ(s.server().replica_id(), "replica-a");
  for (const char* path : {"/health", "/v1/models", "/metrics", "/version"}) {
    auto r = s.get(path);
    ASSERT_TRUE(r) << path;
    EXPECT_EQ(r->status, 200) << path;
    EXPECT_EQ(r->get_header_value("X-Replica-Id"), "replica-a") << path;
    EXPECT_TRUE(r->has_header("X-Request-Id")) << path;  // unchanged
  }
  auto r = s.post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 3}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("X-Replica-Id"), "replica-a");

  StreamReply sr = post_stream(s, "/v1/completions",
                               {{"prompt", "hi"}, {"max_tokens", 3}, {"stream", true}});
  EXPECT_EQ(sr.status, 200);
  // The SSE helper does not keep headers: ask again with a raw client.
  auto c = s.client();
  auto raw = c->Post("/v1/chat/completions",
                     json{{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                          {"max_tokens", 2},
                          {"stream", true}}
                         .dump(),
                     "application/json");
  ASSERT_TRUE(raw);
  EXPECT_EQ(raw->status, 200);
  EXPECT_EQ(raw->get_header_value("X-Replica-Id"), "replica-a");
}

TEST(ReplicaIdentity, HeaderOnErrorResponses) {
  ServerConfig config = with_replica("r-err");
  config.max_request_body_bytes = 1024;
  TestServer s(FakeEngineOptions{}, config);
  auto not_found = s.get("/no/such/path");
  ASSERT_TRUE(not_found);
  EXPECT_EQ(not_found->status, 404);
  EXPECT_EQ(not_found->get_header_value("X-Replica-Id"), "r-err");

  auto bad = s.post_raw("/v1/completions", "{not json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 400);
  EXPECT_EQ(bad->get_header_value("X-Replica-Id"), "r-err");

  auto too_large = s.post("/v1/completions", {{"prompt", std::string(4096, 'x')}});
  ASSERT_TRUE(too_large);
  EXPECT_EQ(too_large->status, 413);
  EXPECT_EQ(too_large->get_header_value("X-Replica-Id"), "r-err");

  auto wrong_method = s.client()->Delete("/v1/completions");
  ASSERT_TRUE(wrong_method);
  EXPECT_EQ(wrong_method->status, 405);
  EXPECT_EQ(wrong_method->get_header_value("X-Replica-Id"), "r-err");
}

TEST(ReplicaIdentity, ModelsCarryReplicaIdBesideOpenAIFields) {
  TestServer s(FakeEngineOptions{}, with_replica("node1:8001"));
  auto r = s.get("/v1/models");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const json list = json::parse(r->body);
  EXPECT_EQ(list["object"], "list");
  ASSERT_EQ(list["data"].size(), 1u);
  const json& card = list["data"][0];
  EXPECT_EQ(card["replica_id"], "node1:8001");
  for (const char* field : {"id", "object", "created", "owned_by", "root", "max_model_len"})
    EXPECT_TRUE(card.contains(field)) << field;
  EXPECT_EQ(card["object"], "model");

  const std::string id = card["id"];
  auto one = s.get("/v1/models/" + id);
  ASSERT_TRUE(one);
  ASSERT_EQ(one->status, 200);
  const json retrieved = json::parse(one->body);
  EXPECT_EQ(retrieved["id"], id);
  EXPECT_EQ(retrieved["replica_id"], "node1:8001");

  auto missing = s.get("/v1/models/not-this-model");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  const json err = json::parse(missing->body);
  EXPECT_TRUE(err.contains("error"));
  EXPECT_FALSE(err.contains("replica_id"));  // an error body stays OpenAI's shape
  EXPECT_EQ(missing->get_header_value("X-Replica-Id"), "node1:8001");
}

TEST(ReplicaIdentity, MetricsHaveReplicaInfoGauge) {
  TestServer s(FakeEngineOptions{}, with_replica("rep-7"));
  auto r = s.get("/metrics");
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200);
  const PrometheusPage page = parse_prometheus_text(r->body);
  EXPECT_TRUE(page.errors.empty()) << page.error_text();
  EXPECT_EQ(page.types.at("llmserve:replica_info"), "gauge");
  const std::string model = s.server().served_model_name();
  EXPECT_EQ(page.value("llmserve:replica_info{model_name=\"" + model +
                       "\",replica_id=\"rep-7\"}"),
            1.0);
}

TEST(ReplicaIdentity, DefaultIsHostnameAndBoundPort) {
  TestServer s;  // no replica id configured, port 0 (any free port)
  const std::string expected = default_replica_id(s.port());
  EXPECT_EQ(s.server().replica_id(), expected);
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof(host) - 1), 0);
  EXPECT_EQ(expected, std::string(host) + ":" + std::to_string(s.port()));
  auto r = s.get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->get_header_value("X-Replica-Id"), expected);
}

TEST(ReplicaIdentity, DrainingHealthIs503WithReplicaId) {
  FakeEngineOptions slow;
  slow.step_delay = std::chrono::milliseconds(50);
  slow.eos_after = 1000;
  TestServer s(slow, with_replica("drainer"));
  // One request in flight (20 tokens x 50 ms) keeps the drain open while /health is asked.
  std::thread busy([&] { s.post("/v1/completions", {{"prompt", "hi"}, {"max_tokens", 20}}); });
  ASSERT_TRUE(wait_for([&] {
    auto m = s.get("/metrics");
    return m && m->body.find("vllm:num_requests_running{model_name=\"fake-model\"} 1") !=
                    std::string::npos;
  }));
  std::thread drain([&] { s.server().shutdown(/*timeout_s=*/10); });
  ASSERT_TRUE(wait_for([&] { return s.server().shutting_down(); }));
  auto r = s.get("/health");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_EQ(r->get_header_value("X-Replica-Id"), "drainer");
  busy.join();
  drain.join();
}

TEST(ReplicaIdentity, ValidatesTheId) {
  EXPECT_TRUE(valid_replica_id("a"));
  EXPECT_TRUE(valid_replica_id("pod-7.llmserve_ns:8000"));
  EXPECT_FALSE(valid_replica_id(""));
  EXPECT_FALSE(valid_replica_id(std::string(129, 'a')));
  EXPECT_FALSE(valid_replica_id("has space"));
  EXPECT_FALSE(valid_replica_id("quote\"d"));
  EXPECT_FALSE(valid_replica_id("new\nline"));
  ServerConfig c;
  c.replica_id = "bad id";
  EXPECT_FALSE(c.validate().ok());
  c.replica_id = "good-id";
  EXPECT_TRUE(c.validate().ok());
  c.replica_id = "";
  EXPECT_TRUE(c.validate().ok());  // empty: the default
}

TEST(ReplicaIdentity, RenderReplicaInfoEscapesNothingItNeedNot) {
  std::string out;
  render_replica_info("r1", "m", &out);
  EXPECT_NE(out.find("# TYPE llmserve:replica_info gauge\n"), std::string::npos);
  EXPECT_NE(out.find("llmserve:replica_info{model_name=\"m\",replica_id=\"r1\"} 1.0\n"),
            std::string::npos);
}

}  // namespace
}  // namespace llmserve::testing
