#include "chat_template/value.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace llmserve::jinja {

void fail(std::string message) { throw TemplateError{std::move(message), false}; }

// ---------------------------------------------------------------- UTF-8

void utf8_append(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

// Invalid bytes decode to U+FFFD-free "raw" code points 0xDC80+byte (Python's surrogateescape),
// so that decode/encode round-trips any byte string.
std::u32string utf8_decode(std::string_view s) {
  std::u32string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<unsigned char>(s[i]);
    int len = b < 0x80 ? 1 : (b >> 5) == 6 ? 2 : (b >> 4) == 14 ? 3 : (b >> 3) == 30 ? 4 : 0;
    char32_t c = len == 1 ? b : len == 2 ? (b & 0x1F) : len == 3 ? (b & 0x0F) : (b & 0x07);
    bool ok = len > 0 && i + len <= s.size();
    for (int k = 1; ok && k < len; ++k) {
      const auto cb = static_cast<unsigned char>(s[i + k]);
      if ((cb & 0xC0) != 0x80) ok = false;
      c = (c << 6) | (cb & 0x3F);
    }
    if (!ok) {
      out += static_cast<char32_t>(0xDC00 + b);
      i += 1;
    } else {
      out += c;
      i += len;
    }
  }
  return out;
}

std::string utf8_encode(std::u32string_view s) {
  std::string out;
  out.reserve(s.size());
  for (char32_t c : s) {
    if (c >= 0xDC80 && c <= 0xDCFF) out += static_cast<char>(c - 0xDC00);
    else utf8_append(out, c);
  }
  return out;
}

bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || (c >= 0x1C && c <= 0x1F) || c == 0x85 ||
         c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

// ---------------------------------------------------------------- dict

std::string key_id(const Value& key) {
  switch (key.type()) {
    case Value::Type::kString: return "s" + key.str();
    case Value::Type::kBool:
    case Value::Type::kInt: return "i" + std::to_string(key.as_int());
    case Value::Type::kFloat: {
      const double f = key.as_float();
      if (std::floor(f) == f && std::fabs(f) < 9.2e18) return "i" + std::to_string(static_cast<int64_t>(f));
      return "f" + py_float_repr(f);
    }
    case Value::Type::kNone: return "n";
    case Value::Type::kList:
      if (key.is_tuple()) {
        std::string id = "t(";
        for (const Value& v : key.items()) id += key_id(v) + ",";
        return id + ")";
      }
      fail("unhashable type: 'list'");
    case Value::Type::kDict: fail("unhashable type: 'dict'");
    case Value::Type::kUndefined: return "u";
    case Value::Type::kCallable: return "c" + std::to_string(reinterpret_cast<uintptr_t>(key.identity()));
  }
  return "";
}

const Value* DictData::find(const Value& key) const {
  auto it = index.find(key_id(key));
  return it == index.end() ? nullptr : &items[it->second].second;
}
const Value* DictData::find(std::string_view key) const {
  std::string id = "s";
  id += key;
  auto it = index.find(id);
  return it == index.end() ? nullptr : &items[it->second].second;
}
void DictData::set(Value key, Value value) {
  std::string id = key_id(key);
  auto it = index.find(id);
  if (it != index.end()) {
    items[it->second].second = std::move(value);
  } else {
    index.emplace(std::move(id), items.size());
    items.emplace_back(std::move(key), std::move(value));
  }
}

// ---------------------------------------------------------------- Value

Value Value::list(std::vector<Value> items, bool tuple) {
  Value v;
  v.type_ = Type::kList;
  v.l_ = std::make_shared<ListData>();
  v.l_->items = std::move(items);
  v.l_->is_tuple = tuple;
  return v;
}
Value Value::dict() {
  Value v;
  v.type_ = Type::kDict;
  v.d_ = std::make_shared<DictData>();
  return v;
}
Value Value::callable(std::string name, NativeFn fn) {
  Value v;
  v.type_ = Type::kCallable;
  v.c_ = std::make_shared<Callable>(Callable{std::move(name), std::move(fn)});
  return v;
}

std::string Value::undefined_message() const { return s_ ? *s_ : "value is undefined"; }

const void* Value::identity() const {
  switch (type_) {
    case Type::kList: return l_.get();
    case Type::kDict: return d_.get();
    case Type::kCallable: return c_.get();
    case Type::kString: return s_.get();
    default: return nullptr;
  }
}

