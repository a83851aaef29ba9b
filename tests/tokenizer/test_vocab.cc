// Vocabulary loading: llama2.c tokenizer.bin and GGUF tokenizer.ggml.* metadata, good and bad.
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include <unistd.h>

#include "tokenizer_test_util.h"
#include "weights/gguf.h"

namespace llmserve {
namespace {

using testing::read_file;
using testing::tok512_path;

constexpr std::string_view kMarker = "\xe2\x96\x81";

/// A file under the test temp dir, removed on destruction.
class TempFile {
 public:
  explicit TempFile(const std::string& name, std::string_view contents)
      : path_((std::filesystem::temp_directory_path() /
               ("llmserve_tok_" + std::to_string(::getpid()) + "_" + name))
                  .string()) {
    std::ofstream out(path_, std::ios::binary);
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
  }
  ~TempFile() { std::remove(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(Llama2cVocab, LoadsTok512) {
  Expected<Vocab> vocab = load_llama2c_vocab(tok512_path(), 512);
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  EXPECT_EQ(vocab->size(), 512);
  EXPECT_EQ(vocab->space_marker, " ");  // tok512.bin spells spaces as ' ', not U+2581
  EXPECT_EQ(vocab->pieces[259], " t");
  EXPECT_EQ(vocab->pieces[260], "he");
  EXPECT_FLOAT_EQ(vocab->scores[260], -1.0f);
  EXPECT_EQ(vocab->types[0], TokenType::kUnknown);
  EXPECT_EQ(vocab->types[1], TokenType::kControl);
  EXPECT_EQ(vocab->types[2], TokenType::kControl);
  EXPECT_EQ(vocab->types[3], TokenType::kByte);
  EXPECT_EQ(vocab->types[258], TokenType::kByte);
  EXPECT_EQ(vocab->types[259], TokenType::kNormal);
  for (int b = 0; b < 256; ++b) EXPECT_EQ(vocab->byte_to_id[b], b + 3);
  EXPECT_EQ(vocab->bos_id, 1);
  EXPECT_EQ(vocab->eos_id, 2);
  EXPECT_EQ(vocab->unk_id, 0);
  EXPECT_TRUE(vocab->add_bos);
  EXPECT_TRUE(vocab->add_space_prefix);
}

TEST(Llama2cVocab, ParseBytePiece) {
  EXPECT_EQ(parse_byte_piece("<0x0A>"), 0x0A);
  EXPECT_EQ(parse_byte_piece("<0xff>"), 0xFF);
  EXPECT_EQ(parse_byte_piece("<0xG0>"), -1);
  EXPECT_EQ(parse_byte_piece("<0x0A"), -1);
  EXPECT_EQ(parse_byte_piece("a"), -1);
}

TEST(Llama2cVocab, MissingFileIsNotFound) {
  const std::string path = testing::shared_path("models/stories260K/no_such_tokenizer.bin");
  Expected<Vocab> vocab = load_llama2c_vocab(path, 512);
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), StatusCode::kNotFound);
  EXPECT_NE(vocab.status().message().find(path), std::string::npos);
}

TEST(Llama2cVocab, TruncatedFileIsDataLoss) {
  const std::string full = read_file(tok512_path());
  for (size_t keep : {size_t{0}, size_t{2}, size_t{4}, size_t{10}, full.size() / 2,
                      full.size() - 1}) {
    TempFile file("truncated.bin", std::string_view(full).substr(0, keep));
    Expected<Vocab> vocab = load_llama2c_vocab(file.path(), 512);
    ASSERT_FALSE(vocab.ok()) << "kept " << keep << " bytes";
    EXPECT_EQ(vocab.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(vocab.status().message().find(file.path()), std::string::npos)
        << vocab.status().message();
  }
}

TEST(Llama2cVocab, VocabSizeLargerThanFileIsDataLoss) {
  Expected<Vocab> vocab = load_llama2c_vocab(tok512_path(), 513);
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(vocab.status().message().find(tok512_path()), std::string::npos);
}

TEST(Llama2cVocab, NegativeLengthIsDataLoss) {
  std::string data(4, '\0');  // max_token_length 0
  const float score = 0;
  const int32_t len = -5;
  data.append(reinterpret_cast<const char*>(&score), 4);
  data.append(reinterpret_cast<const char*>(&len), 4);
  TempFile file("negative.bin", data);
  Expected<Vocab> vocab = load_llama2c_vocab(file.path(), 1);
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(vocab.status().message().find("negative"), std::string::npos);
}

TEST(Llama2cVocab, NonPositiveVocabSizeCountsTheRecords) {
  Expected<Vocab> given = load_llama2c_vocab(tok512_path(), 512);
  ASSERT_TRUE(given.ok()) << given.status().message();
  for (int32_t size : {0, -1}) {
    Expected<Vocab> counted = load_llama2c_vocab(tok512_path(), size);
    ASSERT_TRUE(counted.ok()) << counted.status().message();
    EXPECT_EQ(counted->size(), 512);
    EXPECT_EQ(counted->pieces, given->pieces);
    EXPECT_EQ(counted->scores, given->scores);
  }
  // A file whose records do not end at its end is not a tokenizer.bin (nor a guess at one).
  std::string data = testing::read_file(tok512_path());
  data += "xyz";
  TempFile trailing("trailing.bin", data);
  Expected<Vocab> bad = load_llama2c_vocab(trailing.path(), 0);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), trailing.path() + ": not a llama2.c tokenizer.bin: token "
                                                      "record 512 does not fit the file");
}

// ---- GGUF -------------------------------------------------------------------------------

/// Writes a tensor-free GGUF v3 file holding the given metadata.
class GgufWriter {
 public:
  void add_string(std::string_view key, std::string_view value) {
    header(key, 8);
    str(value);
  }
  void add_bool(std::string_view key, bool value) {
    header(key, 7);
    body_.push_back(value ? 1 : 0);
  }
  void add_u32(std::string_view key, uint32_t value) {
    header(key, 4);
    pod(value);
  }
  void add_strings(std::string_view key, const std::vector<std::string>& values) {
    array_header(key, 8, values.size());
    for (const std::string& v : values) str(v);
  }
  void add_floats(std::string_view key, const std::vector<float>& values) {
    array_header(key, 6, values.size());
    for (float v : values) pod(v);
  }
  void add_i32s(std::string_view key, const std::vector<int32_t>& values) {
    array_header(key, 5, values.size());
    for (int32_t v : values) pod(v);
  }
  std::string bytes() const {
    std::string out = "GGUF";
    append_pod(out, uint32_t{3});
    append_pod(out, uint64_t{0});  // tensors
    append_pod(out, n_kv_);
    return out + body_;
  }

