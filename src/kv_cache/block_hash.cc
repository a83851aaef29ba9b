#include "kv_cache/block_hash.h"

#define XXH_STATIC_LINKING_ONLY  // XXH3_state_t on the stack
#include <xxhash.h>

#include <cstring>

namespace llmserve {

BlockHash hash_block(const BlockHash* parent, std::span<const int32_t> tokens,
                     std::string_view extra_key) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  // Domain: a parent flag, so a first block never equals a later block with a zero parent.
  const uint8_t has_parent = parent != nullptr ? 1 : 0;
  XXH3_128bits_update(&state, &has_parent, 1);
  if (parent != nullptr) {
    const uint64_t p[2] = {parent->lo, parent->hi};
    XXH3_128bits_update(&state, p, sizeof(p));
  }
  const uint64_t n = tokens.size();
  XXH3_128bits_update(&state, &n, sizeof(n));
  XXH3_128bits_update(&state, tokens.data(), tokens.size_bytes());
  const uint64_t k = extra_key.size();
  XXH3_128bits_update(&state, &k, sizeof(k));
  XXH3_128bits_update(&state, extra_key.data(), extra_key.size());
  const XXH128_hash_t h = XXH3_128bits_digest(&state);
  return BlockHash{h.low64, h.high64};
}

void extend_block_hashes(std::span<const int32_t> tokens, int32_t block_size,
                         std::string_view extra_key, std::vector<BlockHash>& hashes) {
  const size_t full = tokens.size() / static_cast<size_t>(block_size);
  while (hashes.size() < full) {
    const size_t i = hashes.size();
    hashes.push_back(hash_block(i == 0 ? nullptr : &hashes[i - 1],
                                tokens.subspan(i * block_size, block_size),
                                i == 0 ? extra_key : std::string_view()));
  }
}

}  // namespace llmserve
