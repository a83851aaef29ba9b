// Filters, tests, str/list/dict methods and globals (Jinja2 3.1 builtins as the sandboxed
// environment transformers uses exposes them).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

#include "chat_template/interpreter.h"

namespace llmserve::jinja {

Value arg_at(const CallArgs& a, size_t i, const char* name, Value def) {
  for (const auto& [k, v] : a.kw)
    if (k == name) return v;
  if (i < a.pos.size()) return a.pos[i];
  return def;
}

namespace {

// ---------------------------------------------------------------- text helpers

char32_t cp_lower(char32_t c) {
  if (c >= 'A' && c <= 'Z') return c + 32;
  if (c < 0x80) return c;
  if (c >= 0xC0 && c <= 0xDE && c != 0xD7) return c + 32;
  if (c >= 0x391 && c <= 0x3AB && c != 0x3A2) return c + 32;
  if (c >= 0x410 && c <= 0x42F) return c + 32;
  if (c >= 0x400 && c <= 0x40F) return c + 80;
  if (c >= 0x100 && c <= 0x17F && c != 0x130 && c != 0x138 && c != 0x149 && c != 0x17F) {
    // Latin Extended-A: pairs (even upper, odd lower) except the 0x139-0x148 / 0x179-0x17E runs.
    const bool odd_run = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_run ? (c % 2 == 1) : (c % 2 == 0)) return c + 1;
  }
  return c;
}
char32_t cp_upper(char32_t c) {
  if (c >= 'a' && c <= 'z') return c - 32;
  if (c < 0x80) return c;
  if (c >= 0xE0 && c <= 0xFE && c != 0xF7) return c - 32;
  if (c == 0xFF) return 0x178;
  if (c >= 0x3B1 && c <= 0x3CB && c != 0x3C2) return c - 32;
  if (c == 0x3C2) return 0x3A3;
  if (c >= 0x430 && c <= 0x44F) return c - 32;
  if (c >= 0x450 && c <= 0x45F) return c - 80;
  if (c >= 0x100 && c <= 0x17F && c != 0x131 && c != 0x138 && c != 0x149 && c != 0x17F) {
    const bool odd_run = (c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E);
    if (odd_run ? (c % 2 == 0) : (c % 2 == 1)) return c - 1;
  }
  return c;
}
bool cp_is_cased(char32_t c) { return cp_lower(c) != c || cp_upper(c) != c || c == 0xDF; }
bool cp_is_alpha(char32_t c) {
  if (c < 0x80) return std::isalpha(static_cast<int>(c)) != 0;
  return !is_py_space(c) && c != 0xA0 && !(c >= 0x2000 && c <= 0x206F) && !(c >= 0x3000 && c <= 0x303F) &&
         !(c >= 0xFF00 && c <= 0xFF0F) && !(c >= 0x80 && c <= 0xBF && c != 0xAA && c != 0xB5 && c != 0xBA);
}
bool cp_is_digit(char32_t c) { return c >= '0' && c <= '9'; }

std::string map_cps(const std::string& s, char32_t (*f)(char32_t)) {
  std::u32string u = utf8_decode(s);
  for (auto& c : u) c = f(c);
  return utf8_encode(u);
}
std::string str_lower(const std::string& s) { return map_cps(s, cp_lower); }
std::string str_upper(const std::string& s) { return map_cps(s, cp_upper); }

std::string str_capitalize(const std::string& s) {
  std::u32string u = utf8_decode(s);
  for (size_t i = 0; i < u.size(); ++i) u[i] = i == 0 ? cp_upper(u[i]) : cp_lower(u[i]);
  return utf8_encode(u);
}

// Python str.title(): a cased character after an uncased one starts a word.
std::string str_title(const std::string& s) {
  std::u32string u = utf8_decode(s);
  bool prev_cased = false;
  for (auto& c : u) {
    const bool cased = cp_is_cased(c);
    c = prev_cased ? cp_lower(c) : cp_upper(c);
    prev_cased = cased;
  }
  return utf8_encode(u);
}

std::u32string strip_u(const std::u32string& u, const Value& chars, bool left, bool right) {
  std::u32string set;
  const bool ws = chars.is_none() || chars.is_undefined();
  if (!ws) {
    if (!chars.is_string()) fail("strip arg must be None or str");
    set = utf8_decode(chars.str());
  }
  auto in_set = [&](char32_t c) { return ws ? is_py_space(c) : set.find(c) != std::u32string::npos; };
  size_t b = 0, e = u.size();
  if (left)
    while (b < e && in_set(u[b])) ++b;
  if (right)
    while (e > b && in_set(u[e - 1])) --e;
  return u.substr(b, e - b);
}
std::string str_strip(const std::string& s, const Value& chars, bool left = true, bool right = true) {
  return utf8_encode(strip_u(utf8_decode(s), chars, left, right));
}

std::vector<std::string> str_split(const std::string& s, const Value& sep_v, int64_t maxsplit) {
  std::vector<std::string> out;
  if (sep_v.is_none() || sep_v.is_undefined()) {
    const std::u32string u = utf8_decode(s);
    size_t i = 0;
    const size_t n = u.size();
    while (true) {
      while (i < n && is_py_space(u[i])) ++i;
      if (i >= n) break;
      if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) {
        out.push_back(utf8_encode(u.substr(i)));
        break;
      }
      size_t j = i;
      while (j < n && !is_py_space(u[j])) ++j;
      out.push_back(utf8_encode(u.substr(i, j - i)));
      i = j;
    }
    return out;
  }
  if (!sep_v.is_string()) fail("must be str or None, not " + sep_v.type_name());
  const std::string& sep = sep_v.str();
  if (sep.empty()) fail("empty separator");
  size_t start = 0;
  while (true) {
    if (maxsplit >= 0 && static_cast<int64_t>(out.size()) >= maxsplit) break;
    const size_t p = s.find(sep, start);
    if (p == std::string::npos) break;
    out.push_back(s.substr(start, p - start));
    start = p + sep.size();
  }
  out.push_back(s.substr(start));
  return out;
}

std::vector<std::string> str_rsplit(const std::string& s, const Value& sep_v, int64_t maxsplit) {
  if (maxsplit < 0) return str_split(s, sep_v, -1);
  std::vector<std::string> out;
  if (sep_v.is_none() || sep_v.is_undefined()) {
    const std::u32string u = utf8_decode(s);
    int64_t i = static_cast<int64_t>(u.size());
    while (true) {
      while (i > 0 && is_py_space(u[static_cast<size_t>(i - 1)])) --i;
      if (i <= 0) break;
      if (static_cast<int64_t>(out.size()) >= maxsplit) {
        out.push_back(utf8_encode(u.substr(0, static_cast<size_t>(i))));
        break;
      }
      int64_t j = i;
      while (j > 0 && !is_py_space(u[static_cast<size_t>(j - 1)])) --j;
      out.push_back(utf8_encode(u.substr(static_cast<size_t>(j), static_cast<size_t>(i - j))));
      i = j;
    }
    std::reverse(out.begin(), out.end());
    return out;
  }
  if (!sep_v.is_string()) fail("must be str or None, not " + sep_v.type_name());
  const std::string& sep = sep_v.str();
  if (sep.empty()) fail("empty separator");
  size_t end = s.size();
  while (static_cast<int64_t>(out.size()) < maxsplit) {
    if (end < sep.size()) break;
    const size_t p = s.rfind(sep, end - sep.size());
    if (p == std::string::npos) break;
    out.push_back(s.substr(p + sep.size(), end - p - sep.size()));
    end = p;
  }
  out.push_back(s.substr(0, end));
  std::reverse(out.begin(), out.end());
  return out;
}

