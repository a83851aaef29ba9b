// SSE streaming, concurrency, client disconnects and shutdown over real loopback HTTP.
#include <gtest/gtest.h>

#include <atomic>
#include <set>

#include "server/sse.h"
#include "server_test_util.h"

namespace llmserve::testing {
namespace {

TEST(Streaming, CompletionChunksThenDone) {
  TestServer ts;
  const std::vector<int32_t> ids = fake_encode("Hello", true);
  StreamReply s = post_stream(
      ts, "/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 7}, {"stream", true}});
  EXPECT_EQ(s.status, 200);
  EXPECT_NE(s.content_type.find("text/event-stream"), std::string::npos) << s.content_type;
  EXPECT_EQ(s.num_done, 1);
  EXPECT_TRUE(s.done_is_last);
  ASSERT_GE(s.chunks.size(), 2u) << "expected one chunk per token";
  std::string text;
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    const json& c = s.chunks[i];
    EXPECT_EQ(c["object"], "text_completion");
    EXPECT_EQ(c["id"], s.chunks[0]["id"]);
    EXPECT_EQ(c["id"].get<std::string>().rfind("cmpl-", 0), 0u);
    EXPECT_EQ(c["model"], "fake-model");
    EXPECT_FALSE(c.contains("usage")) << "usage only with stream_options.include_usage";
    ASSERT_EQ(c["choices"].size(), 1u);
    const json& finish = c["choices"][0]["finish_reason"];
    if (i + 1 < s.chunks.size()) {
      EXPECT_TRUE(finish.is_null()) << "chunk " << i << ": " << c.dump();
    } else {
      EXPECT_EQ(finish, "length");
    }
    text += c["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(text, expected_fake_text(ids, 7));
}

TEST(Streaming, IncludeUsageAddsAFinalUsageChunk) {
  TestServer ts;
  StreamReply s = post_stream(ts, "/v1/completions",
                              {{"prompt", {10, 11, 12}},
                               {"max_tokens", 4},
                               {"stream", true},
                               {"stream_options", {{"include_usage", true}}}});
  ASSERT_GE(s.chunks.size(), 2u);
  const json& last = s.chunks.back();
  EXPECT_TRUE(last["choices"].empty()) << last.dump();
  EXPECT_EQ(last["usage"], json({{"prompt_tokens", 3}, {"completion_tokens", 4},
                                 {"total_tokens", 7},
                                 {"prompt_tokens_details", {{"cached_tokens", 0}}}}));
  std::string text;
  for (size_t i = 0; i + 1 < s.chunks.size(); ++i) {
    EXPECT_TRUE(s.chunks[i].contains("usage") && s.chunks[i]["usage"].is_null())
        << s.chunks[i].dump();
    text += s.chunks[i]["choices"][0]["text"].get<std::string>();
  }
  EXPECT_EQ(s.chunks[s.chunks.size() - 2]["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(text, expected_fake_text({10, 11, 12}, 4));
  EXPECT_TRUE(s.done_is_last);
}

TEST(Streaming, NChoicesAreInterleavedByIndexEachWithItsOwnFinish) {
  TestServer ts;
  const std::vector<int32_t> ids = fake_encode("Hello", true);
  for (const char* path : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(path);
    const bool chat = std::string(path) == "/v1/chat/completions";
    json req = {{"max_tokens", 4}, {"n", 3}, {"stream", true},
                {"stream_options", {{"include_usage", true}}}};
    if (chat)
      req["messages"] = {{{"role", "user"}, {"content", "Hi"}}};
    else
      req["prompt"] = "Hello";
    StreamReply s = post_stream(ts, path, req);
    ASSERT_EQ(s.status, 200);
    EXPECT_TRUE(s.done_is_last);
    std::vector<std::string> text(3);
    std::vector<int> finishes(3, 0), roles(3, 0);
    ASSERT_GE(s.chunks.size(), 2u);
    for (size_t i = 0; i + 1 < s.chunks.size(); ++i) {
      const json& c = s.chunks[i];
      ASSERT_EQ(c["choices"].size(), 1u) << c.dump();
      const int idx = c["choices"][0]["index"].get<int>();
      ASSERT_TRUE(idx >= 0 && idx < 3) << c.dump();
      EXPECT_EQ(finishes[idx], 0) << "a chunk after the choice finished: " << c.dump();
      if (!c["choices"][0]["finish_reason"].is_null()) {
        EXPECT_EQ(c["choices"][0]["finish_reason"], "length");
        ++finishes[idx];
      }
      if (chat) {
        const json& d = c["choices"][0]["delta"];
        if (d.contains("role")) ++roles[idx];
        if (d.contains("content")) text[idx] += d["content"].get<std::string>();
      } else {
        text[idx] += c["choices"][0]["text"].get<std::string>();
      }
    }
    const std::vector<int32_t> prompt =
        chat ? fake_encode("user: Hi\nassistant:", true) : ids;
    for (int i = 0; i < 3; ++i) {
      EXPECT_EQ(finishes[i], 1);
      if (chat) {
        EXPECT_EQ(roles[i], 1);
      }
      EXPECT_EQ(text[i], expected_fake_text(prompt, 4));
    }
    const json& last = s.chunks.back();
    EXPECT_TRUE(last["choices"].empty());
    EXPECT_EQ(last["usage"]["completion_tokens"], 12);
    EXPECT_EQ(last["usage"]["prompt_tokens"], prompt.size());
  }
}

TEST(Streaming, StopStringIsNotLeakedInDeltas) {
  TestServer ts;
  const std::vector<int32_t> ids = fake_encode("Hello", true);
  const std::string full = expected_fake_text(ids, 12);
  StreamReply s = post_stream(ts, "/v1/completions",
                              {{"prompt", "Hello"},
                               {"max_tokens", 12},
                               {"stream", true},
                               {"stop", full.substr(5, 3)}});
  std::string text;
  for (const json& c : s.chunks) text += c["choices"][0]["text"].get<std::string>();
  EXPECT_EQ(text, full.substr(0, 5));
  EXPECT_EQ(s.chunks.back()["choices"][0]["finish_reason"], "stop");
}

TEST(Streaming, ChatRoleFirstThenContent) {
  TestServer ts;
  const json req = {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                    {"max_tokens", 5},
                    {"stream", true}};
  StreamReply s = post_stream(ts, "/v1/chat/completions", req);
  EXPECT_EQ(s.status, 200);
  ASSERT_GE(s.chunks.size(), 3u);
  EXPECT_EQ(s.chunks[0]["choices"][0]["delta"]["role"], "assistant");
  std::string content;
  for (size_t i = 0; i < s.chunks.size(); ++i) {
    const json& c = s.chunks[i];
    EXPECT_EQ(c["object"], "chat.completion.chunk");
    EXPECT_EQ(c["id"], s.chunks[0]["id"]);
    EXPECT_EQ(c["id"].get<std::string>().rfind("chatcmpl-", 0), 0u);
    const json& delta = c["choices"][0]["delta"];
    if (i > 0) {
      EXPECT_FALSE(delta.contains("role")) << c.dump();
    }
    if (delta.contains("content")) content += delta["content"].get<std::string>();
    if (i + 1 < s.chunks.size()) {
      EXPECT_TRUE(c["choices"][0]["finish_reason"].is_null()) << c.dump();
    }
  }
  EXPECT_EQ(s.chunks.back()["choices"][0]["finish_reason"], "length");
  EXPECT_EQ(content, expected_fake_text(fake_encode("user: Hi\nassistant:", true), 5));
  EXPECT_TRUE(s.done_is_last);
}

TEST(Streaming, ConcurrentClientsGetTheirOwnResults) {
  FakeEngineOptions opts;
  opts.step_delay = std::chrono::microseconds(200);  // make requests overlap in the engine
  TestServer ts(opts);
  constexpr int kClients = 16;
  std::vector<std::string> texts(kClients), ids(kClients), want(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      const std::string prompt = "client number " + std::to_string(i) + ":";
      const int max_tokens = 20 + i;
      want[i] = expected_fake_text(fake_encode(prompt, true), max_tokens);
      const json req = {{"prompt", prompt}, {"max_tokens", max_tokens}, {"stream", i % 2 == 0}};
      if (i % 2 == 0) {
        StreamReply s = post_stream(ts, "/v1/completions", req);
        for (const json& c : s.chunks) texts[i] += c["choices"][0]["text"].get<std::string>();
        if (!s.chunks.empty()) ids[i] = s.chunks[0]["id"];
      } else {
        auto r = ts.post("/v1/completions", req);
        if (!r) ADD_FAILURE() << "client " << i << ": " << httplib::to_string(r.error());
        else if (r->status != 200) ADD_FAILURE() << "client " << i << ": " << r->body;
        if (r && r->status == 200) {
          json body = json::parse(r->body);
          texts[i] = body["choices"][0]["text"];
          ids[i] = body["id"];
        }
      }
    });
  }
  for (auto& t : threads) t.join();
  std::set<std::string> distinct_texts, distinct_ids;
  for (int i = 0; i < kClients; ++i) {
    EXPECT_EQ(texts[i], want[i]) << "client " << i;
    distinct_texts.insert(texts[i]);
    distinct_ids.insert(ids[i]);
  }
  EXPECT_EQ(distinct_texts.size(), size_t{kClients});
  EXPECT_EQ(distinct_ids.size(), size_t{kClients});
  EXPECT_EQ(ts.fake().blocks_in_use(), 0);
}

FakeEngineOptions slow_long_engine() {
  FakeEngineOptions opts;
  opts.max_model_len = 1 << 20;
  opts.num_blocks = 1 << 20;
  opts.step_delay = std::chrono::milliseconds(1);
  return opts;
}

TEST(Disconnect, StreamingClientLeavingAbortsTheRequest) {
  TestServer ts(slow_long_engine());
  auto client = ts.client();
  httplib::Request req;
  req.method = "POST";
  req.path = "/v1/completions";
  req.body = json{{"prompt", "Hello"}, {"max_tokens", 500000}, {"stream", true}}.dump();
  req.set_header("Content-Type", "application/json");
  int blocks_while_streaming = -1;
  std::string received;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    received.append(data, n);
    blocks_while_streaming = ts.fake().blocks_in_use();
    return false;  // hang up after the first piece
  };
  httplib::Response res;
  httplib::Error error = httplib::Error::Success;
  client->send(req, res, error);
  client.reset();  // make sure the socket is closed
  EXPECT_NE(received.find("data: "), std::string::npos) << received;
  EXPECT_GT(blocks_while_streaming, 0) << "the request should hold KV blocks while it runs";
  EXPECT_TRUE(wait_for([&] { return ts.fake().blocks_in_use() == 0; }))
      << "blocks still in use: " << ts.fake().blocks_in_use();
  EXPECT_TRUE(wait_for([&] { return ts.fake().num_aborted() == 1; }));
  // The server is still healthy.
  EXPECT_EQ(ts.post("/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}})->status, 200);
}

TEST(Disconnect, NonStreamingClientTimingOutAbortsTheRequest) {
  TestServer ts(slow_long_engine());
  {
    auto client = ts.client();
    client->set_read_timeout(0, 300 * 1000);  // give up after 0.3 s
    auto r = client->Post("/v1/completions",
                          json{{"prompt", "Hello"}, {"max_tokens", 500000}}.dump(),
                          "application/json");
    EXPECT_FALSE(r) << "the request should not have completed";
  }
  EXPECT_EQ(ts.fake().num_added(), 1);
  EXPECT_TRUE(wait_for([&] { return ts.fake().num_aborted() == 1; }))
      << "the server did not notice the client leaving";
  EXPECT_TRUE(wait_for([&] { return ts.fake().blocks_in_use() == 0; }));
}

TEST(Disconnect, StopWhileStreamingAbortsAndReturns) {
  TestServer ts(slow_long_engine());
  std::thread client_thread([&] {
    // Ends when the server goes away; the outcome does not matter here.
    ts.post("/v1/completions", {{"prompt", "Hello"}, {"max_tokens", 500000}, {"stream", true}});
  });
  EXPECT_TRUE(wait_for([&] { return ts.fake().blocks_in_use() > 0; }));
  ts.stop();  // joins listen(): must not wait for the 500000 tokens
  client_thread.join();
  EXPECT_TRUE(wait_for([&] { return ts.fake().blocks_in_use() == 0; }));
  EXPECT_EQ(ts.fake().num_aborted(), 1);
}

}  // namespace
}  // namespace llmserve::testing
