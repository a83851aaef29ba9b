// llmserve make-model: a random-weight Llama-architecture (or, for the MoE preset, Qwen3-MoE)
// model of a named shape, for benchmarks. Writes a GGUF file laid out as llama.cpp's converter writes a llama model
// (metadata keys, tensor names, Q/K rows in llama.cpp's permuted order, 1-D norms in F32),
// with a generated SentencePiece-style vocabulary so text prompts tokenize into real pieces.
// Optionally also writes the same weights as a Hugging Face directory (config.json +
// model.safetensors, HF tensor names, Q/K rows in HF's rotate-half order).
//
// Weights are a counter-based stream: element e of a tensor is a hash of (tensor seed, e), the
// tensor seeds drawn from std::mt19937_64(--seed). Values are an Irwin-Hall(4) approximation of
// a normal with mean 0 and std 0.02, so any element can be regenerated independently (the HF
// writer reads Q/K rows in a different order) and the file never has to be held in memory.
#include <sys/stat.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/human_int.h"
#include "cli/remove_on_signal.h"
#include "common/dtype.h"
#include "weights/gguf_writer.h"

namespace llmserve::cli {
namespace {

struct Preset {
  const char* name;
  int32_t vocab_size;
  int32_t dim;
  int32_t n_layers;
  int32_t n_heads;
  int32_t n_kv_heads;
  int32_t head_dim;
  int32_t ffn_dim;
  int32_t context_length;
  double rope_theta;
  double rms_norm_eps;
  // Mixture of experts (0 = dense): written as llama.cpp's qwen3moe architecture (Qwen3
  // attention with per-head q/k norms, rotate-half RoPE; experts stacked in ffn_*_exps).
  int32_t n_experts = 0;
  int32_t n_experts_used = 0;
  int32_t expert_ffn_dim = 0;
  // Sliding-window attention in every layer (0 = none), Mistral 7B v0.1 style: GGUF
  // llama.attention.sliding_window, HF MistralForCausalLM sliding_window.
  int32_t sliding_window = 0;
  bool is_moe() const { return n_experts > 0; }
};

constexpr Preset kPresets[] = {
    // name            vocab   dim  layers heads kv  hd   ffn   ctx   theta    eps
    {"bench-5m", 4000, 256, 6, 4, 2, 64, 704, 1024, 10000.0, 1e-5},
    {"bench-25m", 8000, 512, 8, 8, 2, 64, 1408, 2048, 10000.0, 1e-5},
    {"bench-250m", 32000, 1024, 16, 16, 4, 64, 2816, 2048, 10000.0, 1e-5},
    // TinyLlama/TinyLlama-1.1B-Chat-v1.0 config.json
    {"tinyllama-1.1b", 32000, 2048, 22, 32, 4, 64, 5632, 2048, 10000.0, 1e-5},
    // Qwen3-30B-A3B's shape scaled down (128 experts, top-8, width 768 there): 1.3B parameters,
    // ~0.26B of them read per token (64 experts, top-8, width 512).
    {"qwen3moe-1b", 32000, 1024, 12, 16, 4, 64, 2816, 2048, 1e6, 1e-6, 64, 8, 512},
    // bench-250m's shape with Mistral 7B v0.1's sliding window scaled down (4096 of 32768
    // there): a 512-token window in every layer, 8192 tokens of context.
    {"mistral-swa-250m", 32000, 1024, 16, 16, 4, 64, 2816, 8192, 10000.0, 1e-5, 0, 0, 0, 512},
};

std::string preset_names() {
  std::string s;
  for (const Preset& p : kPresets) s += (s.empty() ? "" : ", ") + std::string(p.name);
  return s;
}

const Preset* find_preset(std::string_view name) {
  for (const Preset& p : kPresets)
    if (name == p.name) return &p;
  return nullptr;
}

// ------------------------------------------------------------------------------------------
// Vocabulary

constexpr std::string_view kSpace = "\xe2\x96\x81";  // U+2581, SentencePiece's space marker

// Frequent English words, most frequent first (general text plus children's-story words).
constexpr const char* kWords =
    "the of and to a in is it you that he was for on are with as I his they be at one have "
    "this from or had by hot word but what some we can out other were all there when up use "
    "your how said an each she which do their time if will way about many then them write "
    "would like so these her long make thing see him two has look more day could go come did "
    "number sound no most people my over know water than call first who may down side been "
    "now find any new work part take get place made live where after back little only round "
    "man year came show every good me give our under name very through just form sentence "
    "great think say help low line differ turn cause much mean before move right boy old too "
    "same tell does set three want air well also play small end put home read hand port large "
    "spell add even land here must big high such follow act why ask men change went light "
    "kind off need house picture try us again animal point mother world near build self earth "
    "father head stand own page should country found answer school grow study still learn "
    "plant cover food sun four between state keep eye never last let thought city tree cross "
    "farm hard start might story saw far sea draw left late run don't while press close night "
    "real life few north open seem together next white children begin got walk example ease "
    "paper group always music those both mark often letter until mile river car feet care "
    "second book carry took science eat room friend began idea fish mountain stop once base "
    "hear horse cut sure watch color face wood main enough plain girl usual young ready above "
    "ever red list though feel talk bird soon body dog family direct pose leave song measure "
    "door product black short numeral class wind question happen complete ship area half rock "
    "order fire south problem piece told knew pass since top whole king space heard best hour "
    "better true during hundred five remember step early hold west ground interest reach fast "
    "verb sing listen six table travel less morning ten simple several vowel toward war lay "
    "against pattern slow center love person money serve appear road map rain rule govern pull "
    "cold notice voice unit power town fine certain fly fall lead cry dark machine note wait "
    "plan figure star box noun field rest correct able pound done beauty drive stood contain "
    "front teach week final gave green oh quick develop ocean warm free minute strong special "
    "mind behind clear tail produce fact street inch multiply nothing course stay wheel full "
    "force blue object decide surface deep moon island foot system busy test record boat "
    "common gold possible plane stead dry wonder laugh thousand ago ran check game shape "
    "equate miss brought heat snow tire bring yes distant fill east paint language among "
    "upon happy played named ball toy park smiled wanted lily tim ben sam mom dad sad "
    "asked looked went felt saw very said day sky flower cat bear bunny friends loved "
    "decided excited scared shiny pretty funny together outside inside garden jump ran";

constexpr const char* kSubwords =
    "s es ed ing er est ly tion ment ness able ful less al ic ous ive ity re un in de con pro "
    "com ex en an ar or at it on ion ation ies ers ings ted ter ther ough ight ould ight ck "
    "th ch sh wh ph qu ll ss tt ee oo ea ou ai ay ow ie";

// English letter frequency order (most frequent first), used to rank filler merges.
constexpr std::string_view kLetterOrder = "etaoinshrdlcumwfgypbvkjxqz";

/// UTF-8 code points of `s` (ASCII and U+2581 are all this vocabulary uses).
std::vector<std::string> code_points(std::string_view s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    out.emplace_back(s.substr(i, n));
    i += n;
  }
  return out;
}

/// Builds a SentencePiece-BPE vocabulary whose pieces are reachable by the SPM merge rule
/// (repeatedly merge the adjacent pair whose concatenation is a piece with the highest score):
/// every multi-character piece is added only once the merge procedure, run on its characters
/// with the vocabulary so far, stops at exactly two pieces, so that adding their concatenation
/// (with a score below every earlier piece) makes it the final merge.
class VocabBuilder {
 public:
  explicit VocabBuilder(int32_t size) : size_(size) {}

