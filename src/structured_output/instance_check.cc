#include "structured_output/instance_check.h"

#include <chrono>

namespace llmserve::structured_output {

InstanceCheck check_instance(const std::shared_ptr<const CompiledGrammar>& grammar, const TokenVocab& vocab,
                             const std::vector<int32_t>& ids, TokenMasker* masker) {
  InstanceCheck out;
  Matcher m(grammar);
  TokenBitmask mask;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    bool in_mask = false;
    if (masker) {
      auto t0 = std::chrono::steady_clock::now();
      masker->fill(m, mask);
      auto t1 = std::chrono::steady_clock::now();
      out.mask_us.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
      in_mask = id >= 0 && id < vocab.vocab_size() && mask_test(mask, id);
    }
    bool ok = id >= 0 && id < vocab.vocab_size() && !vocab.bytes(id).empty() && m.advance(vocab.bytes(id));
    if (masker && in_mask != ok) out.mask_mismatch = true;
    if (!ok) {
      out.rejected_at = static_cast<int64_t>(i);
      return out;
    }
  }
  out.accepted = m.can_finish();
  if (!out.accepted) out.rejected_at = static_cast<int64_t>(ids.size());
  return out;
}

}  // namespace llmserve::structured_output
