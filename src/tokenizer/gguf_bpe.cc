// GGUF `gpt2` (byte-level BPE) vocabularies: tokenizer.ggml.{tokens,token_type,merges,pre,
// bos_token_id,eos_token_id,unknown_token_id,add_bos_token,add_eos_token}, tokenized as llama.cpp
// does (src/llama-vocab.cpp, llm_tokenizer_bpe): control tokens are recognised in the text only
// with parse_special, user-defined ones always; each text fragment is split by the regex list of
// its `tokenizer.ggml.pre` (each regex splitting the pieces of the previous one, matches and the
// text between them both kept), mapped through GPT-2's bytes_to_unicode, then merged by rank.
#include <algorithm>
#include <cctype>

#include "tokenizer/bpe_tokenizer.h"
#include "tokenizer/gguf_tokenizer.h"
#include "weights/gguf.h"

namespace llmserve {
namespace {

// The pre-tokenizer regex lists below are llama.cpp's, per tokenizer.ggml.pre name
// (llama.cpp src/llama-vocab.cpp, llm_tokenizer_bpe's constructor and the pre-name table in
// llama_vocab::impl::load, MIT licence). Written for PCRE2: non-ASCII characters of the
// DeepSeek classes are spelled \x{...} (their code points as in llama.cpp's UTF-8 literals).

constexpr const char* kGpt2[] = {
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
};

constexpr const char* kLlama3[] = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

constexpr const char* kDeepseekLlm[] = {
    "[\r\n]",
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293}\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A}\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556}\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF}\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D}\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D}\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4}\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4}\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124}\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F}\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4}\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F}\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17}\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3}\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF}\x{1E900}-\x{1E943}]+)",
    R"(\s?[!-/:-~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
    R"(\s+$)",
    R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
    R"(\p{N}+)",
};

constexpr const char* kDeepseekCoder[] = {
    "[\r\n]",
    R"(\s?\p{L}+)",
    R"(\s?\p{P}+)",
    R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)",
    R"(\p{N})",
};

constexpr const char* kDeepseek3[] = {
    R"(\p{N}{1,3})",
    R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
    R"([!"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

constexpr const char* kFalcon[] = {
    R"([\p{P}\$\+<=>\^~\|`]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"([0-9][0-9][0-9])",
};

constexpr const char* kStarcoder[] = {
    R"(\p{N})",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
};

constexpr const char* kQwen2[] = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

constexpr const char* kPoro[] = {
    R"( ?[^(\s|.,!?…。，、।۔،)]+)",
};

constexpr const char* kViking[] = {
    R"( ?[^(\s|.,!?…。，、।۔،)]+)",
    R"(\p{N})",
};

// llama.cpp rewrote tekken's and gpt-4o's \p{Lu}/\p{Ll} classes with lookaheads for std::regex;
// those rewritten forms are what its vectors follow, so they are kept here.
constexpr const char* kTekken[] = {
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

constexpr const char* kGpt4o[] = {
    R"([^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|[^\r\n\p{L}\p{N}]?((?=[\p{L}])([^a-z]))+((?=[\p{L}])([^A-Z]))*(?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

constexpr const char* kSeedCoder[] = {
    R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)",
};

constexpr const char* kBailingMoe[] = {
    R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)",
};

constexpr const char* kChameleon[] = {
    R"(<sentinel:[0-9]+>)",
    R"((IMGIMG)((A|B|C|D|E|F|G|H|I){1,4})Z)",
    R"(([\t\n]|    |  ))",
    R"(\p{N})",
    R"([\p{P}!-/:-@\[-`{-~])",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
};

constexpr const char* kDefault[] = {
    R"([\p{P}\$\+<=>\^~\|]+)",
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S))",
    R"(\p{N}+)",
    R"([0-9][0-9][0-9])",
};

struct PreEntry {
  const char* names;  // '|'-separated tokenizer.ggml.pre values
  const char* const* regexes;
  size_t count;
  bool ignore_merges;
  bool add_bos;
};

template <size_t N>
constexpr PreEntry entry(const char* names, const char* const (&r)[N], bool ignore_merges = false,
                         bool add_bos = false) {
  return {names, r, N, ignore_merges, add_bos};
}

