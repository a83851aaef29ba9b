// Syntax tree of a parsed template (internal to chat_template/).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "chat_template/value.h"

namespace llmserve::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Arg {
  std::string name;  // empty: positional
  ExprPtr value;
};
struct ArgList {
  std::vector<Arg> args;
  ExprPtr star;       // *args
  ExprPtr starstar;   // **kwargs
};

struct Expr {
  enum class Kind {
    kLiteral, kName, kList, kTuple, kDict, kGetAttr, kGetItem, kSlice, kCall, kFilter, kTest,
    kNeg, kPos, kNot, kBinary, kConcat, kCompare, kAnd, kOr, kCond
  };
  explicit Expr(Kind k, int l) : kind(k), line(l) {}
  Kind kind;
  int line;
  Value literal;                 // kLiteral
  std::string name;              // kName, kGetAttr attribute, kFilter/kTest name, kBinary op
  std::vector<ExprPtr> children; // operands (kList/kTuple items, kDict k0 v0 k1 v1..., kConcat parts)
  ExprPtr a, b, c;               // object/left/test ..., right/key/then, step/else
  ArgList args;                  // kCall, kFilter, kTest
  std::vector<std::string> ops;  // kCompare operators ("==", "in", "notin", ...)
  bool negated = false;          // kTest: `is not`
  bool has_start = false, has_stop = false, has_step = false;  // kSlice
};

/// Assignment target: a name, a tuple of names, or namespace attribute (`ns.attr`).
struct Target {
  std::vector<std::string> names;  // >1 or tuple: unpack
  bool is_tuple = false;
  std::string ns_attr;             // non-empty: names[0].ns_attr
};

struct MacroParam {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct FilterCall {
  std::string name;
  ArgList args;
  int line = 0;
};

struct Stmt {
  enum class Kind { kText, kPrint, kIf, kFor, kSet, kSetBlock, kMacro, kCallBlock, kFilterBlock,
                    kBreak, kContinue, kWith, kScope, kDo };
  explicit Stmt(Kind k, int l) : kind(k), line(l) {}
  Kind kind;
  int line;
  std::string text;                       // kText
  ExprPtr expr;                           // kPrint, kSet value, kFor iterable, kCallBlock call, kDo
  std::vector<std::pair<ExprPtr, Body>> branches;  // kIf: (cond, body)...
  Body body;                              // main body
  Body else_body;                         // kIf else, kFor else
  Target target;                          // kFor, kSet, kSetBlock
  ExprPtr filter_cond;                    // kFor `if`
  bool recursive = false;                 // kFor
  std::string name;                       // kMacro name
  std::vector<MacroParam> params;         // kMacro params, kCallBlock caller params
  std::vector<FilterCall> filters;        // kFilterBlock, kSetBlock
  std::vector<std::pair<std::string, ExprPtr>> assigns;  // kWith
  bool uses_loop = true;                  // kFor: body/condition reference `loop` (set by the parser)
};

struct Template {
  Body body;
};

/// Whether `name` is referenced anywhere in the expression / statements (interpreter.cc).
bool expr_uses(const Expr* e, const std::string& name);
bool body_uses(const Body& b, const std::string& name);

/// Parses template source (trim_blocks, lstrip_blocks as transformers sets them). Throws
/// TemplateError with "syntax error at line N: ..." messages.
std::unique_ptr<Template> parse_template(const std::string& source, int max_nesting);

}  // namespace llmserve::jinja
