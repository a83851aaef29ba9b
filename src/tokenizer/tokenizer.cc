#include "tokenizer/tokenizer.h"

namespace llmserve {

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::string out;
  int32_t prev = -1;
  for (int32_t id : ids) {
    out += decode_token(prev, id);
    prev = id;
  }
  return out;
}

}  // namespace llmserve