bool Value::truthy() const {
  switch (type_) {
    case Type::kUndefined:
    case Type::kNone: return false;
    case Type::kBool:
    case Type::kInt: return i_ != 0;
    case Type::kFloat: return f_ != 0.0;
    case Type::kString: return !s_->empty();
    case Type::kList: return !l_->items.empty();
    case Type::kDict: return d_->is_namespace || !d_->items.empty();
    case Type::kCallable: return true;
  }
  return false;
}

std::string Value::type_name() const {
  switch (type_) {
    case Type::kUndefined: return "Undefined";
    case Type::kNone: return "NoneType";
    case Type::kBool: return "bool";
    case Type::kInt: return "int";
    case Type::kFloat: return "float";
    case Type::kString: return "str";
    case Type::kList: return l_->is_tuple ? "tuple" : "list";
    case Type::kDict: return d_->is_namespace ? "Namespace" : "dict";
    case Type::kCallable: return "function";
  }
  return "object";
}

std::string Value::object_repr() const {
  if (type_ == Type::kNone) return "None";
  return type_name() + " object";
}

std::string py_float_repr(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v < 0 ? "-inf" : "inf";
  if (v == 0) return std::signbit(v) ? "-0.0" : "0.0";
  char buf[64];
  auto res = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::scientific);
  std::string sci(buf, res.ptr);  // e.g. "-1.2345e+02"
  bool neg = sci[0] == '-';
  if (neg) sci.erase(0, 1);
  const size_t epos = sci.find('e');
  std::string digits = sci.substr(0, epos);
  digits.erase(std::remove(digits.begin(), digits.end(), '.'), digits.end());
  const int exp = std::stoi(sci.substr(epos + 1));
  std::string out;
  if (exp >= -5 && exp < 16) {
    // Python's repr switches to exponent notation below 1e-4 (decimal exponent < -4).
    if (exp < -4) goto scientific;
    if (exp < 0) {
      out = "0." + std::string(static_cast<size_t>(-exp - 1), '0') + digits;
    } else if (static_cast<int>(digits.size()) <= exp + 1) {
      out = digits + std::string(static_cast<size_t>(exp + 1 - static_cast<int>(digits.size())), '0') + ".0";
    } else {
      out = digits.substr(0, static_cast<size_t>(exp + 1)) + "." + digits.substr(static_cast<size_t>(exp + 1));
    }
    return neg ? "-" + out : out;
  }
scientific:
  out = digits.substr(0, 1);
  if (digits.size() > 1) out += "." + digits.substr(1);
  char eb[16];
  std::snprintf(eb, sizeof eb, "e%c%02d", exp < 0 ? '-' : '+', exp < 0 ? -exp : exp);
  out += eb;
  return neg ? "-" + out : out;
}

static bool py_printable(char32_t c) {
  if (c < 0x20 || c == 0x7F) return false;
  if (c >= 0x80 && c <= 0xA0) return false;  // C1 controls and NBSP (Python: not printable)
  if (c == 0xAD) return false;
  if (c >= 0xDC80 && c <= 0xDCFF) return false;
  if (c == 0x2028 || c == 0x2029 || (c >= 0x200B && c <= 0x200F) || (c >= 0x202A && c <= 0x202E)) return false;
  return true;
}

std::string py_str_repr(std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char q = (has_single && !has_double) ? '"' : '\'';
  std::string out(1, q);
  for (char32_t c : utf8_decode(s)) {
    if (c == static_cast<char32_t>(q) || c == '\\') { out += '\\'; out += static_cast<char>(c); }
    else if (c == '\n') out += "\\n";
    else if (c == '\r') out += "\\r";
    else if (c == '\t') out += "\\t";
    else if (!py_printable(c)) {
      char b[16];
      if (c >= 0xDC80 && c <= 0xDCFF) std::snprintf(b, sizeof b, "\\udc%02x", static_cast<unsigned>(c & 0xFF));
      else if (c < 0x100) std::snprintf(b, sizeof b, "\\x%02x", static_cast<unsigned>(c));
      else std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(c));
      out += b;
    } else utf8_append(out, c);
  }
  out += q;
  return out;
}

std::string Value::repr() const {
  switch (type_) {
    case Type::kUndefined: return "Undefined";
    case Type::kString: return py_str_repr(*s_);
    case Type::kList: {
      std::string out = l_->is_tuple ? "(" : "[";
      for (size_t i = 0; i < l_->items.size(); ++i) {
        if (i) out += ", ";
        out += l_->items[i].repr();
      }
      if (l_->is_tuple && l_->items.size() == 1) out += ",";
      return out + (l_->is_tuple ? ")" : "]");
    }
    case Type::kDict: {
      std::string out = d_->is_namespace ? "<Namespace {" : "{";
      for (size_t i = 0; i < d_->items.size(); ++i) {
        if (i) out += ", ";
        out += d_->items[i].first.repr() + ": " + d_->items[i].second.repr();
      }
      return out + (d_->is_namespace ? "}>" : "}");
    }
    case Type::kCallable: return "<function " + c_->name + ">";
    default: return to_str();
  }
}

