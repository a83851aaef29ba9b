// MoeRouter (models/moe_router.h) on hand-made logits whose expected choice is worked out
// here from the routers' definitions (transformers' Qwen3MoeSparseMoeBlock, DeepSeek-V2's
// MoEGate greedy / group_limited_greedy, DeepSeek-V3's noaux_tc router): which experts, in
// which order, with which weights, and where grouping changes the answer.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "models/moe_router.h"

namespace llmserve {
namespace {

ModelConfig moe_config(int32_t experts, int32_t used) {
  ModelConfig c;
  c.n_experts = experts;
  c.n_experts_used = used;
  c.expert_ffn_dim = 8;
  return c;
}

struct Routed {
  std::vector<int32_t> ids;
  std::vector<float> weights;
  float gap;
};

Routed route(const ModelConfig& c, const std::vector<float>& logits, const std::vector<float>& bias = {}) {
  MoeRouter r;
  Routed out{std::vector<int32_t>(c.n_experts_used), std::vector<float>(c.n_experts_used), 0};
  out.gap = r.route(c, logits.data(), bias.empty() ? nullptr : bias.data(), out.ids.data(), out.weights.data());
  return out;
}

std::vector<double> softmax(const std::vector<float>& z) {
  double sum = 0;
  std::vector<double> p(z.size());
  for (size_t i = 0; i < z.size(); ++i) sum += p[i] = std::exp(double(z[i]));
  for (double& v : p) v /= sum;
  return p;
}

/// The logit whose sigmoid is p.
float logit(double p) { return static_cast<float>(std::log(p / (1 - p))); }

TEST(MoeRouter, SoftmaxTopKRenormalised) {
  ModelConfig c = moe_config(4, 2);  // Qwen3-MoE: norm_topk_prob
  const std::vector<float> z = {0.f, 1.f, 2.f, 3.f};
  const auto p = softmax(z);
  const Routed r = route(c, z);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{3, 2}));
  EXPECT_NEAR(r.weights[0], p[3] / (p[2] + p[3]), 1e-6);
  EXPECT_NEAR(r.weights[1], p[2] / (p[2] + p[3]), 1e-6);
  EXPECT_NEAR(r.gap, p[2] - p[1], 1e-6);
}

TEST(MoeRouter, TiesGoToTheLowerExpert) {
  ModelConfig c = moe_config(4, 2);
  EXPECT_EQ(route(c, {1.f, 1.f, 1.f, 0.f}).ids, (std::vector<int32_t>{0, 1}));
  EXPECT_EQ(route(c, {0.f, 1.f, 1.f, 1.f}).ids, (std::vector<int32_t>{1, 2}));
}

TEST(MoeRouter, ScalingFactorAfterNoRenormalisation) {
  ModelConfig c = moe_config(4, 2);  // DeepSeek-V2: softmax weights times routed_scaling_factor
  c.norm_topk_prob = false;
  c.routed_scaling_factor = 16.0f;
  const std::vector<float> z = {0.5f, -1.f, 2.f, 0.f};
  const auto p = softmax(z);
  const Routed r = route(c, z);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 0}));
  EXPECT_NEAR(r.weights[0], 16 * p[2], 1e-5);
  EXPECT_NEAR(r.weights[1], 16 * p[0], 1e-5);
}

// group_limited_greedy: a group's score is its best expert's. Group 0 holds the best expert,
// group 1 the larger sum (which top-2-sum scoring would pick): by the best expert, group 0.
TEST(MoeRouter, GroupLimitedGreedyScoresAGroupByItsBestExpert) {
  ModelConfig c = moe_config(4, 2);
  c.norm_topk_prob = false;
  c.n_expert_groups = 2;
  c.n_expert_groups_used = 1;
  const std::vector<float> z = {3.f, -3.f, 2.5f, 2.4f};
  const auto p = softmax(z);
  Routed r = route(c, z);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{0, 1}));
  EXPECT_NEAR(r.weights[0], p[0], 1e-6);
  EXPECT_NEAR(r.weights[1], p[1], 1e-6);
  EXPECT_TRUE(std::isinf(r.gap));  // every eligible expert is chosen
  c.moe_group_score = MoeGroupScore::kTop2Sum;
  EXPECT_EQ(route(c, z).ids, (std::vector<int32_t>{2, 3}));
  c.n_expert_groups = 1;  // no grouping: the two best overall
  c.n_expert_groups_used = 1;
  EXPECT_EQ(route(c, z).ids, (std::vector<int32_t>{0, 2}));
}

// noaux_tc: sigmoid scores, groups of 2 scored by their top-2 sum, the 2 best groups kept.
// Expert 0 has the best score (0.9) but its group sums to 0.95 < 1.2 (group 1), 1.0 (group 2).
TEST(MoeRouter, SigmoidGroupsExcludeTheBestExpertOfAWeakGroup) {
  ModelConfig c = moe_config(8, 2);
  c.moe_scoring = MoeScoring::kSigmoid;
  c.moe_group_score = MoeGroupScore::kTop2Sum;
  c.n_expert_groups = 4;
  c.n_expert_groups_used = 2;
  c.norm_topk_prob = true;
  c.routed_scaling_factor = 2.5f;
  const std::vector<double> s = {0.9, 0.05, 0.6, 0.6, 0.5, 0.5, 0.2, 0.2};
  std::vector<float> z;
  for (double v : s) z.push_back(logit(v));
  Routed r = route(c, z);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{2, 3}));
  EXPECT_NEAR(r.weights[0], 1.25, 1e-5);
  EXPECT_NEAR(r.weights[1], 1.25, 1e-5);
  EXPECT_NEAR(r.gap, 0.1, 1e-5);
  // The selection bias moves expert 4 up (0.8) and its group to the top (1.3), but the weights
  // stay the unbiased scores 0.5 and 0.6, renormalised, times 2.5.
  const std::vector<float> bias = {0, 0, 0, 0, 0.3f, 0, 0, 0};
  r = route(c, z, bias);
  EXPECT_EQ(r.ids, (std::vector<int32_t>{4, 2}));
  EXPECT_NEAR(r.weights[0], 2.5 * 0.5 / 1.1, 1e-5);
  EXPECT_NEAR(r.weights[1], 2.5 * 0.6 / 1.1, 1e-5);
  // Without groups the best expert is back.
  c.n_expert_groups = c.n_expert_groups_used = 1;
  EXPECT_EQ(route(c, z).ids, (std::vector<int32_t>{0, 2}));
}

TEST(MoeRouter, ConfigRejectsGroupsThatCannotHoldTheChosenExperts) {
  ModelConfig c = moe_config(8, 4);
  c.dim = 64;
  c.n_layers = 1;
  c.n_heads = 4;
  c.n_kv_heads = 4;
  c.head_dim = 16;
  c.ffn_dim = 32;
  c.vocab_size = 16;
  c.max_position_embeddings = 64;
  ASSERT_TRUE(c.validate().ok()) << c.validate().message();
  c.n_expert_groups = 4;
  c.n_expert_groups_used = 1;  // 2 experts eligible, 4 used
  EXPECT_FALSE(c.validate().ok());
  c.n_expert_groups_used = 2;
  EXPECT_TRUE(c.validate().ok()) << c.validate().message();
  c.n_expert_groups = 3;  // 8 experts do not split into 3 groups
  EXPECT_FALSE(c.validate().ok());
  c.n_expert_groups = 1;
  c.n_expert_groups_used = 1;
  c.routed_scaling_factor = 0;
  EXPECT_FALSE(c.validate().ok());
}

}  // namespace
}  // namespace llmserve
