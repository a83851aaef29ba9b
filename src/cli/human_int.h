// Human-readable integers for token and sequence counts, as vLLM's `human_readable_int` reads
// them: `4k` = 4000 and `25.6k` = 25600 (lowercase k/m/g/t: powers of 1000), `8K` = 8192
// (uppercase K/M/G/T: powers of 1024, whole numbers only), or a plain integer.
#pragma once

#include <cstdint>
#include <string>

#include <CLI/CLI.hpp>

#include "common/status.h"

namespace llmserve::cli {

/// Parses `text` per the rule above. A decimal with a lowercase suffix must give a whole number
/// (`25.6k` yes, `1.5555k` no); decimals with an uppercase suffix are refused (vLLM's rule), with
/// a hint to the lowercase spelling. Errors: InvalidArgument naming the text (the caller adds
/// the flag), also for values outside [-2^63, 2^63).
Expected<int64_t> parse_human_int(const std::string& text);

/// A CLI11 transform for an integer option: rewrites a human-readable value to its digits and
/// requires it in [min, max] ("must be >= 1, got 0"; with a max other than INT32_MAX or
/// INT64_MAX, "must be in [0, 1024], got 2000"). Use on int32 options with the default max. As a check() (which does not rewrite) it only bounds a plain integer.
CLI::Validator human_int(int64_t min, int64_t max = INT32_MAX);

}  // namespace llmserve::cli
