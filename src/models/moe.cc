#include "models/moe.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "kernels/ops.h"

namespace llmserve {

Expected<MoeWeights> load_moe_weights(WeightLoader& w, const ModelConfig& c, int32_t layer,
                                      ThreadPool* pool) {
  const std::string p = "blk." + std::to_string(layer) + ".";
  const int64_t E = c.n_experts, F = c.expert_ffn_dim, dim = c.dim;
  MoeWeights m;
  LLMS_ASSIGN_OR_RETURN(m.router, w.matrix(p + "ffn_gate_inp.weight", E, dim));
  LLMS_ASSIGN_OR_RETURN(std::vector<WeightMatrix> gate, w.experts(p + "ffn_gate_exps.weight", p + "ffn_gate.", E, F, dim));
  LLMS_ASSIGN_OR_RETURN(std::vector<WeightMatrix> up, w.experts(p + "ffn_up_exps.weight", p + "ffn_up.", E, F, dim));
  LLMS_ASSIGN_OR_RETURN(m.down, w.experts(p + "ffn_down_exps.weight", p + "ffn_down.", E, dim, F));
  for (int64_t e = 0; e < E; ++e) {
    WeightMatrix parts[2] = {gate[e], up[e]};
    LLMS_ASSIGN_OR_RETURN(WeightMatrix gu, concat_rows(parts));
    m.gate_up.push_back(std::move(gu));
  }
  std::vector<PrepareJob> jobs;
  for (int64_t e = 0; e < E; ++e) {
    jobs.push_back({&m.gate_up[e], WeightUse::kSiluMul});
    jobs.push_back({&m.down[e]});
  }
  prepare_weights(jobs, pool);
  prepare_weight(m.router);
  if (c.shared_expert_ffn_dim > 0) {
    const int64_t S = c.shared_expert_ffn_dim;
    WeightMatrix parts[2];
    LLMS_ASSIGN_OR_RETURN(parts[0], w.matrix(p + "ffn_gate_shexp.weight", S, dim));
    LLMS_ASSIGN_OR_RETURN(parts[1], w.matrix(p + "ffn_up_shexp.weight", S, dim));
    LLMS_ASSIGN_OR_RETURN(m.shared_gate_up, concat_rows(parts));
    LLMS_ASSIGN_OR_RETURN(m.shared_down, w.matrix(p + "ffn_down_shexp.weight", dim, S));
    prepare_weight(m.shared_gate_up, WeightUse::kSiluMul);
    prepare_weight(m.shared_down);
    const std::string gate = p + "ffn_gate_inp_shexp.weight";
    const TensorView* g = w.file().find_tensor(gate);
    if (!c.shared_expert_gated) {
      // DeepSeek: the shared experts are added as they are (a stray gate is left unused, and
      // check_all_used names it).
    } else if (g != nullptr && g->shape.size() == 2) {  // HF shared_expert_gate: Linear(dim, 1)
      LLMS_ASSIGN_OR_RETURN(const TensorView* t, w.tensor(gate, {1, dim}));
      m.shared_gate.resize(dim);
      to_f32(t->data, t->dtype, dim, m.shared_gate.data());
    } else {
      LLMS_ASSIGN_OR_RETURN(m.shared_gate, w.vector(gate, dim));
    }
  }
  const std::string bias = p + "exp_probs_b.bias";
  if (w.file().find_tensor(bias) != nullptr) {
    LLMS_ASSIGN_OR_RETURN(m.selection_bias, w.vector(bias, E));
  } else if (c.moe_scoring == MoeScoring::kSigmoid) {
    // DeepSeek-V3 trains this bias (auxiliary-loss-free balancing); transformers starts a
    // checkpoint without it from zeros, which is what runs here too: say so.
    std::fprintf(stderr, "warning: %s: no %s (e_score_correction_bias): layer %d routes without a selection bias\n",
                 w.file().path().c_str(), bias.c_str(), static_cast<int>(layer));
  }
  return m;
}

void MoeMlp::forward(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t T, float* y,
                     ThreadPool* pool) {
  const int64_t E = c.n_experts, K = c.n_experts_used, dim = c.dim;
  router_logits_.resize(T * E);
  chosen_.resize(T * K);
  weights_.resize(T * K);
  expert_out_.resize(T * K * dim);
  const float* bias = w.selection_bias.empty() ? nullptr : w.selection_bias.data();
  if (T == 1 && pool != nullptr && pool->num_threads() > 1 && K >= pool->num_threads()) {
    experts_one_token(c, w, x, bias, pool);
  } else {
    experts_grouped(c, w, x, T, bias, pool);
  }
  const bool shared = c.shared_expert_ffn_dim > 0;
  if (shared) {
    shared_hidden_.resize(T * c.shared_expert_ffn_dim);
    shared_out_.resize(T * dim);
    gemm_silu_mul(x, T, w.shared_gate_up, shared_hidden_.data(), pool);
    gemm(shared_hidden_.data(), T, w.shared_down, shared_out_.data(), pool);
  }
  // Each token's weighted sum in rank order (then the shared expert): independent of the batch.
  for (int64_t t = 0; t < T; ++t) {
    float* out = y + t * dim;
    std::fill_n(out, dim, 0.0f);
    for (int64_t k = 0; k < K; ++k) {
      const float wk = weights_[t * K + k];
      const float* o = &expert_out_[(t * K + k) * dim];
      for (int64_t d = 0; d < dim; ++d) out[d] += wk * o[d];
    }
    if (shared && w.shared_gate.empty()) {
      const float* o = &shared_out_[t * dim];
      for (int64_t d = 0; d < dim; ++d) out[d] += o[d];
    } else if (shared) {
      const float* xt = x + t * dim;
      float z = 0;
      for (int64_t d = 0; d < dim; ++d) z += w.shared_gate[d] * xt[d];
      const float g = 1.0f / (1.0f + std::exp(-z));
      const float* o = &shared_out_[t * dim];
      for (int64_t d = 0; d < dim; ++d) out[d] += g * o[d];
    }
  }
}

void MoeMlp::experts_grouped(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t T,
                             const float* bias, ThreadPool* pool) {
  const int64_t E = c.n_experts, K = c.n_experts_used, F = c.expert_ffn_dim, dim = c.dim;
  gemm(x, T, w.router, router_logits_.data(), pool);
  rows_.resize(E);  // cleared, not reallocated: this runs every layer of every step
  for (std::vector<int32_t>& r : rows_) r.clear();
  for (int64_t t = 0; t < T; ++t) {
    router_.route(c, &router_logits_[t * E], bias, &chosen_[t * K], &weights_[t * K]);
    for (int64_t k = 0; k < K; ++k) rows_[chosen_[t * K + k]].push_back(static_cast<int32_t>(t * K + k));
  }
  // One gate/up GEMM (SiLU·mul in its epilogue) and one down GEMM per expert that has tokens,
  // each expert's rows gathered contiguously. For few rows (decode) all experts' GEMMs of a kind
  // run as one group (one pool dispatch instead of one per expert: 8.9 vs 10.2 ms a token on
  // qwen3moe-1b Q4_K_M); for many (prefill) expert by expert, so that each expert's gathered
  // rows stay in cache between the gather, the GEMMs and the scatter (grouping all of them
  // streamed 16 MiB buffers per layer and made a 512-token prefill 20 % slower).
  const int64_t R = T * K;
  if (R <= kMaxGroupedRows) {
    x_in_.resize(R * dim);
    hidden_.resize(R * F);
    out_.resize(R * dim);
    std::vector<GemmProblem> up_problems, down_problems;
    std::vector<int32_t> order_rows;  // gathered row i holds choice order_rows[i]
    order_rows.reserve(R);
    for (int64_t e = 0; e < E; ++e) {
      const std::vector<int32_t>& rows = rows_[e];
      if (rows.empty()) continue;
      const int64_t r0 = static_cast<int64_t>(order_rows.size()), n = static_cast<int64_t>(rows.size());
      for (int32_t r : rows) {
        std::copy_n(x + (r / K) * dim, dim, &x_in_[order_rows.size() * dim]);
        order_rows.push_back(r);
      }
      up_problems.push_back({&x_in_[r0 * dim], n, &w.gate_up[e], &hidden_[r0 * F]});
      down_problems.push_back({&hidden_[r0 * F], n, &w.down[e], &out_[r0 * dim]});
    }
    gemm_silu_mul_grouped(up_problems, pool);
    gemm_grouped(down_problems, pool);
    for (size_t i = 0; i < order_rows.size(); ++i)
      std::copy_n(&out_[i * dim], dim, &expert_out_[static_cast<int64_t>(order_rows[i]) * dim]);
  } else {
    for (int64_t e = 0; e < E; ++e) {
      const std::vector<int32_t>& rows = rows_[e];
      const int64_t n = static_cast<int64_t>(rows.size());
      if (n == 0) continue;
      x_in_.resize(n * dim);
      hidden_.resize(n * F);
      out_.resize(n * dim);
      for (int64_t i = 0; i < n; ++i) std::copy_n(x + (rows[i] / K) * dim, dim, &x_in_[i * dim]);
      gemm_silu_mul(x_in_.data(), n, w.gate_up[e], hidden_.data(), pool);
      gemm(hidden_.data(), n, w.down[e], out_.data(), pool);
      for (int64_t i = 0; i < n; ++i) std::copy_n(&out_[i * dim], dim, &expert_out_[rows[i] * dim]);
    }
  }
}

void MoeMlp::experts_one_token(const ModelConfig& c, const MoeWeights& w, const float* x,
                               const float* bias, ThreadPool* pool) {
  const int64_t E = c.n_experts, K = c.n_experts_used, F = c.expert_ffn_dim, dim = c.dim;
  const int n = pool->num_threads();
  thread_routers_.resize(static_cast<size_t>(n));
  thread_logits_.resize(static_cast<size_t>(n * E));
  thread_chosen_.resize(static_cast<size_t>(n * K));
  thread_weights_.resize(static_cast<size_t>(n * K));
  hidden_.resize(static_cast<size_t>(n * F));
  pool->parallel_for(n, [&](int64_t t, int64_t) {
    // Every thread scores and routes the token itself (the same calls on the same row: the
    // same bits, the same choice), then runs its share of the chosen experts whole, in rank
    // order. No thread waits for another inside the job: a spin on a router split in halves
    // made an oversubscribed or busy machine 5x slower (8 threads on 2 cores: 6.9 tok/s).
    float* logits = &thread_logits_[t * E];
    int32_t* ids = &thread_chosen_[t * K];
    float* wk = &thread_weights_[t * K];
    gemm(x, 1, w.router, logits, nullptr);
    thread_routers_[t].route(c, logits, bias, ids, wk);
    float* h = &hidden_[t * F];
    for (int64_t k = t * K / n; k < (t + 1) * K / n; ++k) {
      gemm_silu_mul(x, 1, w.gate_up[ids[k]], h, nullptr);
      gemm(h, 1, w.down[ids[k]], &expert_out_[k * dim], nullptr);
    }
  });
  std::copy_n(thread_chosen_.data(), K, chosen_.data());
  std::copy_n(thread_weights_.data(), K, weights_.data());
}

}  // namespace llmserve