std::string str_replace(Interpreter& in, const std::string& s, const std::string& old, const std::string& rep, int64_t count) {
  std::string out;
  if (old.empty()) {
    // Python inserts `rep` before every character and at the end.
    const std::u32string u = utf8_decode(s);
    const uint64_t slots = u.size() + 1;
    const uint64_t n = count < 0 ? slots : std::min<uint64_t>(slots, static_cast<uint64_t>(count));
    in.check_string_size(s.size() + n * rep.size());
    for (size_t i = 0; i <= u.size(); ++i) {
      if (i < n) out += rep;
      if (i < u.size()) utf8_append(out, u[i]);
    }
    return out;
  }
  uint64_t occurrences = 0;
  for (size_t p = s.find(old); p != std::string::npos && (count < 0 || occurrences < static_cast<uint64_t>(count));
       p = s.find(old, p + old.size()))
    ++occurrences;
  if (rep.size() > old.size()) in.check_string_size(s.size() + occurrences * (rep.size() - old.size()));
  size_t start = 0;
  uint64_t done = 0;
  while (done < occurrences) {
    const size_t p = s.find(old, start);
    out.append(s, start, p - start);
    out += rep;
    start = p + old.size();
    ++done;
  }
  out.append(s, start, std::string::npos);
  return out;
}

std::vector<std::string> str_splitlines(const std::string& s, bool keepends) {
  std::vector<std::string> out;
  const std::u32string u = utf8_decode(s);
  size_t start = 0, i = 0;
  auto is_break = [](char32_t c) {
    return c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D || c == 0x1E || c == 0x85 ||
           c == 0x2028 || c == 0x2029;
  };
  while (i < u.size()) {
    if (is_break(u[i])) {
      size_t end = i + 1;
      if (u[i] == '\r' && end < u.size() && u[end] == '\n') ++end;
      out.push_back(utf8_encode(u.substr(start, (keepends ? end : i) - start)));
      start = i = end;
    } else {
      ++i;
    }
  }
  if (start < u.size()) out.push_back(utf8_encode(u.substr(start)));
  return out;
}

int64_t cp_len(const std::string& s) {
  int64_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

std::string pad(Interpreter& in, const std::string& s, int64_t width, const std::string& fill, char align) {
  const int64_t len = cp_len(s);
  if (width <= len) return s;
  const int64_t total = width - len;
  in.check_string_size(s.size() + static_cast<size_t>(total) * fill.size());
  int64_t left = align == '<' ? 0 : align == '>' ? total : total / 2 + (total & width & 1);
  std::string out;
  for (int64_t i = 0; i < left; ++i) out += fill;
  out += s;
  for (int64_t i = 0; i < total - left; ++i) out += fill;
  return out;
}

Value str_list(const std::vector<std::string>& v) {
  std::vector<Value> items;
  items.reserve(v.size());
  for (const auto& s : v) items.emplace_back(s);
  return Value::list(std::move(items));
}

int64_t to_int_arg(const Value& v, const char* what) {
  if (v.is_int() || v.is_bool()) return v.as_int();
  if (v.is_undefined()) fail(v.undefined_message());
  fail(std::string("'") + v.type_name() + "' object cannot be interpreted as an integer (" + what + ")");
}

// ---------------------------------------------------------------- printf-style

std::string format_number_spec(const std::string& spec, char conv, const Value& v) {
  // Width and precision are bounded (a template asking for "%1000000000d" gets an error, not
  // a gigabyte of padding), and the result is never truncated.
  for (size_t p = 0; p < spec.size();) {
    if (spec[p] < '0' || spec[p] > '9') {
      ++p;
      continue;
    }
    size_t q = p;
    while (q < spec.size() && spec[q] >= '0' && spec[q] <= '9') ++q;
    if (q - p > 4 || std::stoi(spec.substr(p, q - p)) > 4096)
      fail("%-format width or precision too large (limit 4096): %" + spec + conv);
    p = q;
  }
  char buf[8192];
  const std::string f = "%" + spec + conv;
  if (conv == 'd' || conv == 'i' || conv == 'u' || conv == 'x' || conv == 'X' || conv == 'o') {
    int64_t i;
    if (v.is_float() && !(std::fabs(v.as_float()) < 9.2e18))
      fail(std::string("%") + conv + " format: " + std::to_string(v.as_float()) +
           " does not fit a 64-bit integer");
    if (v.is_float()) i = static_cast<int64_t>(std::trunc(v.as_float()));
    else if (v.is_int() || v.is_bool()) i = v.as_int();
    else fail(std::string("%") + conv + " format: a real number is required, not " + v.type_name());
    const std::string f2 = "%" + spec + "ll" + (conv == 'i' || conv == 'u' ? 'd' : conv);
    std::snprintf(buf, sizeof buf, f2.c_str(), static_cast<long long>(i));
  } else {
    if (!v.is_number()) fail(std::string("must be real number, not ") + v.type_name());
    std::snprintf(buf, sizeof buf, f.c_str(), v.as_float());
  }
  return buf;
}

}  // namespace

std::string py_percent_format(Interpreter& in, const std::string& fmt, const Value& args) {
  std::vector<Value> list;
  const Value* mapping = nullptr;
  if (args.is_tuple()) list = args.items();
  else if (args.is_dict()) mapping = &args;
  else list.push_back(args);
  if (mapping) list.clear();
  std::string out;
  size_t ai = 0;
  size_t i = 0;
  while (i < fmt.size()) {
    const char c = fmt[i];
    if (c != '%') {
      out += c;
      ++i;
      continue;
    }
    ++i;
    if (i >= fmt.size()) fail("incomplete format");
    const Value* arg = nullptr;
    Value keyed;
    if (fmt[i] == '(') {
      const size_t close = fmt.find(')', i);
      if (close == std::string::npos) fail("incomplete format key");
      if (!mapping) fail("format requires a mapping");
      const Value* v = mapping->dict_data().find(std::string_view(fmt).substr(i + 1, close - i - 1));
      if (!v) fail("'" + fmt.substr(i + 1, close - i - 1) + "'");
      keyed = *v;
      arg = &keyed;
      i = close + 1;
    }
    std::string spec;
    while (i < fmt.size() && std::strchr("-+ #0", fmt[i])) spec += fmt[i++];
    while (i < fmt.size() && (std::isdigit(static_cast<unsigned char>(fmt[i])) || fmt[i] == '.')) spec += fmt[i++];
    if (spec.size() > 20) fail("format spec too long");
    while (i < fmt.size() && (fmt[i] == 'l' || fmt[i] == 'h' || fmt[i] == 'L')) ++i;
    if (i >= fmt.size()) fail("incomplete format");
    const char conv = fmt[i++];
    if (conv == '%') {
      out += '%';
      continue;
    }
    if (!arg) {
      if (mapping) arg = mapping;
      else if (ai < list.size()) arg = &list[ai++];
      else fail("not enough arguments for format string");
    }
    switch (conv) {
      case 's':
      case 'r':
      case 'a': {
        std::string s = conv == 's' ? arg->to_str() : arg->repr();
        const size_t dot = spec.find('.');
        if (dot != std::string::npos) {
          const int64_t prec = std::atoll(spec.c_str() + dot + 1);
          std::u32string u = utf8_decode(s);
          if (static_cast<int64_t>(u.size()) > prec) s = utf8_encode(u.substr(0, static_cast<size_t>(prec)));
          spec.resize(dot);
        }
        const bool left = spec.find('-') != std::string::npos;
        std::string digits;
        for (char ch : spec)
          if (std::isdigit(static_cast<unsigned char>(ch)) && !(digits.empty() && ch == '0')) digits += ch;
        const int64_t width = digits.empty() ? 0 : std::atoll(digits.c_str());
        out += pad(in, s, width, " ", left ? '<' : '>');
        break;
      }
      case 'c':
        if (arg->is_string()) out += arg->str();
        else utf8_append(out, static_cast<char32_t>(to_int_arg(*arg, "%c")));
        break;
      case 'd': case 'i': case 'u': case 'x': case 'X': case 'o':
      case 'f': case 'F': case 'e': case 'E': case 'g': case 'G':
        out += format_number_spec(spec, conv, *arg);
        break;
      default: fail(std::string("unsupported format character '") + conv + "'");
    }
    in.check_string_size(out.size());
  }
  if (!mapping && ai < list.size()) fail("not all arguments converted during string formatting");
  return out;
}

