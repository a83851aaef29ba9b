#include "bench/workload.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace llmserve::bench {

namespace {

/// "<...>" pieces other than "<0xNN>" byte pieces are control tokens (<s>, </s>, <unk>).
bool looks_special(const std::string& piece) {
  if (piece.size() < 3 || piece.front() != '<' || piece.back() != '>') return false;
  return parse_byte_piece(piece) < 0;
}


/// Parses one dataset entry; `where` names it in errors.
Expected<BenchRequest> parse_entry(const nlohmann::json& j, const std::string& where) {
  if (!j.is_object()) return InvalidArgument("{}: expected a JSON object", where);
  auto p = j.find("prompt");
  if (p == j.end() || !p->is_string())
    return InvalidArgument("{}: \"prompt\" must be a string", where);
  auto n = j.find("output_len");
  if (n == j.end() || !n->is_number_integer() || n->get<int64_t>() < 1 ||
      n->get<int64_t>() > (1 << 30))
    return InvalidArgument("{}: \"output_len\" must be an integer >= 1", where);
  BenchRequest r;
  r.prompt_text = p->get<std::string>();
  r.output_len = static_cast<int32_t>(n->get<int64_t>());
  return r;
}

/// Reads the whole file as a JSON list, or line by line as JSONL.
Expected<std::vector<BenchRequest>> parse_dataset_text(const std::string& path,
                                                       const std::string& text) {
  std::vector<BenchRequest> out;
  const size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && text[first] == '[') {
    nlohmann::json list = nlohmann::json::parse(text, nullptr, false);
    if (list.is_discarded() || !list.is_array())
      return InvalidArgument("{}: not a valid JSON list", path);
    for (size_t i = 0; i < list.size(); ++i) {
      LLMS_ASSIGN_OR_RETURN(BenchRequest r, parse_entry(list[i], fmt::format("{}[{}]", path, i)));
      out.push_back(std::move(r));
    }
    return out;
  }
  std::istringstream in(text);
  std::string line;
  for (int line_no = 1; std::getline(in, line); ++line_no) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    const std::string where = fmt::format("{}:{}", path, line_no);
    if (j.is_discarded()) return InvalidArgument("{}: not valid JSON", where);
    LLMS_ASSIGN_OR_RETURN(BenchRequest r, parse_entry(j, where));
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace

Status check_random_options(const RandomDatasetOptions& o) {
  if (o.num_prompts < 1 || o.num_prompts > kMaxNumPrompts)
    return InvalidArgument("--num-prompts must be in [1, {}], got {}", kMaxNumPrompts,
                           o.num_prompts);
  if (o.input_len < 1) return InvalidArgument("--input-len must be >= 1, got {}", o.input_len);
  if (o.output_len < 1) return InvalidArgument("--output-len must be >= 1, got {}", o.output_len);
  if (!(o.range_ratio >= 0 && o.range_ratio < 1))
    return InvalidArgument("--range-ratio must be in [0, 1), got {}", o.range_ratio);
  return Status::Ok();
}

std::vector<int32_t> sampleable_ids(const VocabInfo& vocab) {
  std::vector<int32_t> special = vocab.special_ids;
  if (vocab.bos_id >= 0) special.push_back(vocab.bos_id);
  std::sort(special.begin(), special.end());
  std::vector<int32_t> ids;
  ids.reserve(static_cast<size_t>(std::max(vocab.vocab_size, 0)));
  for (int32_t id = 0; id < vocab.vocab_size; ++id)
    if (!std::binary_search(special.begin(), special.end(), id)) ids.push_back(id);
  return ids;
}

VocabInfo vocab_info(const Tokenizer& tokenizer) {
  VocabInfo v;
  v.vocab_size = tokenizer.vocab_size();
  v.bos_id = tokenizer.bos_id();
  v.special_ids = {tokenizer.bos_id(), tokenizer.eos_id()};
  for (int32_t id = 0; id < v.vocab_size; ++id)
    if (looks_special(tokenizer.piece(id))) v.special_ids.push_back(id);
  return v;
}

LengthRange length_range(int32_t len, double range_ratio, int32_t min_len) {
  LengthRange r;
  r.lo = std::max(min_len, static_cast<int32_t>(std::floor(len * (1.0 - range_ratio))));
  r.hi = std::max(r.lo, static_cast<int32_t>(std::ceil(len * (1.0 + range_ratio))));
  return r;
}

Expected<std::vector<BenchRequest>> make_random_dataset(const RandomDatasetOptions& o,
                                                        const VocabInfo& vocab) {
  LLMS_RETURN_IF_ERROR(check_random_options(o));
  const std::vector<int32_t> ids = sampleable_ids(vocab);
  if (ids.empty()) return InvalidArgument("vocabulary of {} has no sampleable token", vocab.vocab_size);
  const bool bos = vocab.bos_id >= 0;
  const LengthRange in = length_range(o.input_len, o.range_ratio, bos ? 2 : 1);
  const LengthRange out = length_range(o.output_len, o.range_ratio, 1);
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<int32_t> in_len(in.lo, in.hi), out_len(out.lo, out.hi);
  std::uniform_int_distribution<size_t> pick(0, ids.size() - 1);
  std::vector<BenchRequest> reqs(static_cast<size_t>(o.num_prompts));
  for (BenchRequest& r : reqs) {
    r.prompt_len = in_len(rng);
    r.output_len = out_len(rng);
    r.prompt_token_ids.reserve(static_cast<size_t>(r.prompt_len));
    if (bos) r.prompt_token_ids.push_back(vocab.bos_id);
    while (static_cast<int32_t>(r.prompt_token_ids.size()) < r.prompt_len)
      r.prompt_token_ids.push_back(ids[pick(rng)]);
  }
  return reqs;
}

Expected<std::vector<BenchRequest>> load_dataset_file(const std::string& path,
                                                      const Tokenizer* tokenizer,
                                                      int32_t num_prompts) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return NotFound("dataset file {} cannot be opened", path);
  std::stringstream ss;
  ss << f.rdbuf();
  LLMS_ASSIGN_OR_RETURN(std::vector<BenchRequest> entries, parse_dataset_text(path, ss.str()));
  if (entries.empty()) return InvalidArgument("dataset file {} has no entries", path);
  std::vector<BenchRequest> out;
  if (num_prompts > kMaxNumPrompts)
    return InvalidArgument("--num-prompts must be <= {}, got {}", kMaxNumPrompts, num_prompts);
  const size_t n = num_prompts > 0 ? static_cast<size_t>(num_prompts) : entries.size();
  for (size_t i = 0; i < n; ++i) out.push_back(entries[i % entries.size()]);
  if (tokenizer) {
    for (BenchRequest& r : out) {
      r.prompt_token_ids = tokenizer->encode(r.prompt_text, /*add_bos=*/true);
      r.prompt_len = static_cast<int32_t>(r.prompt_token_ids.size());
    }
  }
  return out;
}

