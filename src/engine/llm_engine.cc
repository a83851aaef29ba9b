// The LLMEngine implementation: owns model file, tokenizer, thread pool, KV cache manager,
// scheduler, model runner and the requests; step() = schedule -> execute -> sample -> update.
#include "engine/llm_engine.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <string_view>
#include <span>
#include <unordered_map>
#include <utility>

#include "common/check.h"
#include "common/logging.h"
#include "common/timing.h"
#include "engine/model_assets.h"
#include "engine/output_processor.h"
#include "engine/request.h"
#include "engine/scheduler.h"
#include "engine/structured_output_manager.h"
#include "kernels/gemm.h"
#include "kernels/quant/qgemm.h"
#include "kv_cache/kv_cache_manager.h"
#include "models/model_file.h"
#include "models/quantize_model.h"
#include "runner/model_runner.h"
#include "sampling/sampler.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {
namespace {

class EngineCore final : public LLMEngine {
 public:
  Status init(const EngineConfig& config);

  Status add_request(int64_t request_id, EngineRequest request) override;
  Status check_request(const EngineRequest& request) const override;
  void abort_request(int64_t request_id) override;
  std::vector<RequestOutput> step() override;
  bool has_unfinished_requests() const override {
    return scheduler_->has_unfinished() || !pending_outputs_.empty();
  }
  EngineStats stats() const override;
  const StepRecord& last_step() const override { return last_step_; }
  std::optional<KvSnapshot> kv_snapshot() const override;
  const ModelConfig& model_config() const override { return model_file_->config(); }
  const EngineConfig& config() const override { return config_; }
  const Tokenizer& tokenizer() const override { return *tokenizer_; }
  const std::optional<std::string>& chat_template() const override { return chat_template_; }
  int32_t max_model_len() const override { return max_model_len_; }
  int64_t kv_blocks_needed(int64_t total_tokens) const override {
    // Hybrid KV: the full-attention layers hold every block (the sliding pool is sized to hold
    // max_num_seqs windows plus a step).
    return KVCacheManager::blocks_held(total_tokens, config_.scheduler.hybrid_kv ? 0 : config_.scheduler.sliding_window,
                                       config_.scheduler.max_num_batched_tokens, config_.cache.block_size);
  }
  const std::string& served_model_name() const override { return config_.served_model_name; }
  SamplingParams default_sampling_params() const override {
    SamplingParams p;
    const GenerationConfig& g = generation_;
    if (g.temperature) p.temperature = *g.temperature;
    if (g.top_p) p.top_p = *g.top_p;
    if (g.top_k && *g.top_k > 0) p.top_k = *g.top_k;
    if (g.min_p) p.min_p = *g.min_p;
    if (g.repetition_penalty) p.repetition_penalty = *g.repetition_penalty;
    return p;
  }
  std::optional<int32_t> default_max_tokens() const override { return generation_.max_new_tokens; }
  bool has_default_temperature() const override { return generation_.temperature.has_value(); }

 private:
  RequestOutput make_output(Request& req, std::vector<int32_t> new_tokens);
  void record_step(const SchedulerOutput& sched, const std::vector<uint8_t>& is_decode,
                   double start_time, int32_t running_after_schedule);
  double kv_utilization() const;
  mutable std::vector<uint8_t> block_seen_scratch_;  // kv_utilization
  void finish(Request& req, FinishReason reason);