namespace {

// str.format(): {} {0} {name} {name.attr} {0[key]}, conversions !s !r, and format specs
// [[fill]align][sign][0][width][,][.precision][type].
std::string apply_format_spec(Interpreter& in, const Value& v, const std::string& spec) {
  if (spec.empty()) return v.to_str();
  size_t i = 0;
  std::string fill = " ";
  char align = 0;
  auto is_align = [](char c) { return c == '<' || c == '>' || c == '^' || c == '='; };
  const std::u32string u = utf8_decode(spec);
  if (u.size() >= 2 && is_align(static_cast<char>(u[1] < 0x80 ? u[1] : 0))) {
    fill = utf8_encode(u.substr(0, 1));
    align = static_cast<char>(u[1]);
    i = fill.size() + 1;
  } else if (!spec.empty() && is_align(spec[0])) {
    align = spec[0];
    i = 1;
  }
  std::string num_spec;
  if (i < spec.size() && (spec[i] == '+' || spec[i] == '-' || spec[i] == ' ')) num_spec += spec[i++];
  if (i < spec.size() && spec[i] == '0') {
    if (!align) { fill = "0"; align = '='; }
    ++i;
  }
  int64_t width = 0;
  while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) width = width * 10 + (spec[i++] - '0');
  if (width > 100000) fail("format width too large");
  if (i < spec.size() && spec[i] == ',') ++i;
  std::string prec;
  if (i < spec.size() && spec[i] == '.') {
    ++i;
    while (i < spec.size() && std::isdigit(static_cast<unsigned char>(spec[i]))) prec += spec[i++];
    if (prec.size() > 3) fail("format precision too large");
  }
  const char type = i < spec.size() ? spec[i] : 0;
  std::string s;
  if (type == 0 || type == 's') {
    if (type == 's' && !v.is_string()) fail("Unknown format code 's' for object of type '" + v.type_name() + "'");
    s = v.to_str();
    if (!prec.empty()) {
      std::u32string su = utf8_decode(s);
      const size_t p = std::stoul(prec);
      if (su.size() > p) s = utf8_encode(su.substr(0, p));
    }
    if (!align) align = v.is_number() ? '>' : '<';
  } else {
    std::string ns = num_spec;
    if (!prec.empty()) ns += "." + prec;
    char conv = type == 'n' ? 'g' : type;
    if (type == '%') {
      Value scaled(v.as_float() * 100.0);
      s = format_number_spec(ns.empty() ? ".6" : ns, 'f', scaled) + "%";
    } else {
      if ((conv == 'd' || conv == 'x' || conv == 'X' || conv == 'o' || conv == 'b') && v.is_float())
        fail(std::string("Unknown format code '") + conv + "' for object of type 'float'");
      if (conv == 'b') {
        int64_t x = to_int_arg(v, "b");
        std::string bits;
        const bool neg = x < 0;
        uint64_t ux = neg ? static_cast<uint64_t>(-(x + 1)) + 1 : static_cast<uint64_t>(x);
        do { bits.insert(bits.begin(), static_cast<char>('0' + (ux & 1))); ux >>= 1; } while (ux);
        s = (neg ? "-" : "") + bits;
      } else {
        s = format_number_spec(ns, conv, v);
      }
    }
    if (!align) align = '>';
  }
  if (align == '=') {
    std::string sign;
    if (!s.empty() && (s[0] == '-' || s[0] == '+' || s[0] == ' ')) { sign = s.substr(0, 1); s.erase(0, 1); }
    return sign + pad(in, s, width - static_cast<int64_t>(sign.size()), fill, '>');
  }
  return pad(in, s, width, fill, align);
}

std::string py_str_format(Interpreter& in, const std::string& fmt, CallArgs& a) {
  std::string out;
  size_t auto_idx = 0;
  size_t i = 0;
  while (i < fmt.size()) {
    const char c = fmt[i];
    if (c == '{' && i + 1 < fmt.size() && fmt[i + 1] == '{') { out += '{'; i += 2; continue; }
    if (c == '}' && i + 1 < fmt.size() && fmt[i + 1] == '}') { out += '}'; i += 2; continue; }
    if (c == '}') fail("Single '}' encountered in format string");
    if (c != '{') { out += c; ++i; continue; }
    const size_t close = fmt.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = fmt.substr(i + 1, close - i - 1);
    i = close + 1;
    std::string spec, conv;
    if (auto colon = field.find(':'); colon != std::string::npos) { spec = field.substr(colon + 1); field.resize(colon); }
    if (auto bang = field.find('!'); bang != std::string::npos) { conv = field.substr(bang + 1); field.resize(bang); }
    size_t name_end = 0;
    while (name_end < field.size() && field[name_end] != '.' && field[name_end] != '[') ++name_end;
    const std::string head = field.substr(0, name_end);
    Value v;
    if (head.empty()) {
      if (auto_idx >= a.pos.size()) fail("Replacement index " + std::to_string(auto_idx) + " out of range for positional args tuple");
      v = a.pos[auto_idx++];
    } else if (std::all_of(head.begin(), head.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); })) {
      const size_t k = std::stoul(head);
      if (k >= a.pos.size()) fail("Replacement index " + head + " out of range for positional args tuple");
      v = a.pos[k];
    } else {
      bool found = false;
      for (const auto& [k, val] : a.kw)
        if (k == head) { v = val; found = true; }
      if (!found) fail("'" + head + "'");
    }
    size_t p = name_end;
    while (p < field.size()) {
      if (field[p] == '.') {
        size_t q = p + 1;
        while (q < field.size() && field[q] != '.' && field[q] != '[') ++q;
        v = in.getattr(v, field.substr(p + 1, q - p - 1));
        p = q;
      } else {
        const size_t q = field.find(']', p);
        if (q == std::string::npos) fail("Missing ']' in format string");
        const std::string key = field.substr(p + 1, q - p - 1);
        const bool numeric = !key.empty() && std::all_of(key.begin(), key.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
        v = in.getitem(v, numeric ? Value(static_cast<int64_t>(std::stoll(key))) : Value(key));
        p = q + 1;
      }
    }
    if (conv == "r" || conv == "a") v = Value(v.repr());
    else if (conv == "s") v = Value(v.to_str());
    out += apply_format_spec(in, v, spec);
    in.check_string_size(out.size());
  }
  return out;
}

// ---------------------------------------------------------------- attribute paths

Value attr_path(Interpreter& in, const Value& item, const Value& attribute) {
  if (attribute.is_int()) return in.getitem(item, attribute);
  const std::string path = attribute.to_str();
  Value cur = item;
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool numeric = !part.empty() && std::all_of(part.begin(), part.end(), [](char ch) { return std::isdigit(static_cast<unsigned char>(ch)); });
    cur = in.getitem(cur, numeric ? Value(static_cast<int64_t>(std::stoll(part))) : Value(part));
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return cur;
}

// Sorting/unique key: strings lower-cased unless case_sensitive.
Value sort_key(const Value& v, bool case_sensitive) {
  if (!case_sensitive && v.is_string()) return Value(str_lower(v.str()));
  return v;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

double py_round(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits > 22) return x;
  // Round half to even on the decimal representation, like Python's round().
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(std::max<int64_t>(ndigits, 0)), x);
  if (ndigits >= 0) return std::strtod(buf, nullptr);
  const double p = std::pow(10.0, static_cast<double>(-ndigits));
  return std::nearbyint(x / p) * p;
}

Value to_list_value(Interpreter& in, const Value& v) { return Value::list(in.iterate(v)); }

int64_t py_len(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined: return 0;
    case Value::Type::kString: return cp_len(v.str());
    case Value::Type::kList: return static_cast<int64_t>(v.items().size());
    case Value::Type::kDict:
      if (v.is_namespace()) break;
      return static_cast<int64_t>(v.dict_data().items.size());
    default: break;
  }
  fail("object of type '" + v.type_name() + "' has no len()");
}

