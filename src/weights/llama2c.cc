#include "weights/llama2c.h"

#include <cstring>
#include <utility>

namespace llmserve {

namespace {

constexpr size_t kHeaderBytes = 7 * sizeof(int32_t);
// Sane upper bounds: far above any llama2.c-format model, low enough that every size
// computation below fits comfortably in uint64.
constexpr int64_t kMaxDim = 1 << 16;
constexpr int64_t kMaxHidden = 1 << 18;
constexpr int64_t kMaxLayers = 1 << 10;
constexpr int64_t kMaxVocab = 1 << 22;
constexpr int64_t kMaxSeqLen = 1 << 22;

std::string header_string(const int32_t raw[7]) {
  return fmt::format(
      "dim={} hidden_dim={} n_layers={} n_heads={} n_kv_heads={} vocab_size={} "
      "seq_len={}",
      raw[0], raw[1], raw[2], raw[3], raw[4], raw[5], raw[6]);
}

/// Checks one header field against (0, max].
Status check_range(const std::string& path, const int32_t raw[7], const char* field, int64_t value,
                   int64_t max) {
  if (value <= 0 || value > max) {
    return DataLoss("{}: bad llama2.c header: {} = {} is outside [1, {}] ({})", path, field, value,
                    max, header_string(raw));
  }
  return Status::Ok();
}

Expected<Llama2cHeader> parse_header(const std::string& path, const int32_t raw[7]) {
  Llama2cHeader h;
  h.dim = raw[0], h.hidden_dim = raw[1], h.n_layers = raw[2], h.n_heads = raw[3];
  h.n_kv_heads = raw[4], h.seq_len = raw[6];
  const int64_t vocab = raw[5];
  h.shared_classifier = vocab > 0;
  const int64_t abs_vocab = vocab < 0 ? -vocab : vocab;
  LLMS_RETURN_IF_ERROR(check_range(path, raw, "dim", h.dim, kMaxDim));
  LLMS_RETURN_IF_ERROR(check_range(path, raw, "hidden_dim", h.hidden_dim, kMaxHidden));
  LLMS_RETURN_IF_ERROR(check_range(path, raw, "n_layers", h.n_layers, kMaxLayers));
  LLMS_RETURN_IF_ERROR(check_range(path, raw, "n_heads", h.n_heads, h.dim));
  LLMS_RETURN_IF_ERROR(check_range(path, raw, "n_kv_heads", h.n_kv_heads, h.n_heads));
  LLMS_RETURN_IF_ERROR(check_range(path, raw, "|vocab_size|", abs_vocab, kMaxVocab));
  LLMS_RETURN_IF_ERROR(check_range(path, raw, "seq_len", h.seq_len, kMaxSeqLen));
  h.vocab_size = static_cast<int32_t>(abs_vocab);
  if (h.dim % h.n_heads != 0) {
    return DataLoss("{}: bad llama2.c header: dim {} is not a multiple of n_heads {} ({})", path,
                    h.dim, h.n_heads, header_string(raw));
  }
  if (h.n_heads % h.n_kv_heads != 0) {
    return DataLoss("{}: bad llama2.c header: n_heads {} is not a multiple of n_kv_heads {} ({})",
                    path, h.n_heads, h.n_kv_heads, header_string(raw));
  }
  if ((h.dim / h.n_heads) % 2 != 0) {
    return DataLoss("{}: bad llama2.c header: head size {} is odd (RoPE needs pairs) ({})", path,
                    h.dim / h.n_heads, header_string(raw));
  }
  return h;
}

/// Number of float32 values the header implies after the 28-byte header.
uint64_t expected_floats(const Llama2cHeader& h) {
  const uint64_t dim = h.dim, hidden = h.hidden_dim, L = h.n_layers, vocab = h.vocab_size;
  const uint64_t hs = dim / h.n_heads, kv_dim = hs * h.n_kv_heads;
  uint64_t per_layer = dim                                                    // rms_att
                       + dim * dim                                            // wq
                       + 2 * kv_dim * dim                                     // wk, wv
                       + dim * dim                                            // wo
                       + dim                                                  // rms_ffn
                       + 3 * hidden * dim;                                    // w1, w2, w3
  uint64_t n = vocab * dim + L * per_layer + dim + uint64_t(h.seq_len) * hs;  // + freq_cis
  if (!h.shared_classifier) n += vocab * dim;
  return n;
}

/// Hands out consecutive float arrays from the mapped weights.
class FloatCursor {
 public:
  explicit FloatCursor(const float* p) : p_(p) {}
  const float* take(uint64_t n) {
    const float* p = p_;
    p_ += n;
    return p;
  }

