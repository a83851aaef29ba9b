// Model: a decoder-only transformer's forward pass over a packed batch of tokens from many
// sequences, reading and writing the paged KV cache through an AttentionBackend.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "common/status.h"
#include "common/thread_pool.h"
#include "config/model_config.h"
#include "kernels/attention.h"
#include "models/model_file.h"

namespace llmserve {

/// One step's input, as plain arrays owned by the model runner.
struct ForwardBatch {
  int32_t num_tokens = 0;
  const int32_t* token_ids = nullptr;  // [num_tokens]
  const int32_t* positions = nullptr;  // [num_tokens], position of each token in its sequence
  AttentionMetadata attn;
  /// Hybrid KV (SchedulerConfig::hybrid_kv): the sliding-window layers' metadata (their own
  /// block tables and slot mapping into their own cache tensors); null = every layer uses attn.
  const AttentionMetadata* attn_sliding = nullptr;
  /// The metadata a layer uses: attn_sliding for a sliding-window layer when set, else attn.
  const AttentionMetadata& attn_for(bool sliding_layer) const {
    return sliding_layer && attn_sliding != nullptr ? *attn_sliding : attn;
  }
  /// Rows (indices into the batch) whose logits are wanted, e.g. each sequence's last token.
  const int32_t* logits_indices = nullptr;  // [num_logits]
  int32_t num_logits = 0;
};

class Model {
 public:
  virtual ~Model() = default;
  virtual const ModelConfig& config() const = 0;

  /// Runs every layer over the batch: K/V of the batch's tokens are written into `kv_cache`
  /// (one KVCacheLayer per layer) and logits[num_logits, vocab_size] (float32) are written
  /// for the rows in batch.logits_indices.
  virtual void forward(const ForwardBatch& batch, const KVCacheLayer* kv_cache,
                       const AttentionBackend& attention, ThreadPool* pool, float* logits) = 0;
};

/// How a model's weights are loaded.
struct ModelLoadOptions {
  /// --dtype (vLLM's meaning): the element type float weight tensors (F32/F16/BF16, two or more
  /// dimensions) are converted to at load, into owned memory; nullopt ("auto") keeps every
  /// tensor in its file dtype, read in place from the mapping. Norm and bias vectors are
  /// float32 either way; tensors of any other (quantized) type are never converted.
  std::optional<DType> dtype;
  /// The context the model will serve (--max-model-len; 0 = max_position_embeddings): picks
  /// LongRoPE's long or short factors (ModelConfig::select_longrope).
  int32_t max_model_len = 0;
  /// Threads for load-time work (a MoE layer's experts are repacked in parallel); null = the
  /// calling thread. The loaded weights do not depend on it.
  ThreadPool* pool = nullptr;
};

/// file.config() with what `options` decides applied (LongRoPE's factor list).
inline ModelConfig config_for_load(const ModelFile& file, const ModelLoadOptions& options) {
  ModelConfig c = file.config();
  c.select_longrope(options.max_model_len);
  return c;
}

/// The float dtype a model's weights are in once loaded with `options`: options.dtype, else
/// the file's (ModelConfig::weight_dtype), float32 for quantized weights (their float tensors,
/// norms and biases, are kept in f32).
inline DType model_dtype(const ModelConfig& config, const ModelLoadOptions& options) {
  return options.dtype.value_or(config.default_kv_dtype());
}

/// `--kv-cache-dtype auto`: model_dtype (as vLLM's auto follows the model dtype after --dtype),
/// except float16 for quantized weights loaded without --dtype: llama.cpp's default cache type,
/// half the bytes of f32 (twice the sequences in a budget, a faster long-context decode). On
/// issue 14's llama-q references (../shared/testdata/models/quantized) its logits stay within
/// 0.012 of the float64 pass (f32 KV: 0.013; llama.cpp's own: 0.30).
inline DType auto_kv_dtype(const ModelConfig& config, const ModelLoadOptions& options) {
  if (!options.dtype && is_quantized(config.weight_dtype)) return DType::kF16;
  return model_dtype(config, options);
}

/// Builds the model for file.config().architecture (the registry). Checks every tensor's
/// presence, dtype and shape against the config; errors name the file and the tensor.
Expected<std::unique_ptr<Model>> create_model(const ModelFile& file,
                                              const ModelLoadOptions& options = {});

}  // namespace llmserve