// Jinja's int filter: int(value) for numbers, int(str, base) with fallback to float(str).
Value filter_int(const Value& v, const Value& def, int64_t base) {
  if (v.is_int() || v.is_bool()) return Value(v.as_int());
  if (v.is_float()) {
    const double f = v.as_float();
    if (!std::isfinite(f) || std::fabs(f) >= 9.2e18) return def;
    return Value(static_cast<int64_t>(std::trunc(f)));
  }
  if (v.is_string()) {
    std::string s = str_strip(v.str(), Value::none());
    s.erase(std::remove(s.begin(), s.end(), '_'), s.end());
    if (s.empty()) return def;
    errno = 0;
    char* end = nullptr;
    int b = static_cast<int>(base);
    std::string body = s;
    bool neg = false;
    if (!body.empty() && (body[0] == '-' || body[0] == '+')) { neg = body[0] == '-'; body.erase(0, 1); }
    if (body.size() > 2 && body[0] == '0' && std::strchr("xXoObB", body[1])) {
      const char p = static_cast<char>(std::tolower(body[1]));
      const int pb = p == 'x' ? 16 : p == 'o' ? 8 : 2;
      if (b == 0 || b == pb) { b = pb; body = body.substr(2); }
    }
    if (b == 0) b = 10;
    const long long r = std::strtoll(body.c_str(), &end, b);
    if (errno == 0 && end && *end == '\0' && !body.empty() && body[0] != '-' && body[0] != '+')
      return Value(static_cast<int64_t>(neg ? -r : r));
    // float(value) fallback
    end = nullptr;
    const double f = std::strtod(s.c_str(), &end);
    if (end && *end == '\0' && std::isfinite(f) && std::fabs(f) < 9.2e18) return Value(static_cast<int64_t>(std::trunc(f)));
    return def;
  }
  return def;
}

Value filter_float(const Value& v, const Value& def) {
  if (v.is_number()) return Value(v.as_float());
  if (v.is_string()) {
    const std::string s = str_strip(v.str(), Value::none());
    char* end = nullptr;
    const double f = std::strtod(s.c_str(), &end);
    if (!s.empty() && end && *end == '\0') return Value(f);
  }
  return def;
}

bool test_by_name(Interpreter& in, const Value& test_name, const Value& v, const std::vector<Value>& extra) {
  CallArgs a;
  a.pos = extra;
  return in.apply_test(test_name.to_str(), v, a);
}

// select/reject/selectattr/rejectattr
Value select_impl(Interpreter& in, const Value& seq, CallArgs& args, bool use_attr, bool keep_if) {
  size_t i = 0;
  Value attribute;
  if (use_attr) {
    if (args.pos.empty()) fail("Missing parameter for attribute name");
    attribute = args.pos[0];
    i = 1;
  }
  Value test_name;
  std::vector<Value> extra;
  if (i < args.pos.size()) {
    test_name = args.pos[i];
    extra.assign(args.pos.begin() + static_cast<long>(i + 1), args.pos.end());
  }
  std::vector<Value> out;
  for (const Value& item : in.iterate(seq)) {
    in.tick();
    const Value subject = use_attr ? attr_path(in, item, attribute) : item;
    const bool ok = test_name.is_undefined() ? subject.truthy() : test_by_name(in, test_name, subject, extra);
    if (ok == keep_if) out.push_back(item);
  }
  return Value::list(std::move(out));
}

Value filter_map(Interpreter& in, const Value& seq, CallArgs& args, int line) {
  std::vector<Value> out;
  const Value attribute = arg_at(args, 99, "attribute");
  if (!attribute.is_undefined()) {
    const Value def = arg_at(args, 99, "default");
    for (const Value& item : in.iterate(seq)) {
      in.tick();
      Value v = attr_path(in, item, attribute);
      if (v.is_undefined() && !def.is_undefined()) v = def;
      out.push_back(std::move(v));
    }
    return Value::list(std::move(out));
  }
  if (args.pos.empty()) return Value::list(in.iterate(seq));
  const std::string fname = args.pos[0].to_str();
  CallArgs rest;
  rest.pos.assign(args.pos.begin() + 1, args.pos.end());
  rest.kw = args.kw;
  for (const Value& item : in.iterate(seq)) {
    CallArgs a = rest;
    out.push_back(in.apply_filter(fname, item, a, line));
  }
  return Value::list(std::move(out));
}

Value filter_tojson(Interpreter& in, const Value& v, CallArgs& a) {
  JsonDumpOptions o;
  const Value ensure_ascii = arg_at(a, 0, "ensure_ascii");
  const Value indent = arg_at(a, 1, "indent");
  const Value separators = arg_at(a, 2, "separators");
  const Value sort_keys = arg_at(a, 3, "sort_keys");
  o.ensure_ascii = ensure_ascii.truthy();
  if (indent.is_int() || indent.is_bool()) {
    o.indent = static_cast<int>(std::clamp<int64_t>(indent.as_int(), 0, 1000));
    o.item_sep = ",";
  } else if (indent.is_string()) {
    o.indent_is_string = true;
    o.indent_str = indent.str();
    o.item_sep = ",";
  } else if (!indent.is_none() && !indent.is_undefined()) {
    fail("tojson: indent must be an int or a string");
  }
  if (separators.is_list()) {
    if (separators.items().size() != 2) fail("tojson: separators must be a pair");
    o.item_sep = separators.items()[0].to_str();
    o.key_sep = separators.items()[1].to_str();
  }
  o.sort_keys = sort_keys.truthy();
  std::string s = json_dumps(v, o);
  in.check_string_size(s.size());
  return Value(std::move(s));
}

Value filter_indent(Interpreter& in, const Value& v, CallArgs& a) {
  const Value width = arg_at(a, 0, "width", Value(4));
  const bool first = arg_at(a, 1, "first", Value(false)).truthy();
  const bool blank = arg_at(a, 2, "blank", Value(false)).truthy();
  const std::string ind = width.is_string() ? width.str() : std::string(static_cast<size_t>(std::clamp<int64_t>(to_int_arg(width, "width"), 0, 10000)), ' ');
  std::string s = v.to_str() + "\n";
  const std::vector<std::string> lines = str_splitlines(s, false);
  std::string rv;
  if (blank) {
    for (size_t i = 0; i < lines.size(); ++i) {
      if (i) rv += "\n" + ind;
      rv += lines[i];
    }
  } else {
    rv = lines.empty() ? "" : lines[0];
    for (size_t i = 1; i < lines.size(); ++i) {
      rv += "\n";
      if (!lines[i].empty()) rv += ind;
      rv += lines[i];
      in.check_string_size(rv.size());
    }
  }
  if (first) rv = ind + rv;
  in.check_string_size(rv.size());
  return Value(std::move(rv));
}

Value minmax(Interpreter& in, const Value& seq, CallArgs& a, bool want_max) {
  const bool cs = arg_at(a, 0, "case_sensitive", Value(false)).truthy();
  const Value attribute = arg_at(a, 1, "attribute");
  const std::vector<Value> items = in.iterate(seq);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(attribute.is_undefined() ? items[0] : attr_path(in, items[0], attribute), cs);
  for (size_t i = 1; i < items.size(); ++i) {
    Value k = sort_key(attribute.is_undefined() ? items[i] : attr_path(in, items[i], attribute), cs);
    const int c = py_compare(k, best_key, want_max ? ">" : "<");
    if (want_max ? c > 0 : c < 0) {
      best = i;
      best_key = std::move(k);
    }
  }
  return items[best];
}

using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs&, int);

