// Scheduler tests with no model: each step's plan is rendered as a row of a small table and
// compared with the expected schedule. Cell "P4" = 4 prefill tokens, "D" = one decode token,
// "." = not scheduled. After a step every scheduled request is advanced as the engine would.
#include <gtest/gtest.h>

#include <memory>
#include <sstream>

#include "engine/request.h"
#include "engine/scheduler.h"

namespace llmserve {
namespace {

class NullTokenizer final : public Tokenizer {
 public:
  std::vector<int32_t> encode(std::string_view, bool) const override { return {}; }
  std::string decode_token(int32_t, int32_t) const override { return ""; }
  int32_t vocab_size() const override { return 100; }
  int32_t bos_id() const override { return 1; }
  int32_t eos_id() const override { return 2; }
  std::string piece(int32_t) const override { return ""; }
};

struct Harness {
  explicit Harness(SchedulerConfig cfg, int32_t num_blocks, int32_t block_size)
      : kv(num_blocks, block_size), sched((cfg.check_invariants = true, cfg), 1000, kv) {}

  Request* add(int32_t prompt_len, int32_t max_tokens, double arrival = 0, int32_t priority = 0) {
    EngineRequest r;
    r.prompt_token_ids.assign(prompt_len, 5);
    r.params.max_tokens = max_tokens;
    r.arrival_time = arrival;
    r.priority = priority;
    reqs.push_back(std::make_unique<Request>(static_cast<int64_t>(reqs.size()), r, tok, 0));
    sched.add_request(reqs.back().get());
    return reqs.back().get();
  }

  /// Runs one step and returns its row, e.g. "P4 D  .".
  std::string step() {
    SchedulerOutput out = sched.schedule(now);
    std::vector<std::string> cells(reqs.size(), ".");
    for (const auto& s : out.seqs) {
      Request* r = reqs[s.request_id].get();
      const bool prefill = s.num_computed_tokens < r->num_prompt_tokens ||
                           s.num_scheduled_tokens > 1;
      cells[s.request_id] = prefill ? "P" + std::to_string(s.num_scheduled_tokens) : "D";
      r->num_computed_tokens += s.num_scheduled_tokens;
      if (s.logits_mode == LogitsMode::kLast) {
        r->token_ids.push_back(7);
        if (r->num_output_tokens() >= r->params.max_tokens) sched.finish_request(r, FinishReason::kLength);
      }
    }
    std::ostringstream row;
    for (size_t i = 0; i < cells.size(); ++i) row << (i ? " " : "") << cells[i];
    return row.str();
  }

  std::string run(int steps) {
    std::string table;
    for (int i = 0; i < steps; ++i) table += step() + "\n";
    return table;
  }

