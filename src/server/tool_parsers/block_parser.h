// BlockToolParser: the machinery the formats share. A format is a state machine over
// pending() that finds its markers, then parses a call's header and arguments *tentatively*:
// bytes are examined (scan_) but not consumed until the call's header is known (commit), so a
// block that turns out not to be a call is released as content unchanged (revert).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "server/tool_parsers/call_object.h"
#include "server/tool_parsers/json_scanner.h"
#include "server/tool_parsers/marker.h"
#include "server/tool_parsers/tool_parser.h"

namespace llmserve::tool_parsers {

class BlockToolParser : public ToolParser {
 protected:
  using ToolParser::ToolParser;

  enum class Match : uint8_t { kYes, kNo, kNeedMore };
  enum class Step : uint8_t {
    kNeedMore,  // out of input
    kDone,      // the call ended, complete
    kReverted,  // not a call: the examined text went out as content
    kBroken,    // the call had begun, then its JSON broke off (or the input ended): incomplete
  };

  /// Begins tentative scanning at pending()[0]; `prefix` is marker text already consumed,
  /// given back as content on revert.
  void start_block(std::string_view prefix);
  /// Releases prefix + the examined bytes as content.
  void revert();
  /// Consumes the examined bytes (the call's header) and begins the call.
  void commit(std::string name, std::string id = {});
  /// Consumes the examined bytes (a marker between calls, say) without output.
  void drop_scanned();

  /// At pending()[scan_]: matches `literal` and steps over it on kYes.
  Match match_literal(std::string_view literal);
  void skip_ws();
  /// Reads up to `terminator` (stepping over it) into *out; kNo past max_len bytes.
  Match read_until(std::string_view terminator, size_t max_len, std::string* out);
  bool scan_at_end() const { return scan_ >= pending().size(); }
  char scan_char() const { return pending()[scan_]; }

  /// A call object at pending()[scan_] (see CallObjectParser), committed once its header is
  /// known and streamed from then on.
  void start_object(CallObjectParser::Config config);
  Step step_object(bool at_end);

  /// The raw JSON arguments of a call whose name is already known, at pending()[scan_]:
  /// whitespace, then an object; the call is committed once the object is past its first
  /// key (or whole), and its arguments streamed from the '{'.
  void start_arguments(std::string name, std::string id = {});
  Step step_arguments(bool at_end);

  size_t scan_ = 0;  // bytes of pending() examined but not consumed

 private:
  Step stream_object(bool at_end);
  Step stream_arguments(bool at_end);

  std::string prefix_;
  CallObjectParser object_;
  JsonScanner args_;
  std::string call_name_;
  std::string call_id_;
  bool args_started_ = false;
  size_t args_start_ = 0;  // offset of the arguments' '{' in pending() while tentative
};

}  // namespace llmserve::tool_parsers