const std::unordered_map<std::string, FilterFn>& filters() {
  static const std::unordered_map<std::string, FilterFn> table = {
      {"abs", [](Interpreter&, const Value& v, CallArgs&, int) -> Value {
         if (v.is_float()) return Value(std::fabs(v.as_float()));
         if (v.is_int() || v.is_bool()) {
           if (v.as_int() == INT64_MIN) fail("integer overflow");
           return Value(v.as_int() < 0 ? -v.as_int() : v.as_int());
         }
         if (v.is_undefined()) fail(v.undefined_message());
         fail("bad operand type for abs(): '" + v.type_name() + "'");
       }},
      {"attr", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value {
         const Value name = arg_at(a, 0, "name");
         if (v.is_dict() && !v.is_namespace()) {
           Value m = bound_method(in, v, name.to_str());
           return m.is_undefined() ? Value::undefined("'dict object' has no attribute '" + name.to_str() + "'") : m;
         }
         return in.getattr(v, name.to_str());
       }},
      {"batch", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value {
         const int64_t n = to_int_arg(arg_at(a, 0, "linecount"), "linecount");
         if (n <= 0) fail("batch size must be positive");
         const Value fill = arg_at(a, 1, "fill_with", Value::none());
         std::vector<Value> out, cur;
         for (const Value& x : in.iterate(v)) {
           cur.push_back(x);
           if (static_cast<int64_t>(cur.size()) == n) { out.push_back(Value::list(std::move(cur))); cur.clear(); }
         }
         if (!cur.empty()) {
           if (!fill.is_none()) while (static_cast<int64_t>(cur.size()) < n) cur.push_back(fill);
           out.push_back(Value::list(std::move(cur)));
         }
         return Value::list(std::move(out));
       }},
      {"capitalize", [](Interpreter&, const Value& v, CallArgs&, int) -> Value { return Value(str_capitalize(v.to_str())); }},
      {"center", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value {
         return Value(pad(in, v.to_str(), to_int_arg(arg_at(a, 0, "width", Value(80)), "width"), " ", '^'));
       }},
      {"length", [](Interpreter&, const Value& v, CallArgs&, int) -> Value { return Value(py_len(v)); }},
      {"count", [](Interpreter&, const Value& v, CallArgs&, int) -> Value { return Value(py_len(v)); }},
      {"default", [](Interpreter&, const Value& v, CallArgs& a, int) -> Value {
         const Value def = arg_at(a, 0, "default_value", Value(""));
         const bool boolean = arg_at(a, 1, "boolean", Value(false)).truthy();
         if (v.is_undefined() || (boolean && !v.truthy())) return def;
         return v;
       }},
      {"dictsort", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value {
         if (!v.is_dict()) fail("You can only sort by either \"key\" or \"value\"");
         const bool cs = arg_at(a, 0, "case_sensitive", Value(false)).truthy();
         const std::string by = arg_at(a, 1, "by", Value("key")).to_str();
         const bool rev = arg_at(a, 2, "reverse", Value(false)).truthy();
         if (by != "key" && by != "value") fail("You can only sort by either \"key\" or \"value\"");
         std::vector<Value> pairs;
         for (const auto& [k, x] : v.dict_data().items) pairs.push_back(Value::list({k, x}, true));
         const size_t idx = by == "key" ? 0 : 1;
         std::stable_sort(pairs.begin(), pairs.end(), [&](const Value& p, const Value& q) {
           const int c = py_compare(sort_key(p.items()[idx], cs), sort_key(q.items()[idx], cs), "<");
           return rev ? c > 0 : c < 0;
         });
         (void)in;
         return Value::list(std::move(pairs));
       }},
      {"escape", [](Interpreter&, const Value& v, CallArgs&, int) -> Value { return Value(html_escape(v.to_str())); }},
      {"forceescape", [](Interpreter&, const Value& v, CallArgs&, int) -> Value { return Value(html_escape(v.to_str())); }},
      {"first", [](Interpreter& in, const Value& v, CallArgs&, int) -> Value {
         if (v.is_list()) return v.items().empty() ? Value::undefined("No first item, sequence was empty.") : v.items()[0];
         std::vector<Value> items = in.iterate(v);
         return items.empty() ? Value::undefined("No first item, sequence was empty.") : items[0];
       }},
      {"last", [](Interpreter& in, const Value& v, CallArgs&, int) -> Value {
         if (v.is_list()) return v.items().empty() ? Value::undefined("No last item, sequence was empty.") : v.items().back();
         std::vector<Value> items = in.iterate(v);
         return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
       }},
      {"float", [](Interpreter&, const Value& v, CallArgs& a, int) -> Value {
         return filter_float(v, arg_at(a, 0, "default", Value(0.0)));
       }},
      {"format", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value {
         if (!a.pos.empty() && !a.kw.empty()) fail("can't handle positional and keyword arguments at the same time");
         if (!a.kw.empty()) {
           Value d = Value::dict();
           for (auto& [k, x] : a.kw) d.mutable_dict().set(Value(k), x);
           return Value(py_percent_format(in, v.to_str(), d));
         }
         return Value(py_percent_format(in, v.to_str(), Value::list(a.pos, true)));
       }},
      {"indent", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value { return filter_indent(in, v, a); }},
      {"int", [](Interpreter&, const Value& v, CallArgs& a, int) -> Value {
         return filter_int(v, arg_at(a, 0, "default", Value(0)), to_int_arg(arg_at(a, 1, "base", Value(10)), "base"));
       }},
      {"items", [](Interpreter&, const Value& v, CallArgs&, int) -> Value {
         if (v.is_undefined()) return Value::list();
         if (!v.is_dict() || v.is_namespace()) fail("Can only get item pairs from a mapping.");
         std::vector<Value> out;
         for (const auto& [k, x] : v.dict_data().items) out.push_back(Value::list({k, x}, true));
         return Value::list(std::move(out));
       }},
      {"join", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value {
         const std::string sep = arg_at(a, 0, "d", Value("")).to_str();
         const Value attribute = arg_at(a, 1, "attribute");
         std::string out;
         bool first = true;
         for (const Value& x : in.iterate(v)) {
           if (!first) out += sep;
           first = false;
           out += attribute.is_undefined() ? x.to_str() : attr_path(in, x, attribute).to_str();
           in.check_string_size(out.size());
         }
         return Value(std::move(out));
       }},
      {"list", [](Interpreter& in, const Value& v, CallArgs&, int) -> Value { return to_list_value(in, v); }},
      {"lower", [](Interpreter&, const Value& v, CallArgs&, int) -> Value { return Value(str_lower(v.to_str())); }},
      {"upper", [](Interpreter&, const Value& v, CallArgs&, int) -> Value { return Value(str_upper(v.to_str())); }},
      {"map", [](Interpreter& in, const Value& v, CallArgs& a, int line) -> Value { return filter_map(in, v, a, line); }},
      {"max", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value { return minmax(in, v, a, true); }},
      {"min", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value { return minmax(in, v, a, false); }},
      {"pprint", [](Interpreter&, const Value& v, CallArgs&, int) -> Value { return Value(v.repr()); }},
      {"reject", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value { return select_impl(in, v, a, false, false); }},
      {"rejectattr", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value { return select_impl(in, v, a, true, false); }},
      {"select", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value { return select_impl(in, v, a, false, true); }},
      {"selectattr", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value { return select_impl(in, v, a, true, true); }},
      {"replace", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value {
         const Value count = arg_at(a, 2, "count", Value::none());
         return Value(str_replace(in, v.to_str(), arg_at(a, 0, "old").to_str(), arg_at(a, 1, "new").to_str(),
                                  count.is_none() ? -1 : to_int_arg(count, "count")));
       }},
      {"reverse", [](Interpreter& in, const Value& v, CallArgs&, int) -> Value {
         if (v.is_string()) {
           std::u32string u = utf8_decode(v.str());
           std::reverse(u.begin(), u.end());
           return Value(utf8_encode(u));
         }
         std::vector<Value> items = in.iterate(v);
         std::reverse(items.begin(), items.end());
         return Value::list(std::move(items));
       }},
      {"round", [](Interpreter&, const Value& v, CallArgs& a, int) -> Value {
         const int64_t prec = to_int_arg(arg_at(a, 0, "precision", Value(0)), "precision");
         const std::string method = arg_at(a, 1, "method", Value("common")).to_str();
         if (!v.is_number()) fail("type " + v.type_name() + " doesn't define __round__ method");
         const double x = v.as_float();
         if (method == "common") return v.is_float() ? Value(py_round(x, prec)) : Value(v.as_int());  // round(int) is an int
         const double p = std::pow(10.0, static_cast<double>(prec));
         if (method == "ceil") return Value(std::ceil(x * p) / p);
         if (method == "floor") return Value(std::floor(x * p) / p);
         fail("method must be common, ceil or floor");
       }},
      {"safe", [](Interpreter&, const Value& v, CallArgs&, int) -> Value { return v.is_string() ? v : Value(v.to_str()); }},
      {"sort", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value {
         const bool rev = arg_at(a, 0, "reverse", Value(false)).truthy();
         const bool cs = arg_at(a, 1, "case_sensitive", Value(false)).truthy();
         const Value attribute = arg_at(a, 2, "attribute");
         std::vector<Value> items = in.iterate(v);
         std::vector<std::pair<Value, size_t>> keyed;
         for (size_t i = 0; i < items.size(); ++i)
           keyed.emplace_back(sort_key(attribute.is_undefined() ? items[i] : attr_path(in, items[i], attribute), cs), i);
         std::stable_sort(keyed.begin(), keyed.end(), [&](const auto& p, const auto& q) {
           const int c = py_compare(p.first, q.first, "<");
           return rev ? c > 0 : c < 0;
         });
         std::vector<Value> out;
         for (const auto& [k, i] : keyed) out.push_back(items[i]);
         return Value::list(std::move(out));
       }},
      {"string", [](Interpreter&, const Value& v, CallArgs&, int) -> Value { return v.is_string() ? v : Value(v.to_str()); }},
      {"sum", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value {
         const Value attribute = arg_at(a, 0, "attribute");
         Value total = arg_at(a, 1, "start", Value(0));
         for (const Value& x : in.iterate(v)) total = in.binary("+", total, attribute.is_undefined() ? x : attr_path(in, x, attribute));
         return total;
       }},
      {"title", [](Interpreter&, const Value& v, CallArgs&, int) -> Value {
         // Jinja: split on ([-\s({\[<]+), capitalise each piece.
         const std::u32string u = utf8_decode(v.to_str());
         auto is_sep = [](char32_t c) { return c == '-' || c == '(' || c == '{' || c == '[' || c == '<' || is_py_space(c); };
         std::u32string out;
         bool at_start = true;
         for (char32_t c : u) {
           if (is_sep(c)) { out += c; at_start = true; continue; }
           out += at_start ? cp_upper(c) : cp_lower(c);
           at_start = false;
         }
         return Value(utf8_encode(out));
       }},
      {"tojson", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value { return filter_tojson(in, v, a); }},
      {"trim", [](Interpreter&, const Value& v, CallArgs& a, int) -> Value {
         return Value(str_strip(v.to_str(), arg_at(a, 0, "chars", Value::none())));
       }},
      {"truncate", [](Interpreter&, const Value& v, CallArgs& a, int) -> Value {
         const std::string s = v.to_str();
         const int64_t length = to_int_arg(arg_at(a, 0, "length", Value(255)), "length");
         const bool killwords = arg_at(a, 1, "killwords", Value(false)).truthy();
         const std::string end = arg_at(a, 2, "end", Value("...")).to_str();
         const Value leeway_v = arg_at(a, 3, "leeway", Value(5));
         const int64_t leeway = leeway_v.is_none() ? 5 : to_int_arg(leeway_v, "leeway");
         const std::u32string u = utf8_decode(s);
         const int64_t end_len = cp_len(end);
         if (length < end_len) fail("expected length >= " + std::to_string(end_len) + ", got " + std::to_string(length));
         if (static_cast<int64_t>(u.size()) <= length + leeway) return Value(s);
         std::u32string cut = u.substr(0, static_cast<size_t>(length - end_len));
         if (killwords) return Value(utf8_encode(cut) + end);
         const size_t sp = cut.rfind(U' ');
         if (sp != std::u32string::npos) cut = cut.substr(0, sp);
         return Value(utf8_encode(cut) + end);
       }},
      {"unique", [](Interpreter& in, const Value& v, CallArgs& a, int) -> Value {
         const bool cs = arg_at(a, 0, "case_sensitive", Value(false)).truthy();
         const Value attribute = arg_at(a, 1, "attribute");
         std::vector<Value> out;
         std::unordered_map<std::string, bool> seen;
         for (const Value& x : in.iterate(v)) {
           const Value k = sort_key(attribute.is_undefined() ? x : attr_path(in, x, attribute), cs);
           if (seen.emplace(key_id(k), true).second) out.push_back(x);
         }
         return Value::list(std::move(out));
       }},
      {"wordcount", [](Interpreter&, const Value& v, CallArgs&, int) -> Value {
         int64_t n = 0;
         bool in_word = false;
         for (char32_t c : utf8_decode(v.to_str())) {
           const bool w = cp_is_alpha(c) || cp_is_digit(c) || c == '_';
           if (w && !in_word) ++n;
           in_word = w;
         }
         return Value(n);
       }},
      {"from_json", [](Interpreter&, const Value& v, CallArgs&, int) -> Value {
         try {
           return from_json(nlohmann::ordered_json::parse(v.to_str()));
         } catch (const nlohmann::json::exception& e) {
           fail(std::string("from_json: ") + e.what());
         }
       }},
  };
  return table;
}

