#include "models/model_file.h"

#include <cmath>
#include <cstdio>
#include <filesystem>

namespace llmserve {
namespace {

std::string file_stem(const std::string& path) {
  return std::filesystem::path(path).stem().string();
}

Expected<ModelConfig> config_from_gguf(const GgufFile& g) {
  LLMS_ASSIGN_OR_RETURN(std::string arch, g.get_string("general.architecture"));
  if (arch != "llama")
    return Unimplemented("{}: unsupported architecture '{}' (supported: llama)", g.path(), arch);
  ModelConfig c;
  c.architecture = arch;
  c.rope_style = RopeStyle::kAdjacentPairs;  // llama.cpp's converter permutes Q/K for this
  auto get_i = [&](const char* key) -> Expected<int32_t> {
    LLMS_ASSIGN_OR_RETURN(int64_t v, g.get_int(std::string("llama.") + key));
    if (v <= 0 || v > (1LL << 31) - 1)
      return InvalidArgument("{}: metadata llama.{} = {} is out of range", g.path(), key, v);
    return static_cast<int32_t>(v);
  };
  LLMS_ASSIGN_OR_RETURN(c.dim, get_i("embedding_length"));
  LLMS_ASSIGN_OR_RETURN(c.n_layers, get_i("block_count"));
  LLMS_ASSIGN_OR_RETURN(c.n_heads, get_i("attention.head_count"));
  LLMS_ASSIGN_OR_RETURN(c.ffn_dim, get_i("feed_forward_length"));
  LLMS_ASSIGN_OR_RETURN(c.max_position_embeddings, get_i("context_length"));
  c.n_kv_heads = c.n_heads;
  if (g.has_key("llama.attention.head_count_kv")) {
    LLMS_ASSIGN_OR_RETURN(c.n_kv_heads, get_i("attention.head_count_kv"));
  }
  c.head_dim = c.dim / c.n_heads;
  if (g.has_key("llama.attention.key_length")) {
    LLMS_ASSIGN_OR_RETURN(c.head_dim, get_i("attention.key_length"));
  }
  if (g.has_key("llama.attention.layer_norm_rms_epsilon")) {
    LLMS_ASSIGN_OR_RETURN(double eps, g.get_float("llama.attention.layer_norm_rms_epsilon"));
    c.rms_norm_eps = static_cast<float>(eps);
  }
  if (g.has_key("llama.rope.freq_base")) {
    LLMS_ASSIGN_OR_RETURN(double theta, g.get_float("llama.rope.freq_base"));
    c.rope_theta = static_cast<float>(theta);
  }
  if (!std::isfinite(c.rms_norm_eps) || !std::isfinite(c.rope_theta))
    return InvalidArgument("{}: metadata rms_norm_eps ({}) and rope.freq_base ({}) must be finite",
                           g.path(), c.rms_norm_eps, c.rope_theta);
  if (g.has_key("llama.rope.dimension_count")) {
    LLMS_ASSIGN_OR_RETURN(int64_t rope_dim, g.get_int("llama.rope.dimension_count"));
    if (rope_dim != c.head_dim)
      return Unimplemented("{}: llama.rope.dimension_count = {} but head_dim = {}: partial "
                           "rotary embeddings are not supported", g.path(), rope_dim, c.head_dim);
  }
  for (const TensorView& t : g.tensors()) {  // layers beyond block_count mean bad metadata
    int layer = -1;
    if (std::sscanf(t.name.c_str(), "blk.%d.", &layer) == 1 && layer >= c.n_layers)
      return InvalidArgument("{}: tensor {} belongs to layer {} but llama.block_count = {}",
                             g.path(), t.name, layer, c.n_layers);
  }
  const TensorView* emb = g.find_tensor("token_embd.weight");
  if (!emb) return NotFound("{}: missing tensor token_embd.weight", g.path());
  if (emb->shape.size() != 2)
    return DataLoss("{}: token_embd.weight has {} dims, expected 2", g.path(), emb->shape.size());
  c.vocab_size = static_cast<int32_t>(emb->shape[0]);
  c.tie_word_embeddings = g.find_tensor("output.weight") == nullptr;
  c.weight_dtype = emb->dtype;
  return c;
}

ModelConfig config_from_llama2c(const Llama2cHeader& h) {
  ModelConfig c;
  c.architecture = "llama";
  c.vocab_size = h.vocab_size;
  c.dim = h.dim;
  c.n_layers = h.n_layers;
  c.n_heads = h.n_heads;
  c.n_kv_heads = h.n_kv_heads;
  c.head_dim = h.dim / h.n_heads;
  c.ffn_dim = h.hidden_dim;
  c.max_position_embeddings = h.seq_len;
  c.rms_norm_eps = 1e-5f;  // run.c rmsnorm
  c.rope_theta = 10000.0f;
  c.rope_style = RopeStyle::kAdjacentPairs;
  c.tie_word_embeddings = h.shared_classifier;
  return c;
}

bool has_gguf_magic(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) return false;
  char magic[4] = {};
  const size_t n = std::fread(magic, 1, 4, f);
  std::fclose(f);
  return n == 4 && magic[0] == 'G' && magic[1] == 'G' && magic[2] == 'U' && magic[3] == 'F';
}

}  // namespace

Expected<std::unique_ptr<ModelFile>> ModelFile::open(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return NotFound("{}: no such model file", path);
  if (!std::filesystem::is_regular_file(path, ec))
    return InvalidArgument("{}: not a regular file (expected a .gguf or llama2.c .bin file)",
                           path);
  auto mf = std::make_unique<ModelFile>();
  mf->path_ = path;
  if (has_gguf_magic(path)) {
    mf->format_ = Format::kGguf;
    LLMS_ASSIGN_OR_RETURN(GgufFile g, GgufFile::open(path));
    mf->gguf_ = std::make_unique<GgufFile>(std::move(g));
    LLMS_ASSIGN_OR_RETURN(mf->config_, config_from_gguf(*mf->gguf_));
  } else {
    mf->format_ = Format::kLlama2c;
    LLMS_ASSIGN_OR_RETURN(Llama2cCheckpoint ck, Llama2cCheckpoint::open(path));
    mf->llama2c_ = std::make_unique<Llama2cCheckpoint>(std::move(ck));
    mf->config_ = config_from_llama2c(mf->llama2c_->header());
  }
  mf->config_.name = file_stem(path);
  Status st = mf->config_.validate();
  if (!st.ok()) return InvalidArgument("{}: {}", path, st.message());
  return mf;
}

const TensorView* ModelFile::find_tensor(std::string_view name) const {
  if (format_ == Format::kHfDir) {
    auto it = hf_by_gguf_name_.find(name);
    return it == hf_by_gguf_name_.end() ? nullptr : it->second;
  }
  return gguf_ ? gguf_->find_tensor(name) : llama2c_->find_tensor(name);
}

std::vector<const TensorView*> ModelFile::tensors() const {
  std::vector<const TensorView*> out;
  if (safetensors_) return safetensors_->tensors();
  if (gguf_) {
    for (const TensorView& t : gguf_->tensors()) out.push_back(&t);
  } else if (llama2c_) {
    for (const TensorView& t : llama2c_->tensors()) out.push_back(&t);
  }
  return out;
}

Expected<const TensorView*> ModelFile::tensor(std::string_view name) const {
  const TensorView* t = find_tensor(name);
  if (!t) return NotFound("{}: missing tensor {}", path_, name);
  return t;
}

}  // namespace llmserve
