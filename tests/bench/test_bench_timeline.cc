// The timeline: cell classification of a scripted run, and a well-formed SVG with one row
// per request.
#include <gtest/gtest.h>

#include "bench/timeline_svg.h"
#include "xml_check.h"

namespace llmserve::bench {
namespace {

using E = StepRecord::Entry;

StepRecord make_step(std::vector<E> scheduled, std::vector<int64_t> waiting,
                     std::vector<int64_t> preempted = {}) {
  StepRecord s;
  s.scheduled = std::move(scheduled);
  s.waiting = std::move(waiting);
  s.preempted = std::move(preempted);
  for (const E& e : s.scheduled) (e.is_prefill ? s.num_prefill_tokens : s.num_decode_tokens) +=
      e.num_scheduled_tokens;
  return s;
}

//          step: 0  1  2  3  4  5
//  request 0:    P  D  D  .  .  .    (finishes at step 2)
//  request 1:    P  P  D  D  X  P    (chunked prefill; preempted at 4, recomputed at 5)
//  request 2:    W  W  W  P  S  D    (S: admitted but not scheduled in step 4)
RunResult scripted_run() {
  RunResult run;
  run.requests.resize(3);
  for (int i = 0; i < 3; ++i) run.requests[static_cast<size_t>(i)].id = i;
  run.finish_step = {2, 5, 5};
  run.max_num_seqs = 2;
  run.max_num_batched_tokens = 16;
  run.steps = {make_step({{0, 8, true}, {1, 4, true}}, {2}),
               make_step({{0, 1, false}, {1, 4, true}}, {2}),
               make_step({{0, 1, false}, {1, 1, false}}, {2}),
               make_step({{1, 1, false}, {2, 6, true}}, {}),
               make_step({}, {1}, {1}),
               make_step({{1, 9, true}, {2, 1, false}}, {})};
  return run;
}

std::string row_string(const TimelineGrid& g, int64_t r) {
  std::string out;
  for (int64_t s = 0; s < g.num_steps; ++s) {
    switch (g.at(r, s)) {
      case CellState::kBlank: out += '.'; break;
      case CellState::kWaiting: out += 'W'; break;
      case CellState::kStalled: out += 'S'; break;
      case CellState::kPrefill: out += 'P'; break;
      case CellState::kDecode: out += 'D'; break;
      case CellState::kPreempted: out += 'X'; break;
    }
  }
  return out;
}

TEST(BenchTimeline, CellsFollowTheStepRecords) {
  const TimelineGrid g = build_timeline_grid(scripted_run());
  ASSERT_EQ(g.num_requests, 3);
  ASSERT_EQ(g.num_steps, 6);
  EXPECT_EQ(row_string(g, 0), "PDD...");
  EXPECT_EQ(row_string(g, 1), "PPDDXP");
  EXPECT_EQ(row_string(g, 2), "WWWPSD");
  EXPECT_EQ(g.tokens_at(1, 1), 4);
  EXPECT_EQ(g.tokens_at(1, 5), 9);
}

size_t count(const std::string& text, const std::string& needle) {
  size_t n = 0;
  for (size_t p = text.find(needle); p != std::string::npos; p = text.find(needle, p + 1)) ++n;
  return n;
}

TEST(BenchTimeline, SvgIsWellFormedWithOneRowPerRequest) {
  const std::string svg = render_timeline_svg(scripted_run(), "llmserve bench <test> & co");
  EXPECT_EQ(testing::xml_error(svg), "");
  EXPECT_EQ(count(svg, "<g class=\"row\""), 3u);
  EXPECT_NE(svg.find("prefill at step 1 (4 tokens)"), std::string::npos);
  EXPECT_NE(svg.find("preempted at step 4"), std::string::npos);
  EXPECT_NE(svg.find("step 3: 2 of 2 seats"), std::string::npos);
  EXPECT_NE(svg.find("step 5: 9 prefill + 1 decode tokens of 16"), std::string::npos);
  EXPECT_NE(svg.find("&lt;test&gt; &amp; co"), std::string::npos);
}

TEST(BenchTimeline, XmlCheckCatchesBrokenDocuments) {
  EXPECT_EQ(testing::xml_error("<a><b x=\"1\"/></a>"), "");
  EXPECT_NE(testing::xml_error("<a><b></a>"), "");
  EXPECT_NE(testing::xml_error("<a x=1></a>"), "");
  EXPECT_NE(testing::xml_error("<a>&</a>"), "");
  EXPECT_NE(testing::xml_error("<a></a><b></b>"), "");
}

TEST(BenchTimeline, EmptyRunStillRenders) {
  RunResult run;
  run.requests.resize(2);
  const std::string svg = render_timeline_svg(run, "empty");
  EXPECT_EQ(testing::xml_error(svg), "");
  EXPECT_EQ(count(svg, "<g class=\"row\""), 2u);
}

}  // namespace
}  // namespace llmserve::bench