using TestFn = bool (*)(Interpreter&, const Value&, CallArgs&);

Value test_arg(const CallArgs& a) {
  if (a.pos.empty() && a.kw.empty()) fail("test needs an argument");
  return a.pos.empty() ? a.kw[0].second : a.pos[0];
}

const std::unordered_map<std::string, TestFn>& tests() {
  static const std::unordered_map<std::string, TestFn> table = [] {
    std::unordered_map<std::string, TestFn> t = {
        {"boolean", [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool(); }},
        {"callable", [](Interpreter&, const Value& v, CallArgs&) { return v.is_callable(); }},
        {"defined", [](Interpreter&, const Value& v, CallArgs&) { return !v.is_undefined(); }},
        {"undefined", [](Interpreter&, const Value& v, CallArgs&) { return v.is_undefined(); }},
        {"divisibleby", [](Interpreter& in, const Value& v, CallArgs& a) {
           return py_equal(in.binary("%", v, test_arg(a)), Value(0));
         }},
        {"eq", [](Interpreter&, const Value& v, CallArgs& a) { return py_equal(v, test_arg(a)); }},
        {"ne", [](Interpreter&, const Value& v, CallArgs& a) { return !py_equal(v, test_arg(a)); }},
        {"lt", [](Interpreter&, const Value& v, CallArgs& a) { return py_compare(v, test_arg(a), "<") < 0; }},
        {"le", [](Interpreter&, const Value& v, CallArgs& a) { return py_compare(v, test_arg(a), "<=") <= 0; }},
        {"gt", [](Interpreter&, const Value& v, CallArgs& a) { return py_compare(v, test_arg(a), ">") > 0; }},
        {"ge", [](Interpreter&, const Value& v, CallArgs& a) { return py_compare(v, test_arg(a), ">=") >= 0; }},
        {"escaped", [](Interpreter&, const Value&, CallArgs&) { return false; }},
        {"even", [](Interpreter& in, const Value& v, CallArgs&) { return py_equal(in.binary("%", v, Value(2)), Value(0)); }},
        {"odd", [](Interpreter& in, const Value& v, CallArgs&) { return py_equal(in.binary("%", v, Value(2)), Value(1)); }},
        {"false", [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && !v.as_bool(); }},
        {"true", [](Interpreter&, const Value& v, CallArgs&) { return v.is_bool() && v.as_bool(); }},
        {"filter", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && filters().count(v.str()) > 0; }},
        {"test", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string() && is_builtin_test(v.str()); }},
        {"float", [](Interpreter&, const Value& v, CallArgs&) { return v.is_float(); }},
        {"integer", [](Interpreter&, const Value& v, CallArgs&) { return v.is_int(); }},
        {"number", [](Interpreter&, const Value& v, CallArgs&) { return v.is_number(); }},
        {"in", [](Interpreter& in, const Value& v, CallArgs& a) { return in.contains(test_arg(a), v); }},
        {"iterable", [](Interpreter&, const Value& v, CallArgs&) {
           return v.is_undefined() || v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
         }},
        {"sequence", [](Interpreter&, const Value& v, CallArgs&) {
           return v.is_string() || v.is_list() || (v.is_dict() && !v.is_namespace());
         }},
        {"mapping", [](Interpreter&, const Value& v, CallArgs&) { return v.is_dict() && !v.is_namespace(); }},
        {"string", [](Interpreter&, const Value& v, CallArgs&) { return v.is_string(); }},
        {"none", [](Interpreter&, const Value& v, CallArgs&) { return v.is_none(); }},
        {"lower", [](Interpreter&, const Value& v, CallArgs&) {
           if (!v.is_string()) return false;
           bool cased = false;
           for (char32_t c : utf8_decode(v.str())) {
             if (cp_upper(c) != c) cased = true;
             else if (cp_lower(c) != c) return false;
           }
           return cased;
         }},
        {"upper", [](Interpreter&, const Value& v, CallArgs&) {
           if (!v.is_string()) return false;
           bool cased = false;
           for (char32_t c : utf8_decode(v.str())) {
             if (cp_lower(c) != c) cased = true;
             else if (cp_upper(c) != c) return false;
           }
           return cased;
         }},
        {"sameas", [](Interpreter&, const Value& v, CallArgs& a) {
           const Value o = test_arg(a);
           if (v.type() != o.type()) return false;
           if (v.is_list() || v.is_dict() || v.is_callable()) return v.identity() == o.identity();
           return py_equal(v, o);
         }},
    };
    t["equalto"] = t["eq"];
    t["=="] = t["eq"];
    t["!="] = t["ne"];
    t["lessthan"] = t["lt"];
    t["<"] = t["lt"];
    t["<="] = t["le"];
    t["greaterthan"] = t["gt"];
    t[">"] = t["gt"];
    t[">="] = t["ge"];
    return t;
  }();
  return table;
}

}  // namespace