 private:
  template <typename T>
  static void append_pod(std::string& s, T v) {
    s.append(reinterpret_cast<const char*>(&v), sizeof(T));
  }
  template <typename T>
  void pod(T v) { append_pod(body_, v); }
  void str(std::string_view s) {
    pod(uint64_t{s.size()});
    body_.append(s);
  }
  void header(std::string_view key, uint32_t type) {
    ++n_kv_;
    str(key);
    pod(type);
  }
  void array_header(std::string_view key, uint32_t elem_type, size_t n) {
    header(key, 9);
    pod(elem_type);
    pod(uint64_t{n});
  }

  std::string body_;
  uint64_t n_kv_ = 0;
};

/// A small valid "llama" vocabulary: <unk> <s> </s>, the 256 byte pieces, a few words.
GgufWriter small_vocab_writer() {
  std::vector<std::string> tokens = {"<unk>", "<s>", "</s>"};
  std::vector<int32_t> types = {2, 3, 3};
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof(buf), "<0x%02X>", b);
    tokens.push_back(buf);
    types.push_back(6);
  }
  for (const char* w : {"\xe2\x96\x81", "h", "i", "hi", "\xe2\x96\x81hi"}) {
    tokens.push_back(w);
    types.push_back(1);
  }
  std::vector<float> scores(tokens.size(), 0.0f);
  scores[tokens.size() - 2] = -1;
  scores[tokens.size() - 1] = -2;
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_strings("tokenizer.ggml.tokens", tokens);
  w.add_floats("tokenizer.ggml.scores", scores);
  w.add_i32s("tokenizer.ggml.token_type", types);
  w.add_u32("tokenizer.ggml.bos_token_id", 1);
  w.add_u32("tokenizer.ggml.eos_token_id", 2);
  w.add_u32("tokenizer.ggml.unknown_token_id", 0);
  return w;
}

Expected<Vocab> load_vocab_file(const std::string& path) {
  LLMS_ASSIGN_OR_RETURN(const GgufFile gguf, GgufFile::open(path));
  return load_gguf_vocab(gguf);
}

TEST(GgufVocab, LoadsStories260K) {
  Expected<Vocab> vocab = load_vocab_file(testing::stories_gguf_path());
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  EXPECT_EQ(vocab->size(), 512);
  EXPECT_EQ(vocab->space_marker, kMarker);
  EXPECT_EQ(vocab->pieces[259], std::string(kMarker) + "t");
  EXPECT_EQ(vocab->types[1], TokenType::kControl);
  EXPECT_EQ(vocab->types[3], TokenType::kByte);
  EXPECT_EQ(vocab->byte_to_id[0x0A], 13);
  EXPECT_EQ(vocab->bos_id, 1);
  EXPECT_EQ(vocab->eos_id, 2);
  EXPECT_EQ(vocab->unk_id, 0);
  EXPECT_TRUE(vocab->add_bos);           // key absent: default
  EXPECT_TRUE(vocab->add_space_prefix);  // key absent: default
}

TEST(GgufVocab, SameScoresAsTokenizerBin) {
  Expected<Vocab> gguf = load_vocab_file(testing::stories_gguf_path());
  Expected<Vocab> bin = load_llama2c_vocab(tok512_path(), 512);
  ASSERT_TRUE(gguf.ok() && bin.ok());
  EXPECT_EQ(gguf->scores, bin->scores);
}