 private:
  const float* p_;
};

TensorView make_view(std::string name, std::vector<int64_t> shape, const float* data) {
  TensorView t;
  t.name = std::move(name);
  t.dtype = DType::kF32;
  t.shape = std::move(shape);
  t.data = data;
  t.nbytes = static_cast<size_t>(t.numel()) * sizeof(float);
  return t;
}

/// A stacked [L, rows, cols] (or [L, rows] when cols == 0) array split into per-layer views.
struct Stacked {
  const char* suffix;
  int64_t rows, cols;
  const float* base;
};

std::vector<TensorView> build_views(const Llama2cHeader& h, const float* weights) {
  const int64_t dim = h.dim, hidden = h.hidden_dim, vocab = h.vocab_size, L = h.n_layers;
  const int64_t hs = dim / h.n_heads, q_dim = hs * h.n_heads, kv_dim = hs * h.n_kv_heads;
  FloatCursor cur(weights);
  const float* emb = cur.take(vocab * dim);
  // File order of the stacked per-layer arrays.
  Stacked stacked[] = {{"attn_norm", dim, 0, nullptr},       {"attn_q", q_dim, dim, nullptr},
                       {"attn_k", kv_dim, dim, nullptr},     {"attn_v", kv_dim, dim, nullptr},
                       {"attn_output", dim, q_dim, nullptr}, {"ffn_norm", dim, 0, nullptr},
                       {"ffn_gate", hidden, dim, nullptr},   {"ffn_down", dim, hidden, nullptr},
                       {"ffn_up", hidden, dim, nullptr}};
  for (Stacked& s : stacked) s.base = cur.take(L * s.rows * (s.cols == 0 ? 1 : s.cols));
  const float* rms_final = cur.take(dim);
  cur.take(int64_t{h.seq_len} * hs);  // freq_cis_real + freq_cis_imag (hs/2 each): unused
  const float* wcls = h.shared_classifier ? emb : cur.take(vocab * dim);

  std::vector<TensorView> out;
  out.push_back(make_view("token_embd.weight", {vocab, dim}, emb));
  for (int64_t i = 0; i < L; ++i) {
    for (const Stacked& s : stacked) {
      const int64_t per = s.rows * (s.cols == 0 ? 1 : s.cols);
      std::vector<int64_t> shape =
          s.cols == 0 ? std::vector<int64_t>{s.rows} : std::vector<int64_t>{s.rows, s.cols};
      out.push_back(make_view(fmt::format("blk.{}.{}.weight", i, s.suffix), std::move(shape),
                              s.base + i * per));
    }
  }
  out.push_back(make_view("output_norm.weight", {dim}, rms_final));
  out.push_back(make_view("output.weight", {vocab, dim}, wcls));
  return out;
}

/// The checked header of a mapped checkpoint.
Expected<Llama2cHeader> header_of(const MappedFile& mapped) {
  if (mapped.size() < kHeaderBytes) {
    return DataLoss("{}: truncated: llama2.c header needs {} bytes, file size is {}",
                    mapped.path(), kHeaderBytes, mapped.size());
  }
  int32_t raw[7];
  std::memcpy(raw, mapped.data(), kHeaderBytes);
  return parse_header(mapped.path(), raw);
}

}  // namespace

Expected<Llama2cHeader> Llama2cCheckpoint::read_header(const std::string& path) {
  LLMS_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::open(path));
  return header_of(mapped);
}

Expected<Llama2cCheckpoint> Llama2cCheckpoint::open(const std::string& path) {
  LLMS_ASSIGN_OR_RETURN(MappedFile mapped, MappedFile::open(path));
  LLMS_ASSIGN_OR_RETURN(Llama2cHeader header, header_of(mapped));
  int32_t raw[7];
  std::memcpy(raw, mapped.data(), kHeaderBytes);
  const uint64_t expected = kHeaderBytes + expected_floats(header) * sizeof(float);
  if (mapped.size() != expected) {
    return DataLoss("{}: {}: header ({}{}) implies {} bytes, file size is {}", path,
                    mapped.size() < expected ? "truncated" : "size mismatch", header_string(raw),
                    header.shared_classifier ? ", tied classifier" : ", untied classifier",
                    expected, mapped.size());
  }
  Llama2cCheckpoint ckpt;
  ckpt.file_ = std::move(mapped);
  ckpt.header_ = header;
  ckpt.tensors_ =
      build_views(header, reinterpret_cast<const float*>(ckpt.file_.data() + kHeaderBytes));
  return ckpt;
}

const TensorView* Llama2cCheckpoint::find_tensor(std::string_view name) const {
  for (const TensorView& t : tensors_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace llmserve