Value call_filter_builtin(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, bool& found) {
  std::string n = name;
  if (n == "d") n = "default";
  else if (n == "e") n = "escape";
  const auto& t = filters();
  auto it = t.find(n);
  if (it == t.end()) {
    found = false;
    return Value();
  }
  found = true;
  return it->second(in, v, args, 0);
}

bool is_builtin_test(const std::string& name) { return tests().count(name) > 0; }

bool call_test_builtin(Interpreter& in, const std::string& name, const Value& v, CallArgs& args, bool& found) {
  const auto& t = tests();
  auto it = t.find(name);
  if (it == t.end()) {
    found = false;
    return false;
  }
  found = true;
  return it->second(in, v, args);
}

// ---------------------------------------------------------------- methods

namespace {

[[noreturn]] void unsafe(const Value& obj, const std::string& name) {
  fail("access to attribute '" + name + "' of '" + obj.type_name() + "' object is unsafe.");
}

Value str_method(Interpreter& in, const std::string& s, const std::string& name, CallArgs& a) {
  auto prefix_test = [&](bool ends) {
    const Value arg = arg_at(a, 0, "prefix");
    std::string_view view = s;
    const Value start = arg_at(a, 1, "start", Value::none());
    const Value end = arg_at(a, 2, "end", Value::none());
    if (!start.is_none() || !end.is_none()) {
      // Code-point slice [start:end].
      const std::u32string u = utf8_decode(s);
      const int64_t n = static_cast<int64_t>(u.size());
      auto adj = [&](const Value& x, int64_t def) {
        if (x.is_none() || x.is_undefined()) return def;
        int64_t i = to_int_arg(x, "index");
        if (i < 0) i = std::max<int64_t>(0, i + n);
        return std::min(i, n);
      };
      const int64_t b = adj(start, 0), e = adj(end, n);
      static thread_local std::string tmp;
      tmp = b < e ? utf8_encode(u.substr(static_cast<size_t>(b), static_cast<size_t>(e - b))) : "";
      view = tmp;
    }
    std::vector<Value> cands;
    if (arg.is_tuple()) cands = arg.items();
    else if (arg.is_string()) cands.push_back(arg);
    else fail(std::string(ends ? "endswith" : "startswith") + " first arg must be str or a tuple of str, not " + arg.type_name());
    for (const Value& c : cands) {
      if (!c.is_string()) fail("tuple for startswith/endswith must only contain str");
      const std::string& p = c.str();
      if (p.size() <= view.size() && (ends ? view.compare(view.size() - p.size(), p.size(), p) == 0 : view.compare(0, p.size(), p) == 0))
        return Value(true);
    }
    return Value(false);
  };
  if (name == "startswith") return prefix_test(false);
  if (name == "endswith") return prefix_test(true);
  if (name == "strip") return Value(str_strip(s, arg_at(a, 0, "chars", Value::none())));
  if (name == "lstrip") return Value(str_strip(s, arg_at(a, 0, "chars", Value::none()), true, false));
  if (name == "rstrip") return Value(str_strip(s, arg_at(a, 0, "chars", Value::none()), false, true));
  if (name == "split" || name == "rsplit") {
    const Value sep = arg_at(a, 0, "sep", Value::none());
    const int64_t maxsplit = to_int_arg(arg_at(a, 1, "maxsplit", Value(-1)), "maxsplit");
    return str_list(name == "split" ? str_split(s, sep, maxsplit) : str_rsplit(s, sep, maxsplit));
  }
  if (name == "splitlines") return str_list(str_splitlines(s, arg_at(a, 0, "keepends", Value(false)).truthy()));
  if (name == "replace") {
    const Value count = arg_at(a, 2, "count", Value(-1));
    return Value(str_replace(in, s, arg_at(a, 0, "old").to_str(), arg_at(a, 1, "new").to_str(), to_int_arg(count, "count")));
  }
  if (name == "upper") return Value(str_upper(s));
  if (name == "lower" || name == "casefold") return Value(str_lower(s));
  if (name == "title") return Value(str_title(s));
  if (name == "capitalize") return Value(str_capitalize(s));
  if (name == "swapcase") {
    std::u32string u = utf8_decode(s);
    for (auto& c : u) c = cp_lower(c) != c ? cp_lower(c) : cp_upper(c);
    return Value(utf8_encode(u));
  }
  if (name == "format") return Value(py_str_format(in, s, a));
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    const Value sub_v = arg_at(a, 0, "sub");
    if (!sub_v.is_string()) fail("must be str, not " + sub_v.type_name());
    const std::u32string u = utf8_decode(s), sub = utf8_decode(sub_v.str());
    const int64_t n = static_cast<int64_t>(u.size());
    auto adj = [&](const Value& x, int64_t def) {
      if (x.is_none() || x.is_undefined()) return def;
      int64_t i = to_int_arg(x, "index");
      if (i < 0) i = std::max<int64_t>(0, i + n);
      return std::min(i, n);
    };
    const int64_t b = adj(arg_at(a, 1, "start"), 0), e = adj(arg_at(a, 2, "end"), n);
    const std::u32string hay = b < e ? u.substr(static_cast<size_t>(b), static_cast<size_t>(e - b)) : U"";
    if (name == "count") {
      if (sub.empty()) return Value(static_cast<int64_t>(hay.size()) + 1);
      int64_t c = 0;
      for (size_t p = hay.find(sub); p != std::u32string::npos; p = hay.find(sub, p + sub.size())) ++c;
      return Value(c);
    }
    if (b > e && !sub.empty()) return Value(int64_t{-1});
    const size_t p = (name == "find" || name == "index") ? hay.find(sub) : hay.rfind(sub);
    if (p == std::u32string::npos) {
      if (name == "index" || name == "rindex") fail("substring not found");
      return Value(int64_t{-1});
    }
    return Value(b + static_cast<int64_t>(p));
  }
  if (name == "join") {
    std::string out;
    bool first = true;
    for (const Value& x : in.iterate(arg_at(a, 0, "iterable"))) {
      if (!x.is_string()) fail("sequence item: expected str instance, " + x.type_name() + " found");
      if (!first) out += s;
      first = false;
      out += x.str();
      in.check_string_size(out.size());
    }
    return Value(std::move(out));
  }
  if (name == "center" || name == "ljust" || name == "rjust") {
    const int64_t width = to_int_arg(arg_at(a, 0, "width"), "width");
    const std::string fill = arg_at(a, 1, "fillchar", Value(" ")).to_str();
    return Value(pad(in, s, width, fill, name == "center" ? '^' : name == "ljust" ? '<' : '>'));
  }
  if (name == "zfill") {
    const int64_t width = to_int_arg(arg_at(a, 0, "width"), "width");
    std::string body = s, sign;
    if (!body.empty() && (body[0] == '-' || body[0] == '+')) { sign = body.substr(0, 1); body.erase(0, 1); }
    return Value(sign + pad(in, body, width - static_cast<int64_t>(sign.size()), "0", '>'));
  }
  if (name == "partition" || name == "rpartition") {
    const std::string sep = arg_at(a, 0, "sep").to_str();
    if (sep.empty()) fail("empty separator");
    const size_t p = name == "partition" ? s.find(sep) : s.rfind(sep);
    if (p == std::string::npos)
      return name == "partition" ? Value::list({Value(s), Value(""), Value("")}, true)
                                 : Value::list({Value(""), Value(""), Value(s)}, true);
    return Value::list({Value(s.substr(0, p)), Value(sep), Value(s.substr(p + sep.size()))}, true);
  }
  if (name == "removeprefix" || name == "removesuffix") {
    const std::string x = arg_at(a, 0, "prefix").to_str();
    if (name == "removeprefix") return Value(s.compare(0, x.size(), x) == 0 ? s.substr(x.size()) : s);
    return Value(x.size() <= s.size() && s.compare(s.size() - x.size(), x.size(), x) == 0 ? s.substr(0, s.size() - x.size()) : s);
  }
  auto all = [&](auto pred) {
    const std::u32string u = utf8_decode(s);
    if (u.empty()) return Value(false);
    for (char32_t c : u)
      if (!pred(c)) return Value(false);
    return Value(true);
  };
  if (name == "isdigit" || name == "isdecimal" || name == "isnumeric") return all(cp_is_digit);
  if (name == "isalpha") return all(cp_is_alpha);
  if (name == "isalnum") return all([](char32_t c) { return cp_is_alpha(c) || cp_is_digit(c); });
  if (name == "isspace") return all(is_py_space);
  if (name == "islower" || name == "isupper") {
    CallArgs none;
    bool found = false;
    return Value(call_test_builtin(in, name == "islower" ? "lower" : "upper", Value(s), none, found));
  }
  fail("'str' object has no attribute '" + name + "'");
}

