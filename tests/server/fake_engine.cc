#include "fake_engine.h"

#include <algorithm>
#include <thread>

#include "common/timing.h"

namespace llmserve::testing {

namespace {

double cycled(const std::vector<double>& values, int64_t i) {
  return values.empty() ? 0.0 : values[static_cast<size_t>(i) % values.size()];
}

}  // namespace

std::vector<int32_t> FakeTokenizer::encode(std::string_view text, bool add_bos) const {
  std::vector<int32_t> ids;
  if (add_bos) ids.push_back(bos_id());
  for (char c : text) ids.push_back(byte_token(c));
  return ids;
}

std::vector<int32_t> FakeTokenizer::encode(std::string_view text,
                                           const EncodeOptions& options) const {
  std::vector<int32_t> ids;
  for (size_t i = 0; i < text.size();) {
    if (options.parse_special && text.substr(i, 3) == "<s>") {
      ids.push_back(bos_id());
      i += 3;
    } else if (options.parse_special && text.substr(i, 4) == "</s>") {
      ids.push_back(eos_id());
      i += 4;
    } else {
      ids.push_back(byte_token(text[i++]));
    }
  }
  if (options.add_special && (ids.empty() || ids[0] != bos_id())) ids.insert(ids.begin(), bos_id());
  return ids;
}

std::string FakeTokenizer::decode_token(int32_t /*prev_id*/, int32_t id) const {
  if (id < 3 || id >= kVocabSize) return "";
  return std::string(1, static_cast<char>(id - 3));
}

FakeEngine::FakeEngine(FakeEngineOptions options)
    : options_(std::move(options)), num_free_blocks_(options_.num_blocks) {
  model_config_.name = options_.served_model_name;
  model_config_.vocab_size = FakeTokenizer::kVocabSize;
  model_config_.max_position_embeddings = options_.max_model_len;
  config_.served_model_name = options_.served_model_name;
  config_.cache.block_size = options_.block_size;
  config_.cache.num_kv_blocks = options_.num_blocks;
  config_.scheduler.max_model_len = options_.max_model_len;
  config_.scheduler.max_num_seqs = options_.max_num_seqs;
  totals_.num_total_blocks = options_.num_blocks;
}

int32_t FakeEngine::blocks_for(int64_t num_tokens) const {
  return static_cast<int32_t>((num_tokens + options_.block_size - 1) / options_.block_size);
}

Status FakeEngine::check_request(const EngineRequest& request) const {
  const auto& ids = request.prompt_token_ids;
  if (ids.empty()) return InvalidArgument("prompt is empty");
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= FakeTokenizer::kVocabSize)
      return InvalidArgument("prompt token id {} at position {} is outside the vocabulary [0, {})",
                             ids[i], i, FakeTokenizer::kVocabSize);
  LLMS_RETURN_IF_ERROR(request.params.validate(FakeTokenizer::kVocabSize));
  const int64_t prompt_len = static_cast<int64_t>(ids.size());
  if (prompt_len > options_.max_model_len)
    return InvalidArgument("prompt has {} tokens, more than max_model_len {}", prompt_len,
                           options_.max_model_len);
  const int64_t total = prompt_len + request.params.max_tokens;
  if (total > options_.max_model_len)
    return InvalidArgument("prompt ({} tokens) + max_tokens ({}) = {} exceeds max_model_len {}",
                           prompt_len, request.params.max_tokens, total, options_.max_model_len);
  if (blocks_for(total) > options_.num_blocks)
    return ResourceExhausted("request needs {} KV blocks, the pool has {}", blocks_for(total),
                             options_.num_blocks);
  return Status::Ok();
}

Status FakeEngine::add_request(int64_t request_id, EngineRequest request) {
  LLMS_RETURN_IF_ERROR(check_request(request));
  {
    std::lock_guard<std::mutex> lock(last_mu_);
    last_request_ = request;
  }
  Seq seq;
  seq.id = request_id;
  for (int32_t id : request.prompt_token_ids) seq.prompt_sum += id;
  seq.ordinal = num_added_.load();
  seq.timing.arrival_time =
      options_.timing ? options_.timing->arrival_time : request.arrival_time;
  seq.req = std::move(request);
  waiting_.push_back(std::move(seq));
  ++num_added_;
  return Status::Ok();
}