Status check_arrival_options(const ArrivalOptions& o) {
  if (!(o.request_rate > 0))
    return InvalidArgument("--request-rate must be > 0 or inf, got {}", o.request_rate);
  if (!(o.burstiness > 0) || std::isinf(o.burstiness))
    return InvalidArgument("--burstiness must be a finite positive number, got {}", o.burstiness);
  return Status::Ok();
}

Expected<std::vector<double>> make_arrival_offsets(int32_t n, const ArrivalOptions& o) {
  if (n < 0) return InvalidArgument("number of requests must be >= 0, got {}", n);
  LLMS_RETURN_IF_ERROR(check_arrival_options(o));
  std::vector<double> offsets(static_cast<size_t>(n), 0.0);
  if (std::isinf(o.request_rate)) return offsets;
  // A rate so low that the arrivals would spread over more than a week is a typo (1e-5 for
  // 1e5), not a benchmark: refused rather than left waiting.
  constexpr double kMaxSpanS = 7 * 24 * 3600.0;
  if (n > 1 && (n - 1) / o.request_rate > kMaxSpanS)
    return InvalidArgument("--request-rate {} would spread {} requests over about {:.3g} s (more "
                           "than a week); give a higher rate", o.request_rate, n,
                           (n - 1) / o.request_rate);
  // Gamma(shape k, scale theta) has mean k * theta: theta = 1 / (rate * k) gives mean 1/rate.
  const double theta = 1.0 / (o.request_rate * o.burstiness);
  std::mt19937_64 rng(o.seed);
  std::gamma_distribution<double> gap(o.burstiness, theta);
  for (size_t i = 1; i < offsets.size(); ++i) offsets[i] = offsets[i - 1] + gap(rng);
  return offsets;
}

Status assign_arrivals(std::vector<BenchRequest>& requests, const ArrivalOptions& options) {
  LLMS_ASSIGN_OR_RETURN(std::vector<double> offsets,
                        make_arrival_offsets(static_cast<int32_t>(requests.size()), options));
  for (size_t i = 0; i < requests.size(); ++i) requests[i].arrival_offset_s = offsets[i];
  return Status::Ok();
}

}  // namespace llmserve::bench
