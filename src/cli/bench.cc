// llmserve bench: vLLM `bench serve`-style load test. `bench MODEL` drives the engine
// in-process (and can draw the schedule with --timeline); `bench serve --url URL` sends the
// same workload to an OpenAI-compatible server and measures client-side.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <new>
#include <stdexcept>
#include <utility>

#include "bench/http_client.h"
#include "bench/metrics.h"
#include "bench/multi_turn.h"
#include "bench/prefix_repetition.h"
#include "bench/progress.h"
#include "bench/roofline.h"
#include "bench/runner.h"
#include "bench/timeline_svg.h"
#include "bench/workload.h"
#include "cli/commands.h"
#include "cli/human_int.h"
#include "cli/parse_errors.h"
#include "cli/weight_cost.h"
#include "common/thread_pool.h"
#include "engine/llm_engine.h"
#include "models/model_file.h"

namespace llmserve::cli {

namespace {

/// --request-rate: a positive decimal number, or inf (std::stod's other spellings of
/// infinity too), checked as every number flag is (check_number_syntax: no blanks, no hex).
Expected<double> parse_rate(const std::string& text) {
  if (std::string bad = decimal_syntax_error(text); !bad.empty())
    return InvalidArgument("--request-rate: {}", bad);
  double rate = 0;
  try {
    size_t used = 0;
    rate = std::stod(text, &used);
    if (used != text.size()) rate = -1;
  } catch (const std::out_of_range&) {  // 1e999; 1e-999 is below any rate too
    if (text.find('-') == std::string::npos && text.find("e-") == std::string::npos &&
        text.find("E-") == std::string::npos)
      return InvalidArgument("--request-rate: '{}' is beyond a 64-bit float's range (inf sends "
                             "every request at once)", text);
    rate = -1;
  } catch (...) {
    rate = -1;
  }
  if (!(rate > 0)) return InvalidArgument("--request-rate: '{}' is not a positive number or inf", text);
  return rate;
}

/// The workload: multi-turn conversations, random prompts over `vocab`, shared-prefix prompts
/// or a dataset file (tokenized when `tokenizer` is given), with arrival offsets. `as_text`:
/// multi-turn turns as text (bench serve).
Expected<std::vector<bench::BenchRequest>> make_workload(const BenchWorkloadFlags& f,
                                                         bool num_prompts_given, uint64_t seed,
                                                         const bench::VocabInfo& vocab,
                                                         const Tokenizer* tokenizer, bool as_text) {
  std::vector<bench::BenchRequest> reqs;
  if (f.conversations > 0) {  // every conversation starts at t = 0
    bench::MultiTurnOptions o{f.conversations, f.turns, f.new_tokens, f.output_len, seed};
    return bench::make_multi_turn_workload(o, vocab, as_text);
  }
  if (f.dataset == "random") {
    bench::RandomDatasetOptions o{f.num_prompts, f.input_len, f.output_len, f.range_ratio, seed};
    LLMS_ASSIGN_OR_RETURN(reqs, bench::make_random_dataset(o, vocab));
  } else if (f.dataset == "prefix_repetition") {
    bench::PrefixRepetitionOptions o{f.num_prompts, f.prefix_len,        f.suffix_len,
                                     f.num_prefixes, f.prefix_output_len, seed};
    LLMS_ASSIGN_OR_RETURN(reqs, bench::make_prefix_repetition_dataset(o, vocab));
  } else {
    LLMS_ASSIGN_OR_RETURN(reqs, bench::load_dataset_file(f.dataset, tokenizer,
                                                         num_prompts_given ? f.num_prompts : 0));
  }
  LLMS_ASSIGN_OR_RETURN(double rate, parse_rate(f.request_rate));
  LLMS_RETURN_IF_ERROR(bench::assign_arrivals(reqs, {rate, f.burstiness, seed}));
  return reqs;
}

/// `roofline`: bench --roofline's figures (null: none), under "decode_roofline" in the JSON.
void print_results(const bench::RunResult& run, bool json,
                   const bench::DecodeRoofline* roofline = nullptr) {
  const bench::BenchMetrics m = bench::compute_metrics(run);
  if (json) {
    nlohmann::json j = bench::metrics_to_json(m);
    if (roofline) j["decode_roofline"] = bench::roofline_to_json(*roofline, m);
    std::cout << j.dump() << std::endl;
    return;
  }
  std::cout << bench::format_metrics_table(m, "Serving Benchmark Result");
  if (roofline) std::cout << bench::format_roofline_table(*roofline, m);
  std::cout << std::flush;
}

/// bench --roofline's probe buffer: far beyond any last-level cache, small beside a model.
constexpr int64_t kRooflineProbeBytes = int64_t{512} << 20;

/// bench::probe_read_bandwidth over kRooflineProbeBytes; a buffer that cannot be allocated is
/// an error, not an abort.
Expected<double> roofline_probe(ThreadPool& pool) {
  try {
    return bench::probe_read_bandwidth(pool, kRooflineProbeBytes, 4);
  } catch (const std::bad_alloc&) {
    return ResourceExhausted("--roofline: cannot allocate the {} MiB bandwidth probe buffer",
                             kRooflineProbeBytes >> 20);
  }
}

/// Prints the first failed request's error on stderr (bench serve).
void report_failures(const bench::RunResult& run) {
  for (const bench::RequestRecord& r : run.requests) {
    if (r.success) continue;
    std::fprintf(stderr, "warning: request %lld failed: %s\n", static_cast<long long>(r.id),
                 r.error.c_str());
    return;
  }
}

}  // namespace

BenchCommand::BenchCommand(CLI::App& app, std::string command_line)
    : command_line_(std::move(command_line)) {
  cmd_ = app.add_subcommand(
      "bench", "Benchmark the engine in-process (MODEL) or a server (bench serve --url URL)");
  config_.cache.kv_cache_prefault = true;  // measure as a warmed-up server runs
  add_engine_flags(*cmd_, config_, flags_);  // MODEL is needed only without `serve`
  // In process, no name is served, and every request has priority 0.
  set_unused_flags(flags_, {"--served-model-name", "--scheduling-policy"}, "bench");
  add_workload_flags(*cmd_);
  cmd_->add_option("--timeline", timeline_path_,
                   "Write the schedule (requests x engine steps) as an SVG file");
  cmd_->add_flag("--roofline", roofline_,
                 "Compare one stream's decode (1 / median TPOT) with the weight-bytes roofline: "
                 "the read bandwidth, probed just before and just after the run (512 MiB), over "
                 "the bytes a token reads (inspect's decode_bytes_per_token, after --quantization "
                 "and --dtype); needs --num-prompts 1 and the random dataset. Weights that fit in "
                 "the cache can run above this DRAM roofline");
  cmd_->require_subcommand(0, 1);

  serve_ = cmd_->add_subcommand(
      "serve", "Send the workload to an OpenAI-compatible server (/v1/completions, streaming)");
  add_workload_flags(*serve_);
  serve_->add_option("--url", url_, "Server base URL, e.g. http://127.0.0.1:8000")->required();
  serve_->add_option("--seed", config_.seed, "Seed of the dataset and arrivals")
      ->transform(human_int(0, INT64_MAX))  // a uint64: "-1" would wrap around; 1k = 1000
      ->capture_default_str();
  serve_->add_option("--served-model-name", served_model_,
                     "Model name to send (default: the first of GET /v1/models)");
  serve_->add_option("--model-file", vocab_model_,
                     "Model file whose vocabulary size bounds random prompt ids (default: "
                     "--vocab-size)");
  serve_->add_option("--vocab-size", vocab_size_, "Vocabulary size for random prompts")
      ->transform(human_int(1))
      ->capture_default_str();
  serve_->add_option("--max-concurrency", max_concurrency_,
                     "Requests in flight at once (0 = unbounded)")
      ->transform(human_int(0))
      ->capture_default_str();
  serve_->add_option("--api-key", api_key_,
                     "Send 'Authorization: Bearer <key>' (default: $OPENAI_API_KEY)");
  serve_->add_option("--timeout", timeout_s_,
                     "Seconds one read from the server (connect, headers, each stream chunk) "
                     "may wait, > 0")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
}

void BenchCommand::add_workload_flags(CLI::App& app) {
  BenchWorkloadFlags& f = workload_;
  num_prompts_opts_.push_back(
      app.add_option("--num-prompts", f.num_prompts,
                     "Number of requests (a --dataset file: default all its entries; more "
                     "cycles through them)")
          ->transform(human_int(1))
          ->capture_default_str());
  app.add_option("--input-len", f.input_len, "Prompt tokens, BOS included (random dataset)")
      ->transform(human_int(1))
      ->capture_default_str();
  app.add_option("--output-len", f.output_len, "Tokens to generate (random dataset)")
      ->transform(human_int(1))
      ->capture_default_str();
  app.add_option("--range-ratio", f.range_ratio,
                 "Lengths uniform in [L*(1-R), L*(1+R)], 0 <= R < 1")
      ->capture_default_str();
  app.add_option("--request-rate", f.request_rate,
                 "Requests per second (gamma/Poisson arrivals), or inf = all at once")
      ->capture_default_str();
  app.add_option("--burstiness", f.burstiness,
                 "Gamma shape of inter-arrival times: 1 = Poisson, < 1 burstier")
      ->capture_default_str();
  app.add_option("--dataset", f.dataset,
                 "random, prefix_repetition (shared prefixes, vLLM's), or a JSONL/JSON file of "
                 "{\"prompt\": ..., \"output_len\": N}")
      ->capture_default_str();
  app.add_option("--prefix-repetition-prefix-len", f.prefix_len,
                 "prefix_repetition: tokens every request of a group shares, BOS included")
      ->transform(human_int(1))
      ->capture_default_str();
  app.add_option("--prefix-repetition-suffix-len", f.suffix_len,
                 "prefix_repetition: random tokens after the prefix, per request")
      ->transform(human_int(0))
      ->capture_default_str();
  app.add_option("--prefix-repetition-num-prefixes", f.num_prefixes,
                 "prefix_repetition: distinct prefixes (the requests are split among them)")
      ->transform(human_int(1))
      ->capture_default_str();
  app.add_option("--prefix-repetition-output-len", f.prefix_output_len,
                 "prefix_repetition: tokens to generate per request")
      ->transform(human_int(1))
      ->capture_default_str();
  app.add_option("--multi-turn-conversations", f.conversations,
                 "Multi-turn: C conversations at once; each turn resends the history plus "
                 "--multi-turn-new-tokens new tokens and generates --output-len")
      ->transform(human_int(1));
  app.add_option("--multi-turn-turns", f.turns, "Multi-turn: turns per conversation")
      ->transform(human_int(1))
      ->capture_default_str();
  app.add_option("--multi-turn-new-tokens", f.new_tokens,
                 "Multi-turn: new user tokens per turn (bench serve: words)")
      ->transform(human_int(1))
      ->capture_default_str();
  app.add_option("--temperature", f.temperature, "Sampling temperature (0 = greedy)")
      ->capture_default_str();
  app.add_flag("--json", f.json, "Print one JSON object instead of the table");
}

bool BenchCommand::num_prompts_given() const {
  for (const CLI::Option* o : num_prompts_opts_)
    if (o->count() > 0) return true;
  return false;
}

bool BenchCommand::given(const char* flag) const {
  for (const CLI::App* app : {cmd_, serve_})
    if (const CLI::Option* o = app->get_option_no_throw(flag); o && o->count() > 0) return true;
  return false;
}

Status BenchCommand::check_workload_flags() const {
  const BenchWorkloadFlags& f = workload_;
  LLMS_RETURN_IF_ERROR(check_sampling_flags(f.temperature, 1.0f));  // before the model loads
  // The arrival and length flags too (the workload itself is built after the load).
  LLMS_ASSIGN_OR_RETURN(const double rate, parse_rate(f.request_rate));
  LLMS_RETURN_IF_ERROR(bench::check_arrival_options({rate, f.burstiness, config_.seed}));
  if (f.dataset == "random" && !given("--multi-turn-conversations")) {
    LLMS_RETURN_IF_ERROR(bench::check_random_options(
        {f.num_prompts, f.input_len, f.output_len, f.range_ratio, config_.seed}));
    // The request count is known: a rate spreading them over more than a week too.
    LLMS_RETURN_IF_ERROR(
        bench::make_arrival_offsets(f.num_prompts, {rate, f.burstiness, config_.seed}).status());
  }
  const bool prefix_repetition = f.dataset == "prefix_repetition";
  const bool multi_turn = given("--multi-turn-conversations");
  for (const char* flag : {"--prefix-repetition-prefix-len", "--prefix-repetition-suffix-len",
                           "--prefix-repetition-num-prefixes", "--prefix-repetition-output-len"})
    if (given(flag) && !prefix_repetition)
      return InvalidArgument("{} needs --dataset prefix_repetition", flag);
  for (const char* flag : {"--multi-turn-turns", "--multi-turn-new-tokens"})
    if (given(flag) && !multi_turn) return InvalidArgument("{} needs --multi-turn-conversations", flag);
  if (multi_turn) {
    if (f.dataset != "random")
      return InvalidArgument("--dataset {} cannot be combined with --multi-turn-conversations "
                             "(each turn's new tokens are random)", f.dataset);
    const std::pair<const char*, const char*> unused[] = {
        {"--num-prompts", "it sends conversations x turns requests"},
        {"--input-len", "use --multi-turn-new-tokens"},
        {"--range-ratio", "every turn has the same lengths"},
        {"--request-rate", "every conversation starts at once and sends its next turn when the "
                           "previous reply has finished"},
        {"--burstiness", "every conversation starts at once and sends its next turn when the "
                         "previous reply has finished"}};
    for (const auto& [flag, why] : unused)
      if (given(flag))
        return InvalidArgument("{} does not apply to --multi-turn-conversations ({})", flag, why);
    if (serve_->parsed())
      for (const char* flag : {"--vocab-size", "--model-file"})
        if (given(flag))
          return InvalidArgument("{} does not apply to bench serve --multi-turn-conversations "
                                 "(turns are sent as text)", flag);
    return bench::check_multi_turn_options(
        {f.conversations, f.turns, f.new_tokens, f.output_len, 0});
  }
  if (prefix_repetition) {
    if (given("--input-len"))
      return InvalidArgument("--input-len does not apply to --dataset prefix_repetition (use "
                             "--prefix-repetition-prefix-len and --prefix-repetition-suffix-len)");
    if (given("--output-len"))
      return InvalidArgument("--output-len does not apply to --dataset prefix_repetition (use "
                             "--prefix-repetition-output-len)");
    if (given("--range-ratio"))
      return InvalidArgument("--range-ratio does not apply to --dataset prefix_repetition (its "
                             "lengths are fixed)");
  } else if (f.dataset != "random") {
    const std::pair<const char*, const char*> unused[] = {
        {"--input-len", "its prompts are the file's"},
        {"--output-len", "each entry gives its output_len"},
        {"--range-ratio", "its lengths are the file's"}};
    for (const auto& [flag, why] : unused)
      if (given(flag)) return InvalidArgument("{} does not apply to a --dataset file ({})", flag, why);
  }
  // Values, before any model is loaded (the BOS-dependent bound is checked with the vocabulary).
  if (prefix_repetition)
    return bench::check_prefix_repetition_options(
        {f.num_prompts, f.prefix_len, f.suffix_len, f.num_prefixes, f.prefix_output_len, 0},
        /*bos=*/false);
  return Status::Ok();
}

int BenchCommand::run() {
  if (serve_->parsed())  // flags of `bench` given before `serve`
    for (const auto& [flag, set] : {std::pair{"--roofline", roofline_},
                                    std::pair{"--timeline", !timeline_path_.empty()}})
      if (set)
        return fail(InvalidArgument(
            "{} applies to the in-process bench (bench MODEL), not bench serve", flag));
  if (roofline_) {  // one stream's decode
    if (given("--multi-turn-conversations"))
      return fail(InvalidArgument("--roofline does not apply to --multi-turn-conversations (it "
                                  "measures one stream's decode)"));
    if (workload_.dataset != "random")
      return fail(InvalidArgument("--roofline needs the random dataset (one stream of "
                                  "--input-len + --output-len tokens), not --dataset {}",
                                  workload_.dataset));
    if (workload_.num_prompts != 1)
      return fail(InvalidArgument("--roofline measures one stream's decode: use --num-prompts 1 "
                                  "(got {})", workload_.num_prompts));
  }
  if (Status st = check_workload_flags(); !st.ok()) return fail(st);
  if (serve_->parsed()) return run_serve();
  return run_in_process();
}

int BenchCommand::run_in_process() {
  if (config_.model_path.empty() && flags_.model_flag.empty())
    return fail(InvalidArgument("bench: MODEL is required (or use `bench serve --url URL`)"));
  if (Status st = finish_engine_flags(config_, flags_); !st.ok()) return fail(st);
  if (!timeline_path_.empty()) {  // fail before a long run, not after it
    std::ofstream probe(timeline_path_, std::ios::app);
    if (!probe) return fail(InvalidArgument("--timeline: cannot write {}", timeline_path_));
  }
  auto engine_or = LLMEngine::create(config_);
  if (!engine_or.ok()) return fail(engine_or.status());
  LLMEngine& engine = **engine_or;
  const Tokenizer& tok = engine.tokenizer();
  auto reqs = make_workload(workload_, num_prompts_given(), config_.seed, bench::vocab_info(tok),
                            &tok, /*as_text=*/false);
  if (!reqs.ok()) return fail(reqs.status());

  // --roofline: the bytes a token reads, and the bandwidth just before and after the run.
  std::optional<bench::DecodeRoofline> roofline;
  std::unique_ptr<ThreadPool> probe_pool;
  if (roofline_) {
    auto file = ModelFile::open(config_.model_path);
    if (!file.ok()) return fail(file.status());
    auto cost = planned_weight_cost(**file, config_.quantization, config_.dtype);
    if (!cost.ok()) return fail(cost.status());
    roofline.emplace();
    roofline->bytes_per_token = cost->decode_bytes_per_token;
    probe_pool = std::make_unique<ThreadPool>(config_.num_threads > 0 ? config_.num_threads
                                                                      : ThreadPool::physical_cores());
    auto bw = roofline_probe(*probe_pool);
    if (!bw.ok()) return fail(bw.status());
    roofline->bandwidth_before_gbs = *bw;
  }

  bench::ProgressBar bar;
  bench::RunOptions opts;
  opts.temperature = workload_.temperature;
  opts.progress = [&](int64_t done, int64_t total) { bar.update(done, total); };
  auto run = bench::run_in_process(engine, *reqs, opts);
  bar.finish();
  if (!run.ok()) return fail(run.status());
  if (roofline) {
    auto bw = roofline_probe(*probe_pool);
    if (!bw.ok()) return fail(bw.status());
    roofline->bandwidth_after_gbs = *bw;
  }
  if (!timeline_path_.empty()) {
    if (Status st = bench::write_timeline_svg(timeline_path_, *run, command_line_); !st.ok())
      return fail(st);
  }
  print_results(*run, workload_.json, roofline ? &*roofline : nullptr);
  return 0;
}

/// True when requests were sent and none succeeded (the run measured nothing).
static bool all_failed(const bench::RunResult& run) {
  for (const bench::RequestRecord& r : run.requests)
    if (r.success) return false;
  return !run.requests.empty();
}

int BenchCommand::run_serve() {
  bench::VocabInfo vocab;
  vocab.vocab_size = vocab_size_;
  vocab.special_ids = {0, 1, 2};  // <unk>, <s>, </s> in Llama/SentencePiece vocabularies
  if (!vocab_model_.empty()) {
    if (serve_->count("--vocab-size") > 0)
      return fail(InvalidArgument("give --model-file or --vocab-size, not both (the model "
                                  "file's vocabulary sets the size)"));
    auto file = ModelFile::open(vocab_model_);
    if (!file.ok()) return fail(file.status());
    vocab.vocab_size = (*file)->config().vocab_size;
  }
  // Dataset files are sent as text; the server tokenizes and reports the prompt length.
  auto reqs = make_workload(workload_, num_prompts_given(), config_.seed, vocab, nullptr,
                            /*as_text=*/true);
  if (!reqs.ok()) return fail(reqs.status());

  bench::ProgressBar bar;
  bench::ServeOptions opts;
  opts.url = url_;
  opts.model = served_model_;
  opts.temperature = workload_.temperature;
  opts.max_concurrency = max_concurrency_;
  opts.timeout_s = timeout_s_;
  opts.api_key = api_key_;
  if (opts.api_key.empty())
    if (const char* env = std::getenv("OPENAI_API_KEY")) opts.api_key = env;
  opts.progress = [&](int64_t done, int64_t total) { bar.update(done, total); };
  auto run = bench::run_over_http(*reqs, opts);
  bar.finish();
  if (!run.ok()) return fail(run.status());
  if (!run->server_engine)
    std::fprintf(stderr, "note: engine rows n/a: %s\n", run->server_metrics_note.c_str());
  report_failures(*run);
  print_results(*run, workload_.json);
  return all_failed(*run) ? 1 : 0;
}

}  // namespace llmserve::cli
