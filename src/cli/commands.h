// The subcommands. Each registers its flags on construction and runs after parsing;
// run() returns the process exit code (0 ok, 1 error with a one-line message on stderr).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "cli/engine_flags.h"
#include "config/engine_config.h"

namespace llmserve::cli {

/// Prints "error: <message>" to stderr and returns 1.
int fail(const Status& status);

/// --temperature (finite, >= 0) and --top-p (in (0, 1]), named as the flags in the error (the
/// engine's message would say "temperature"): checked before a model loads. Doubles, as the flags
/// are read, so a value that a float would round to 0 or inf (1e-50, 1e39) is named as given.
Status check_sampling_flags(double temperature, double top_p);

class ServeCommand {
 public:
  explicit ServeCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  CLI::App* cmd_;
  EngineConfig config_;
  EngineFlagValues flags_;
  std::string host_ = "127.0.0.1";
  int port_ = 8000;
  std::string chat_template_;
  int http_threads_ = 0;  // 0 = automatic (ServerConfig::num_http_threads)
  std::string api_key_;   // --api-key, else $LLMSERVE_API_KEY
  int64_t max_request_body_bytes_ = int64_t{8} << 20;
  int max_waiting_ = 256;
  double shutdown_timeout_s_ = 30;
  bool disable_log_requests_ = false;
  bool disable_ui_ = false;
  bool ui_show_prompts_ = false;
  bool ignore_unknown_fields_ = false;
  std::string tool_call_parser_;   // --tool-call-parser
  bool enable_auto_tool_choice_ = false;
  std::string reasoning_parser_;   // --reasoning-parser
  std::string replica_id_;         // --replica-id ("" = <hostname>:<port>)
};

class GenerateCommand {
 public:
  explicit GenerateCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  CLI::App* cmd_;
  EngineConfig config_;
  EngineFlagValues flags_;
  std::string prompt_;
  int max_tokens_ = 64;
  double temperature_ = 0.0;  // doubles: 1e-50 is reported as given, not as float's 0
  double top_p_ = 1.0;
  int top_k_ = -1;
  int64_t seed_ = -1;
  bool json_ = false;
  bool ignore_eos_ = false;
};

class LogitsCommand {
 public:
  explicit LogitsCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  CLI::App* cmd_;
  EngineConfig config_;
  EngineFlagValues flags_;
  std::string token_ids_;
  std::string out_path_;
};


/// llmserve make-model: writes a random-weight Llama-architecture GGUF (and optionally the same
/// weights as a Hugging Face safetensors directory) of a named shape, for benchmarks.
class MakeModelCommand {
 public:
  explicit MakeModelCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  CLI::App* cmd_;
  std::string preset_;
  std::string dtype_ = "bf16";
  uint64_t seed_ = 0;
  std::string out_path_;
  std::string hf_dir_;
};

/// llmserve quantize IN OUT --type TYPE: a GGUF (f32/f16/bf16) or Hugging Face directory
/// quantized into a GGUF file with llama-quantize's per-tensor rules and our quantizers.
class QuantizeCommand {
 public:
  explicit QuantizeCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  CLI::App* cmd_;
  std::string in_path_;
  std::string out_path_;
  std::string type_;
  bool pure_ = false;
  std::string tokenizer_;
  int threads_ = 0;
};

/// llmserve inspect MODEL: the model's shape, attention type, parameter count and KV cache
/// cost (bytes per token; blocks, tokens and max-length sequences in a KV memory budget, sized
/// as the engine sizes its pool), beside the MHA-equivalent figures. Text or --json.
class InspectCommand {
 public:
  explicit InspectCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  CLI::App* cmd_;
  std::string model_path_;           // MODEL
  std::string model_flag_;           // --model
  std::string kv_cache_memory_;      // parse_bytes syntax; "" = kDefaultKvCacheMemoryBytes
  int64_t max_model_len_ = 0;        // 0 = the model's max_position_embeddings
  std::string dtype_ = "auto";       // --dtype: what --kv-cache-dtype auto follows
  std::string kv_cache_dtype_ = "auto";
  int32_t block_size_ = CacheConfig{}.block_size;
  std::string quantization_;         // --quantization: report the weights as serve would make them
  bool json_ = false;
};

/// llmserve dequantize FILE --out-dir DIR [--tensor NAME]: the tensors of a GGUF file as
/// float32 .npy files (<tensor name>.npy; 1-D [n], else [rows, row length]), quantized
/// types through the reference dequantizer; one line per tensor (name, type, shape).
class DequantizeCommand {
 public:
  explicit DequantizeCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  CLI::App* cmd_;
  std::string path_;       // FILE
  std::string file_flag_;  // --file
  std::string out_dir_;
  std::vector<std::string> tensors_;
};

/// llmserve render-chat: renders a conversation with a Jinja chat template (transformers'
/// apply_chat_template semantics; the template chosen as serve chooses it) and prints exactly
/// the text; template errors -> exit 1.
class RenderChatCommand {
 public:
  explicit RenderChatCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  /// --model: its chat template (as the engine finds it) and, unless given, bos/eos tokens.
  Status read_model(std::optional<std::string>* model_template);

