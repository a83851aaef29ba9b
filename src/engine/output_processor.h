// Output processing for one request after a token is sampled: incremental detokenization,
// stop conditions (EOS, stop_token_ids, stop strings, max_tokens, max_model_len) and the
// text delta that is safe to send (complete UTF-8, never text that may still turn out to be
// the start of a stop string).
#pragma once

#include <cstdint>

#include "engine/request.h"
#include "tokenizer/tokenizer.h"

namespace llmserve {

/// Appends `token` to `req` and decides whether it finishes. Returns kNone to continue.
/// On kStop via a stop string, output_text is cut before the stop string.
FinishReason append_token(Request& req, int32_t token, const Tokenizer& tokenizer,
                          int32_t max_model_len);

/// Moves the newly safe part of req.output_text into `delta`. When `finished`, everything
/// remaining (held-back text included) is released.
void take_text_delta(Request& req, bool finished, std::string& delta);

}  // namespace llmserve