  bool full() const { return static_cast<int32_t>(pieces_.size()) >= size_; }

  void add_special(std::string piece, int32_t type, float score = 0.0f) {
    add_raw(std::move(piece), type, score);
  }

  /// Adds a single piece with the next (decreasing) score. False if full or present.
  bool add_piece(const std::string& piece) {
    if (full() || index_.count(piece)) return false;
    add_raw(piece, /*type=*/1, -static_cast<float>(pieces_.size()));
    return true;
  }

  /// Adds `word` and whatever intermediate merges it needs to become one token.
  void learn(std::string_view word) {
    for (int iter = 0; iter < 64 && !full(); ++iter) {
      const std::vector<std::string> toks = tokenize(word);
      if (toks.size() <= 1) return;
      // Merge the adjacent pair with the shortest concatenation (leftmost on ties).
      size_t best = 0;
      for (size_t i = 1; i + 1 < toks.size(); ++i)
        if (toks[i].size() + toks[i + 1].size() < toks[best].size() + toks[best + 1].size())
          best = i;
      if (!add_piece(toks[best] + toks[best + 1])) return;
    }
  }

  /// The SPM merge procedure over the code points of `text`.
  std::vector<std::string> tokenize(std::string_view text) const {
    std::vector<std::string> toks = code_points(text);
    while (toks.size() > 1) {
      int best = -1;
      float best_score = 0;
      for (size_t i = 0; i + 1 < toks.size(); ++i) {
        auto it = index_.find(toks[i] + toks[i + 1]);
        if (it == index_.end()) continue;
        const float s = scores_[it->second];
        if (best < 0 || s > best_score) {
          best = static_cast<int>(i);
          best_score = s;
        }
      }
      if (best < 0) break;
      toks[best] += toks[best + 1];
      toks.erase(toks.begin() + best + 1);
    }
    return toks;
  }