// The pre names llama.cpp maps to each list (llama3-type also sets ignore_merges and add_bos).
constexpr PreEntry kPreTable[] = {
    entry("llama3|llama-v3|llama-bpe|falcon3|falcon-h1|pixtral|midm-2.0|lfm2|dbrx|smaug-bpe|"
          "chatglm-bpe|glm4",
          kLlama3, true, true),
    entry("deepseek-llm", kDeepseekLlm),
    entry("deepseek-coder", kDeepseekCoder),
    entry("deepseek-v3|hunyuan-dense", kDeepseek3),
    entry("falcon", kFalcon),
    entry("starcoder|refact|command-r|smollm|codeshell|exaone|minerva-7b", kStarcoder),
    entry("gpt-2|phi-2|jina-es|jina-de|gigachat|jina-v2-es|jina-v2-de|a.x-4.0|mellum|"
          "jina-v1-en|jina-v2-code|roberta-bpe|exaone4|mpt|olmo|jais|trillion|granite-docling",
          kGpt2),
    entry("qwen2|deepseek-r1-qwen|kormo|megrez|stablelm2|hunyuan|grok-2", kQwen2),
    entry("poro-chat|bloom|gpt3-finnish", kPoro),
    entry("viking", kViking),
    entry("tekken", kTekken, true, true),
    entry("gpt-4o|llama4|minimax-m2", kGpt4o),
    entry("seed-coder", kSeedCoder),
    entry("bailingmoe|bailingmoe2|llada-moe", kBailingMoe),
    entry("chameleon", kChameleon, false, true),
};

/// Pre names whose llama.cpp splitter is custom code rather than a regex list.
constexpr std::string_view kCustomPre = "kimi-k2|afmoe|superbpe";

bool name_in(std::string_view name, std::string_view list) {
  while (!list.empty()) {
    const size_t bar = list.find('|');
    if (list.substr(0, bar) == name) return true;
    if (bar == std::string_view::npos) break;
    list.remove_prefix(bar + 1);
  }
  return false;
}

/// The llama.cpp entry for `pre`; unknown or missing names get llama.cpp's default list.
PreEntry lookup_pre(std::string_view pre) {
  // llama.cpp's `chatglm-bpe`/`glm4` also reset BOS; the regexes are the llama3 ones.
  for (const PreEntry& e : kPreTable) {
    if (name_in(pre, e.names)) {
      if (name_in(pre, "dbrx|smaug-bpe|chatglm-bpe|glm4")) return {e.names, e.regexes, e.count, false, false};
      return e;
    }
  }
  return entry("default", kDefault);
}

}  // namespace

std::vector<std::string> gguf_pre_regexes(std::string_view pre) {
  const PreEntry e = lookup_pre(pre);
  return std::vector<std::string>(e.regexes, e.regexes + e.count);
}

std::vector<std::string> gguf_pre_names() {
  std::vector<std::string> names;
  for (const PreEntry& e : kPreTable) {
    std::string_view list = e.names;
    while (!list.empty()) {
      const size_t bar = list.find('|');
      names.emplace_back(list.substr(0, bar));
      if (bar == std::string_view::npos) break;
      list.remove_prefix(bar + 1);
    }
  }
  return names;
}

