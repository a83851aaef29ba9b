#include "server/tool_parsers/block_parser.h"

#include <algorithm>
#include <utility>

namespace llmserve::tool_parsers {
namespace {

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

// The start of the longest suffix of `text` that is a proper prefix of `marker`.
size_t partial_start(std::string_view text, std::string_view marker) {
  const size_t max_len = std::min(text.size(), marker.size() - 1);
  for (size_t len = max_len; len > 0; --len) {
    if (text.substr(text.size() - len) == marker.substr(0, len)) return text.size() - len;
  }
  return text.size();
}

}  // namespace

MarkerHit find_marker(std::string_view text, std::initializer_list<std::string_view> markers) {
  MarkerHit hit;
  hit.safe = text.size();
  size_t i = 0;
  for (std::string_view m : markers) {
    if (m.empty()) {
      ++i;
      continue;
    }
    const size_t p = text.find(m);
    if (p != std::string_view::npos && (hit.pos == std::string_view::npos || p < hit.pos)) {
      hit.pos = p;
      hit.which = i;
    }
    ++i;
  }
  if (hit.pos != std::string_view::npos) {
    hit.safe = hit.pos;
    return hit;
  }
  for (std::string_view m : markers) {
    if (!m.empty()) hit.safe = std::min(hit.safe, partial_start(text, m));
  }
  return hit;
}

void BlockToolParser::start_block(std::string_view prefix) {
  prefix_ = std::string(prefix);
  scan_ = 0;
}

void BlockToolParser::revert() {
  std::string text = std::exchange(prefix_, {});
  text.append(pending().substr(0, scan_));
  consume(scan_);
  scan_ = 0;
  emit_content(text);
}

void BlockToolParser::commit(std::string name, std::string id) {
  drop_scanned();
  begin_call(std::move(name), std::move(id));
}

void BlockToolParser::drop_scanned() {
  consume(scan_);
  scan_ = 0;
  prefix_.clear();
}

BlockToolParser::Match BlockToolParser::match_literal(std::string_view literal) {
  const std::string_view rest = pending().substr(scan_);
  if (rest.substr(0, literal.size()) == literal) {
    scan_ += literal.size();
    return Match::kYes;
  }
  return literal.substr(0, rest.size()) == rest ? Match::kNeedMore : Match::kNo;
}

void BlockToolParser::skip_ws() {
  const std::string_view text = pending();
  while (scan_ < text.size() && is_ws(text[scan_])) ++scan_;
}

BlockToolParser::Match BlockToolParser::read_until(std::string_view terminator, size_t max_len,
                                                   std::string* out) {
  const std::string_view rest = pending().substr(scan_);
  const size_t p = rest.find(terminator);
  if (p != std::string_view::npos) {
    if (p > max_len) return Match::kNo;
    *out = std::string(rest.substr(0, p));
    scan_ += p + terminator.size();
    return Match::kYes;
  }
  return rest.size() >= max_len + terminator.size() ? Match::kNo : Match::kNeedMore;
}

void BlockToolParser::start_object(CallObjectParser::Config config) {
  object_ = CallObjectParser(config);
}

BlockToolParser::Step BlockToolParser::step_object(bool at_end) {
  if (in_call()) return stream_object(at_end);
  const std::string_view text = pending();
  while (scan_ < text.size()) {
    if (object_.feed(text[scan_]) == CallObjectParser::Result::kError) {
      revert();
      return Step::kReverted;
    }
    ++scan_;
    if (object_.ready()) {
      commit(object_.name());
      emit_arguments(object_.take_arguments());
      if (object_.done()) {
        end_call(true);
        return Step::kDone;
      }
      return stream_object(at_end);
    }
  }
  if (!at_end) return Step::kNeedMore;
  revert();
  return Step::kReverted;
}

BlockToolParser::Step BlockToolParser::stream_object(bool at_end) {
  const std::string_view text = pending();
  size_t i = 0;
  bool failed = false;
  while (i < text.size() && !object_.done()) {
    if (object_.feed(text[i]) == CallObjectParser::Result::kError) {
      failed = true;
      break;
    }
    ++i;
  }
  consume(i);
  emit_arguments(object_.take_arguments());
  if (object_.done()) {
    end_call(true);
    return Step::kDone;
  }
  if (!failed && !at_end) return Step::kNeedMore;
  end_call(false);
  return Step::kBroken;
}

void BlockToolParser::start_arguments(std::string name, std::string id) {
  call_name_ = std::move(name);
  call_id_ = std::move(id);
  args_.reset();
  args_started_ = false;
}

BlockToolParser::Step BlockToolParser::step_arguments(bool at_end) {
  if (in_call()) return stream_arguments(at_end);
  // Tentative until the object is past its first key (or whole): `{invalid` is not a call.
  const std::string_view text = pending();
  while (scan_ < text.size()) {
    if (!args_started_) {
      const char c = text[scan_];
      if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
        ++scan_;
        continue;
      }
      if (c != '{') break;
      args_started_ = true;
      args_start_ = scan_;
    }
    std::string ignored;
    if (args_.feed(text[scan_], &ignored) == JsonScanner::Result::kError) break;
    ++scan_;
    if (args_.seen_key() || args_.done()) {
      // The header ends where the arguments begin; re-stream them from there.
      scan_ = args_start_;
      commit(std::move(call_name_), std::move(call_id_));
      args_.reset();
      return stream_arguments(at_end);
    }
  }
  if (scan_ >= text.size() && !at_end) return Step::kNeedMore;
  revert();
  return Step::kReverted;
}

BlockToolParser::Step BlockToolParser::stream_arguments(bool at_end) {
  const std::string_view text = pending();
  std::string out;
  size_t i = 0;
  bool failed = false;
  while (i < text.size() && !args_.done()) {
    if (args_.feed(text[i], &out) == JsonScanner::Result::kError) {
      failed = true;
      break;
    }
    ++i;
  }
  consume(i);
  emit_arguments(out);
  if (args_.done()) {
    end_call(true);
    return Step::kDone;
  }
  if (!failed && !at_end) return Step::kNeedMore;
  end_call(false);
  return Step::kBroken;
}

}  // namespace llmserve::tool_parsers
