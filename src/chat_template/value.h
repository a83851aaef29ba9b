// Values of the Jinja2 interpreter behind chat templates (see chat_template.h).
//
// A Value models the Python objects a chat template sees: Undefined (Jinja's default
// `Undefined`: prints as "", is falsy, iterates as empty; other uses raise), None, bool, int
// (64-bit; overflow is an error where Python would grow), float, str (UTF-8; lengths, indexing
// and slicing count code points as Python does), list / tuple, dict (insertion-ordered, like
// Python's dict; also Jinja's `namespace()` objects) and callables (macros, builtins, bound
// methods). Lists and dicts have reference semantics like Python objects.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace llmserve::jinja {

/// Thrown inside the interpreter; turned into a Status at the API boundary.
/// `raised` marks errors from the template's own raise_exception(msg).
struct TemplateError {
  std::string message;
  bool raised = false;
};
[[noreturn]] void fail(std::string message);

class Value;
class Interpreter;

struct ListData {
  std::vector<Value> items;
  bool is_tuple = false;
};

/// Insertion-ordered dict; keys compare like Python (1 == 1.0 == True).
struct DictData {
  std::vector<std::pair<Value, Value>> items;
  std::unordered_map<std::string, size_t> index;  // key_id(key) -> position in items
  bool is_namespace = false;                      // Jinja namespace(): attribute assignment

  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  void set(Value key, Value value);
};

struct CallArgs {
  std::vector<Value> pos;
  std::vector<std::pair<std::string, Value>> kw;
};

using NativeFn = std::function<Value(Interpreter&, CallArgs&)>;
struct Callable {
  std::string name;
  NativeFn fn;
};

class Value {
 public:
  enum class Type : uint8_t { kUndefined, kNone, kBool, kInt, kFloat, kString, kList, kDict, kCallable };

  Value() = default;  // Undefined
  static Value undefined(std::string hint = "") {
    Value v;
    if (!hint.empty()) v.s_ = std::make_shared<const std::string>(std::move(hint));
    return v;
  }
  static Value none() { Value v; v.type_ = Type::kNone; return v; }
  Value(bool b) : type_(Type::kBool), i_(b) {}                       // NOLINT
  Value(int v) : type_(Type::kInt), i_(v) {}                         // NOLINT
  Value(int64_t v) : type_(Type::kInt), i_(v) {}                     // NOLINT
  Value(double v) : type_(Type::kFloat), f_(v) {}                    // NOLINT
  Value(std::string s)                                               // NOLINT
      : type_(Type::kString), s_(std::make_shared<const std::string>(std::move(s))) {}
  Value(const char* s) : Value(std::string(s)) {}                    // NOLINT
  static Value list(std::vector<Value> items = {}, bool tuple = false);
  static Value dict();
  static Value callable(std::string name, NativeFn fn);

  Type type() const { return type_; }
  bool is_undefined() const { return type_ == Type::kUndefined; }
  bool is_none() const { return type_ == Type::kNone; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_int() const { return type_ == Type::kInt; }
  bool is_float() const { return type_ == Type::kFloat; }
  bool is_number() const { return type_ == Type::kInt || type_ == Type::kFloat || type_ == Type::kBool; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_list() const { return type_ == Type::kList; }
  bool is_tuple() const { return type_ == Type::kList && l_->is_tuple; }
  bool is_dict() const { return type_ == Type::kDict; }
  bool is_namespace() const { return type_ == Type::kDict && d_->is_namespace; }
  bool is_callable() const { return type_ == Type::kCallable; }

  bool as_bool() const { return i_ != 0; }
  int64_t as_int() const { return i_; }        // int or bool
  double as_float() const { return type_ == Type::kFloat ? f_ : static_cast<double>(i_); }
  const std::string& str() const { return *s_; }
  const std::vector<Value>& items() const { return l_->items; }
  std::vector<Value>& mutable_items() { return l_->items; }
  const DictData& dict_data() const { return *d_; }
  DictData& mutable_dict() { return *d_; }
  const Callable& fn() const { return *c_; }
  /// Undefined: the UndefinedError message an operation on it raises.
  std::string undefined_message() const;
  /// Identity of list/dict/callable payloads (Jinja `sameas`).
  const void* identity() const;

  bool truthy() const;
  /// Python str(): None -> "None", True -> "True", floats as repr, containers as repr.
  std::string to_str() const;
  /// Python repr().
  std::string repr() const;
  /// Python type name ("int", "str", "NoneType", ...), for error messages.
  std::string type_name() const;
  /// Jinja's object_type_repr ("dict object", "None", ...).
  std::string object_repr() const;

 private:
  Type type_ = Type::kUndefined;
  int64_t i_ = 0;
  double f_ = 0;
  std::shared_ptr<const std::string> s_;  // string, or the undefined hint
  std::shared_ptr<ListData> l_;
  std::shared_ptr<DictData> d_;
  std::shared_ptr<Callable> c_;
};

/// Python `==` (numbers across int/float/bool, containers element-wise; Undefined == Undefined).
bool py_equal(const Value& a, const Value& b);
/// Python `<` ordering; throws TypeError-style errors for unorderable types.
int py_compare(const Value& a, const Value& b, const char* op);
/// Hash key used by DictData (Python-equal keys give equal ids).
std::string key_id(const Value& key);

/// Python float repr (shortest round-trip, "1.0", "1e+20", "1e-05", "inf", "nan").
std::string py_float_repr(double v);
/// Python repr of a str.
std::string py_str_repr(std::string_view s);

struct JsonDumpOptions {
  bool ensure_ascii = false;
  int indent = -1;                 // < 0: no newlines
  std::string indent_str;          // used when indent_is_string
  bool indent_is_string = false;
  std::string item_sep = ", ";     // defaults follow json.dumps: "," when indenting
  std::string key_sep = ": ";
  bool sort_keys = false;
};
/// json.dumps(value, ...) as transformers' tojson filter calls it.
std::string json_dumps(const Value& v, const JsonDumpOptions& opts);

Value from_json(const nlohmann::ordered_json& j);
Value from_json(const nlohmann::json& j);
/// Values -> JSON (Undefined/callables are an error, tuples become arrays).
nlohmann::ordered_json to_json(const Value& v);

// UTF-8 helpers (code-point semantics for str operations).
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t c);
bool is_py_space(char32_t c);

}  // namespace llmserve::jinja
