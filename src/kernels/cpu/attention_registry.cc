// --attention-backend names -> backends.
#include "kernels/attention.h"
#include "kernels/naive/attention_internal.h"

namespace llmserve {

Expected<std::unique_ptr<AttentionBackend>> make_attention_backend(const std::string& name) {
  if (name == "naive" || name == "reference") return attention_internal::make_naive_attention();
  if (name == "flash") return attention_internal::make_flash_attention(false);
  if (name == "flash-split") return attention_internal::make_flash_attention(true);
  return InvalidArgument(
      "unknown --attention-backend '{}' (available: flash, flash-split, naive, reference)",
      name);
}

}  // namespace llmserve
