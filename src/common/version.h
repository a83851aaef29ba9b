// The llmserve version, reported by `llmserve --version` and GET /version.
#pragma once

namespace llmserve {

inline constexpr const char* kLlmserveVersion = "0.1.0";

}  // namespace llmserve
