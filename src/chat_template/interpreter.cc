#include "chat_template/interpreter.h"

#include <cmath>
#include <optional>

namespace llmserve::jinja {

namespace {

[[noreturn]] void undefined_error(const Value& v) { fail(v.undefined_message()); }

bool checked_add(int64_t a, int64_t b, int64_t& r) { return !__builtin_add_overflow(a, b, &r); }
bool checked_sub(int64_t a, int64_t b, int64_t& r) { return !__builtin_sub_overflow(a, b, &r); }
bool checked_mul(int64_t a, int64_t b, int64_t& r) { return !__builtin_mul_overflow(a, b, &r); }

[[noreturn]] void overflow() { fail("integer overflow (values beyond 64 bits are not supported)"); }

}  // namespace
namespace {

bool args_use(const ArgList& a, const std::string& name) {
  for (const auto& x : a.args)
    if (expr_uses(x.value.get(), name)) return true;
  return expr_uses(a.star.get(), name) || expr_uses(a.starstar.get(), name);
}
}  // namespace

bool expr_uses(const Expr* e, const std::string& name) {
  if (!e) return false;
  if (e->kind == Expr::Kind::kName && e->name == name) return true;
  for (const auto& c : e->children)
    if (expr_uses(c.get(), name)) return true;
  return expr_uses(e->a.get(), name) || expr_uses(e->b.get(), name) || expr_uses(e->c.get(), name) ||
         args_use(e->args, name);
}
bool body_uses(const Body& b, const std::string& name) {
  for (const auto& s : b) {
    if (expr_uses(s->expr.get(), name) || expr_uses(s->filter_cond.get(), name)) return true;
    for (const auto& [c, body] : s->branches)
      if (expr_uses(c.get(), name) || body_uses(body, name)) return true;
    if (body_uses(s->body, name) || body_uses(s->else_body, name)) return true;
    for (const auto& p : s->params)
      if (expr_uses(p.default_value.get(), name)) return true;
    for (const auto& f : s->filters)
      if (args_use(f.args, name)) return true;
    for (const auto& [n, e] : s->assigns)
      if (expr_uses(e.get(), name)) return true;
  }
  return false;
}

Interpreter::Interpreter(const RenderOptions& opts) : opts_(opts), globals_(std::make_shared<Scope>()) {
  install_globals(*this, *globals_);
}

std::tm Interpreter::now() const {
  if (opts_.now) return opts_.now();
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

void Interpreter::tick() {
  if (++steps_ > opts_.max_steps)
    fail("template exceeded the step limit (" + std::to_string(opts_.max_steps) + ")");
}
void Interpreter::check_string_size(size_t bytes) const {
  if (bytes > opts_.max_string_bytes)
    fail("string too large (" + std::to_string(bytes) + " bytes; limit " + std::to_string(opts_.max_string_bytes) + ")");
}
void Interpreter::check_list_size(size_t n) const {
  if (n > opts_.max_list_items)
    fail("list too large (" + std::to_string(n) + " items; limit " + std::to_string(opts_.max_list_items) + ")");
}
void Interpreter::append(std::string& out, std::string_view s) const {
  if (out.size() + s.size() > opts_.max_output_bytes)
    fail("rendered output exceeds " + std::to_string(opts_.max_output_bytes) + " bytes");
  out += s;
}

std::string Interpreter::render(const Template& tpl, const Value& context) {
  auto root = std::make_shared<Scope>(globals_);
  if (context.is_dict())
    for (const auto& [k, v] : context.dict_data().items) root->vars[k.to_str()] = v;
  std::string out;
  exec(tpl.body, root, out);
  return out;
}

// ---------------------------------------------------------------- statements

Interpreter::Flow Interpreter::exec(const Body& body, const ScopePtr& scope, std::string& out) {
  Depth guard(*this);
  for (const StmtPtr& sp : body) {
    const Stmt& s = *sp;
    tick();
    switch (s.kind) {
      case Stmt::Kind::kText: append(out, s.text); break;
      case Stmt::Kind::kPrint: {
        const Value v = eval(*s.expr, scope);
        if (v.is_string()) append(out, v.str());
        else append(out, v.to_str());
        break;
      }
      case Stmt::Kind::kIf: {
        bool done = false;
        for (const auto& [cond, b] : s.branches) {
          if (eval(*cond, scope).truthy()) {
            done = true;
            const Flow f = exec(b, scope, out);
            if (f != Flow::kNormal) return f;
            break;
          }
        }
        if (!done) {
          const Flow f = exec(s.else_body, scope, out);
          if (f != Flow::kNormal) return f;
        }
        break;
      }
      case Stmt::Kind::kFor: run_for(s, eval(*s.expr, scope), scope, out, 0); break;
      case Stmt::Kind::kSet: assign(s.target, eval(*s.expr, scope), scope); break;
      case Stmt::Kind::kSetBlock: {
        std::string captured;
        exec(s.body, std::make_shared<Scope>(scope), captured);
        Value v(std::move(captured));
        for (const FilterCall& f : s.filters) {
          CallArgs a = eval_args(f.args, scope);
          v = apply_filter(f.name, v, a, f.line);
        }
        assign(s.target, std::move(v), scope);
        break;
      }
      case Stmt::Kind::kMacro: scope->vars[s.name] = make_macro(s, scope); break;
      case Stmt::Kind::kCallBlock: {
        const Expr& call = *s.expr;
        Value fn = eval(*call.a, scope);
        CallArgs args = eval_args(call.args, scope);
        const Stmt* body_stmt = &s;
        ScopePtr outer = scope;
        Value caller = Value::callable("caller", [this, body_stmt, outer](Interpreter&, CallArgs& ca) {
          auto child = std::make_shared<Scope>(outer);
          for (size_t i = 0; i < body_stmt->params.size(); ++i) {
            const MacroParam& p = body_stmt->params[i];
            Value v = arg_at(ca, i, p.name.c_str());
            if (v.is_undefined() && p.default_value) v = eval(*p.default_value, child);
            child->vars[p.name] = v;
          }
          std::string captured;
          exec(body_stmt->body, child, captured);
          return Value(std::move(captured));
        });
        args.kw.emplace_back("caller", caller);
        const Value r = this->call(fn, args);
        append(out, r.to_str());
        break;
      }
      case Stmt::Kind::kFilterBlock: {
        std::string captured;
        exec(s.body, std::make_shared<Scope>(scope), captured);
        Value v(std::move(captured));
        for (const FilterCall& f : s.filters) {
          CallArgs a = eval_args(f.args, scope);
          v = apply_filter(f.name, v, a, f.line);
        }
        append(out, v.to_str());
        break;
      }
      case Stmt::Kind::kBreak: return Flow::kBreak;
      case Stmt::Kind::kContinue: return Flow::kContinue;
      case Stmt::Kind::kWith: {
        auto child = std::make_shared<Scope>(scope);
        for (const auto& [name, e] : s.assigns) child->vars[name] = eval(*e, scope);
        exec(s.body, child, out);
        break;
      }
      case Stmt::Kind::kScope: {
        const Flow f = exec(s.body, scope, out);
        if (f != Flow::kNormal) return f;
        break;
      }
      case Stmt::Kind::kDo: eval(*s.expr, scope); break;
    }
  }
  return Flow::kNormal;
}

void Interpreter::assign(const Target& t, Value v, const ScopePtr& scope) {
  if (!t.ns_attr.empty()) {
    const Value* ns = scope->find(t.names[0]);
    if (!ns || !ns->is_namespace()) fail("cannot assign attribute on non-namespace object");
    Value target = *ns;
    target.mutable_dict().set(Value(t.ns_attr), std::move(v));
    return;
  }
  if (!t.is_tuple) {
    scope->vars[t.names[0]] = std::move(v);
    return;
  }
  std::vector<Value> items = iterate(v);
  if (items.size() != t.names.size()) {
    if (items.size() < t.names.size())
      fail("not enough values to unpack (expected " + std::to_string(t.names.size()) + ", got " +
           std::to_string(items.size()) + ")");
    fail("too many values to unpack (expected " + std::to_string(t.names.size()) + ")");
  }
  for (size_t i = 0; i < items.size(); ++i) scope->vars[t.names[i]] = std::move(items[i]);
}

void Interpreter::run_for(const Stmt& s, const Value& iterable, const ScopePtr& scope, std::string& out, int depth) {
  std::vector<Value> items = iterate(iterable);
  if (s.filter_cond) {
    std::vector<Value> kept;
    for (Value& it : items) {
      tick();
      auto tmp = std::make_shared<Scope>(scope);
      assign(s.target, it, tmp);
      if (eval(*s.filter_cond, tmp).truthy()) kept.push_back(std::move(it));
    }
    items = std::move(kept);
  }
  const int64_t n = static_cast<int64_t>(items.size());
  if (n == 0) {
    exec(s.else_body, std::make_shared<Scope>(scope), out);
    return;
  }
  // loop.cycle / loop.changed state
  auto last_changed = std::make_shared<std::vector<Value>>();
  auto has_changed = std::make_shared<bool>(false);
  for (int64_t i = 0; i < n; ++i) {
    tick();
    if (++loop_iterations_ > opts_.max_loop_iterations)
      fail("template exceeded the loop iteration limit (" + std::to_string(opts_.max_loop_iterations) + ")");
    auto child = std::make_shared<Scope>(scope);
    assign(s.target, items[static_cast<size_t>(i)], child);
    if (!s.uses_loop) {
      if (exec(s.body, child, out) == Flow::kBreak) break;
      continue;
    }
    Value loop = Value::dict();
    DictData& d = loop.mutable_dict();
    d.set("index", Value(i + 1));
    d.set("index0", Value(i));
    d.set("revindex", Value(n - i));
    d.set("revindex0", Value(n - i - 1));
    d.set("first", Value(i == 0));
    d.set("last", Value(i == n - 1));
    d.set("length", Value(n));
    d.set("depth", Value(depth + 1));
    d.set("depth0", Value(depth));
    d.set("previtem", i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("there is no previous item"));
    d.set("nextitem", i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("there is no next item"));
    d.set("cycle", Value::callable("cycle", [i](Interpreter&, CallArgs& a) -> Value {
            if (a.pos.empty()) fail("no items for cycling given");
            return a.pos[static_cast<size_t>(i) % a.pos.size()];
          }));
    d.set("changed", Value::callable("changed", [last_changed, has_changed](Interpreter&, CallArgs& a) -> Value {
            bool same = *has_changed && last_changed->size() == a.pos.size();
            for (size_t k = 0; same && k < a.pos.size(); ++k) same = py_equal((*last_changed)[k], a.pos[k]);
            *has_changed = true;
            *last_changed = a.pos;
            return Value(!same);
          }));
    if (s.recursive) {
      const Stmt* sp = &s;
      ScopePtr outer = scope;
      d.set("__call__", Value::callable("loop", [sp, outer, depth](Interpreter& in, CallArgs& a) -> Value {
              if (a.pos.size() != 1) fail("loop() takes exactly one argument");
              std::string captured;
              in.run_for(*sp, a.pos[0], outer, captured, depth + 1);
              return Value(std::move(captured));
            }));
    }
    child->vars["loop"] = std::move(loop);
    const Flow f = exec(s.body, child, out);
    if (f == Flow::kBreak) break;
  }
}

Value Interpreter::make_macro(const Stmt& m, const ScopePtr& closure) {
  const Stmt* mp = &m;
  const bool uses_varargs = body_uses(m.body, "varargs");
  const bool uses_kwargs = body_uses(m.body, "kwargs");
  const bool uses_caller = body_uses(m.body, "caller");
  // The closure holds the scope that holds the macro: a weak reference avoids a cycle.
  std::weak_ptr<Scope> weak = closure;
  return Value::callable(m.name, [mp, weak, uses_varargs, uses_kwargs, uses_caller](Interpreter& in, CallArgs& a) {
    ScopePtr c = weak.lock();
    if (!c) fail("macro '" + mp->name + "' called after its scope ended");
    return in.call_macro(*mp, c, a, uses_varargs, uses_kwargs, uses_caller);
  });
}

Value Interpreter::call_macro(const Stmt& m, const ScopePtr& closure, CallArgs& a, bool uses_varargs,
                              bool uses_kwargs, bool uses_caller) {
  Depth guard(*this);
  auto child = std::make_shared<Scope>(closure);
  std::vector<bool> kw_used(a.kw.size(), false);
  Value caller;
  for (size_t k = 0; k < a.kw.size(); ++k)
    if (a.kw[k].first == "caller") {
      caller = a.kw[k].second;
      kw_used[k] = true;
    }
  for (size_t i = 0; i < m.params.size(); ++i) {
    const MacroParam& p = m.params[i];
    Value v;
    bool have = false;
    if (i < a.pos.size()) {
      v = a.pos[i];
      have = true;
    }
    for (size_t k = 0; k < a.kw.size(); ++k) {
      if (a.kw[k].first == p.name) {
        if (have) fail("macro '" + m.name + "' got multiple values for argument '" + p.name + "'");
        v = a.kw[k].second;
        kw_used[k] = true;
        have = true;
      }
    }
    if (!have) {
      if (p.default_value) v = eval(*p.default_value, child);
      else v = Value::undefined("parameter '" + p.name + "' was not provided");
    }
    child->vars[p.name] = v;
  }
  std::vector<Value> extra;
  for (size_t i = m.params.size(); i < a.pos.size(); ++i) extra.push_back(a.pos[i]);
  if (!extra.empty() && !uses_varargs)
    fail("macro '" + m.name + "' takes not more than " + std::to_string(m.params.size()) + " argument(s)");
  if (uses_varargs) child->vars["varargs"] = Value::list(std::move(extra), true);
  Value kwargs = uses_kwargs ? Value::dict() : Value();
  for (size_t k = 0; k < a.kw.size(); ++k) {
    if (kw_used[k]) continue;
    if (!uses_kwargs) fail("macro '" + m.name + "' takes no keyword argument '" + a.kw[k].first + "'");
    kwargs.mutable_dict().set(Value(a.kw[k].first), a.kw[k].second);
  }
  if (uses_kwargs) child->vars["kwargs"] = kwargs;
  if (!caller.is_undefined()) {
    if (!uses_caller) fail("macro '" + m.name + "' was invoked with two values for the special caller argument");
    child->vars["caller"] = caller;
  }
  std::string out;
  exec(m.body, child, out);
  return Value(std::move(out));
}

// ---------------------------------------------------------------- expressions

CallArgs Interpreter::eval_args(const ArgList& a, const ScopePtr& scope) {
  CallArgs out;
  for (const Arg& arg : a.args) {
    if (arg.name.empty()) out.pos.push_back(eval(*arg.value, scope));
    else out.kw.emplace_back(arg.name, eval(*arg.value, scope));
  }
  if (a.star) {
    for (Value& v : iterate(eval(*a.star, scope))) out.pos.push_back(std::move(v));
  }
  if (a.starstar) {
    const Value d = eval(*a.starstar, scope);
    if (!d.is_dict()) fail("argument after ** must be a mapping, not " + d.type_name());
    for (const auto& [k, v] : d.dict_data().items) out.kw.emplace_back(k.to_str(), v);
  }
  return out;
}

Value Interpreter::call(const Value& fn, CallArgs& args) {
  tick();
  if (fn.is_callable()) return fn.fn().fn(*this, args);
  if (fn.is_undefined()) undefined_error(fn);
  if (fn.is_dict() && !fn.is_namespace()) {
    if (const Value* c = fn.dict_data().find(std::string_view("__call__")); c && c->is_callable())
      return c->fn().fn(*this, args);
  }
  fail("'" + fn.type_name() + "' object is not callable");
}

std::vector<Value> Interpreter::iterate(const Value& v) {
  switch (v.type()) {
    case Value::Type::kUndefined: return {};
    case Value::Type::kList: return v.items();
    case Value::Type::kDict: {
      if (v.is_namespace()) fail("'Namespace' object is not iterable");
      std::vector<Value> keys;
      keys.reserve(v.dict_data().items.size());
      for (const auto& kv : v.dict_data().items) keys.push_back(kv.first);
      return keys;
    }
    case Value::Type::kString: {
      std::vector<Value> chars;
      for (char32_t c : utf8_decode(v.str())) chars.emplace_back(utf8_encode(std::u32string(1, c)));
      return chars;
    }
    default: fail("'" + v.type_name() + "' object is not iterable");
  }
}

bool Interpreter::contains(const Value& c, const Value& item) {
  if (c.is_string()) {
    if (item.is_undefined()) undefined_error(item);
    if (!item.is_string()) fail("'in <string>' requires string as left operand, not " + item.type_name());
    return c.str().find(item.str()) != std::string::npos;
  }
  if (c.is_dict() && !c.is_namespace()) {
    if (item.is_list() && !item.is_tuple()) fail("unhashable type: 'list'");
    if (item.is_dict()) fail("unhashable type: 'dict'");
    return c.dict_data().find(item) != nullptr;
  }
  if (c.is_list()) {
    for (const Value& x : c.items())
      if (py_equal(x, item)) return true;
    return false;
  }
  if (c.is_undefined()) return false;
  fail("argument of type '" + c.type_name() + "' is not iterable");
}

Value Interpreter::getattr(const Value& obj, const std::string& name) {
  switch (obj.type()) {
    case Value::Type::kUndefined: undefined_error(obj);
    case Value::Type::kDict: {
      if (obj.is_namespace()) {
        if (const Value* v = obj.dict_data().find(std::string_view(name))) return *v;
        return Value::undefined("'Namespace object' has no attribute '" + name + "'");
      }
      Value m = bound_method(*this, obj, name);
      if (!m.is_undefined()) return m;
      if (const Value* v = obj.dict_data().find(std::string_view(name))) return *v;
      return Value::undefined("'dict object' has no attribute '" + name + "'");
    }
    case Value::Type::kString:
    case Value::Type::kList: {
      Value m = bound_method(*this, obj, name);
      if (!m.is_undefined()) return m;
      return Value::undefined("'" + obj.object_repr() + "' has no attribute '" + name + "'");
    }
    default: return Value::undefined("'" + obj.object_repr() + "' has no attribute '" + name + "'");
  }
}

Value Interpreter::getitem(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_dict() && !obj.is_namespace()) {
    if (key.is_list() && !key.is_tuple()) fail("unhashable type: 'list'");
    if (key.is_dict()) fail("unhashable type: 'dict'");
    if (const Value* v = obj.dict_data().find(key)) return *v;
    if (key.is_string()) {
      Value m = bound_method(*this, obj, key.str());
      if (!m.is_undefined()) return m;
      return Value::undefined("'dict object' has no attribute '" + key.str() + "'");
    }
    return Value::undefined("dict object has no element " + key.repr());
  }
  if ((obj.is_list() || obj.is_string()) && (key.is_int() || key.is_bool())) {
    int64_t i = key.as_int();
    if (obj.is_list()) {
      const int64_t n = static_cast<int64_t>(obj.items().size());
      if (i < 0) i += n;
      if (i < 0 || i >= n) return Value::undefined(obj.type_name() + " object has no element " + key.repr());
      return obj.items()[static_cast<size_t>(i)];
    }
    const std::u32string s = utf8_decode(obj.str());
    const int64_t n = static_cast<int64_t>(s.size());
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("str object has no element " + key.repr());
    return Value(utf8_encode(s.substr(static_cast<size_t>(i), 1)));
  }
  if (key.is_string()) return getattr(obj, key.str());
  return Value::undefined(obj.object_repr() + " has no element " + key.repr());
}

Value Interpreter::slice(const Value& obj, const Value& start_v, const Value& stop_v, const Value& step_v) {
  if (obj.is_undefined()) undefined_error(obj);
  auto as_index = [](const Value& v, const char* what) -> std::optional<int64_t> {
    if (v.is_undefined() || v.is_none()) return std::nullopt;
    if (!v.is_int() && !v.is_bool()) fail(std::string("slice indices must be integers or None (") + what + ")");
    return v.as_int();
  };
  const auto start = as_index(start_v, "start");
  const auto stop = as_index(stop_v, "stop");
  const auto step_o = as_index(step_v, "step");
  const int64_t step = step_o.value_or(1);
  if (step == 0) fail("slice step cannot be zero");
  auto pick = [&](int64_t n, std::vector<size_t>& idx) {
    int64_t lo, hi;
    auto adjust = [&](std::optional<int64_t> v, int64_t def) {
      if (!v) return def;
      int64_t x = *v;
      if (x < 0) {
        x += n;
        if (x < 0) x = step < 0 ? -1 : 0;
      } else if (x >= n) {
        x = step < 0 ? n - 1 : n;
      }
      return x;
    };
    lo = adjust(start, step < 0 ? n - 1 : 0);
    hi = adjust(stop, step < 0 ? -1 : n);
    if (step > 0)
      for (int64_t i = lo; i < hi; i += step) idx.push_back(static_cast<size_t>(i));
    else
      for (int64_t i = lo; i > hi; i += step) idx.push_back(static_cast<size_t>(i));
  };
  std::vector<size_t> idx;
  if (obj.is_list()) {
    pick(static_cast<int64_t>(obj.items().size()), idx);
    std::vector<Value> out;
    out.reserve(idx.size());
    for (size_t i : idx) out.push_back(obj.items()[i]);
    return Value::list(std::move(out), obj.is_tuple());
  }
  if (obj.is_string()) {
    const std::u32string s = utf8_decode(obj.str());
    pick(static_cast<int64_t>(s.size()), idx);
    std::u32string out;
    for (size_t i : idx) out += s[i];
    return Value(utf8_encode(out));
  }
  fail("'" + obj.type_name() + "' object is not subscriptable");
}

static int64_t floordiv(int64_t a, int64_t b) {
  if (b == 0) fail("integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) overflow();
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
static int64_t pymod(int64_t a, int64_t b) {
  if (b == 0) fail("integer division or modulo by zero");
  if (b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

Value Interpreter::binary(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  const char o0 = op[0];
  auto unsupported = [&]() -> Value {
    fail("unsupported operand type(s) for " + op + ": '" + a.type_name() + "' and '" + b.type_name() + "'");
  };
  const bool nums = a.is_number() && b.is_number();
  const bool ints = nums && !a.is_float() && !b.is_float();
  if (op == "+") {
    if (ints) { int64_t r; if (!checked_add(a.as_int(), b.as_int(), r)) overflow(); return Value(r); }
    if (nums) return Value(a.as_float() + b.as_float());
    if (a.is_string() && b.is_string()) {
      check_string_size(a.str().size() + b.str().size());
      return Value(a.str() + b.str());
    }
    if (a.is_string()) fail("can only concatenate str (not \"" + b.type_name() + "\") to str");
    if (a.is_list() && b.is_list() && a.is_tuple() == b.is_tuple()) {
      check_list_size(a.items().size() + b.items().size());
      std::vector<Value> r = a.items();
      r.insert(r.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(r), a.is_tuple());
    }
    if (a.is_list()) fail("can only concatenate " + a.type_name() + " (not \"" + b.type_name() + "\") to " + a.type_name());
    return unsupported();
  }
  if (op == "-") {
    if (ints) { int64_t r; if (!checked_sub(a.as_int(), b.as_int(), r)) overflow(); return Value(r); }
    if (nums) return Value(a.as_float() - b.as_float());
    return unsupported();
  }
  if (op == "*") {
    if (ints) { int64_t r; if (!checked_mul(a.as_int(), b.as_int(), r)) overflow(); return Value(r); }
    if (nums) return Value(a.as_float() * b.as_float());
    const Value* seq = (a.is_string() || a.is_list()) ? &a : (b.is_string() || b.is_list()) ? &b : nullptr;
    const Value* cnt = seq == &a ? &b : &a;
    if (seq && (cnt->is_int() || cnt->is_bool())) {
      const int64_t n = std::max<int64_t>(0, cnt->as_int());
      if (seq->is_string()) {
        const size_t len = seq->str().size();
        if (len && static_cast<uint64_t>(n) > opts_.max_string_bytes / len + 1) check_string_size(opts_.max_string_bytes + 1);
        check_string_size(len * static_cast<size_t>(n));
        std::string r;
        r.reserve(len * static_cast<size_t>(n));
        for (int64_t i = 0; i < n; ++i) r += seq->str();
        return Value(std::move(r));
      }
      const size_t len = seq->items().size();
      if (len && static_cast<uint64_t>(n) > opts_.max_list_items / len + 1) check_list_size(opts_.max_list_items + 1);
      check_list_size(len * static_cast<size_t>(n));
      std::vector<Value> r;
      for (int64_t i = 0; i < n; ++i) r.insert(r.end(), seq->items().begin(), seq->items().end());
      return Value::list(std::move(r), seq->is_tuple());
    }
    if (seq) fail("can't multiply sequence by non-int of type '" + cnt->type_name() + "'");
    return unsupported();
  }
  if (op == "/") {
    if (!nums) return unsupported();
    if (b.as_float() == 0) fail("division by zero");
    return Value(a.as_float() / b.as_float());
  }
  if (op == "//") {
    if (ints) return Value(floordiv(a.as_int(), b.as_int()));
    if (nums) {
      if (b.as_float() == 0) fail("float floor division by zero");
      return Value(std::floor(a.as_float() / b.as_float()));
    }
    return unsupported();
  }
  if (o0 == '%') {
    if (a.is_string()) return Value(py_percent_format(*this, a.str(), b));
    if (ints) return Value(pymod(a.as_int(), b.as_int()));
    if (nums) {
      const double y = b.as_float();
      if (y == 0) fail("float modulo");
      double r = std::fmod(a.as_float(), y);
      if (r != 0 && ((r < 0) != (y < 0))) r += y;
      return Value(r);
    }
    return unsupported();
  }
  if (op == "**") {
    if (ints && b.as_int() >= 0) {
      int64_t base = a.as_int(), e = b.as_int(), r = 1;
      while (e > 0) {
        if (e & 1) { if (!checked_mul(r, base, r)) overflow(); }
        e >>= 1;
        if (e > 0 && !checked_mul(base, base, base)) overflow();
      }
      return Value(r);
    }
    if (nums) {
      if (a.as_float() == 0 && b.as_float() < 0) fail("0.0 cannot be raised to a negative power");
      return Value(std::pow(a.as_float(), b.as_float()));
    }
    return unsupported();
  }
  fail("unknown operator " + op);
}

Value Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  Depth guard(*this);
  switch (e.kind) {
    case Expr::Kind::kLiteral: return e.literal;
    case Expr::Kind::kName: {
      if (const Value* v = scope->find(e.name)) return *v;
      return Value::undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::kList:
    case Expr::Kind::kTuple: {
      std::vector<Value> items;
      items.reserve(e.children.size());
      for (const auto& c : e.children) items.push_back(eval(*c, scope));
      return Value::list(std::move(items), e.kind == Expr::Kind::kTuple);
    }
    case Expr::Kind::kDict: {
      Value d = Value::dict();
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        Value k = eval(*e.children[i], scope);
        if (k.is_dict() || (k.is_list() && !k.is_tuple())) fail("unhashable type: '" + k.type_name() + "'");
        d.mutable_dict().set(std::move(k), eval(*e.children[i + 1], scope));
      }
      return d;
    }
    case Expr::Kind::kGetAttr: return getattr(eval(*e.a, scope), e.name);
    case Expr::Kind::kGetItem: return getitem(eval(*e.a, scope), eval(*e.b, scope));
    case Expr::Kind::kSlice: {
      const Value obj = eval(*e.a, scope);
      const Value st = e.has_start ? eval(*e.children[0], scope) : Value::none();
      const Value sp = e.has_stop ? eval(*e.children[1], scope) : Value::none();
      const Value stp = e.has_step ? eval(*e.children[2], scope) : Value::none();
      return slice(obj, st, sp, stp);
    }
    case Expr::Kind::kCall: {
      const Value fn = eval(*e.a, scope);
      CallArgs args = eval_args(e.args, scope);
      return call(fn, args);
    }
    case Expr::Kind::kFilter: {
      const Value v = eval(*e.a, scope);
      CallArgs args = eval_args(e.args, scope);
      return apply_filter(e.name, v, args, e.line);
    }
    case Expr::Kind::kTest: {
      if (!has_test(e.name)) fail("no test named '" + e.name + "'");
      const Value v = eval(*e.a, scope);
      CallArgs args = eval_args(e.args, scope);
      const bool r = apply_test(e.name, v, args);
      return Value(e.negated ? !r : r);
    }
    case Expr::Kind::kNeg:
    case Expr::Kind::kPos: {
      const Value v = eval(*e.a, scope);
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number())
        fail(std::string("bad operand type for unary ") + (e.kind == Expr::Kind::kNeg ? "-" : "+") + ": '" + v.type_name() + "'");
      if (e.kind == Expr::Kind::kPos) return v.is_bool() ? Value(v.as_int()) : v;
      if (v.is_float()) return Value(-v.as_float());
      if (v.as_int() == INT64_MIN) overflow();
      return Value(-v.as_int());
    }
    case Expr::Kind::kNot: return Value(!eval(*e.a, scope).truthy());
    case Expr::Kind::kBinary: {
      const Value a = eval(*e.a, scope);
      const Value b = eval(*e.b, scope);
      return binary(e.name, a, b);
    }
    case Expr::Kind::kConcat: {
      std::string s;
      for (const auto& c : e.children) {
        const Value v = eval(*c, scope);
        if (v.is_string()) s += v.str();
        else s += v.to_str();
        check_string_size(s.size());
      }
      return Value(std::move(s));
    }
    case Expr::Kind::kCompare: {
      Value left = eval(*e.a, scope);
      for (size_t i = 0; i < e.ops.size(); ++i) {
        Value right = eval(*e.children[i], scope);
        const std::string& op = e.ops[i];
        bool r;
        if (op == "==") r = py_equal(left, right);
        else if (op == "!=") r = !py_equal(left, right);
        else if (op == "in") r = contains(right, left);
        else if (op == "notin") r = !contains(right, left);
        else {
          const int c = py_compare(left, right, op.c_str());
          r = op == "<" ? c < 0 : op == "<=" ? c <= 0 : op == ">" ? c > 0 : c >= 0;
        }
        if (!r) return Value(false);
        left = std::move(right);
      }
      return Value(true);
    }
    case Expr::Kind::kAnd: {
      Value a = eval(*e.a, scope);
      if (!a.truthy()) return a;
      return eval(*e.b, scope);
    }
    case Expr::Kind::kOr: {
      Value a = eval(*e.a, scope);
      if (a.truthy()) return a;
      return eval(*e.b, scope);
    }
    case Expr::Kind::kCond: {
      if (eval(*e.a, scope).truthy()) return eval(*e.b, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
  }
  return Value();
}

Value Interpreter::apply_filter(const std::string& name, const Value& v, CallArgs& args, int line) {
  tick();
  bool found = false;
  Value r = call_filter_builtin(*this, name, v, args, found);
  if (!found) fail("syntax error at line " + std::to_string(line) + ": no filter named '" + name + "'");
  return r;
}

bool Interpreter::has_test(const std::string& name) const { return is_builtin_test(name); }

bool Interpreter::apply_test(const std::string& name, const Value& v, CallArgs& args) {
  tick();
  bool found = false;
  const bool r = call_test_builtin(*this, name, v, args, found);
  if (!found) fail("no test named '" + name + "'");
  return r;
}

}  // namespace llmserve::jinja