  CLI::App* cmd_;
  CLI::Option* bos_opt_ = nullptr;
  CLI::Option* eos_opt_ = nullptr;
  std::string template_source_;  // --chat-template: a file or the template text
  std::string model_path_;
  std::string tokenizer_path_;
  std::string messages_path_;
  std::string tools_path_;
  std::string kwargs_json_;
  std::string bos_token_;
  std::string eos_token_;
  std::string now_;
  bool add_generation_prompt_ = false;
  bool continue_final_message_ = false;
};

/// llmserve tokenize: the token ids of one text file (`{"ids": [...]}` with --json).
class TokenizeCommand {
 public:
  explicit TokenizeCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  CLI::App* cmd_;
  std::string tokenizer_path_;
  std::string text_path_;
  int32_t vocab_size_ = 0;
  bool add_special_ = false;
  bool parse_special_ = false;
  bool json_ = false;
};

/// llmserve grammar-check: accept/reject instance files under a constraint, token by token.
class GrammarCheckCommand {
 public:
  explicit GrammarCheckCommand(CLI::App& app);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  CLI::App* cmd_;
  std::string tokenizer_path_;
  std::string json_schema_path_;
  std::string regex_;
  std::string grammar_path_;
  std::vector<std::string> choices_;
  std::vector<std::string> instances_;
  bool disable_any_whitespace_ = false;
  bool json_ = false;
};

/// Workload flags shared by `bench` and `bench serve`.
struct BenchWorkloadFlags {
  int num_prompts = 100;            // requests
  int input_len = 128;              // prompt tokens (BOS included), random dataset
  int output_len = 128;             // tokens to generate, random dataset
  double range_ratio = 0.0;         // lengths uniform in [L*(1-R), L*(1+R)]
  std::string request_rate = "inf"; // requests per second, or "inf" (all at t = 0)
  double burstiness = 1.0;          // gamma shape of inter-arrival times (1 = Poisson)
  std::string dataset = "random";   // "random", "prefix_repetition" or a JSON/JSONL file
  float temperature = 0.0f;         // sampling temperature of every request
  bool json = false;                // print one JSON object instead of the table
  // --dataset prefix_repetition (vLLM's flags and defaults)
  int prefix_len = 256;             // --prefix-repetition-prefix-len (BOS included)
  int suffix_len = 256;             // --prefix-repetition-suffix-len
  int num_prefixes = 10;            // --prefix-repetition-num-prefixes
  int prefix_output_len = 128;      // --prefix-repetition-output-len
  // multi-turn conversations (0 conversations = off)
  int conversations = 0;            // --multi-turn-conversations
  int turns = 3;                    // --multi-turn-turns
  int new_tokens = 64;              // --multi-turn-new-tokens
};

/// `llmserve bench MODEL ...` (engine in-process) and `llmserve bench serve --url URL ...`.
class BenchCommand {
 public:
  /// `command_line` is shown in the timeline's title.
  BenchCommand(CLI::App& app, std::string command_line);
  bool parsed() const { return cmd_->parsed(); }
  int run();

 private:
  void add_workload_flags(CLI::App& app);
  /// Whether --num-prompts appeared on the command line (bench or bench serve).
  bool num_prompts_given() const;
  /// Whether `flag` appeared on the command line (bench or bench serve).
  bool given(const char* flag) const;
  /// The workload flags that contradict each other or have no effect on the chosen workload
  /// (dataset, prefix repetition, multi-turn): the first one found, as a one-line error.
  Status check_workload_flags() const;
  int run_in_process();
  int run_serve();

  CLI::App* cmd_;
  CLI::App* serve_;
  std::string command_line_;
  EngineConfig config_;
  EngineFlagValues flags_;
  BenchWorkloadFlags workload_;
  std::vector<CLI::Option*> num_prompts_opts_;  // --num-prompts of bench and bench serve
  std::string timeline_path_;
  bool roofline_ = false;  // --roofline
  // bench serve
  std::string url_;
  std::string served_model_;   // model name sent to the server ("" = ask /v1/models)
  std::string vocab_model_;    // model file whose vocabulary sizes the random prompts
  int vocab_size_ = 512;
  int max_concurrency_ = 0;
  double timeout_s_ = 600;
  std::string api_key_;        // --api-key, else $OPENAI_API_KEY
};

}  // namespace llmserve::cli
