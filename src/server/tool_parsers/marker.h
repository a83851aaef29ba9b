// find_marker: where the first of several markers occurs in a text, and how much of the text
// can be released now because no marker can start in it (the rest may grow into one).
#pragma once

#include <initializer_list>
#include <string_view>

namespace llmserve::tool_parsers {

struct MarkerHit {
  size_t pos = std::string_view::npos;  // start of the earliest full marker, or npos
  size_t which = 0;                     // its index in the list
  size_t safe = 0;  // text[0, safe) cannot be part of a marker: it can be released now
};
/// Empty markers are ignored.
MarkerHit find_marker(std::string_view text, std::initializer_list<std::string_view> markers);

}  // namespace llmserve::tool_parsers