TEST(GgufVocab, LoadsLlamaSpmAndPhi3) {
  Expected<Vocab> llama = load_vocab_file(testing::vocab_test_path("llama-spm"));
  ASSERT_TRUE(llama.ok()) << llama.status().message();
  EXPECT_EQ(llama->size(), 32000);
  EXPECT_TRUE(llama->add_bos);
  Expected<Vocab> phi3 = load_vocab_file(testing::vocab_test_path("phi-3"));
  ASSERT_TRUE(phi3.ok()) << phi3.status().message();
  EXPECT_EQ(phi3->size(), 32064);
  EXPECT_EQ(phi3->eos_id, 32000);
  EXPECT_EQ(phi3->types[32007], TokenType::kControl);  // <|end|>
}

TEST(GgufVocab, ByteLevelBpeIsUnimplemented) {
  const std::string path = testing::vocab_test_path("gpt-2");
  Expected<Vocab> vocab = load_vocab_file(path);
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(vocab.status().message().find("gpt2"), std::string::npos) << vocab.status().message();
  EXPECT_NE(vocab.status().message().find(path), std::string::npos);
}

TEST(GgufVocab, HandWrittenVocabularyLoadsAndEncodes) {
  TempFile file("small.gguf", small_vocab_writer().bytes());
  Expected<Vocab> vocab = load_vocab_file(file.path());
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  auto tok = make_spm_tokenizer(std::move(vocab).value());
  EXPECT_EQ(tok->encode("hi", true), (std::vector<int32_t>{1, 263}));
  EXPECT_EQ(tok->encode("hi!", false), (std::vector<int32_t>{263, 3 + '!'}));
}

TEST(GgufVocab, WrongTokenizerModelIsUnimplemented) {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "bert");
  w.add_strings("tokenizer.ggml.tokens", {"a"});
  TempFile file("bert.gguf", w.bytes());
  Expected<Vocab> vocab = load_vocab_file(file.path());
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(vocab.status().message().find("bert"), std::string::npos);
  EXPECT_NE(vocab.status().message().find(file.path()), std::string::npos);
}

TEST(GgufVocab, MissingModelKeyIsNotFound) {
  GgufWriter w;
  w.add_strings("tokenizer.ggml.tokens", {"a"});
  TempFile file("nomodel.gguf", w.bytes());
  Expected<Vocab> vocab = load_vocab_file(file.path());
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), StatusCode::kNotFound);
  EXPECT_NE(vocab.status().message().find("tokenizer.ggml.model"), std::string::npos);
}

TEST(GgufVocab, MismatchedArrayLengthsAreDataLoss) {
  for (const char* key : {"tokenizer.ggml.scores", "tokenizer.ggml.token_type"}) {
    GgufWriter w;
    w.add_string("tokenizer.ggml.model", "llama");
    w.add_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>", "a"});
    if (std::string_view(key) == "tokenizer.ggml.scores") {
      w.add_floats(key, {0, 0, 0});
    } else {
      w.add_i32s(key, {2, 3, 3});
    }
    TempFile file("mismatch.gguf", w.bytes());
    Expected<Vocab> vocab = load_vocab_file(file.path());
    ASSERT_FALSE(vocab.ok()) << key;
    EXPECT_EQ(vocab.status().code(), StatusCode::kDataLoss);
    EXPECT_NE(vocab.status().message().find(key), std::string::npos) << vocab.status().message();
    EXPECT_NE(vocab.status().message().find(file.path()), std::string::npos);
  }
}

TEST(GgufVocab, SpecialIdOutOfRangeIsDataLoss) {
  GgufWriter w;
  w.add_string("tokenizer.ggml.model", "llama");
  w.add_strings("tokenizer.ggml.tokens", {"<unk>", "<s>", "</s>"});
  w.add_u32("tokenizer.ggml.bos_token_id", 7);
  TempFile file("badbos.gguf", w.bytes());
  Expected<Vocab> vocab = load_vocab_file(file.path());
  ASSERT_FALSE(vocab.ok());
  EXPECT_EQ(vocab.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(vocab.status().message().find("bos_token_id"), std::string::npos);
}

TEST(GgufVocab, FlagsAreRead) {
  GgufWriter w = small_vocab_writer();
  w.add_bool("tokenizer.ggml.add_bos_token", false);
  w.add_bool("tokenizer.ggml.add_space_prefix", false);
  TempFile file("flags.gguf", w.bytes());
  Expected<Vocab> vocab = load_vocab_file(file.path());
  ASSERT_TRUE(vocab.ok()) << vocab.status().message();
  EXPECT_FALSE(vocab->add_bos);
  EXPECT_FALSE(vocab->add_space_prefix);
  auto tok = make_spm_tokenizer(std::move(vocab).value());
  EXPECT_EQ(tok->encode("hi", true), (std::vector<int32_t>{262}));  // no BOS, no prefix
}

}  // namespace
}  // namespace llmserve
