// Decoding: per-token SentencePiece decoding, llama2.c's printed text, the incremental
// detokenizer, and the UTF-8 helpers it relies on.
#include <algorithm>
#include <random>

#include <nlohmann/json.hpp>

#include "tokenizer_test_util.h"

namespace llmserve {
namespace {

using testing::load_tok512;
using testing::read_file;

TEST(DecodeToken, SentencePieceRules) {
  auto tok = load_tok512();
  ASSERT_NE(tok, nullptr);
  EXPECT_EQ(tok->decode_token(-1, 1), "");          // BOS
  EXPECT_EQ(tok->decode_token(5, 2), "");           // EOS
  EXPECT_EQ(tok->decode_token(5, 0), "");           // unk
  EXPECT_EQ(tok->decode_token(5, 512), "");         // out of range
  EXPECT_EQ(tok->decode_token(5, -3), "");          // out of range
  EXPECT_EQ(tok->decode_token(5, 13), "\n");        // <0x0A>
  EXPECT_EQ(tok->decode_token(5, 3 + 0xE6), "\xE6");  // raw byte
  EXPECT_EQ(tok->decode_token(400, 259), " t");     // mid-text keeps its space
  EXPECT_EQ(tok->decode_token(1, 259), "t");        // after BOS the space goes
  EXPECT_EQ(tok->decode_token(-1, 259), "t");       // at the start too
  EXPECT_EQ(tok->decode_token(1, 3 + ' '), " ");    // a byte piece is never stripped
  EXPECT_EQ(tok->piece(259), " t");
  EXPECT_EQ(tok->piece(1), "\n<s>\n");
  EXPECT_EQ(tok->piece(9999), "");
  EXPECT_EQ(tok->vocab_size(), 512);
  EXPECT_EQ(tok->bos_id(), 1);
  EXPECT_EQ(tok->eos_id(), 2);
}

struct RefCase {
  std::string prompt;
  std::string text;
  std::vector<int32_t> prompt_ids;
  std::vector<int32_t> generated_ids;
};

std::vector<RefCase> reference_cases() {
  const auto json = nlohmann::json::parse(read_file(testing::reference_json_path()));
  std::vector<RefCase> cases;
  for (const auto& c : json.at("cases")) {
    cases.push_back({c.at("prompt").get<std::string>(), c.at("text").get<std::string>(),
                     c.at("prompt_ids").get<std::vector<int32_t>>(),
                     c.at("generated_ids").get<std::vector<int32_t>>()});
  }
  return cases;
}

// run.c prints decode(prev, next) for every position after BOS, so its output is the
// one-shot decode of prompt_ids + generated_ids.
TEST(DecodeToken, ReproducesLlama2cPrintedText) {
  auto tok = load_tok512();
  for (const RefCase& c : reference_cases()) {
    std::vector<int32_t> all = c.prompt_ids;
    all.insert(all.end(), c.generated_ids.begin(), c.generated_ids.end());
    EXPECT_EQ(tok->decode(all), c.text) << "prompt: " << c.prompt;
  }
}

// What a server does: echo the prompt, then stream the continuation token by token.
TEST(IncrementalDetokenizer, PromptPlusStreamReproducesText) {
  auto tok = load_tok512();
  for (const RefCase& c : reference_cases()) {
    IncrementalDetokenizer detok(*tok, c.prompt_ids.back());
    std::string text = c.prompt;
    for (int32_t id : c.generated_ids) text += detok.push(id);
    text += detok.flush();
    EXPECT_EQ(text, c.text) << "prompt: " << c.prompt;
  }
}

/// Streams `ids` and checks each chunk is well-formed; returns the concatenation.
std::string stream(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  IncrementalDetokenizer detok(tok);
  std::string out;
  for (int32_t id : ids) {
    const std::string chunk = detok.push(id);
    EXPECT_TRUE(utf8::is_valid(chunk)) << "chunk after id " << id;
    out += chunk;
  }
  const std::string rest = detok.flush();
  EXPECT_TRUE(utf8::is_valid(rest));
  return out + rest;
}

TEST(IncrementalDetokenizer, ByteFallbackNeverSplitsCharacters) {
  auto tok = load_tok512();
  // "🦙 héllo 日本"
  const std::string text = "\xf0\x9f\xa6\x99 h\xc3\xa9llo \xe6\x97\xa5\xe6\x9c\xac";
  const std::vector<int32_t> ids = tok->encode(text, true);
  const int n_byte_tokens = static_cast<int>(
      std::count_if(ids.begin(), ids.end(), [](int32_t id) { return id >= 3 && id <= 258; }));
  EXPECT_EQ(n_byte_tokens, 4 + 3 + 3);  // 🦙, 日, 本 are not in tok512; é is
  EXPECT_EQ(tok->decode(ids), text);

  IncrementalDetokenizer detok(*tok);
  std::string out;
  for (int32_t id : ids) {
    const std::string chunk = detok.push(id);
    ASSERT_TRUE(utf8::is_valid(chunk)) << "chunk after id " << id;
    out += chunk;
  }
  EXPECT_EQ(detok.flush(), "");
  EXPECT_EQ(out, text);
}

TEST(IncrementalDetokenizer, HoldsBackUntilComplete) {
  auto tok = load_tok512();
  IncrementalDetokenizer detok(*tok, /*prev_id=*/400);
  EXPECT_EQ(detok.push(3 + 0xE6), "");
  EXPECT_EQ(detok.push(3 + 0x97), "");
  EXPECT_EQ(detok.push(3 + 0xA5), "\xe6\x97\xa5");
  EXPECT_EQ(detok.push(259), " t");
  EXPECT_EQ(detok.flush(), "");
}

TEST(IncrementalDetokenizer, InvalidBytesBecomeReplacementCharacters) {
  auto tok = load_tok512();
  IncrementalDetokenizer detok(*tok, 400);
  EXPECT_EQ(detok.push(3 + 0xE6), "");
  EXPECT_EQ(detok.push(3 + 0x97), "");
  EXPECT_EQ(detok.push(259), "\xEF\xBF\xBD t");  // cannot complete any more
  EXPECT_EQ(detok.push(3 + 0xFF), "\xEF\xBF\xBD");  // never valid: no waiting
  EXPECT_EQ(detok.push(3 + 0xF0), "");
  EXPECT_EQ(detok.flush(), "\xEF\xBF\xBD");  // truncated at end of stream
}

TEST(IncrementalDetokenizer, RandomBytesStreamLikeOneShot) {
  auto tok = load_tok512();
  std::mt19937 rng(11);
  for (int iter = 0; iter < 500; ++iter) {
    std::vector<int32_t> ids;
    const int n = 1 + static_cast<int>(rng() % 24);
    for (int i = 0; i < n; ++i) {
      // Mostly byte pieces (biased to UTF-8 lead/continuation bytes), some normal pieces.
      const uint32_t r = rng() % 10;
      if (r < 4) {
        ids.push_back(3 + 0x80 + static_cast<int32_t>(rng() % 0x40));
      } else if (r < 6) {
        ids.push_back(3 + 0xC0 + static_cast<int32_t>(rng() % 0x40));
      } else if (r < 8) {
        ids.push_back(3 + static_cast<int32_t>(rng() % 256));
      } else {
        ids.push_back(259 + static_cast<int32_t>(rng() % 253));
      }
    }
    const std::string one_shot = tok->decode(ids);
    const std::string streamed = stream(*tok, ids);
    EXPECT_EQ(streamed, utf8::sanitize(one_shot));
    if (utf8::is_valid(one_shot)) {
      EXPECT_EQ(streamed, one_shot);
    }
  }
}

TEST(IncrementalDetokenizer, ValidMultibyteTextStreamsExactly) {
  auto tok = load_tok512();
  std::mt19937 rng(5);
  const char* kChars[] = {"a", " ", "\xc3\xa9", "\xe6\x97\xa5", "\xf0\x9f\xa6\x99",
                          "\xd0\xb6", "\n", "The", "\xe2\x80\x9c"};
  for (int iter = 0; iter < 200; ++iter) {
    std::string text = "x";
    for (int i = rng() % 20; i > 0; --i) text += kChars[rng() % std::size(kChars)];
    EXPECT_EQ(stream(*tok, tok->encode(text, true)), text);
  }
}

// ---- UTF-8 helpers ---------------------------------------------------------------------------

TEST(Utf8, Classify) {
  using utf8::SeqKind;
  auto kind = [](std::string_view s) { return utf8::classify(s, 0).kind; };
  auto len = [](std::string_view s) { return utf8::classify(s, 0).len; };
  EXPECT_EQ(kind("a"), SeqKind::kComplete);
  EXPECT_EQ(kind("\xc3\xa9"), SeqKind::kComplete);
  EXPECT_EQ(kind("\xf0\x9f\xa6\x99"), SeqKind::kComplete);
  EXPECT_EQ(kind("\xf0\x9f\xa6"), SeqKind::kIncomplete);
  EXPECT_EQ(len("\xf0\x9f\xa6"), 3u);
  EXPECT_EQ(kind("\x80"), SeqKind::kInvalid);
  EXPECT_EQ(kind("\xc0\xaf"), SeqKind::kInvalid);  // overlong
  EXPECT_EQ(kind("\xed\xa0\x80"), SeqKind::kInvalid);  // surrogate
  EXPECT_EQ(len("\xed\xa0\x80"), 1u);
  EXPECT_EQ(kind("\xf4\x90\x80\x80"), SeqKind::kInvalid);  // above U+10FFFF
  EXPECT_EQ(kind("\xe2\x82" "A"), SeqKind::kInvalid);
  EXPECT_EQ(len("\xe2\x82" "A"), 2u);
}

TEST(Utf8, SanitizeUsesMaximalSubparts) {
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(utf8::sanitize("ok \xc3\xa9"), "ok \xc3\xa9");
  EXPECT_EQ(utf8::sanitize("\xe2\x82" "A"), r + "A");
  EXPECT_EQ(utf8::sanitize("\xc0\xaf"), r + r);
  EXPECT_EQ(utf8::sanitize("\xed\xa0\x80"), r + r + r);
  EXPECT_EQ(utf8::sanitize("a\xf0\x9f"), "a" + r);
  EXPECT_TRUE(utf8::is_valid(utf8::sanitize("\xff\xfe\xfd")));
}

}  // namespace
}  // namespace llmserve
