// Checks one instance text against a grammar the way a constrained decoder would see it:
// token by token (MaskBench's protocol, JSONSchemaBench arXiv 2501.10868): accepted iff every
// token is allowed in turn and the grammar may stop after the last one. With masks on, each
// step's mask is computed too, its time recorded, and the token's membership in it checked
// against the step (a disagreement is a bug and is reported).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "structured_output/matcher.h"
#include "structured_output/token_mask.h"

namespace llmserve::structured_output {

struct InstanceCheck {
  bool accepted = false;
  /// Index of the first refused token (ids.size() when all were allowed but the grammar could
  /// not stop there; -1 when accepted).
  int64_t rejected_at = -1;
  /// Per-token mask computation times in microseconds (empty without masks).
  std::vector<double> mask_us;
  /// True if some step's mask disagreed with advancing by the token (must never happen).
  bool mask_mismatch = false;
};

/// Feeds `ids` (tokens of `vocab`) through a fresh matcher on `grammar`; with `masker`, computes
/// the mask before every token as a decoder would.
InstanceCheck check_instance(const std::shared_ptr<const CompiledGrammar>& grammar, const TokenVocab& vocab,
                             const std::vector<int32_t>& ids, TokenMasker* masker);

}  // namespace llmserve::structured_output