EngineRequest FakeEngine::last_request() const {
  std::lock_guard<std::mutex> lock(last_mu_);
  return last_request_;
}

void FakeEngine::release(Seq& seq) {
  num_free_blocks_ += seq.num_blocks;
  blocks_in_use_ -= seq.num_blocks;
  seq.num_blocks = 0;
}

void FakeEngine::abort_request(int64_t request_id) {
  auto report = [&](Seq& seq) {
    release(seq);
    RequestOutput out;
    out.request_id = seq.id;
    out.finished = true;
    out.finish_reason = FinishReason::kAbort;
    out.num_prompt_tokens = static_cast<int32_t>(seq.req.prompt_token_ids.size());
    out.num_output_tokens = seq.num_generated;
    out.num_preemptions = seq.num_generated > 0 && options_.timing
                              ? options_.timing->num_preemptions
                              : 0;
    out.timing = seq.timing;
    if (!options_.timing) {
      out.timing.finished_time = now_seconds();
    } else {
      const double last = seq.timing.last_token_time > 0 ? seq.timing.last_token_time
                                                          : seq.timing.arrival_time;
      out.timing.finished_time = last + options_.timing->finish_s;
    }
    pending_aborts_.push_back(std::move(out));
    ++num_aborted_;
  };
  auto is_it = [request_id](const Seq& s) { return s.id == request_id; };
  if (auto it = std::find_if(waiting_.begin(), waiting_.end(), is_it); it != waiting_.end()) {
    report(*it);
    waiting_.erase(it);
  } else if (auto jt = std::find_if(running_.begin(), running_.end(), is_it);
             jt != running_.end()) {
    report(*jt);
    running_.erase(jt);
  }
}

bool FakeEngine::admit(Seq& seq) {
  const int32_t need = blocks_for(static_cast<int64_t>(seq.req.prompt_token_ids.size()) + 1);
  if (need > num_free_blocks_) return false;
  num_free_blocks_ -= need;
  blocks_in_use_ += need;
  seq.num_blocks = need;
  seq.timing.first_scheduled_time =
      options_.timing
          ? seq.timing.arrival_time + cycled(options_.timing->queue_s, seq.ordinal)
          : now_seconds();
  totals_.prompt_tokens_total += static_cast<int64_t>(seq.req.prompt_token_ids.size());
  return true;
}

bool FakeEngine::advance(Seq& seq, RequestOutput* out) {
  const SamplingParams& p = seq.req.params;
  const int32_t k = seq.num_generated;
  const bool eos_prompt = seq.req.prompt_token_ids.back() == FakeTokenizer::byte_token('.');
  const char letter = static_cast<char>('a' + (seq.prompt_sum + k) % 26);
  const int32_t token = (eos_prompt && !p.ignore_eos && k + 1 == options_.eos_after)
                            ? tokenizer_.eos_id()
                            : FakeTokenizer::byte_token(letter);
  ++seq.num_generated;
  ++totals_.generation_tokens_total;
  double now = now_seconds();
  if (options_.timing) {
    now = k == 0 ? seq.timing.first_scheduled_time + cycled(options_.timing->prefill_s, seq.ordinal)
                 : seq.timing.last_token_time + cycled(options_.timing->itl_s, k - 1);
  }
  if (k == 0) seq.timing.first_token_time = now;
  seq.timing.last_token_time = now;

  FinishReason finish = FinishReason::kNone;
  const bool is_stop_token =
      std::find(p.stop_token_ids.begin(), p.stop_token_ids.end(), token) != p.stop_token_ids.end();
  if (token == tokenizer_.eos_id() || is_stop_token) {
    finish = FinishReason::kStop;
  } else {
    seq.text += tokenizer_.decode_token(-1, token);
    size_t cut = std::string::npos;
    for (const std::string& s : p.stop) cut = std::min(cut, seq.text.find(s));
    if (cut != std::string::npos) {
      seq.text.resize(cut);
      finish = FinishReason::kStop;
    }
  }
  if (finish == FinishReason::kNone && seq.num_generated >= p.max_tokens)
    finish = FinishReason::kLength;

  size_t emit_to = seq.text.size();
  if (finish == FinishReason::kNone) {  // hold back what could still become a stop string
    size_t hold = 0;
    for (const std::string& s : p.stop) hold = std::max(hold, s.size() - 1);
    emit_to = std::max(seq.num_emitted, seq.text.size() > hold ? seq.text.size() - hold : 0);
  }
  out->request_id = seq.id;
  out->new_token_ids = {token};
  out->new_text = seq.text.substr(seq.num_emitted, emit_to - seq.num_emitted);
  seq.num_emitted = emit_to;
  out->finished = finish != FinishReason::kNone;
  out->finish_reason = finish;
  out->num_prompt_tokens = static_cast<int32_t>(seq.req.prompt_token_ids.size());
  out->num_output_tokens = seq.num_generated;
  out->num_preemptions = options_.timing ? options_.timing->num_preemptions : 0;
  if (out->finished)
    seq.timing.finished_time = now + (options_.timing ? options_.timing->finish_s : 0.0);
  out->timing = seq.timing;
  return out->finished;
}

