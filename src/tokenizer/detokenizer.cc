// IncrementalDetokenizer: holds back bytes of an unfinished UTF-8 sequence between tokens.
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace llmserve {
namespace {

/// Removes from `pending` and returns its longest prefix that can be emitted: complete
/// sequences as they are, ill-formed ones as U+FFFD. A trailing sequence that may still
/// complete stays in `pending`, unless `at_end`, in which case it becomes U+FFFD too.
std::string take_ready(std::string& pending, bool at_end) {
  std::string out;
  size_t pos = 0;
  while (pos < pending.size()) {
    const utf8::Seq seq = utf8::classify(pending, pos);
    if (seq.kind == utf8::SeqKind::kIncomplete && !at_end) break;
    if (seq.kind == utf8::SeqKind::kComplete) {
      out.append(pending, pos, seq.len);
    } else {
      out.append(utf8::kReplacement);
    }
    pos += seq.len;
  }
  pending.erase(0, pos);
  return out;
}

}  // namespace

std::string IncrementalDetokenizer::push(int32_t id) {
  pending_ += tokenizer_->decode_token(prev_id_, id, skip_special_);
  prev_id_ = id;
  return take_ready(pending_, /*at_end=*/false);
}

std::string IncrementalDetokenizer::flush() { return take_ready(pending_, /*at_end=*/true); }

}  // namespace llmserve