Expected<std::unique_ptr<Tokenizer>> load_gguf_bpe_tokenizer(const GgufFile& gguf) {
  const std::string& path = gguf.path();
  BpeTokenizerConfig cfg;
  LLMS_ASSIGN_OR_RETURN(cfg.tokens, gguf.get_string_array("tokenizer.ggml.tokens"));
  if (cfg.tokens.empty() || cfg.tokens.size() > static_cast<size_t>(INT32_MAX)) {
    return DataLoss("{}: tokenizer.ggml.tokens has {} entries", path, cfg.tokens.size());
  }
  const size_t n = cfg.tokens.size();
  std::vector<int64_t> types(n, static_cast<int64_t>(TokenType::kNormal));
  if (gguf.has_key("tokenizer.ggml.token_type")) {
    LLMS_ASSIGN_OR_RETURN(types, gguf.get_int_array("tokenizer.ggml.token_type"));
    if (types.size() != n) {
      return DataLoss("{}: tokenizer.ggml.token_type has {} entries but tokenizer.ggml.tokens "
                      "has {}", path, types.size(), n);
    }
  }
  if (!gguf.has_key("tokenizer.ggml.merges")) {
    return DataLoss("{}: tokenizer.ggml.merges is missing (required for tokenizer model 'gpt2')",
                    path);
  }
  LLMS_ASSIGN_OR_RETURN(const std::vector<std::string> merges,
                        gguf.get_string_array("tokenizer.ggml.merges"));
  cfg.merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    // llama.cpp splits at the first space after the first character.
    const size_t space = merges[i].find(' ', 1);
    if (space == std::string::npos) {
      return DataLoss("{}: tokenizer.ggml.merges[{}] = '{}' is not 'left right'", path, i,
                      merges[i]);
    }
    cfg.merges.emplace_back(merges[i].substr(0, space), merges[i].substr(space + 1));
  }

  std::string pre;
  if (gguf.has_key("tokenizer.ggml.pre")) {
    LLMS_ASSIGN_OR_RETURN(pre, gguf.get_string("tokenizer.ggml.pre"));
  }
  if (name_in(pre, kCustomPre)) {
    return Unimplemented("{}: tokenizer.ggml.pre '{}' is not supported (llama.cpp splits it with "
                         "custom code, not a regex list)", path, pre);
  }
  const PreEntry entry = lookup_pre(pre);
  cfg.model_options.ignore_merges = entry.ignore_merges;

  std::vector<std::unique_ptr<PreTokenizer>> stages;
  for (size_t i = 0; i < entry.count; ++i) {
    Expected<Regex> regex = Regex::compile(entry.regexes[i], /*dollar_endonly=*/true);
    if (!regex.ok()) {
      return InvalidArgument("{}: tokenizer.ggml.pre '{}': regex {}: {}", path, pre, i,
                             regex.status().message());
    }
    stages.push_back(make_split_pre_tokenizer(std::make_unique<Regex>(std::move(regex).value()),
                                              "", SplitBehavior::kIsolated, false));
  }
  LLMS_ASSIGN_OR_RETURN(std::unique_ptr<PreTokenizer> byte_level,
                        make_byte_level_pre_tokenizer(false, false));
  stages.push_back(std::move(byte_level));
  cfg.pre_tokenizer = make_pre_tokenizer_sequence(std::move(stages));
  cfg.decoder = make_byte_level_decoder();

  // Control, unknown and user-defined tokens are matched before the model (llama.cpp's
  // special-token cache); only user-defined ones without parse_special.
  cfg.added_mode = AddedTokenSplitter::Mode::kLlamaCpp;
  for (size_t id = 0; id < n; ++id) {
    const auto type = static_cast<TokenType>(types[id]);
    if (type == TokenType::kControl || type == TokenType::kUnknown ||
        type == TokenType::kUserDefined) {
      AddedToken t;
      t.content = cfg.tokens[id];
      t.id = static_cast<int32_t>(id);
      t.special = type != TokenType::kUserDefined;
      cfg.added_tokens.push_back(std::move(t));
    } else if (type == TokenType::kUnused) {
      cfg.extra_special_ids.push_back(static_cast<int32_t>(id));
    }
  }

  LLMS_RETURN_IF_ERROR(load_gguf_special_ids(gguf, static_cast<int32_t>(n), cfg.bos_id,
                                             cfg.eos_id, cfg.model_options.unk_id));
  cfg.model_options.unk_id = -1;  // byte-level BPE never emits unk (llama.cpp drops bytes)
  bool add_bos = entry.add_bos;
  bool add_eos = false;
  LLMS_RETURN_IF_ERROR(load_gguf_flag(gguf, "tokenizer.ggml.add_bos_token", add_bos));
  LLMS_RETURN_IF_ERROR(load_gguf_flag(gguf, "tokenizer.ggml.add_eos_token", add_eos));
  if (add_bos && cfg.bos_id >= 0) cfg.prefix_ids.push_back(cfg.bos_id);
  if (add_eos && cfg.eos_id >= 0) cfg.suffix_ids.push_back(cfg.eos_id);
  return make_bpe_tokenizer(std::move(cfg));
}

}  // namespace llmserve
