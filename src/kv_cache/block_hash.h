// The identity of a full KV block for automatic prefix caching (vLLM V1's design): a 128-bit
// hash chained over the parent block's hash, the block's token ids and extra keys (the
// request's cache_salt, first block only: the chain carries it to every later block). Two
// blocks with equal hashes hold the same tokens after the same prefix, so their K/V are the
// same bits (batch-invariant kernels, docs/batch_invariance.md) and one can stand for the
// other. XXH3-128 (xxHash, Debian's libxxhash): not cryptographic, but with 128 bits an
// accidental collision is out of reach (2^-64 for 2^32 blocks); tenants who must not learn
// whether another's prompt is cached use cache_salt (docs/operations.md).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace llmserve {

struct BlockHash {
  uint64_t lo = 0, hi = 0;
  friend bool operator==(const BlockHash&, const BlockHash&) = default;
};

struct BlockHashHasher {
  size_t operator()(const BlockHash& h) const noexcept { return static_cast<size_t>(h.lo); }
};

/// The hash of a block holding `tokens` after the block whose hash is `parent` (null for the
/// first block of a sequence), with `extra_key` mixed in (empty: none).
BlockHash hash_block(const BlockHash* parent, std::span<const int32_t> tokens,
                     std::string_view extra_key);

/// Appends to `hashes` the hashes of the full blocks of `tokens` (block_size tokens each) it
/// does not hold yet; block 0 takes `extra_key`. Partial last blocks get no hash.
void extend_block_hashes(std::span<const int32_t> tokens, int32_t block_size,
                         std::string_view extra_key, std::vector<BlockHash>& hashes);

}  // namespace llmserve