  double now = 1.0;  // scripted clock (seconds) passed to schedule()
  NullTokenizer tok;
  KVCacheManager kv;
  Scheduler sched;
  std::vector<std::unique_ptr<Request>> reqs;
};

TEST(Scheduler, ContinuousBatchingJoinsAndLeavesPerStep) {
  SchedulerConfig cfg;
  cfg.max_num_batched_tokens = 16;
  Harness h(cfg, 100, 4);
  h.add(4, 2);  // r0: short output, leaves early
  h.add(3, 5);  // r1
  EXPECT_EQ(h.run(2), "P4 P3\nD D\n");
  h.add(2, 1);  // r2 arrives while r1 decodes; r0 has finished
  EXPECT_EQ(h.run(3),
            ". D P2\n"
            ". D .\n"
            ". D .\n");
  EXPECT_FALSE(h.sched.has_unfinished());
  EXPECT_EQ(h.kv.num_free_blocks(), 100);
}

TEST(Scheduler, ChunkedPrefillSplitsLongPromptAndDecodesGoFirst) {
  SchedulerConfig cfg;
  cfg.max_num_batched_tokens = 4;
  Harness h(cfg, 100, 4);
  h.add(2, 3);   // r0
  h.add(9, 1);   // r1: 9-token prompt, budget 4
  EXPECT_EQ(h.run(4),
            "P2 P2\n"   // r0 whole, r1 gets the leftover 2
            "D P3\n"    // decode first, r1 continues with the rest of the budget
            "D P3\n"
            ". P1\n");  // r1's last chunk samples its only token and finishes
  EXPECT_FALSE(h.sched.has_unfinished());
}

TEST(Scheduler, MixedPolicyRunsWholePrefillsBesideDecodes) {
  SchedulerConfig cfg;
  cfg.max_num_batched_tokens = 8;
  cfg.max_model_len = 8;
  cfg.enable_chunked_prefill = false;
  cfg.prefill_policy = PrefillPolicy::kMixed;
  Harness h(cfg, 100, 4);
  h.add(5, 2);
  h.add(5, 1);  // does not fit beside r0's prefill (5 + 5 > 8): waits whole, then joins
  EXPECT_EQ(h.run(3), "P5 .\nD P5\n. .\n");
}

TEST(Scheduler, PrefillFirstPausesDecodesWhileAPromptCanStart) {
  SchedulerConfig cfg;
  cfg.max_num_batched_tokens = 8;
  cfg.max_model_len = 8;
  cfg.enable_chunked_prefill = false;  // prefill-first is the default policy then
  Harness h(cfg, 100, 4);
  h.add(5, 3);
  h.add(5, 1);
  EXPECT_EQ(h.run(4),
            "P5 .\n"   // r1 does not fit beside r0's prefill
            ". P5\n"   // r1's prefill takes the step; r0's decode waits
            "D .\n"
            "D .\n");
}

TEST(Scheduler, StaticBatchRunsToCompletionBeforeAdmittingMore) {
  SchedulerConfig cfg;
  cfg.batching = BatchingMode::kStatic;
  cfg.max_num_seqs = 2;
  Harness h(cfg, 100, 4);
  h.add(2, 1);  // r0 finishes after its prefill: its seat stays idle
  h.add(2, 3);
  h.add(2, 1);  // r2 must wait for the whole batch {r0, r1}
  EXPECT_EQ(h.run(4),
            "P2 P2 .\n"
            ". D .\n"
            ". D .\n"
            ". . P2\n");
}

TEST(Scheduler, ContinuousFillsTheSeatStaticLeavesIdle) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 2;
  Harness h(cfg, 100, 4);
  h.add(2, 1);
  h.add(2, 3);
  h.add(2, 1);
  EXPECT_EQ(h.run(3), "P2 P2 .\n. D P2\n. D .\n");
}

TEST(Scheduler, DynamicBatchLaunchesWhenFullOrOldestWaitedMaxDelay) {
  SchedulerConfig cfg;
  cfg.batching = BatchingMode::kDynamic;
  cfg.max_num_seqs = 3;
  cfg.max_delay_ms = 100;
  Harness h(cfg, 100, 4);
  h.now = 10.0;
  h.add(2, 1, /*arrival=*/10.0);
  h.add(2, 1, /*arrival=*/10.02);
  EXPECT_EQ(h.step(), ". .");     // 2 < max_num_seqs waiting, oldest waited 0 ms
  h.now = 10.05;
  EXPECT_EQ(h.step(), ". .");     // 50 ms < 100 ms
  h.now = 10.125;
  EXPECT_EQ(h.step(), "P2 P2");   // the oldest has waited >= 100 ms: launch with two
  h.add(2, 1, 10.13);
  h.add(2, 1, 10.13);
  h.add(2, 1, 10.13);
  h.now = 10.13;
  EXPECT_EQ(h.step(), ". . P2 P2 P2");  // three waiting == max_num_seqs: launch at once
  EXPECT_FALSE(h.sched.has_unfinished());
}

TEST(Scheduler, PriorityPolicyAdmitsLowestValueFirstTiesByArrival) {
  SchedulerConfig cfg;
  cfg.policy = SchedulingPolicy::kPriority;
  cfg.max_num_seqs = 1;
  Harness h(cfg, 100, 4);
  h.add(1, 1, /*arrival=*/1.0, /*priority=*/5);
  h.add(1, 1, 2.0, 0);
  h.add(1, 1, 3.0, 0);
  h.add(1, 1, 0.5, 9);
  EXPECT_EQ(h.run(4),
            ". P1 . .\n"
            ". . P1 .\n"
            "P1 . . .\n"
            ". . . P1\n");
}

TEST(Scheduler, PriorityPolicyPreemptsTheLowestPriority) {
  SchedulerConfig cfg;
  cfg.policy = SchedulingPolicy::kPriority;
  Harness h(cfg, /*num_blocks=*/2, /*block_size=*/2);
  h.add(2, 3, 1.0, /*priority=*/9);  // r0: admitted first, least important
  h.add(2, 3, 2.0, /*priority=*/1);  // r1
  EXPECT_EQ(h.step(), "P2 P2");      // one block each
  // Both need a 2nd block; the pool is dry. r0 (priority 9) is preempted although it was
  // admitted first, and r1 takes its block.
  EXPECT_EQ(h.step(), ". D");
  EXPECT_EQ(h.reqs[0]->num_preemptions, 1);
  EXPECT_EQ(h.reqs[1]->num_preemptions, 0);
}

TEST(Scheduler, MaxNumSeqsBoundsTheBatch) {
  SchedulerConfig cfg;
  cfg.max_num_seqs = 2;
  Harness h(cfg, 100, 4);
  h.add(1, 2);
  h.add(1, 2);
  h.add(1, 2);
  EXPECT_EQ(h.run(3), "P1 P1 .\nD D .\n. . P1\n");
}

TEST(Scheduler, PreemptsMostRecentlyAdmittedWhenPoolRunsDry) {
  SchedulerConfig cfg;
  Harness h(cfg, /*num_blocks=*/3, /*block_size=*/2);
  h.add(2, 3);  // r0
  h.add(2, 3);  // r1
  h.add(1, 3);  // r2
  // Step 2: r0 needs a 2nd block; r2 (most recently admitted) is preempted, then r1 too
  // (it is now the most recent and still finds no block). Both wait, r1 at the head, until
  // r0 finishes (step 3) and frees its blocks; they are then recomputed from scratch
  // (r1: 2 prompt + 1 generated token, r2: 1 + 1). In step 5 r1 takes a 2nd block and r2,
  // now the most recent again, is preempted a second time.
  EXPECT_EQ(h.run(5),
            "P2 P2 P1\n"
            "D . .\n"
            "D . .\n"
            ". P3 P2\n"
            ". D .\n");
  EXPECT_EQ(h.reqs[1]->num_preemptions, 1);
  EXPECT_EQ(h.reqs[2]->num_preemptions, 2);
  for (int i = 0; i < 50 && h.sched.has_unfinished(); ++i) h.step();
  EXPECT_FALSE(h.sched.has_unfinished());
  EXPECT_EQ(h.kv.num_free_blocks(), 3);
  for (auto& r : h.reqs) EXPECT_EQ(r->num_output_tokens(), r->params.max_tokens);
}

}  // namespace
}  // namespace llmserve