std::string Value::to_str() const {
  switch (type_) {
    case Type::kUndefined: return "";
    case Type::kNone: return "None";
    case Type::kBool: return i_ ? "True" : "False";
    case Type::kInt: return std::to_string(i_);
    case Type::kFloat: return py_float_repr(f_);
    case Type::kString: return *s_;
    default: return repr();
  }
}

// ---------------------------------------------------------------- comparisons

bool py_equal(const Value& a, const Value& b) {
  using T = Value::Type;
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) return a.as_float() == b.as_float();
    return a.as_int() == b.as_int();
  }
  if (a.type() != b.type()) return false;
  switch (a.type()) {
    case T::kUndefined:
    case T::kNone: return true;
    case T::kString: return a.str() == b.str();
    case T::kList: {
      if (a.is_tuple() != b.is_tuple() || a.items().size() != b.items().size()) return false;
      for (size_t i = 0; i < a.items().size(); ++i)
        if (!py_equal(a.items()[i], b.items()[i])) return false;
      return true;
    }
    case T::kDict: {
      if (a.is_namespace() || b.is_namespace()) return a.identity() == b.identity();
      const auto& da = a.dict_data();
      const auto& db = b.dict_data();
      if (da.items.size() != db.items.size()) return false;
      for (const auto& [k, v] : da.items) {
        const Value* o = db.find(k);
        if (!o || !py_equal(v, *o)) return false;
      }
      return true;
    }
    case T::kCallable: return a.identity() == b.identity();
    default: return false;
  }
}

int py_compare(const Value& a, const Value& b, const char* op) {
  if (a.is_undefined() || b.is_undefined())
    fail(a.is_undefined() ? a.undefined_message() : b.undefined_message());
  if (a.is_number() && b.is_number()) {
    if (a.is_float() || b.is_float()) {
      const double x = a.as_float(), y = b.as_float();
      return x < y ? -1 : x > y ? 1 : 0;
    }
    return a.as_int() < b.as_int() ? -1 : a.as_int() > b.as_int() ? 1 : 0;
  }
  if (a.is_string() && b.is_string()) {
    // UTF-8 byte order equals code point order.
    const int c = a.str().compare(b.str());
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!py_equal(x[i], y[i])) return py_compare(x[i], y[i], op);
    }
    return x.size() < y.size() ? -1 : x.size() > y.size() ? 1 : 0;
  }
  fail(std::string("'") + op + "' not supported between instances of '" + a.type_name() +
       "' and '" + b.type_name() + "'");
}

// ---------------------------------------------------------------- JSON

static void json_escape(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (char32_t c : utf8_decode(s)) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default: {
        char b[16];
        if (c < 0x20 || (ensure_ascii && c > 0x7E && c != 0x7F) || (c >= 0xDC80 && c <= 0xDCFF)) {
          if (c >= 0x10000) {
            const char32_t v = c - 0x10000;
            std::snprintf(b, sizeof b, "\\u%04x\\u%04x", static_cast<unsigned>(0xD800 + (v >> 10)),
                          static_cast<unsigned>(0xDC00 + (v & 0x3FF)));
          } else {
            std::snprintf(b, sizeof b, "\\u%04x", static_cast<unsigned>(c));
          }
          out += b;
        } else {
          utf8_append(out, c);
        }
      }
    }
  }
  out += '"';
}

static std::string json_float(double f) {
  if (std::isnan(f)) return "NaN";
  if (std::isinf(f)) return f < 0 ? "-Infinity" : "Infinity";
  return py_float_repr(f);
}

