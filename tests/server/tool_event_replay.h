// Test helper shared by the tool-call parser tests: rebuilds a ToolParseResult from a parser's
// events alone, checking OpenAI's delta shape on the way (a call's begin carries its index,
// id and name; argument fragments follow for the latest call; no empty fragments).
#pragma once

#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "server/tool_parsers/tool_parser.h"

namespace llmserve::tool_parsers {

/// `content_allowed` false: any content event is a failure (grammar-forced outputs).
inline void apply_events(const std::vector<ToolEvent>& events, ToolParseResult* r,
                         bool content_allowed = true) {
  for (const ToolEvent& ev : events) {
    switch (ev.kind) {
      case ToolEventKind::kContent:
        if (!content_allowed) ADD_FAILURE() << "content event: [" << ev.text << "]";
        EXPECT_FALSE(ev.text.empty());
        r->content += ev.text;
        break;
      case ToolEventKind::kToolCallBegin:
        EXPECT_EQ(ev.index, static_cast<int>(r->tool_calls.size()));
        EXPECT_FALSE(ev.id.empty());
        EXPECT_FALSE(ev.name.empty());
        EXPECT_TRUE(ev.text.empty());
        r->tool_calls.push_back({ev.index, ev.id, ev.name, "", false});
        break;
      case ToolEventKind::kToolCallArguments:
        ASSERT_FALSE(r->tool_calls.empty());
        EXPECT_EQ(ev.index, static_cast<int>(r->tool_calls.size()) - 1);
        EXPECT_FALSE(ev.text.empty());
        r->tool_calls.back().arguments += ev.text;
        break;
    }
  }
}

/// Checks that the replayed `r` agrees with the parser's own result() (ids and arguments of
/// every call, content) and copies `complete`, which only the parser knows.
inline void match_parser_result(const ToolParser& p, ToolParseResult* r) {
  EXPECT_EQ(r->content, p.result().content);
  EXPECT_EQ(r->tool_calls.size(), p.result().tool_calls.size());
  for (size_t i = 0; i < r->tool_calls.size() && i < p.result().tool_calls.size(); ++i) {
    EXPECT_EQ(r->tool_calls[i].id, p.result().tool_calls[i].id);
    EXPECT_EQ(r->tool_calls[i].arguments, p.result().tool_calls[i].arguments);
    r->tool_calls[i].complete = p.result().tool_calls[i].complete;
  }
}

/// A readable, byte-exact rendering of a result (the texts may hold invalid UTF-8).
inline std::string describe(const ToolParseResult& r) {
  std::string out = "content=[" + r.content + "]";
  for (const ToolCall& c : r.tool_calls) {
    out += " {" + std::to_string(c.index) + " id=" + c.id + " name=" + c.name + " args=[" +
           c.arguments + "]" + (c.complete ? "" : " incomplete") + "}";
  }
  return out;
}

}  // namespace llmserve::tool_parsers