  std::vector<std::string> pieces_;
  std::vector<float> scores_;
  std::vector<int32_t> types_;

 private:
  void add_raw(std::string piece, int32_t type, float score) {
    index_.emplace(piece, static_cast<int>(pieces_.size()));
    pieces_.push_back(std::move(piece));
    scores_.push_back(score);
    types_.push_back(type);
  }

  int32_t size_;
  std::unordered_map<std::string, int> index_;
};

std::vector<std::string> split_words(const char* list) {
  std::vector<std::string> out;
  std::string cur;
  for (const char* p = list;; ++p) {
    if (*p == ' ' || *p == '\0') {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (*p == '\0') break;
    } else {
      cur += *p;
    }
  }
  return out;
}

std::string capitalize(std::string w) {
  if (!w.empty() && w[0] >= 'a' && w[0] <= 'z') w[0] = static_cast<char>(w[0] - 'a' + 'A');
  return w;
}

/// All strings of `len` letters from kLetterOrder ordered by the sum of letter ranks
/// (then lexicographically by rank), i.e. likely-looking combinations first.
std::vector<std::string> letter_combinations(int len) {
  std::vector<std::pair<int, std::string>> ranked;
  const int n = static_cast<int>(kLetterOrder.size());
  int total = 1;
  for (int i = 0; i < len; ++i) total *= n;
  for (int code = 0; code < total; ++code) {
    std::string s;
    int rank = 0;
    for (int i = 0, c = code; i < len; ++i, c /= n) {
      s.insert(s.begin(), kLetterOrder[c % n]);
      rank += c % n;
    }
    ranked.emplace_back(rank, std::move(s));
  }
  std::stable_sort(ranked.begin(), ranked.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<std::string> out;
  out.reserve(ranked.size());
  for (auto& [rank, s] : ranked) out.push_back(std::move(s));
  return out;
}

VocabBuilder build_vocab(int32_t size) {
  VocabBuilder v(size);
  v.add_special("<unk>", /*kUnknown*/ 2);
  v.add_special("<s>", /*kControl*/ 3);
  v.add_special("</s>", /*kControl*/ 3);
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    v.add_special(buf, /*kByte*/ 6);
  }
  // Single characters: the space marker, letters, digits, ASCII punctuation.
  v.add_piece(std::string(kSpace));
  for (char c : kLetterOrder) v.add_piece(std::string(1, c));
  for (char c : kLetterOrder) v.add_piece(std::string(1, static_cast<char>(c - 'a' + 'A')));
  for (char c = '0'; c <= '9'; ++c) v.add_piece(std::string(1, c));
  for (char c : std::string_view(".,'\"!?-:;()[]{}/\\&%$#@*+=<>_`~^|")) {
    v.add_piece(std::string(1, c));
  }
  const std::string sp(kSpace);
  const std::vector<std::string> words = split_words(kWords);
  // Words with the space marker (as they appear after a space), then capitalised ones
  // (sentence starts), then subwords and words without the marker (inside longer words).
  for (const std::string& w : words) v.learn(sp + w);
  for (size_t i = 0; i < words.size() && i < 300; ++i) v.learn(sp + capitalize(words[i]));
  for (const std::string& w : split_words(kSubwords)) v.learn(w);
  for (const std::string& w : words) v.learn(w);
  for (const std::string& w : words) v.learn(capitalize(w));
  // Filler until the size is reached: letter pairs and triples, most likely-looking first,
  // inside words and after a space; then space-prefixed digits; then longer letter runs.
  for (int len = 2; len <= 3 && !v.full(); ++len) {
    for (const std::string& s : letter_combinations(len)) {
      if (v.full()) break;
      v.learn(s);
      v.learn(sp + s);
    }
  }
  for (int n = 0; n < 1000 && !v.full(); ++n) v.learn(sp + std::to_string(n));
  for (int len = 4; !v.full(); ++len) {
    for (const std::string& s : letter_combinations(std::min(len, 4))) {
      if (v.full()) break;
      v.learn(sp + s + (len > 4 ? std::string(len - 4, 'e') : ""));
    }
  }
  return v;
}

// ------------------------------------------------------------------------------------------
// Weights

constexpr float kWeightStd = 0.02f;

inline uint64_t mix64(uint64_t z) {  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// Element `e` of the tensor with seed `seed`: Irwin-Hall sum of four 16-bit uniforms,
/// centred and scaled to std kWeightStd (range +-4.5 std).
inline float weight_value(uint64_t seed, uint64_t e) {
  const uint64_t r = mix64(seed + (e + 1) * 0x9e3779b97f4a7c15ULL);
  const int64_t sum = static_cast<int64_t>(r & 0xffff) + ((r >> 16) & 0xffff) +
                      ((r >> 32) & 0xffff) + (r >> 48);
  // Sum of 4 uniforms on {0..65535}: mean 131070, std sqrt(4 * (65536^2 - 1) / 12).
  constexpr float kScale = kWeightStd / 37837.23f;
  return static_cast<float>(sum - 131070) * kScale;
}

/// Pieces before this id are <unk>, <s>, </s> and the 256 byte pieces.
constexpr int64_t kFirstNormalPiece = 3 + 256;

struct TensorSpec {
  std::string gguf_name;
  std::string hf_name;
  std::vector<int64_t> shape;  // outermost-first
  bool is_norm = false;        // all ones, F32 in the GGUF
  uint64_t seed = 0;
  int32_t permute_heads = 0;   // Q/K: heads whose rows llama.cpp permutes (0 = none)
  int64_t zero_rows = 0;       // leading rows that are all zero (output.weight, see below)

  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    return n;
  }
};

std::vector<TensorSpec> model_tensors(const Preset& p, uint64_t seed) {
  std::vector<TensorSpec> t;
  const int64_t q_dim = int64_t{p.n_heads} * p.head_dim, kv_dim = int64_t{p.n_kv_heads} * p.head_dim;
  t.push_back({"token_embd.weight", "model.embed_tokens.weight", {p.vocab_size, p.dim}});
  for (int l = 0; l < p.n_layers; ++l) {
    const std::string g = "blk." + std::to_string(l) + ".";
    const std::string h = "model.layers." + std::to_string(l) + ".";
    t.push_back({g + "attn_norm.weight", h + "input_layernorm.weight", {p.dim}, true});
    // qwen3moe keeps HF's rotate-half Q/K rows; llama.cpp permutes llama's.
    t.push_back({g + "attn_q.weight", h + "self_attn.q_proj.weight", {q_dim, p.dim}, false, 0,
                 p.is_moe() ? 0 : p.n_heads});
    t.push_back({g + "attn_k.weight", h + "self_attn.k_proj.weight", {kv_dim, p.dim}, false, 0,
                 p.is_moe() ? 0 : p.n_kv_heads});
    t.push_back({g + "attn_v.weight", h + "self_attn.v_proj.weight", {kv_dim, p.dim}});
    t.push_back({g + "attn_output.weight", h + "self_attn.o_proj.weight", {p.dim, q_dim}});
    t.push_back({g + "ffn_norm.weight", h + "post_attention_layernorm.weight", {p.dim}, true});
    if (p.is_moe()) {
      const int64_t E = p.n_experts, F = p.expert_ffn_dim;
      t.push_back({g + "attn_q_norm.weight", h + "self_attn.q_norm.weight", {p.head_dim}, true});
      t.push_back({g + "attn_k_norm.weight", h + "self_attn.k_norm.weight", {p.head_dim}, true});
      t.push_back({g + "ffn_gate_inp.weight", h + "mlp.gate.weight", {E, p.dim}});
      t.push_back({g + "ffn_gate_exps.weight", "", {E, F, p.dim}});  // HF: one tensor per expert
      t.push_back({g + "ffn_up_exps.weight", "", {E, F, p.dim}});
      t.push_back({g + "ffn_down_exps.weight", "", {E, p.dim, F}});
      continue;
    }
    t.push_back({g + "ffn_gate.weight", h + "mlp.gate_proj.weight", {p.ffn_dim, p.dim}});
    t.push_back({g + "ffn_up.weight", h + "mlp.up_proj.weight", {p.ffn_dim, p.dim}});
    t.push_back({g + "ffn_down.weight", h + "mlp.down_proj.weight", {p.dim, p.ffn_dim}});
  }
  t.push_back({"output_norm.weight", "model.norm.weight", {p.dim}, true});
  // The rows of the control and byte tokens in output.weight are zero: their logits are 0
  // while the others' spread around it, so greedy decoding of the random model never stops at
  // EOS by chance and its text is made of word pieces rather than stray bytes.
  t.push_back({"output.weight", "lm_head.weight", {p.vocab_size, p.dim}, false, 0, 0,
               kFirstNormalPiece});
  std::mt19937_64 rng(seed);
  for (TensorSpec& s : t) s.seed = rng();
  return t;
}

/// Fills `out` with elements [begin, begin + n) of the GGUF-layout tensor, encoded as `dtype`.
void fill_elements(const TensorSpec& t, DType dtype, int64_t begin, int64_t n, uint8_t* out) {
  const int64_t zero_end = t.zero_rows * t.shape.back();  // elements before this are 0
  auto body = [&](int64_t lo, int64_t hi) {
    for (int64_t i = lo; i < hi; ++i) {
      const int64_t e = begin + i;
      const float x = t.is_norm         ? 1.0f
                      : e < zero_end    ? 0.0f
                                        : weight_value(t.seed, static_cast<uint64_t>(e));
      switch (dtype) {
        case DType::kF32: std::memcpy(out + 4 * i, &x, 4); break;
        case DType::kF16: {
          const uint16_t h = f32_to_f16(x);
          std::memcpy(out + 2 * i, &h, 2);
          break;
        }
        case DType::kBF16: {
          const uint16_t h = f32_to_bf16(x);
          std::memcpy(out + 2 * i, &h, 2);
          break;
        }
        default:
          LLMS_CHECK(false, "make-model writes float tensors only, not {}", dtype_name(dtype));
      }
    }
  };
  if (n < (1 << 16)) {
    body(0, n);
    return;
  }
  std::thread helper(body, n / 2, n);  // two halves: generation is CPU-bound at ~1 ns/elem
  body(0, n / 2);
  helper.join();
}

constexpr int64_t kChunkElems = 1 << 20;

DType gguf_dtype(const TensorSpec& t, DType dtype) { return t.is_norm ? DType::kF32 : dtype; }

Status write_gguf(const Preset& p, DType dtype, const std::vector<TensorSpec>& tensors,
                  const VocabBuilder& vocab, const std::string& path) {
  GgufWriter w;
  const std::string a = p.is_moe() ? "qwen3moe" : "llama";
  w.add_string("general.architecture", a);
  w.add_string("general.name", p.name);
  w.add_uint32(a + ".context_length", p.context_length);
  w.add_uint32(a + ".embedding_length", p.dim);
  w.add_uint32(a + ".block_count", p.n_layers);
  w.add_uint32(a + ".feed_forward_length", p.ffn_dim);
  w.add_uint32(a + ".rope.dimension_count", p.head_dim);
  w.add_uint32(a + ".attention.head_count", p.n_heads);
  w.add_uint32(a + ".attention.head_count_kv", p.n_kv_heads);
  if (p.head_dim * p.n_heads != p.dim || p.is_moe()) {
    w.add_uint32(a + ".attention.key_length", p.head_dim);
    w.add_uint32(a + ".attention.value_length", p.head_dim);
  }
  w.add_float32(a + ".attention.layer_norm_rms_epsilon", static_cast<float>(p.rms_norm_eps));
  w.add_float32(a + ".rope.freq_base", static_cast<float>(p.rope_theta));
  w.add_uint32(a + ".vocab_size", p.vocab_size);
  if (p.sliding_window > 0) w.add_uint32(a + ".attention.sliding_window", p.sliding_window);
  if (p.is_moe()) {
    w.add_uint32(a + ".expert_count", p.n_experts);
    w.add_uint32(a + ".expert_used_count", p.n_experts_used);
    w.add_uint32(a + ".expert_feed_forward_length", p.expert_ffn_dim);
  }
  // llama_ftype: ALL_F32 = 0, MOSTLY_F16 = 1, MOSTLY_BF16 = 32.
  w.add_uint32("general.file_type", dtype == DType::kF32 ? 0 : dtype == DType::kF16 ? 1 : 32);
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_string_array("tokenizer.ggml.tokens", vocab.pieces_);
  w.add_float32_array("tokenizer.ggml.scores", vocab.scores_);
  w.add_int32_array("tokenizer.ggml.token_type", vocab.types_);
  w.add_uint32("tokenizer.ggml.bos_token_id", 1);
  w.add_uint32("tokenizer.ggml.eos_token_id", 2);
  w.add_uint32("tokenizer.ggml.unknown_token_id", 0);
  w.add_bool("tokenizer.ggml.add_bos_token", true);
  w.add_bool("tokenizer.ggml.add_eos_token", false);
  for (const TensorSpec& t : tensors)
    w.add_tensor(t.gguf_name, t.shape, ggml_type_of(gguf_dtype(t, dtype)));
  LLMS_RETURN_IF_ERROR(w.begin(path));
  std::vector<uint8_t> buf(kChunkElems * 4);
  for (const TensorSpec& t : tensors) {
    const DType dt = gguf_dtype(t, dtype);
    for (int64_t b = 0; b < t.numel(); b += kChunkElems) {
      const int64_t n = std::min(kChunkElems, t.numel() - b);
      fill_elements(t, dt, b, n, buf.data());
      LLMS_RETURN_IF_ERROR(w.write(buf.data(), static_cast<size_t>(n) * dtype_size(dt)));
    }
  }
  return w.finish();
}

/// GGUF row of HF row `r` for a Q/K weight of `heads` heads: llama.cpp's converter permutes
/// HF's rotate-half layout (per head: first half of the dims, then second half) to adjacent
/// pairs, gguf[h*hd + 2i + j] = hf[h*hd + j*hd/2 + i].
int64_t gguf_row_of_hf_row(int64_t r, int64_t rows, int32_t heads) {
  const int64_t hd = rows / heads, half = hd / 2;
  const int64_t h = r / hd, k = r % hd, j = k / half, i = k % half;
  return h * hd + 2 * i + j;
}

Status write_hf(const Preset& p, DType dtype, const std::vector<TensorSpec>& tensors,
                const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return NotFound("{}: cannot create directory: {}", dir, ec.message());
  const char* st_dtype = dtype == DType::kF32 ? "F32" : dtype == DType::kF16 ? "F16" : "BF16";
  nlohmann::ordered_json header;
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  for (const TensorSpec& t : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(t.numel()) * dtype_size(dtype);
    header[t.hf_name] = {{"dtype", st_dtype}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string h = header.dump();
  while ((h.size() + 8) % 8 != 0) h += ' ';
  const std::string path = dir + "/model.safetensors";
  std::ofstream out(path, std::ios::binary);
  if (!out) return NotFound("{}: cannot create file", path);
  const uint64_t hlen = h.size();
  out.write(reinterpret_cast<const char*>(&hlen), 8);
  out.write(h.data(), static_cast<std::streamsize>(h.size()));
  std::vector<uint8_t> buf(kChunkElems * 4);
  for (const TensorSpec& t : tensors) {
    const int64_t rows = t.shape.size() == 2 ? t.shape[0] : 1, cols = t.shape.back();
    if (t.permute_heads == 0) {
      for (int64_t b = 0; b < t.numel(); b += kChunkElems) {
        const int64_t n = std::min(kChunkElems, t.numel() - b);
        fill_elements(t, dtype, b, n, buf.data());
        out.write(reinterpret_cast<const char*>(buf.data()), n * dtype_size(dtype));
      }
      continue;
    }
    for (int64_t r = 0; r < rows; ++r) {
      const int64_t g = gguf_row_of_hf_row(r, rows, t.permute_heads);
      fill_elements(t, dtype, g * cols, cols, buf.data());
      out.write(reinterpret_cast<const char*>(buf.data()), cols * dtype_size(dtype));
    }
  }
  out.close();
  if (!out) return DataLoss("{}: write failed", path);

  const bool mistral = p.sliding_window > 0;
  nlohmann::ordered_json config = {
      {"architectures", {mistral ? "MistralForCausalLM" : "LlamaForCausalLM"}},
      {"model_type", mistral ? "mistral" : "llama"},
      {"vocab_size", p.vocab_size},
      {"hidden_size", p.dim},
      {"intermediate_size", p.ffn_dim},
      {"num_hidden_layers", p.n_layers},
      {"num_attention_heads", p.n_heads},
      {"num_key_value_heads", p.n_kv_heads},
      {"head_dim", p.head_dim},
      {"hidden_act", "silu"},
      {"max_position_embeddings", p.context_length},
      {"rms_norm_eps", p.rms_norm_eps},
      {"rope_theta", p.rope_theta},
      {"rope_scaling", nullptr},
      {"attention_bias", false},
      {"mlp_bias", false},
      {"tie_word_embeddings", false},
      {"bos_token_id", 1},
      {"eos_token_id", 2},
      {"torch_dtype", dtype == DType::kF32 ? "float32" : dtype == DType::kF16 ? "float16" : "bfloat16"},
  };
  if (mistral) config["sliding_window"] = p.sliding_window;
  std::ofstream cfg(dir + "/config.json");
  cfg << config.dump(2) << "\n";
  cfg.close();
  if (!cfg) return DataLoss("{}/config.json: write failed", dir);
  return Status::Ok();
}

/// HF tokenizer files for the generated vocabulary, in the form transformers' Llama converter
/// writes for a SentencePiece BPE model: tokenizer.json (BPE with byte fallback; merges are
/// every split a + b of a piece into two pieces, ranked by the piece's score as the
/// SentencePiece extractor ranks them), tokenizer_config.json, special_tokens_map.json.
Status write_hf_tokenizer(const Preset& p, const VocabBuilder& vocab, const std::string& dir) {
  using nlohmann::ordered_json;
  const std::string sp(kSpace);
  ordered_json vocab_json = ordered_json::object();
  std::unordered_map<std::string, int> id_of;
  for (size_t i = 0; i < vocab.pieces_.size(); ++i) {
    vocab_json[vocab.pieces_[i]] = i;
    id_of.emplace(vocab.pieces_[i], static_cast<int>(i));
  }
  struct Merge {
    int piece, left, right;
  };
  std::vector<Merge> merges;
  for (size_t i = 0; i < vocab.pieces_.size(); ++i) {
    if (vocab.types_[i] != 1) continue;
    const std::string& piece = vocab.pieces_[i];
    const std::vector<std::string> cps = code_points(piece);
    std::string left;
    for (size_t k = 0; k + 1 < cps.size(); ++k) {
      left += cps[k];
      const std::string right = piece.substr(left.size());
      auto l = id_of.find(left), r = id_of.find(right);
      if (l != id_of.end() && r != id_of.end())
        merges.push_back({static_cast<int>(i), l->second, r->second});
    }
  }
  std::sort(merges.begin(), merges.end(), [](const Merge& a, const Merge& b) {
    return std::tie(a.piece, a.left, a.right) < std::tie(b.piece, b.left, b.right);
  });
  ordered_json merges_json = ordered_json::array();
  for (const Merge& m : merges)
    merges_json.push_back(vocab.pieces_[m.left] + " " + vocab.pieces_[m.right]);
  ordered_json added = ordered_json::array();
  for (int id = 0; id < 3; ++id) {
    added.push_back({{"id", id}, {"content", vocab.pieces_[id]}, {"single_word", false},
                     {"lstrip", false}, {"rstrip", false}, {"normalized", false},
                     {"special", true}});
  }
  const ordered_json tok = {
      {"version", "1.0"},
      {"truncation", nullptr},
      {"padding", nullptr},
      {"added_tokens", added},
      {"normalizer",
       {{"type", "Sequence"},
        {"normalizers",
         {{{"type", "Prepend"}, {"prepend", sp}},
          {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", sp}}}}}},
      {"pre_tokenizer", nullptr},
      {"post_processor",
       {{"type", "TemplateProcessing"},
        {"single", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
        {"pair", {{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                  {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                  {{"SpecialToken", {{"id", "<s>"}, {"type_id", 1}}}},
                  {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
        {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}}},
      {"decoder",
       {{"type", "Sequence"},
        {"decoders",
         {{{"type", "Replace"}, {"pattern", {{"String", sp}}}, {"content", " "}},
          {{"type", "ByteFallback"}},
          {{"type", "Fuse"}},
          {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}}},
      {"model",
       {{"type", "BPE"},
        {"dropout", nullptr},
        {"unk_token", "<unk>"},
        {"continuing_subword_prefix", nullptr},
        {"end_of_word_suffix", nullptr},
        {"fuse_unk", true},
        {"byte_fallback", true},
        {"vocab", vocab_json},
        {"merges", merges_json}}},
  };
  const ordered_json config = {
      {"add_bos_token", true},
      {"add_eos_token", false},
      {"bos_token", "<s>"},
      {"eos_token", "</s>"},
      {"unk_token", "<unk>"},
      {"pad_token", nullptr},
      {"clean_up_tokenization_spaces", false},
      {"legacy", true},
      {"model_max_length", p.context_length},
      {"tokenizer_class", "LlamaTokenizerFast"},
  };
  const ordered_json special = {{"bos_token", "<s>"}, {"eos_token", "</s>"}, {"unk_token", "<unk>"}};
  const ordered_json generation = {{"bos_token_id", 1}, {"eos_token_id", 2}};
  for (const auto& [name, j] : {std::pair{"tokenizer.json", &tok},
                                std::pair{"tokenizer_config.json", &config},
                                std::pair{"special_tokens_map.json", &special},
                                std::pair{"generation_config.json", &generation}}) {
    std::ofstream out(dir + "/" + name);
    out << j->dump(2) << "\n";
    out.close();
    if (!out) return DataLoss("{}/{}: write failed", dir, name);
  }
  return Status::Ok();
}

std::string human_bytes(uint64_t b) {
  char buf[32];
  if (b >= (1ULL << 30)) std::snprintf(buf, sizeof(buf), "%.2f GiB", b / double(1ULL << 30));
  else std::snprintf(buf, sizeof(buf), "%.1f MiB", b / double(1ULL << 20));
  return buf;
}

}  // namespace

MakeModelCommand::MakeModelCommand(CLI::App& app) {
  cmd_ = app.add_subcommand("make-model",
                            "Write a random-weight Llama-architecture (or Qwen3-MoE) GGUF for benchmarks");
  cmd_->add_option("--preset", preset_, "Model shape: " + preset_names())->required();
  cmd_->add_option("--dtype", dtype_,
                   "Weight dtype of the file: float32 / f32, float16 / half / f16 or bfloat16 / "
                   "bf16 (norms stay f32)")
      ->check(dtype_validator(/*allow_auto=*/false))
      ->capture_default_str();
  cmd_->add_option("--seed", seed_, "Weight seed (same seed, same file)")
      ->transform(human_int(0, INT64_MAX))  // a uint64: "-1" would wrap around; 1k = 1000
      ->capture_default_str();
  cmd_->add_option("--out", out_path_, "Output GGUF file")->required();
  cmd_->add_option("--hf-dir", hf_dir_,
                   "Also write the same weights as a Hugging Face directory "
                   "(config.json, model.safetensors, tokenizer.json and configs)");
}

int MakeModelCommand::run() {
  const Preset* p = find_preset(preset_);
  if (!p) return fail(InvalidArgument("unknown preset '{}' (known: {})", preset_, preset_names()));
  auto dtype_flag = parse_dtype("--dtype", dtype_, /*allow_auto=*/false);
  if (!dtype_flag.ok()) return fail(dtype_flag.status());
  const DType dtype = **dtype_flag;
  if (p->is_moe() && !hf_dir_.empty())
    return fail(Unimplemented("--hf-dir is not supported for the mixture-of-experts preset '{}' "
                              "(the GGUF only)", preset_));
  if (Status st = check_output_path(out_path_, "make-model", "--out"); !st.ok()) return fail(st);

  const auto t0 = std::chrono::steady_clock::now();
  const VocabBuilder vocab = build_vocab(p->vocab_size);
  if (static_cast<int32_t>(vocab.pieces_.size()) != p->vocab_size)
    return fail(Status(StatusCode::kInternal,
                       fmt::format("generated {} pieces for vocabulary size {}",
                                   vocab.pieces_.size(), p->vocab_size)));
  const std::vector<TensorSpec> tensors = model_tensors(*p, seed_);

  // Write to a temporary name and rename, so a failed run leaves no truncated model behind.
  const std::string tmp = out_path_ + ".tmp";
  if (Status st = create_temp_file(tmp); !st.ok()) return fail(st);  // not ours: kept
  const RemoveOnSignal remove_tmp_on_signal(tmp);
  if (Status st = write_gguf(*p, dtype, tensors, vocab, tmp); !st.ok()) {
    std::remove(tmp.c_str());
    return fail(st);
  }
  if (std::rename(tmp.c_str(), out_path_.c_str()) != 0) {
    std::remove(tmp.c_str());
    return fail(NotFound("{}: cannot rename {} into place: {}", out_path_, tmp,
                         std::strerror(errno)));
  }
  if (!hf_dir_.empty()) {
    if (Status st = write_hf(*p, dtype, tensors, hf_dir_); !st.ok()) return fail(st);
    if (Status st = write_hf_tokenizer(*p, vocab, hf_dir_); !st.ok()) return fail(st);
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  int64_t params = 0;
  for (const TensorSpec& t : tensors) params += t.numel();
  std::error_code ec;
  const uint64_t size = std::filesystem::file_size(out_path_, ec);
  std::printf("wrote %s: preset %s, %s, %.1fM parameters, %s, %.2f s%s%s\n", out_path_.c_str(),
              p->name, std::string(dtype_name(dtype)).c_str(), params / 1e6,
              human_bytes(size).c_str(), secs,
              hf_dir_.empty() ? "" : ", HF copy in ", hf_dir_.c_str());
  return 0;
}

}  // namespace llmserve::cli
