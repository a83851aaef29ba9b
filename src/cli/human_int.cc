#include "cli/human_int.h"

#include <cctype>

namespace llmserve::cli {
namespace {

/// The multiplier of a suffix character, 0 for none; `decimal` says whether it is a power of
/// 1000 (lowercase) or of 1024 (uppercase).
int64_t suffix_multiplier(char c, bool* decimal) {
  *decimal = std::islower(static_cast<unsigned char>(c)) != 0;
  switch (c) {
    case 'k': return 1'000;
    case 'm': return 1'000'000;
    case 'g': return 1'000'000'000;
    case 't': return 1'000'000'000'000;
    case 'K': return int64_t{1} << 10;
    case 'M': return int64_t{1} << 20;
    case 'G': return int64_t{1} << 30;
    case 'T': return int64_t{1} << 40;
    default: return 0;
  }
}

bool all_digits(const std::string& s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

}  // namespace

Expected<int64_t> parse_human_int(const std::string& text) {
  auto bad = [&] {
    return InvalidArgument("'{}' is not an integer (e.g. 4096, 4k = 4000, 4K = 4096)", text);
  };
  if (text.empty()) return bad();
  bool decimal = false;
  const int64_t mult = suffix_multiplier(text.back(), &decimal);
  const std::string number = mult != 0 ? text.substr(0, text.size() - 1) : text;
  // A sign as CLI11's plain integer options take it ("+5", "-1"); a minus only without a
  // suffix.
  const bool negative = mult == 0 && number.size() > 1 && number[0] == '-';
  const bool plus = number.size() > 1 && number[0] == '+';
  const std::string digits = negative || plus ? number.substr(1) : number;
  const size_t dot = digits.find('.');
  const std::string whole = digits.substr(0, dot);
  const std::string frac = dot == std::string::npos ? "" : digits.substr(dot + 1);
  if (!all_digits(whole) || (dot != std::string::npos && (mult == 0 || !all_digits(frac))))
    return bad();
  if (!frac.empty() && !decimal) {
    const char lower = static_cast<char>(std::tolower(static_cast<unsigned char>(text.back())));
    return InvalidArgument("'{}': decimals are not allowed with binary suffixes like {} (did "
                           "you mean {}{}?)", text, text.back(), number, lower);
  }
  // value = (whole . frac) * mult, exactly, in 128 bits.
  __int128 scaled = 0, scale = 1;
  for (char c : whole + frac) {
    scaled = scaled * 10 + (c - '0');
    if (scaled > (__int128{1} << 64)) return InvalidArgument("'{}' is out of range", text);
  }
  for (size_t i = 0; i < frac.size(); ++i) scale *= 10;
  const __int128 product = scaled * (mult == 0 ? 1 : mult);
  if (product % scale != 0)
    return InvalidArgument("'{}' is not a whole number", text);
  __int128 value = product / scale;
  if (negative) value = -value;
  if (value > INT64_MAX || value < INT64_MIN) return InvalidArgument("'{}' is out of range", text);
  return static_cast<int64_t>(value);
}

CLI::Validator human_int(int64_t min, int64_t max) {
  return CLI::Validator(
      [min, max](std::string& value) -> std::string {
        Expected<int64_t> v = parse_human_int(value);
        if (!v.ok()) return v.status().message();
        // A bound of its own on both sides reads as a range ("must be in [0, 1024]").
        const bool range = max != INT32_MAX && max != INT64_MAX;
        // With a suffix, the value it stands for too ("got 4k (= 4000)").
        const std::string got = value == std::to_string(*v) ? value : fmt::format("{} (= {})", value, *v);
        if (range && (*v < min || *v > max))
          return fmt::format("must be in [{}, {}], got {}", min, max, got);
        if (*v < min) return fmt::format("must be >= {}, got {}", min, got);
        if (*v > max) return fmt::format("must be <= {}, got {}", max, got);
        value = std::to_string(*v);
        return std::string();
      },
      "INT (4k = 4000, 4K = 4096)");
}

}  // namespace llmserve::cli
