// Tree-walking evaluator for parsed templates (internal to chat_template/).
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "chat_template/ast.h"
#include "chat_template/chat_template.h"
#include "chat_template/value.h"

namespace llmserve::jinja {

struct Scope {
  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
  explicit Scope(std::shared_ptr<Scope> p = nullptr) : parent(std::move(p)) {}
  const Value* find(const std::string& name) const {
    for (const Scope* s = this; s; s = s->parent.get()) {
      auto it = s->vars.find(name);
      if (it != s->vars.end()) return &it->second;
    }
    return nullptr;
  }
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& opts);

  /// Renders `tpl` with `context` (a dict) as the top-level variables.
  std::string render(const Template& tpl, const Value& context);

  enum class Flow { kNormal, kBreak, kContinue };
  Flow exec(const Body& body, const ScopePtr& scope, std::string& out);
  Value eval(const Expr& e, const ScopePtr& scope);

  // Operations shared with the builtins.
  Value call(const Value& fn, CallArgs& args);
  Value getattr(const Value& obj, const std::string& name);
  Value getitem(const Value& obj, const Value& key);
  Value apply_filter(const std::string& name, const Value& v, CallArgs& args, int line);
  bool apply_test(const std::string& name, const Value& v, CallArgs& args);
  bool has_test(const std::string& name) const;
  /// Elements of an iterable (dict: keys, str: characters, Undefined: none); TypeError otherwise.
  std::vector<Value> iterate(const Value& v);
  Value binary(const std::string& op, const Value& a, const Value& b);
  bool contains(const Value& container, const Value& item);

  void tick();                                   // one unit of the step budget
  void check_string_size(size_t bytes) const;    // max_string_bytes
  void check_list_size(size_t n) const;          // max_list_items
  const RenderOptions& options() const { return opts_; }
  std::tm now() const;

 private:
  void append(std::string& out, std::string_view s) const;
  void assign(const Target& t, Value v, const ScopePtr& scope);
  Value make_macro(const Stmt& m, const ScopePtr& closure);
  Value call_macro(const Stmt& m, const ScopePtr& closure, CallArgs& args, bool uses_varargs, bool uses_kwargs, bool uses_caller);
  void run_for(const Stmt& s, const Value& iterable, const ScopePtr& scope, std::string& out, int depth);
  CallArgs eval_args(const ArgList& a, const ScopePtr& scope);
  Value slice(const Value& obj, const Value& start, const Value& stop, const Value& step);

  struct Depth {
    Interpreter& in;
    explicit Depth(Interpreter& i) : in(i) {
      if (++in.depth_ > in.opts_.max_recursion_depth)
        fail("maximum recursion depth exceeded (" + std::to_string(in.opts_.max_recursion_depth) + ")");
    }
    ~Depth() { --in.depth_; }
  };

  RenderOptions opts_;
  ScopePtr globals_;
  int depth_ = 0;
  uint64_t steps_ = 0;
  uint64_t loop_iterations_ = 0;
};

// builtins.cc
Value call_filter_builtin(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, bool& found);
bool call_test_builtin(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, bool& found);
bool is_builtin_test(const std::string& name);
/// A bound method of str/list/dict, or Undefined when `obj` has no such method.
Value bound_method(Interpreter& in, const Value& obj, const std::string& name);
void install_globals(Interpreter& in, Scope& globals);
/// Python printf-style `fmt % args`.
std::string py_percent_format(Interpreter& in, const std::string& fmt, const Value& args);
/// Argument `i` (positional) or `name` (keyword), else `def`.
Value arg_at(const CallArgs& a, size_t i, const char* name, Value def = Value());

}  // namespace llmserve::jinja