std::vector<RequestOutput> FakeEngine::step() {
  if (options_.step_delay.count() > 0) std::this_thread::sleep_for(options_.step_delay);
  std::vector<RequestOutput> outputs = std::move(pending_aborts_);
  pending_aborts_.clear();
  while (!waiting_.empty() && static_cast<int32_t>(running_.size()) < options_.max_num_seqs &&
         admit(waiting_.front())) {
    running_.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  StepRecord record;
  record.step_idx = totals_.num_steps;
  record.start_time = now_seconds();
  std::vector<Seq> still_running;
  for (Seq& seq : running_) {
    const int32_t need =
        blocks_for(static_cast<int64_t>(seq.req.prompt_token_ids.size()) + seq.num_generated + 1) -
        seq.num_blocks;
    if (need > num_free_blocks_) {  // no room this step; try again next step
      still_running.push_back(std::move(seq));
      continue;
    }
    num_free_blocks_ -= need;
    blocks_in_use_ += need;
    seq.num_blocks += need;
    const bool is_prefill = seq.num_generated == 0;
    const int32_t num_tokens =
        is_prefill ? static_cast<int32_t>(seq.req.prompt_token_ids.size()) : 1;
    record.scheduled.push_back({seq.id, num_tokens, is_prefill});
    (is_prefill ? record.num_prefill_tokens : record.num_decode_tokens) += num_tokens;
    RequestOutput out;
    if (advance(seq, &out)) {
      release(seq);
      ++totals_.num_requests_finished;
    } else {
      still_running.push_back(std::move(seq));
    }
    outputs.push_back(std::move(out));
  }
  running_ = std::move(still_running);
  ++totals_.num_steps;
  for (const Seq& seq : waiting_) record.waiting.push_back(seq.id);
  const EngineStats now = stats();
  record.end_time = now_seconds();
  record.num_running = now.num_running;
  record.num_waiting = now.num_waiting;
  record.num_used_blocks = options_.num_blocks - num_free_blocks_;
  record.kv_utilization = now.kv_utilization;
  last_step_ = std::move(record);
  return outputs;
}

bool FakeEngine::has_unfinished_requests() const {
  return !waiting_.empty() || !running_.empty() || !pending_aborts_.empty();
}

EngineStats FakeEngine::stats() const {
  EngineStats s = totals_;
  s.num_running = static_cast<int32_t>(running_.size());
  s.num_waiting = static_cast<int32_t>(waiting_.size());
  s.num_total_blocks = options_.num_blocks;
  s.num_free_blocks = num_free_blocks_;
  s.kv_cache_usage = 1.0 - static_cast<double>(num_free_blocks_) / options_.num_blocks;
  // Tokens stored / slots in allocated blocks (the fake reserves one slot ahead per request).
  int64_t tokens = 0;
  for (const Seq& seq : running_)
    tokens += static_cast<int64_t>(seq.req.prompt_token_ids.size()) + seq.num_generated;
  const int64_t slots =
      int64_t{options_.num_blocks - num_free_blocks_} * options_.block_size;
  s.kv_utilization = slots > 0 ? static_cast<double>(tokens) / static_cast<double>(slots) : 0.0;
  return s;
}

}  // namespace llmserve::testing