  EngineConfig config_;
  int32_t max_model_len_ = 0;
  std::unique_ptr<ModelFile> model_file_;
  GenerationConfig generation_;  // after --generation-config
  std::unique_ptr<Tokenizer> tokenizer_;
  std::optional<std::string> chat_template_;
  std::unique_ptr<ThreadPool> pool_;
  std::unique_ptr<KVCacheManager> kv_;
  std::unique_ptr<KVCacheManager> sliding_kv_;  // hybrid KV: the sliding layers' pool
  std::unique_ptr<Scheduler> scheduler_;
  std::unique_ptr<ModelRunner> runner_;
  std::unordered_map<int64_t, std::unique_ptr<Request>> requests_;
  std::vector<RequestOutput> pending_outputs_;  // aborts reported by the next step()
  std::vector<std::pair<float, int32_t>> sample_scratch_;
  LogitsProcessorScratch processor_scratch_;
  std::vector<float> restricted_logits_;  // logit_bias / allowed_token_ids applied
  std::vector<uint8_t> allowed_scratch_;
  std::unique_ptr<StructuredOutputManager> structured_;  // grammar masks (tokenizer's vocabulary)
  EngineStats counters_;
  StepRecord last_step_;
  std::vector<uint8_t> is_decode_scratch_;  // per scheduled sequence, for record_step
};

Status EngineCore::init(const EngineConfig& config) {
  config_ = config;
  LLMS_RETURN_IF_ERROR(config_.validate());
  LLMS_ASSIGN_OR_RETURN(model_file_, ModelFile::open(config_.model_path));
  const ModelConfig& mc = model_file_->config();
  LLMS_ASSIGN_OR_RETURN(tokenizer_, load_model_tokenizer(config_, *model_file_));
  LLMS_ASSIGN_OR_RETURN(chat_template_, find_model_chat_template(config_, *model_file_));
  structured_ = std::make_unique<StructuredOutputManager>(*tokenizer_);
  LLMS_ASSIGN_OR_RETURN(generation_,
                        resolve_generation_config(config_.generation_config, *model_file_));
  if (config_.served_model_name.empty()) config_.served_model_name = mc.name;

  max_model_len_ = config_.scheduler.max_model_len > 0 ? config_.scheduler.max_model_len
                                                       : mc.max_position_embeddings;
  config_.scheduler.max_model_len = max_model_len_;
  // Windows: every layer sliding frees blocks before the window in the one pool; a model mixing
  // full and sliding layers (Gemma, Qwen2 max_window_layers) gets hybrid KV: the sliding layers
  // in a pool of their own that frees them, the full layers keeping every block.
  config_.scheduler.sliding_window = mc.sliding_window;
  config_.scheduler.hybrid_kv = mc.sliding_window > 0 && !mc.all_layers_sliding();
  LLMS_RETURN_IF_ERROR(config_.scheduler.validate());
  if (max_model_len_ > mc.max_position_embeddings)
    spdlog::warn("--max-model-len {} exceeds the model's declared context length {}",
                 max_model_len_, mc.max_position_embeddings);

  if (config_.num_threads == 0) config_.num_threads = ThreadPool::physical_cores();
  pool_ = std::make_unique<ThreadPool>(config_.num_threads);
  if (!config_.quantization.empty()) {
    LLMS_RETURN_IF_ERROR(
        apply_quantization(*model_file_, config_.quantization, pool_.get()).status());
  }

  const int32_t bs = config_.cache.block_size;
  const ModelLoadOptions load{config_.dtype, max_model_len_, pool_.get()};
  const DType kv_dtype = config_.cache.kv_cache_dtype.value_or(auto_kv_dtype(mc, load));
  config_.cache.kv_cache_dtype = kv_dtype;
  const int64_t block_bytes = ModelRunner::kv_bytes_per_block(mc, bs, kv_dtype);
  // Hybrid KV: bytes of one block in the full and in the sliding layers, and the most blocks the
  // sliding pool can need: each running sequence holds its window (ceil((W - 1) / bs) + 1
  // blocks) plus its share of one step (all of them together at most ceil(S / bs) + one per
  // sequence), and never more than a whole max_model_len sequence.
  int32_t n_sliding_layers = 0;
  for (int32_t l = 0; l < mc.n_layers; ++l) n_sliding_layers += mc.layer_window(l) > 0;
  const int64_t layer_block_bytes = block_bytes / mc.n_layers;
  const int64_t full_block_bytes = layer_block_bytes * (mc.n_layers - n_sliding_layers);
  const int64_t sliding_bound = [&] {
    const int64_t per_seq = std::min<int64_t>((int64_t{mc.sliding_window} - 1 + bs - 1) / bs + 2,
                                              (max_model_len_ + bs - 1) / bs);
    return int64_t{config_.scheduler.max_num_seqs} * per_seq +
           (int64_t{config_.scheduler.max_num_batched_tokens} + bs - 1) / bs;
  }();
  const bool hybrid = config_.scheduler.hybrid_kv;
  int64_t num_blocks = config_.cache.num_kv_blocks, num_sliding_blocks = 0;
  if (num_blocks == 0) {
    const int64_t budget = config_.cache.kv_cache_memory_bytes > 0
                               ? config_.cache.kv_cache_memory_bytes
                               : kDefaultKvCacheMemoryBytes;
    num_blocks = std::min<int64_t>(budget / block_bytes, 1 << 30);
    if (hybrid && sliding_bound < num_blocks) {  // the rest of the budget goes to the full layers
      num_sliding_blocks = sliding_bound;
      num_blocks = std::min<int64_t>((budget - sliding_bound * layer_block_bytes * n_sliding_layers) / full_block_bytes,
                                     1 << 30);
    }
  }
  if (hybrid && num_sliding_blocks == 0) num_sliding_blocks = std::min(num_blocks, sliding_bound);
  if (num_blocks < 1)
    return ResourceExhausted("KV cache budget of {} bytes holds no block of {} bytes "
                             "(--block-size {})", config_.cache.kv_cache_memory_bytes,
                             block_bytes, bs);
  const int64_t phys_bytes = int64_t{sysconf(_SC_PHYS_PAGES)} * sysconf(_SC_PAGE_SIZE);
  const int64_t kv_bytes = hybrid ? num_blocks * full_block_bytes + num_sliding_blocks * layer_block_bytes * n_sliding_layers
                                  : num_blocks * block_bytes;
  if (kv_bytes > phys_bytes || num_blocks > (int64_t{1} << 31) / bs)
    return ResourceExhausted(
        "KV cache of {} blocks x {} bytes = {:.2f} GiB does not fit this machine's {:.2f} GiB of "
        "memory; lower --kv-cache-memory or --num-kv-blocks",
        num_blocks, block_bytes, double(kv_bytes) / (1 << 30), double(phys_bytes) / (1 << 30));
  config_.cache.num_kv_blocks = static_cast<int32_t>(num_blocks);
  kv_ = std::make_unique<KVCacheManager>(config_.cache.num_kv_blocks, bs,
                                         config_.cache.enable_prefix_caching);
  if (hybrid) {
    sliding_kv_ = std::make_unique<KVCacheManager>(static_cast<int32_t>(num_sliding_blocks), bs,
                                                   config_.cache.enable_prefix_caching);
    spdlog::info("hybrid KV cache: {} full-attention layers in {} blocks, {} sliding-window layers (window {}) in "
                 "{} blocks of their own ({:.1f} MiB in all)", mc.n_layers - n_sliding_layers, num_blocks,
                 n_sliding_layers, mc.sliding_window, num_sliding_blocks, double(kv_bytes) / (1 << 20));
  }
  if (kv_blocks_needed(max_model_len_) > num_blocks)
    spdlog::warn("KV pool of {} blocks holds {} tokens, fewer than --max-model-len {}; "
                 "longer requests will be rejected", num_blocks, num_blocks * bs, max_model_len_);
  scheduler_ = std::make_unique<Scheduler>(config_.scheduler, max_model_len_, *kv_, sliding_kv_.get());

  LLMS_ASSIGN_OR_RETURN(auto model, create_model(*model_file_, load));
  LLMS_ASSIGN_OR_RETURN(auto attention, make_attention_backend(config_.attention_backend));
  LLMS_ASSIGN_OR_RETURN(runner_, ModelRunner::create(std::move(model), std::move(attention),
                                                     config_.cache.num_kv_blocks, bs, kv_dtype,
                                                     pool_.get(), static_cast<int32_t>(num_sliding_blocks)));
  if (config_.cache.kv_cache_prefault) {
    const int64_t batch_blocks = int64_t{config_.scheduler.max_num_seqs} * kv_blocks_needed(max_model_len_);
    const auto blocks = static_cast<int32_t>(std::min<int64_t>(num_blocks, batch_blocks));
    const auto t0 = std::chrono::steady_clock::now();
    const int64_t bytes = runner_->prefault_kv_cache(blocks);
    spdlog::info("KV cache: {} of {} blocks ({:.1f} MiB) committed at start-up in {:.2f} s "
                 "(--no-kv-cache-prefault starts faster and commits them on first use)",
                 blocks, num_blocks, bytes / 1048576.0,
                 std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  // Weight tensors (2-D and up) per dtype, and the GEMM kernels they run on.
  std::map<std::string_view, int> by_type;
  bool any_quantized = false, any_float = false;
  for (const TensorView* t : model_file_->tensors())
    if (t->shape.size() >= 2) {
      ++by_type[dtype_ggml_name(t->dtype)];
      any_quantized = any_quantized || is_quantized(t->dtype);
      any_float = any_float || !is_quantized(t->dtype);
    }
  std::string tensors;
  for (const auto& [name, count] : by_type)
    tensors += fmt::format("{}{} x {}", tensors.empty() ? "" : ", ", name, count);
  // "weights f32: F16 x 7" (float matrices computed in --dtype's type); quantized matrices
  // are computed in their own type, so a wholly quantized model lists its types only.
  const std::string weights =
      !any_quantized ? fmt::format("{}: {}", dtype_name(model_dtype(mc, load)), tensors)
      : any_float    ? fmt::format("{} (float ones as {})", tensors, dtype_name(model_dtype(mc, load)))
                     : tensors;
  spdlog::info("model {} ({}, {} layers, dim {}, {} heads / {} KV heads: {}, weights {}), "
               "vocab {}, max_model_len {}, KV pool {} blocks x {} tokens = {:.1f} MiB ({}), {} "
               "thread{}, attention {}, kernels {}{}{}",
               config_.served_model_name, mc.architecture, mc.n_layers, mc.dim, mc.n_heads,
               mc.n_kv_heads, mc.attention_type(), weights,
               mc.vocab_size, max_model_len_, num_blocks,
               bs, kv_bytes / 1048576.0, dtype_name(kv_dtype), config_.num_threads,
               config_.num_threads == 1 ? "" : "s", config_.attention_backend, gemm_isa(),
               any_quantized ? ", quantized GEMM " : "", any_quantized ? quant_gemm_isa() : "");
  if (mc.rope_scaling.type == RopeScalingType::kLongRope) {
    ModelConfig served = mc;
    served.select_longrope(max_model_len_);
    spdlog::info("LongRoPE: {} factors (max_model_len {} {} the original context {})",
                 served.rope_scaling.use_long_factor ? "long" : "short", max_model_len_,
                 served.rope_scaling.use_long_factor ? "exceeds" : "is within",
                 mc.rope_scaling.original_max_position_embeddings);
  }
  spdlog::info("{}", describe_generation_config(config_.generation_config, *model_file_,
                                                generation_));
  return Status::Ok();
}

Status EngineCore::check_request(const EngineRequest& r) const {
  const int64_t n = static_cast<int64_t>(r.prompt_token_ids.size());
  if (n == 0) return InvalidArgument("the prompt is empty (0 tokens)");
  const int32_t vocab = model_file_->config().vocab_size;
  for (int32_t id : r.prompt_token_ids)
    if (id < 0 || id >= vocab)
      return InvalidArgument("prompt token id {} is outside the vocabulary [0, {})", id, vocab);
  LLMS_RETURN_IF_ERROR(r.params.validate(vocab));
  if (n > max_model_len_)
    return InvalidArgument("the prompt has {} tokens, more than max_model_len {}", n,
                           max_model_len_);
  if (n + r.params.max_tokens > max_model_len_)
    return InvalidArgument(
        "this model's maximum context length is {} tokens; the request asks for {} tokens "
        "({} in the prompt, {} for max_tokens)",
        max_model_len_, n + r.params.max_tokens, n, r.params.max_tokens);
  const int64_t blocks = kv_blocks_needed(n + r.params.max_tokens);
  if (blocks > kv_->num_total_blocks()) {
    if (const int32_t w = config_.scheduler.sliding_window; w > 0 && !config_.scheduler.hybrid_kv)
      return InvalidArgument(
          "the request needs up to {} blocks of {} tokens of KV cache at once (its {} tokens, or the {}-token sliding "
          "window plus a step of up to --max-num-batched-tokens {}), more than the whole pool of {} blocks",
          blocks, kv_->block_size(), n + r.params.max_tokens, w, config_.scheduler.max_num_batched_tokens,
          kv_->num_total_blocks());
    return InvalidArgument(
        "the request needs {} tokens of KV cache ({} blocks of {}), more than the whole pool "
        "of {} blocks", n + r.params.max_tokens, blocks, kv_->block_size(), kv_->num_total_blocks());
  }
  return Status::Ok();
}

Status EngineCore::add_request(int64_t request_id, EngineRequest request) {
  LLMS_RETURN_IF_ERROR(check_request(request));
  LLMS_CHECK(!requests_.count(request_id), "duplicate request id {}", request_id);
  // The checkpoint's other end-of-sequence ids (generation_config.json eos_token_id lists,
  // e.g. Llama 3's <|eot_id|>) stop generation like the tokenizer's EOS (vLLM does the same).
  if (!request.params.ignore_eos) {
    std::vector<int32_t>& stops = request.params.stop_token_ids;
    for (int32_t id : generation_.eos_token_ids)
      if (id != tokenizer_->eos_id() && std::find(stops.begin(), stops.end(), id) == stops.end())
        stops.push_back(id);
  }
  auto req = std::make_unique<Request>(request_id, std::move(request), *tokenizer_, config_.seed);
  scheduler_->add_request(req.get());
  requests_.emplace(request_id, std::move(req));
  return Status::Ok();
}

void EngineCore::abort_request(int64_t request_id) {
  auto it = requests_.find(request_id);
  if (it == requests_.end()) return;
  Request& req = *it->second;
  finish(req, FinishReason::kAbort);
  pending_outputs_.push_back(make_output(req, {}));
  requests_.erase(it);
}

void EngineCore::finish(Request& req, FinishReason reason) {
  scheduler_->finish_request(&req, reason);
  req.timing.finished_time = now_seconds();
  ++counters_.num_requests_finished;
}

RequestOutput EngineCore::make_output(Request& req, std::vector<int32_t> new_tokens) {
  RequestOutput out;
  out.request_id = req.request_id;
  out.new_token_ids = std::move(new_tokens);
  out.finished = req.is_finished();
  out.finish_reason = req.finish_reason;
  if (req.finish_reason != FinishReason::kAbort) take_text_delta(req, out.finished, out.new_text);
  out.num_prompt_tokens = req.num_prompt_tokens;
  out.num_cached_tokens = std::max(0, req.num_cached_tokens);
  out.num_output_tokens = req.num_output_tokens();
  out.num_preemptions = req.num_preemptions;
  out.timing = req.timing;
  return out;
}

std::optional<KvSnapshot> EngineCore::kv_snapshot() const {
  KvSnapshot snap;
  snap.step_idx = last_step_.step_idx;
  const BlockPool& pool = kv_->pool();
  snap.ref_counts.resize(static_cast<size_t>(pool.num_total_blocks()));
  for (int32_t b = 0; b < pool.num_total_blocks(); ++b) snap.ref_counts[b] = pool.ref_count(b);
  snap.cached = pool.cached_lru_order();
  for (const auto& [id, req] : requests_)
    if (!req->block_table.empty()) snap.block_tables.emplace_back(id, req->block_table);
  std::sort(snap.block_tables.begin(), snap.block_tables.end(),
            [](const auto& a, const auto& b) { return a.first < b.first; });
  return snap;
}

double EngineCore::kv_utilization() const {
  const int64_t slots = int64_t{kv_->num_used_blocks()} * kv_->block_size();
  if (slots == 0) return 0.0;
  // Tokens stored in used blocks, each block once (prefix-cached blocks are shared, and full).
  const int32_t bs = kv_->block_size();
  std::vector<uint8_t>& seen = block_seen_scratch_;
  seen.assign(kv_->num_total_blocks(), 0);
  int64_t stored = 0;
  for (const Request* r : scheduler_->running())
    for (size_t i = 0; i < r->block_table.size(); ++i) {
      const int32_t id = r->block_table[i];
      if (id == KVCacheManager::kNullBlock || seen[id]) continue;
      seen[id] = 1;
      stored += std::clamp<int64_t>(r->num_computed_tokens - int64_t(i) * bs, 0, bs);
    }
  return static_cast<double>(stored) / static_cast<double>(slots);
}

void EngineCore::record_step(const SchedulerOutput& sched, const std::vector<uint8_t>& is_decode,
                             double start_time, int32_t running_after_schedule) {
  StepRecord& rec = last_step_;
  rec.step_idx = counters_.num_steps;
  rec.start_time = start_time;
  rec.end_time = now_seconds();
  rec.scheduled.clear();
  rec.num_prefill_tokens = rec.num_decode_tokens = 0;
  for (size_t si = 0; si < sched.seqs.size(); ++si) {
    const ScheduledSequence& s = sched.seqs[si];
    (is_decode[si] ? rec.num_decode_tokens : rec.num_prefill_tokens) += s.num_scheduled_tokens;
    rec.scheduled.push_back({s.request_id, s.num_scheduled_tokens, !is_decode[si]});
  }
  rec.preempted = scheduler_->last_preempted();
  rec.waiting.clear();
  for (const Request* r : scheduler_->waiting()) rec.waiting.push_back(r->request_id);
  rec.num_running = running_after_schedule;  // seats held while this step ran
  rec.num_waiting = scheduler_->num_waiting();
  rec.num_used_blocks = kv_->num_used_blocks();
  rec.num_cached_blocks = kv_->num_cached_blocks();
  rec.num_prefix_hit_tokens = scheduler_->last_prefix_hit_tokens();
  counters_.scheduled_prefill_tokens_total += rec.num_prefill_tokens;
  counters_.scheduled_decode_tokens_total += rec.num_decode_tokens;
  rec.kv_utilization = kv_utilization();
}

std::vector<RequestOutput> EngineCore::step() {
  std::vector<RequestOutput> outputs;
  outputs.swap(pending_outputs_);
  const double start_time = now_seconds();
  const SchedulerOutput sched = scheduler_->schedule(start_time);
  if (sched.empty()) return outputs;
  ++counters_.num_steps;
  const int32_t running_after_schedule = scheduler_->num_running();
  // Which scheduled sequences are decodes, decided before the step appends tokens.
  std::vector<uint8_t>& is_decode = is_decode_scratch_;  // reused: no allocation per step
  is_decode.assign(sched.seqs.size(), 0);
  for (size_t si = 0; si < sched.seqs.size(); ++si) {
    const ScheduledSequence& s = sched.seqs[si];
    const Request& req = *requests_.at(s.request_id);
    is_decode[si] = s.num_scheduled_tokens == 1 && req.num_output_tokens() > 0 &&
                    s.num_computed_tokens == req.num_tokens() - 1;
  }

  const StepLogits& logits = runner_->execute(sched);
  const double now = now_seconds();
  for (size_t si = 0; si < sched.seqs.size(); ++si) {
    const ScheduledSequence& s = sched.seqs[si];
    Request& req = *requests_.at(s.request_id);
    req.num_computed_tokens += s.num_scheduled_tokens;
    scheduler_->cache_computed_blocks(&req);
    if (req.num_output_tokens() == 0) counters_.prompt_tokens_total += s.num_scheduled_tokens;
    if (logits.logits_row_start[si] < 0) continue;  // partial prefill chunk
    int32_t last_row = logits.logits_row_start[si];
    if (s.logits_mode == LogitsMode::kAll) {
      // Row j predicts token num_computed + j + 1: a prompt logprob while that is a prompt
      // token. A prefill restarted after preemption computes them again from the start.
      if (s.num_computed_tokens == 0) req.prompt_logprobs.clear();
      for (int32_t j = 0; j < s.num_scheduled_tokens; ++j) {
        const int32_t pos = s.num_computed_tokens + j + 1;
        if (pos >= req.num_prompt_tokens) break;
        req.prompt_logprobs.push_back(compute_logprobs(
            logits.row(last_row + j), logits.vocab_size, req.token_ids[pos],
            req.params.prompt_logprobs, sample_scratch_));
      }
      if (req.num_computed_tokens < req.num_tokens()) continue;  // partial prefill chunk
      last_row += s.num_scheduled_tokens - 1;
    }

    const float* row = logits.row(last_row);
    if (has_logit_restrictions(req.params)) {
      // logit_bias / allowed_token_ids change the distribution itself: logprobs reflect them.
      restricted_logits_.assign(row, row + logits.vocab_size);
      apply_logit_restrictions(restricted_logits_.data(), logits.vocab_size, req.params,
                               allowed_scratch_);
      row = restricted_logits_.data();
    }
    const float* raw_row = row;
    const bool constrained = StructuredOutputManager::constrains(req);
    if (constrained || needs_logits_processing(req.params, req.num_output_tokens())) {
      // Penalties, min_tokens and the grammar mask work on a copy; the runner's logits stay
      // raw.
      std::vector<float>& buf = processor_scratch_.logits;
      buf.assign(row, row + logits.vocab_size);
      const std::span<const int32_t> all(req.token_ids);
      if (needs_logits_processing(req.params, req.num_output_tokens()))
        apply_logits_processors(buf.data(), logits.vocab_size, req.params,
                                all.first(req.num_prompt_tokens),
                                all.subspan(req.num_prompt_tokens), tokenizer_->eos_id(),
                                processor_scratch_);
      row = buf.data();
      if (constrained && structured_->apply_mask(req, buf.data(), logits.vocab_size) == 0) {
        // Nothing the grammar allows can be written (the vocabulary cannot spell it, or
        // min_tokens / allowed_token_ids exclude it): end the request rather than write a
        // token the grammar refuses. "abort": the output is incomplete and not a length cut.
        finish(req, FinishReason::kAbort);
        spdlog::warn("request {}: no token allowed by its grammar after {} output tokens; "
                     "aborted", req.request_id, req.num_output_tokens());
        outputs.push_back(make_output(req, {}));
        requests_.erase(s.request_id);
        continue;
      }
    }
    const int32_t token =
        sample_token(row, logits.vocab_size, req.params, req.rng, sample_scratch_);
    ++counters_.generation_tokens_total;
    if (req.timing.first_token_time == 0) req.timing.first_token_time = now;
    req.timing.last_token_time = now;
    FinishReason reason = append_token(req, token, *tokenizer_, max_model_len_);
    // A grammar that allows no further byte ends the sequence here (its EOS would be the only
    // choice next step). A length cut that lands on the last byte stays "length" only when the
    // grammar did not end: an output the grammar completed is a stop.
    if (req.grammar && structured_->accept_token(req, token) &&
        (reason == FinishReason::kNone || reason == FinishReason::kLength))
      reason = FinishReason::kStop;
    if (reason != FinishReason::kNone) finish(req, reason);
    RequestOutput out = make_output(req, {token});
    if (req.num_output_tokens() == 1 && req.params.prompt_logprobs >= 0)
      out.prompt_logprobs = std::move(req.prompt_logprobs);
    // Of the raw logits (vLLM's default; after logit_bias / allowed_token_ids), not the
    // penalised / tempered ones.
    if (req.params.logprobs >= 0)
      out.logprobs.push_back(compute_logprobs(raw_row, logits.vocab_size, token,
                                              req.params.logprobs, sample_scratch_));
    outputs.push_back(std::move(out));
    if (req.is_finished()) requests_.erase(s.request_id);
  }
  record_step(sched, is_decode, start_time, running_after_schedule);
  return outputs;
}

EngineStats EngineCore::stats() const {
  EngineStats s = counters_;
  s.num_running = scheduler_->num_running();
  s.num_waiting = scheduler_->num_waiting();
  s.num_total_blocks = kv_->num_total_blocks();
  s.num_free_blocks = kv_->num_free_blocks();
  if (sliding_kv_) {
    s.num_sliding_total_blocks = sliding_kv_->num_total_blocks();
    s.num_sliding_free_blocks = sliding_kv_->num_free_blocks();
  }
  s.kv_cache_usage = kv_->usage();
  s.num_preemptions_total = scheduler_->num_preemptions_total();
  s.kv_utilization = kv_utilization();
  s.prefix_cache_queries_total = scheduler_->prefix_cache_queries_total();
  s.prefix_cache_hits_total = scheduler_->prefix_cache_hits_total();
  s.num_cached_blocks = kv_->num_cached_blocks();
  return s;
}

}  // namespace

Expected<std::unique_ptr<LLMEngine>> LLMEngine::create(const EngineConfig& config) {
  auto engine = std::make_unique<EngineCore>();
  LLMS_RETURN_IF_ERROR(engine->init(config));
  return std::unique_ptr<LLMEngine>(std::move(engine));
}

}  // namespace llmserve