const char* kStrMethods[] = {"startswith", "endswith", "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines",
                             "replace", "upper", "lower", "casefold", "title", "capitalize", "swapcase", "format",
                             "find", "rfind", "index", "rindex", "count", "join", "center", "ljust", "rjust", "zfill",
                             "partition", "rpartition", "removeprefix", "removesuffix", "isdigit", "isdecimal",
                             "isnumeric", "isalpha", "isalnum", "isspace", "islower", "isupper"};
const char* kDictMethods[] = {"get", "items", "keys", "values", "copy"};
const char* kDictUnsafe[] = {"pop", "popitem", "setdefault", "update", "clear"};
const char* kListMethods[] = {"index", "count", "copy"};
const char* kListUnsafe[] = {"append", "extend", "insert", "pop", "remove", "reverse", "sort", "clear"};

template <size_t N>
bool among(const char* (&names)[N], const std::string& n) {
  for (const char* x : names)
    if (n == x) return true;
  return false;
}

}  // namespace

Value bound_method(Interpreter& in, const Value& obj, const std::string& name) {
  (void)in;
  if (obj.is_string() && among(kStrMethods, name)) {
    return Value::callable(name, [obj, name](Interpreter& i, CallArgs& a) { return str_method(i, obj.str(), name, a); });
  }
  if (obj.is_dict() && !obj.is_namespace()) {
    if (among(kDictUnsafe, name))
      return Value::callable(name, [obj, name](Interpreter&, CallArgs&) -> Value { unsafe(obj, name); });
    if (!among(kDictMethods, name)) return Value();
    return Value::callable(name, [obj, name](Interpreter&, CallArgs& a) -> Value {
      const DictData& d = obj.dict_data();
      if (name == "get") {
        const Value* v = d.find(arg_at(a, 0, "key"));
        return v ? *v : arg_at(a, 1, "default", Value::none());
      }
      std::vector<Value> out;
      if (name == "copy") {
        Value c = Value::dict();
        c.mutable_dict() = d;
        return c;
      }
      for (const auto& [k, v] : d.items)
        out.push_back(name == "items" ? Value::list({k, v}, true) : name == "keys" ? k : v);
      return Value::list(std::move(out));
    });
  }
  if (obj.is_list()) {
    if (among(kListUnsafe, name))
      return Value::callable(name, [obj, name](Interpreter&, CallArgs&) -> Value { unsafe(obj, name); });
    if (!among(kListMethods, name)) return Value();
    return Value::callable(name, [obj, name](Interpreter&, CallArgs& a) -> Value {
      if (name == "copy") return Value::list(obj.items(), obj.is_tuple());
      const Value x = arg_at(a, 0, "value");
      int64_t c = 0;
      for (size_t i = 0; i < obj.items().size(); ++i) {
        if (py_equal(obj.items()[i], x)) {
          if (name == "index") return Value(static_cast<int64_t>(i));
          ++c;
        }
      }
      if (name == "index") fail(x.repr() + " is not in list");
      return Value(c);
    });
  }
  return Value();
}

// ---------------------------------------------------------------- globals

void install_globals(Interpreter& in, Scope& g) {
  (void)in;
  g.vars["range"] = Value::callable("range", [](Interpreter& i, CallArgs& a) -> Value {
    int64_t start = 0, stop, step = 1;
    if (a.pos.size() == 1) {
      stop = to_int_arg(a.pos[0], "range");
    } else if (a.pos.size() == 2 || a.pos.size() == 3) {
      start = to_int_arg(a.pos[0], "range");
      stop = to_int_arg(a.pos[1], "range");
      if (a.pos.size() == 3) step = to_int_arg(a.pos[2], "range");
    } else {
      fail("range expected 1 to 3 arguments, got " + std::to_string(a.pos.size()));
    }
    if (step == 0) fail("range() arg 3 must not be zero");
    // Jinja's sandbox: MAX_RANGE = 100000.
    const long double count = step > 0 ? (stop > start ? (static_cast<long double>(stop) - start + step - 1) / step : 0)
                                       : (start > stop ? (static_cast<long double>(start) - stop - step - 1) / -step : 0);
    if (count > 100000)
      fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    std::vector<Value> out;
    // Iterate over the count, never x += step (which can overflow and never end).
    const int64_t n = static_cast<int64_t>(count);
    for (int64_t k = 0; k < n; ++k)
      out.emplace_back(static_cast<int64_t>(static_cast<__int128>(start) + static_cast<__int128>(k) * step));
    i.check_list_size(out.size());
    return Value::list(std::move(out));
  });
  g.vars["dict"] = Value::callable("dict", [](Interpreter& i, CallArgs& a) -> Value {
    Value d = Value::dict();
    if (!a.pos.empty()) {
      const Value& src = a.pos[0];
      if (src.is_dict()) {
        for (const auto& [k, v] : src.dict_data().items) d.mutable_dict().set(k, v);
      } else {
        for (const Value& pair : i.iterate(src)) {
          std::vector<Value> kv = i.iterate(pair);
          if (kv.size() != 2) fail("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
          d.mutable_dict().set(kv[0], kv[1]);
        }
      }
    }
    for (auto& [k, v] : a.kw) d.mutable_dict().set(Value(k), v);
    return d;
  });
  g.vars["namespace"] = Value::callable("namespace", [](Interpreter&, CallArgs& a) -> Value {
    Value d = Value::dict();
    d.mutable_dict().is_namespace = true;
    for (const Value& src : a.pos) {
      if (!src.is_dict()) fail("namespace() positional arguments must be mappings");
      for (const auto& [k, v] : src.dict_data().items) d.mutable_dict().set(k, v);
    }
    for (auto& [k, v] : a.kw) d.mutable_dict().set(Value(k), v);
    return d;
  });
  g.vars["raise_exception"] = Value::callable("raise_exception", [](Interpreter&, CallArgs& a) -> Value {
    throw TemplateError{arg_at(a, 0, "message").to_str(), true};
  });
  g.vars["strftime_now"] = Value::callable("strftime_now", [](Interpreter& i, CallArgs& a) -> Value {
    const std::string fmt = arg_at(a, 0, "format").to_str();
    if (fmt.size() > 1000) fail("strftime_now: format too long");
    const std::tm tm = i.now();
    std::string buf(fmt.size() * 16 + 64, '\0');
    const size_t n = fmt.empty() ? 0 : std::strftime(buf.data(), buf.size(), fmt.c_str(), &tm);
    buf.resize(n);
    return Value(std::move(buf));
  });
  g.vars["joiner"] = Value::callable("joiner", [](Interpreter&, CallArgs& a) -> Value {
    const std::string sep = arg_at(a, 0, "sep", Value(", ")).to_str();
    auto used = std::make_shared<bool>(false);
    return Value::callable("joiner", [sep, used](Interpreter&, CallArgs&) -> Value {
      if (!*used) { *used = true; return Value(""); }
      return Value(sep);
    });
  });
}

}  // namespace llmserve::jinja
