// SentencePiece encoding against llama2.c's reference prompt ids, llama.cpp's test vectors,
// and a naive O(n^2) reference implementation.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <random>
#include <sstream>

#include <nlohmann/json.hpp>

#include "tokenizer_test_util.h"
#include "weights/gguf.h"

namespace llmserve {
namespace {

using testing::load_tok512;
using testing::NaiveSpm;
using testing::read_file;

struct RefCase {
  std::string prompt;
  std::vector<int32_t> prompt_ids;
};

std::vector<RefCase> reference_cases() {
  const auto json = nlohmann::json::parse(read_file(testing::reference_json_path()));
  std::vector<RefCase> cases;
  for (const auto& c : json.at("cases")) {
    cases.push_back({c.at("prompt").get<std::string>(),
                     c.at("prompt_ids").get<std::vector<int32_t>>()});
  }
  return cases;
}

Expected<Vocab> load_gguf_vocab_file(const std::string& path) {
  LLMS_ASSIGN_OR_RETURN(const GgufFile gguf, GgufFile::open(path));
  return load_gguf_vocab(gguf);
}

TEST(SpmEncode, Tok512MatchesLlama2cPromptIds) {
  auto tok = load_tok512();
  ASSERT_NE(tok, nullptr);
  const auto cases = reference_cases();
  ASSERT_GE(cases.size(), 5u);
  for (const RefCase& c : cases) {
    EXPECT_EQ(tok->encode(c.prompt, true), c.prompt_ids) << "prompt: " << c.prompt;
  }
}

TEST(SpmEncode, Stories260KGgufMatchesLlama2cPromptIds) {
  Expected<Vocab> vocab = load_gguf_vocab_file(testing::stories_gguf_path());
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  auto tok = make_spm_tokenizer(std::move(vocab).value());
  auto bin = load_tok512();
  for (const RefCase& c : reference_cases()) {
    EXPECT_EQ(tok->encode(c.prompt, true), c.prompt_ids) << "prompt: " << c.prompt;
  }
  // Same pieces modulo the space spelling, so every id decodes the same way.
  for (int32_t id = 0; id < tok->vocab_size(); ++id) {
    EXPECT_EQ(tok->decode_token(-1, id), bin->decode_token(-1, id)) << id;
    EXPECT_EQ(tok->decode_token(300, id), bin->decode_token(300, id)) << id;
  }
}

TEST(SpmEncode, BosOnlyWhenAskedAndWanted) {
  auto tok = load_tok512();
  EXPECT_EQ(tok->encode("", true), (std::vector<int32_t>{1}));
  EXPECT_TRUE(tok->encode("", false).empty());
  EXPECT_EQ(tok->encode("Once upon a time", false), (std::vector<int32_t>{403, 407, 261, 378}));
}

// ---- llama.cpp test vectors ---------------------------------------------------------------

using testing::read_vectors;
using testing::VectorCase;

void check_vectors(const std::string& name) {
  const std::string path = testing::vocab_test_path(name);
  Expected<Vocab> vocab = load_gguf_vocab_file(path);
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  auto tok = make_spm_tokenizer(std::move(vocab).value());
  const auto cases = read_vectors(path);
  ASSERT_GE(cases.size(), 40u);
  size_t passed = 0;
  for (const VectorCase& c : cases) {
    const auto ids = tok->encode(c.text, /*add_bos=*/false);
    EXPECT_EQ(ids, c.ids) << name << " text: [" << c.text << "]";
    passed += ids == c.ids;
  }
  std::printf("[ vectors  ] %s: %zu/%zu cases match llama.cpp\n", name.c_str(), passed,
              cases.size());
}

TEST(SpmEncode, LlamaCppVectorsLlamaSpm) { check_vectors("llama-spm"); }
TEST(SpmEncode, LlamaCppVectorsPhi3) { check_vectors("phi-3"); }

// ---- against the naive reference ------------------------------------------------------------

/// Random strings drawn from the vocabulary's own pieces, spaces, and a few non-vocab chars.
std::string random_text(const Vocab& vocab, std::mt19937& rng, int n_parts) {
  static const char* kExtras[] = {" ", " ", "  ", "\n", "\xf0\x9f\xa6\x99", "\xe6\x97\xa5",
                                  "\xff", "\xe2\x82", "\t"};
  std::string text;
  for (int i = 0; i < n_parts; ++i) {
    if (rng() % 4 == 0) {
      text += kExtras[rng() % std::size(kExtras)];
      continue;
    }
    const auto id = static_cast<int32_t>(rng() % vocab.size());
    if (vocab.types[id] != TokenType::kNormal) continue;
    for (char c : vocab.pieces[id]) text += c;
  }
  // Spell pieces' space markers as real spaces, as user text would.
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    if (text.compare(pos, vocab.space_marker.size(), vocab.space_marker) == 0) {
      out += ' ';
      pos += vocab.space_marker.size();
    } else {
      out += text[pos++];
    }
  }
  return out;
}

void check_against_naive(const Vocab& vocab, uint32_t seed) {
  auto tok = make_spm_tokenizer(vocab);
  const NaiveSpm naive(vocab);
  std::mt19937 rng(seed);
  for (int iter = 0; iter < 300; ++iter) {
    const std::string text = random_text(vocab, rng, 1 + static_cast<int>(rng() % 30));
    ASSERT_EQ(tok->encode(text, false), naive.encode(text)) << "[" << text << "]";
  }
}

TEST(SpmEncode, MatchesNaiveReferenceTok512) {
  Expected<Vocab> vocab = load_llama2c_vocab(testing::tok512_path(), 512);
  ASSERT_TRUE(vocab.ok());
  check_against_naive(*vocab, 1);
}

TEST(SpmEncode, MatchesNaiveReferenceLlamaSpm) {
  Expected<Vocab> vocab = load_gguf_vocab_file(testing::vocab_test_path("llama-spm"));
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  check_against_naive(*vocab, 2);
}

// ---- long inputs and bad bytes ---------------------------------------------------------------

/// ~200 KB of story text. tok512 has no piece containing '\n' (other than the control pieces
/// "\n<s>\n", unreachable from plain text), so merges never cross a newline and the result
/// must equal the per-line naive encodings joined by the '\n' byte token.
TEST(SpmEncode, LongTextIsFastAndCorrect) {
  Expected<Vocab> vocab = load_llama2c_vocab(testing::tok512_path(), 512);
  ASSERT_TRUE(vocab.ok());
  auto tok = make_spm_tokenizer(*vocab);
  const auto json = nlohmann::json::parse(read_file(testing::reference_json_path()));
  std::vector<std::string> lines;
  size_t total = 0;
  while (total < 200'000) {
    for (const auto& c : json.at("cases")) {
      std::istringstream text(c.at("text").get<std::string>());
      for (std::string line; std::getline(text, line) && total < 200'000;) {
        if (line.empty()) continue;
        total += line.size() + 1;
        lines.push_back(line);
      }
    }
  }
  std::string big;
  for (const std::string& line : lines) big += line + "\n";

  const auto t0 = std::chrono::steady_clock::now();
  const std::vector<int32_t> ids = tok->encode(big, true);
  const double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::printf("[ timing   ] encoded %zu bytes into %zu tokens in %.1f ms\n", big.size(),
              ids.size(), ms);

  std::vector<int32_t> expected = {vocab->bos_id};
  Vocab no_prefix = *vocab;
  no_prefix.add_space_prefix = false;
  const NaiveSpm naive_first(*vocab);
  const NaiveSpm naive_rest(no_prefix);
  for (size_t i = 0; i < lines.size(); ++i) {
    const auto part = (i == 0 ? naive_first : naive_rest).encode(lines[i]);
    expected.insert(expected.end(), part.begin(), part.end());
    expected.push_back(vocab->byte_to_id['\n']);
  }
  ASSERT_EQ(ids, expected);
  EXPECT_EQ(tok->decode(ids), big);
}

/// Repetitive text is where equal-score ties pile up: the leftmost pair must win.
TEST(SpmEncode, RunsMatchNaiveReferenceLlamaSpm) {
  Expected<Vocab> vocab = load_gguf_vocab_file(testing::vocab_test_path("llama-spm"));
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  auto tok = make_spm_tokenizer(*vocab);
  const NaiveSpm naive(*vocab);
  for (const std::string unit : {" ", "a", "ab", " a", "\n", "\xe6\x97\xa5", "==", "..."}) {
    for (int n : {1, 2, 3, 7, 16, 17, 33, 100}) {
      std::string text;
      for (int i = 0; i < n; ++i) text += unit;
      EXPECT_EQ(tok->encode(text, false), naive.encode(text)) << "[" << text << "]";
    }
  }
}

/// Inputs that would make a quadratic merge loop crawl; only the round trip is asserted.
TEST(SpmEncode, LongPathologicalInputsRoundTrip) {
  Expected<Vocab> vocab = load_gguf_vocab_file(testing::vocab_test_path("llama-spm"));
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  auto tok = make_spm_tokenizer(std::move(vocab).value());
  std::mt19937 rng(3);
  std::string random_bytes(200'000, '\0');
  for (char& c : random_bytes) c = static_cast<char>(rng() % 256);
  const std::pair<const char*, std::string> inputs[] = {
      {"spaces", std::string(200'000, ' ')},
      {"letters", std::string(200'000, 'a')},
      {"cjk", [] {
         std::string s;
         while (s.size() < 200'000) s += "\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e";
         return s;
       }()},
      {"random bytes", random_bytes},
  };
  for (const auto& [name, text] : inputs) {
    const auto t0 = std::chrono::steady_clock::now();
    const std::vector<int32_t> ids = tok->encode(text, true);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::printf("[ timing   ] %s: %zu bytes -> %zu tokens in %.1f ms\n", name, text.size(),
                ids.size(), ms);
    EXPECT_EQ(tok->decode(ids), text) << name;
  }
}

TEST(SpmEncode, InvalidUtf8FallsBackToBytes) {
  auto tok = load_tok512();
  const std::string text = "a\xff\xfe b\xe2\x82 \xc0\xaf\xed\xa0\x80z\xf0\x9f";
  const std::vector<int32_t> ids = tok->encode(text, false);
  EXPECT_EQ(tok->decode(ids), text);
  for (unsigned char byte : std::string("\xff\xfe\xe2\x82\xc0\xaf\xed\xa0\x80\xf0\x9f")) {
    EXPECT_NE(std::find(ids.begin(), ids.end(), 3 + byte), ids.end()) << int(byte);
  }
}

TEST(SpmEncode, RoundTripsArbitraryBytes) {
  auto tok = load_tok512();
  std::mt19937 rng(7);
  for (int iter = 0; iter < 200; ++iter) {
    std::string text(rng() % 40, '\0');
    for (char& c : text) c = static_cast<char>(rng() % 256);
    EXPECT_EQ(tok->decode(tok->encode(text, true)), text);
  }
}

}  // namespace
}  // namespace llmserve
