#include "models/deepseek2.h"
#include "models/gemma.h"
#include "models/llama.h"
#include "models/model.h"

namespace llmserve {

Expected<std::unique_ptr<Model>> create_model(const ModelFile& file,
                                              const ModelLoadOptions& options) {
  const std::string& arch = file.config().architecture;
  if (arch == "llama" || arch == "qwen2" || arch == "qwen3" || arch == "qwen3moe" ||
      arch == "qwen2moe" || arch == "phi3")
    return create_llama_model(file, options);
  if (arch == "deepseek2") return create_deepseek2_model(file, options);
  if (arch == "gemma2" || arch == "gemma3") return create_gemma_model(file, options);
  return Unimplemented("{}: unsupported architecture '{}'", file.path(), arch);
}

}  // namespace llmserve
