// A small XML well-formedness check for the timeline test (no XML library is a dependency):
// balanced, properly nested tags, quoted attribute values, known entities only.
#pragma once

#include <string>

namespace llmserve::bench::testing {

/// "" when `text` is well-formed XML with one root element, else what is wrong and where.
std::string xml_error(const std::string& text);

}  // namespace llmserve::bench::testing
