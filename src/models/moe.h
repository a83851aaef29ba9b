// Mixture-of-experts MLP (sparsely-gated experts: Shazeer et al. 2017; top-k routing as in
// transformers' Qwen3MoeSparseMoeBlock): a router scores every expert for each token, the token
// goes through its top-k experts (each a SwiGLU MLP), and their outputs are summed weighted by
// the router probabilities (softmax over all experts, renormalised over the k chosen when
// norm_topk_prob). A step groups its tokens by expert and runs one gate/up and one down GEMM
// per active expert over exactly its tokens, so decode reads only the chosen experts' bytes.
//
// Batch invariance (docs/batch_invariance.md): a token's router row, its experts' GEMM rows and
// the weighted sum (in top-k rank order) do not depend on which other tokens are in the step or
// chose the same expert (GEMM rows are computed by one recipe whatever M is).
#pragma once

#include <string>
#include <vector>

#include "common/thread_pool.h"
#include "config/model_config.h"
#include "kernels/gemm.h"
#include "models/moe_router.h"
#include "models/weight_loader.h"

namespace llmserve {

/// One layer's expert weights, prepared for the GEMMs.
struct MoeWeights {
  WeightMatrix router;                 // [n_experts, dim] (GGUF ffn_gate_inp, HF mlp.gate)
  std::vector<WeightMatrix> gate_up;   // per expert [2 * expert_ffn_dim, dim]: gate over up
  std::vector<WeightMatrix> down;      // per expert [dim, expert_ffn_dim]
  // Qwen2-MoE's shared expert (empty when ModelConfig::shared_expert_ffn_dim is 0).
  WeightMatrix shared_gate_up;         // [2 * shared_expert_ffn_dim, dim]
  WeightMatrix shared_down;            // [dim, shared_expert_ffn_dim]
  std::vector<float> shared_gate;      // [dim]: the shared expert's weight is sigmoid(x . this)
                                       // (empty when the shared expert is ungated: DeepSeek)
  std::vector<float> selection_bias;   // [n_experts] DeepSeek-V3 e_score_correction_bias (GGUF
                                       // exp_probs_b.bias), added for selection only; or empty
};

/// Loads layer `layer`'s experts: blk.N.ffn_gate_inp.weight and the stacked
/// blk.N.ffn_{gate,up,down}_exps.weight, or per-expert blk.N.ffn_{gate,up,down}.E.weight; with
/// a shared expert, blk.N.ffn_{gate,up,down}_shexp.weight and, when it is gated, its gate
/// blk.N.ffn_gate_inp_shexp.weight ([dim] in GGUF, [1, dim] as HF's shared_expert_gate); the
/// selection bias blk.N.exp_probs_b.bias when the file has it.
/// The experts are prepared (repacked) on `pool`'s threads when given (null: this thread).
/// Errors: WeightLoader's (missing tensor, shape) naming the file and tensor.
Expected<MoeWeights> load_moe_weights(WeightLoader& w, const ModelConfig& c, int32_t layer,
                                      ThreadPool* pool = nullptr);

/// The MoE MLP's forward pass with its scratch (reused across steps; one per model).
class MoeMlp {
 public:
  /// y[t] = sum over token t's top-k experts e of w_e * down_e(silu(gate_e x[t]) * up_e x[t])
  /// (+ sigmoid(g . x[t]) * shared(x[t]) with a gated shared expert, + shared(x[t]) with an
  /// ungated one), w_e from MoeRouter; x and y [T, dim] row-major float32.
  void forward(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t T, float* y, ThreadPool* pool);

 private:
  /// Routes the T tokens (chosen_, weights_) and writes each choice's expert output
  /// (expert_out_): one gate/up and one down GEMM per active expert over its gathered rows.
  void experts_grouped(const ModelConfig& c, const MoeWeights& w, const float* x, int64_t T,
                       const float* bias, ThreadPool* pool);
  /// The same for one token (single-stream decode) as one pool job: every thread scores and
  /// routes the token itself, then runs its share of the k chosen experts
  /// whole, each GEMM on one thread. The layer's MLP costs one dispatch instead of three,
  /// nothing runs serially between router, gate/up and down, and each thread streams whole
  /// expert matrices. Same bits as experts_grouped (a GEMM row's result depends on neither M
  /// nor the thread split).
  void experts_one_token(const ModelConfig& c, const MoeWeights& w, const float* x,
                         const float* bias, ThreadPool* pool);
  /// Chosen rows (tokens x k) up to which a step runs its experts' GEMMs as one group.
  static constexpr int64_t kMaxGroupedRows = 256;
  std::vector<float> router_logits_;        // [T, n_experts]
  std::vector<int32_t> chosen_;             // [T, k] expert ids, in rank order
  std::vector<float> weights_;              // [T, k]
  std::vector<std::vector<int32_t>> rows_;  // per expert: indices t * k + rank choosing it
  MoeRouter router_;
  std::vector<float> x_in_, hidden_, out_;  // [T * k, .]: the chosen rows gathered by expert, their SwiGLU, their output
  std::vector<float> expert_out_;           // [T * k, dim]: each choice's expert output
  std::vector<float> shared_hidden_, shared_out_;  // [T, shared width], [T, dim]
  // experts_one_token's per-thread state: routers, [threads, n_experts] logits, [threads, k]
  // choices and weights (hidden_ holds [threads, width]).
  std::vector<MoeRouter> thread_routers_;
  std::vector<float> thread_logits_;
  std::vector<int32_t> thread_chosen_;
  std::vector<float> thread_weights_;
};

}  // namespace llmserve
