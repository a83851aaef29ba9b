#include "xml_check.h"

#include <cctype>
#include <vector>

namespace llmserve::bench::testing {

namespace {

bool name_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '-' || c == ':' ||
         c == '.';
}

/// Checks that every '&' starts a known entity in [b, e).
bool entities_ok(const std::string& t, size_t b, size_t e) {
  for (size_t i = b; i < e; ++i) {
    if (t[i] != '&') continue;
    bool ok = false;
    for (const char* ent : {"&amp;", "&lt;", "&gt;", "&quot;", "&apos;"})
      ok |= t.compare(i, std::char_traits<char>::length(ent), ent) == 0;
    if (!ok) return false;
  }
  return true;
}

/// Parses the attributes of a start tag from `i` to its '>' ; returns the index after '>'
/// or npos. `self_closing` reports "/>".
size_t parse_attrs(const std::string& t, size_t i, bool& self_closing) {
  while (i < t.size()) {
    while (i < t.size() && std::isspace(static_cast<unsigned char>(t[i]))) ++i;
    if (i >= t.size()) return std::string::npos;
    if (t[i] == '>') return i + 1;
    if (t.compare(i, 2, "/>") == 0) {
      self_closing = true;
      return i + 2;
    }
    const size_t n0 = i;
    while (i < t.size() && name_char(t[i])) ++i;
    if (i == n0 || i + 1 >= t.size() || t[i] != '=' || (t[i + 1] != '"' && t[i + 1] != '\''))
      return std::string::npos;
    const char q = t[i + 1];
    const size_t end = t.find(q, i + 2);
    if (end == std::string::npos) return std::string::npos;
    if (t.find('<', i + 2) < end || !entities_ok(t, i + 2, end)) return std::string::npos;
    i = end + 1;
  }
  return std::string::npos;
}

}  // namespace

std::string xml_error(const std::string& t) {
  std::vector<std::string> stack;
  int roots = 0;
  size_t i = 0;
  while (i < t.size()) {
    const size_t lt = t.find('<', i);
    if (!entities_ok(t, i, lt == std::string::npos ? t.size() : lt))
      return "bad entity near offset " + std::to_string(i);
    if (lt == std::string::npos) break;
    if (t.compare(lt, 2, "<?") == 0 || t.compare(lt, 4, "<!--") == 0) {
      const size_t end = t.find(t[lt + 1] == '?' ? "?>" : "-->", lt);
      if (end == std::string::npos) return "unterminated declaration";
      i = end + 2;
      continue;
    }
    if (t.compare(lt, 2, "</") == 0) {
      const size_t gt = t.find('>', lt);
      if (gt == std::string::npos || stack.empty() || t.substr(lt + 2, gt - lt - 2) != stack.back())
        return "mismatched end tag at offset " + std::to_string(lt);
      stack.pop_back();
      i = gt + 1;
      continue;
    }
    size_t n = lt + 1;
    while (n < t.size() && name_char(t[n])) ++n;
    if (n == lt + 1) return "bad tag at offset " + std::to_string(lt);
    if (stack.empty()) ++roots;
    bool self_closing = false;
    const size_t after = parse_attrs(t, n, self_closing);
    if (after == std::string::npos) return "bad attributes at offset " + std::to_string(lt);
    if (!self_closing) stack.push_back(t.substr(lt + 1, n - lt - 1));
    i = after;
  }
  if (!stack.empty()) return "unclosed <" + stack.back() + ">";
  if (roots != 1) return "expected one root element, got " + std::to_string(roots);
  return "";
}

}  // namespace llmserve::bench::testing