static void json_dump_rec(std::string& out, const Value& v, const JsonDumpOptions& o, int level) {
  auto newline = [&](int lvl) {
    if (o.indent < 0 && !o.indent_is_string) return;
    out += '\n';
    for (int i = 0; i < lvl; ++i) out += o.indent_is_string ? o.indent_str : std::string(static_cast<size_t>(o.indent), ' ');
  };
  if (level > 500) fail("tojson: value nested too deeply");
  switch (v.type()) {
    case Value::Type::kNone: out += "null"; return;
    case Value::Type::kBool: out += v.as_bool() ? "true" : "false"; return;
    case Value::Type::kInt: out += std::to_string(v.as_int()); return;
    case Value::Type::kFloat: out += json_float(v.as_float()); return;
    case Value::Type::kString: json_escape(out, v.str(), o.ensure_ascii); return;
    case Value::Type::kList: {
      if (v.items().empty()) { out += "[]"; return; }
      out += '[';
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += o.item_sep;
        newline(level + 1);
        json_dump_rec(out, v.items()[i], o, level + 1);
      }
      newline(level);
      out += ']';
      return;
    }
    case Value::Type::kDict: {
      if (v.is_namespace()) fail("Object of type Namespace is not JSON serializable");
      const auto& d = v.dict_data();
      if (d.items.empty()) { out += "{}"; return; }
      std::vector<std::pair<std::string, const Value*>> entries;
      for (const auto& [k, val] : d.items) {
        std::string key;
        switch (k.type()) {
          case Value::Type::kString: key = k.str(); break;
          case Value::Type::kNone: key = "null"; break;
          case Value::Type::kBool: key = k.as_bool() ? "true" : "false"; break;
          case Value::Type::kInt: key = std::to_string(k.as_int()); break;
          case Value::Type::kFloat: key = json_float(k.as_float()); break;
          default: fail("keys must be str, int, float, bool or None, not " + k.type_name());
        }
        entries.emplace_back(std::move(key), &val);
      }
      if (o.sort_keys)
        std::stable_sort(entries.begin(), entries.end(), [](auto& a, auto& b) { return a.first < b.first; });
      out += '{';
      for (size_t i = 0; i < entries.size(); ++i) {
        if (i) out += o.item_sep;
        newline(level + 1);
        json_escape(out, entries[i].first, o.ensure_ascii);
        out += o.key_sep;
        json_dump_rec(out, *entries[i].second, o, level + 1);
      }
      newline(level);
      out += '}';
      return;
    }
    case Value::Type::kUndefined: fail("Object of type Undefined is not JSON serializable");
    case Value::Type::kCallable: fail("Object of type function is not JSON serializable");
  }
}

std::string json_dumps(const Value& v, const JsonDumpOptions& opts) {
  std::string out;
  json_dump_rec(out, v, opts, 0);
  return out;
}

template <typename J>
static Value from_json_impl(const J& j, int depth) {
  if (depth > 1000) fail("JSON input nested too deeply");
  switch (j.type()) {
    case nlohmann::json::value_t::null: return Value::none();
    case nlohmann::json::value_t::boolean: return Value(j.template get<bool>());
    case nlohmann::json::value_t::number_integer: return Value(j.template get<int64_t>());
    case nlohmann::json::value_t::number_unsigned: {
      const auto u = j.template get<uint64_t>();
      if (u > static_cast<uint64_t>(INT64_MAX)) return Value(static_cast<double>(u));
      return Value(static_cast<int64_t>(u));
    }
    case nlohmann::json::value_t::number_float: return Value(j.template get<double>());
    case nlohmann::json::value_t::string: return Value(j.template get<std::string>());
    case nlohmann::json::value_t::array: {
      std::vector<Value> items;
      items.reserve(j.size());
      for (const auto& e : j) items.push_back(from_json_impl(e, depth + 1));
      return Value::list(std::move(items));
    }
    case nlohmann::json::value_t::object: {
      Value d = Value::dict();
      for (auto it = j.begin(); it != j.end(); ++it)
        d.mutable_dict().set(Value(it.key()), from_json_impl(it.value(), depth + 1));
      return d;
    }
    default: return Value::none();
  }
}
Value from_json(const nlohmann::ordered_json& j) { return from_json_impl(j, 0); }
Value from_json(const nlohmann::json& j) { return from_json_impl(j, 0); }

nlohmann::ordered_json to_json(const Value& v) {
  switch (v.type()) {
    case Value::Type::kNone: return nullptr;
    case Value::Type::kBool: return v.as_bool();
    case Value::Type::kInt: return v.as_int();
    case Value::Type::kFloat: return v.as_float();
    case Value::Type::kString: return v.str();
    case Value::Type::kList: {
      auto a = nlohmann::ordered_json::array();
      for (const Value& e : v.items()) a.push_back(to_json(e));
      return a;
    }
    case Value::Type::kDict: {
      auto o = nlohmann::ordered_json::object();
      for (const auto& [k, e] : v.dict_data().items) o[k.to_str()] = to_json(e);
      return o;
    }
    default: fail("cannot convert " + v.type_name() + " to JSON");
  }
}

}  // namespace llmserve::jinja
