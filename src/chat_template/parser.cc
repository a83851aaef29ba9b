// Lexer and parser following Jinja2 3.1's lexer.py / parser.py, with the environment
// transformers uses: trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=False,
// loopcontrols (break/continue).
#include <cstring>

#include "chat_template/ast.h"

namespace llmserve::jinja {
namespace {

struct Token {
  enum Type { kData, kVarBegin, kVarEnd, kBlockBegin, kBlockEnd, kName, kString, kInt, kFloat, kOp, kEof };
  Type type;
  std::string text;
  int line;
  int64_t ival = 0;
  double fval = 0;
};

[[noreturn]] void syntax_error(int line, const std::string& msg) {
  fail("syntax error at line " + std::to_string(line) + ": " + msg);
}

bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'; }

class Lexer {
 public:
  explicit Lexer(const std::string& source) {
    src_.reserve(source.size());
    for (size_t i = 0; i < source.size(); ++i) {
      if (source[i] == '\r') {
        src_ += '\n';
        if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
      } else {
        src_ += source[i];
      }
    }
    if (!src_.empty() && src_.back() == '\n') src_.pop_back();  // keep_trailing_newline=False
  }

  std::vector<Token> run() {
    const size_t n = src_.size();
    while (pos_ < n) {
      size_t idx = pos_;
      while (true) {
        idx = src_.find('{', idx);
        if (idx == std::string::npos || idx + 1 >= n) { idx = std::string::npos; break; }
        const char k = src_[idx + 1];
        if (k == '{' || k == '%' || k == '#') break;
        ++idx;
      }
      if (idx == std::string::npos) {
        emit_data(src_.substr(pos_));
        pos_ = n;
        break;
      }
      const char kind = src_[idx + 1];
      const char sign = (idx + 2 < n && (src_[idx + 2] == '-' || src_[idx + 2] == '+')) ? src_[idx + 2] : 0;
      std::string text = src_.substr(pos_, idx - pos_);
      const int text_newlines = count_nl(text);
      text = strip_before(std::move(text), sign, kind != '{');
      emit_data(std::move(text));
      line_ += text_newlines;
      size_t p = idx + 2 + (sign ? 1 : 0);
      if (kind == '%' && try_raw(p)) continue;
      if (kind == '#') {
        lex_comment(p);
        continue;
      }
      lex_tag(kind, p);
    }
    toks_.push_back({Token::kEof, "", line_});
    return std::move(toks_);
  }

 private:
  static int count_nl(std::string_view s) {
    int c = 0;
    for (char ch : s) c += ch == '\n';
    return c;
  }

  // OptionalLStrip: '-' strips all whitespace before the tag; otherwise lstrip_blocks removes
  // spaces/tabs between the line start and a block/comment tag.
  std::string strip_before(std::string text, char sign, bool lstrip_ok) {
    if (sign == '-') {
      size_t e = text.size();
      while (e > 0 && is_ws(text[e - 1])) --e;
      text.resize(e);
    } else if (sign != '+' && lstrip_ok) {
      const size_t nl = text.rfind('\n');
      const size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
      if ((l_pos > 0 || line_starting_) && l_pos < text.size()) {
        bool all_ws = true;
        for (size_t i = l_pos; i < text.size(); ++i) all_ws &= is_ws(text[i]);
        if (all_ws) text.resize(l_pos);
      }
    }
    return text;
  }

  void emit_data(std::string text) {
    if (!text.empty()) toks_.push_back({Token::kData, std::move(text), line_});
  }

  // After a closing tag: '+' keeps everything, '-' eats all whitespace, plain eats one
  // newline when trim applies (blocks and comments: trim_blocks=True).
  size_t after_end(size_t p, char sign, bool trim) {
    if (sign == '-') {
      while (p < src_.size() && is_ws(src_[p])) {
        line_ += src_[p] == '\n';
        ++p;
      }
    } else if (sign == 0 && trim && p < src_.size() && src_[p] == '\n') {
      ++line_;
      ++p;
    }
    return p;
  }

  bool match_at(size_t p, const char* s) const { return src_.compare(p, std::strlen(s), s) == 0; }

  size_t skip_ws(size_t p) const {
    while (p < src_.size() && is_ws(src_[p])) ++p;
    return p;
  }

  bool try_raw(size_t p) {
    size_t q = skip_ws(p);
    if (!match_at(q, "raw")) return false;
    q += 3;
    if (q < src_.size() && (std::isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) return false;
    q = skip_ws(q);
    char end_sign = 0;
    if (match_at(q, "-%}")) { end_sign = '-'; q += 3; }
    else if (match_at(q, "%}")) { q += 2; }
    else return false;
    line_ += count_nl(src_.substr(p, q - p));
    if (end_sign == '-') q = after_end(q, '-', false);
    line_starting_ = q > 0 && src_[q - 1] == '\n';
    // Find {%(-|+)?\s*endraw\s*(+%}|-%}\s*|%}\n?)
    size_t s = q;
    while (true) {
      s = src_.find("{%", s);
      if (s == std::string::npos) syntax_error(line_, "missing end of raw directive");
      size_t t = s + 2;
      char sign = 0;
      if (t < src_.size() && (src_[t] == '-' || src_[t] == '+')) sign = src_[t++];
      t = skip_ws(t);
      if (match_at(t, "endraw")) {
        t = skip_ws(t + 6);
        char es = 0;
        if (match_at(t, "+%}")) { es = '+'; t += 3; }
        else if (match_at(t, "-%}")) { es = '-'; t += 3; }
        else if (match_at(t, "%}")) { t += 2; }
        else { s += 2; continue; }
        std::string text = src_.substr(q, s - q);
        const int nl = count_nl(text);
        emit_data(strip_before(std::move(text), sign, true));
        line_ += nl + count_nl(src_.substr(s, t - s));
        pos_ = after_end(t, es, true);
        line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
        return true;
      }
      s += 2;
    }
  }

  void lex_comment(size_t p) {
    size_t k = src_.find("#}", p);
    if (k == std::string::npos) syntax_error(line_, "missing end of comment tag");
    char sign = 0;
    if (k > p && (src_[k - 1] == '-' || src_[k - 1] == '+')) sign = src_[k - 1];
    line_ += count_nl(src_.substr(p, k - p));
    pos_ = after_end(k + 2, sign, true);
    line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
  }

  void lex_tag(char kind, size_t p) {
    const bool block = kind == '%';
    toks_.push_back({block ? Token::kBlockBegin : Token::kVarBegin, "", line_});
    std::vector<char> stack;
    const size_t n = src_.size();
    while (true) {
      if (p >= n) syntax_error(line_, block ? "unexpected end of template, expected '%}'" : "unexpected end of template, expected '}}'");
      if (stack.empty()) {
        const char* close = block ? "%}" : "}}";
        char sign = 0;
        size_t e = std::string::npos;
        if ((src_[p] == '-' || src_[p] == '+') && match_at(p + 1, close)) {
          sign = src_[p];
          e = p + 3;
        } else if (match_at(p, close)) {
          e = p + 2;
        }
        if (e != std::string::npos && !(sign == '+' && !block)) {
          toks_.push_back({block ? Token::kBlockEnd : Token::kVarEnd, "", line_});
          pos_ = after_end(e, sign, block);
          line_starting_ = pos_ > 0 && src_[pos_ - 1] == '\n';
          return;
        }
      }
      const char c = src_[p];
      if (is_ws(c)) {
        line_ += c == '\n';
        ++p;
        continue;
      }
      if (std::isdigit(static_cast<unsigned char>(c))) {
        p = lex_number(p);
        continue;
      }
      if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
        size_t q = p;
        while (q < n && (std::isalnum(static_cast<unsigned char>(src_[q])) || src_[q] == '_')) ++q;
        toks_.push_back({Token::kName, src_.substr(p, q - p), line_});
        p = q;
        continue;
      }
      if (c == '\'' || c == '"') {
        p = lex_string(p);
        continue;
      }
      static const char* kOps[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%", "~",
                                   "[", "]", "(", ")", "{", "}", ">", "<", "=", ".", ":", "|", ",", ";"};
      bool found = false;
      for (const char* op : kOps) {
        if (match_at(p, op)) {
          const std::string s(op);
          if (s == "(" || s == "[" || s == "{") {
            stack.push_back(s == "(" ? ')' : s == "[" ? ']' : '}');
          } else if (s == ")" || s == "]" || s == "}") {
            if (stack.empty()) syntax_error(line_, "unexpected '" + s + "'");
            if (stack.back() != s[0])
              syntax_error(line_, "unexpected '" + s + "', expected '" + std::string(1, stack.back()) + "'");
            stack.pop_back();
          }
          toks_.push_back({Token::kOp, s, line_});
          p += s.size();
          found = true;
          break;
        }
      }
      if (!found) syntax_error(line_, std::string("unexpected char '") + c + "'");
    }
  }

  size_t lex_number(size_t p) {
    const size_t n = src_.size();
    auto digits = [&](size_t q) {
      while (q < n && (std::isdigit(static_cast<unsigned char>(src_[q])) ||
                       (src_[q] == '_' && q + 1 < n && std::isdigit(static_cast<unsigned char>(src_[q + 1])))))
        ++q;
      return q;
    };
    size_t q = digits(p);
    bool is_float = false;
    if (q + 1 < n && src_[q] == '.' && std::isdigit(static_cast<unsigned char>(src_[q + 1]))) {
      is_float = true;
      q = digits(q + 1);
    }
    if (q < n && (src_[q] == 'e' || src_[q] == 'E')) {
      size_t r = q + 1;
      if (r < n && (src_[r] == '+' || src_[r] == '-')) ++r;
      if (r < n && std::isdigit(static_cast<unsigned char>(src_[r]))) {
        is_float = true;
        q = digits(r);
      }
    }
    std::string text;
    for (size_t i = p; i < q; ++i)
      if (src_[i] != '_') text += src_[i];
    Token t{is_float ? Token::kFloat : Token::kInt, text, line_};
    if (is_float) {
      t.fval = std::strtod(text.c_str(), nullptr);
    } else {
      errno = 0;
      t.ival = std::strtoll(text.c_str(), nullptr, 10);
      if (errno == ERANGE) syntax_error(line_, "integer literal too large: " + text);
    }
    toks_.push_back(std::move(t));
    return q;
  }

  size_t lex_string(size_t p) {
    const char q = src_[p];
    const size_t n = src_.size();
    std::string out;
    const int start_line = line_;
    size_t i = p + 1;
    auto hex = [&](size_t at, int len) -> char32_t {
      if (at + len > n) syntax_error(line_, "truncated \\x/\\u escape in string");
      char32_t v = 0;
      for (int k = 0; k < len; ++k) {
        const char h = src_[at + k];
        int d = std::isdigit(static_cast<unsigned char>(h)) ? h - '0'
                : (h >= 'a' && h <= 'f') ? h - 'a' + 10 : (h >= 'A' && h <= 'F') ? h - 'A' + 10 : -1;
        if (d < 0) syntax_error(line_, "truncated \\x/\\u escape in string");
        v = v * 16 + static_cast<char32_t>(d);
      }
      return v;
    };
    while (true) {
      if (i >= n) syntax_error(start_line, "unterminated string");
      const char c = src_[i];
      if (c == q) break;
      if (c == '\n') ++line_;
      if (c != '\\') {
        out += c;
        ++i;
        continue;
      }
      if (i + 1 >= n) syntax_error(start_line, "unterminated string");
      const char e = src_[i + 1];
      i += 2;
      switch (e) {
        case 'n': out += '\n'; break;
        case 't': out += '\t'; break;
        case 'r': out += '\r'; break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'v': out += '\v'; break;
        case '\n': ++line_; break;  // line continuation
        case 'x': utf8_append(out, hex(i, 2)); i += 2; break;
        case 'u': utf8_append(out, hex(i, 4)); i += 4; break;
        case 'U': {
          const char32_t v = hex(i, 8);
          if (v > 0x10FFFF) syntax_error(line_, "illegal Unicode character in string");
          utf8_append(out, v);
          i += 8;
          break;
        }
        default:
          if (e >= '0' && e <= '7') {
            char32_t v = static_cast<char32_t>(e - '0');
            for (int k = 0; k < 2 && i < n && src_[i] >= '0' && src_[i] <= '7'; ++k, ++i) v = v * 8 + (src_[i] - '0');
            utf8_append(out, v);
          } else {
            out += '\\';
            out += e;
            if (e == '\n') ++line_;
          }
      }
    }
    toks_.push_back({Token::kString, std::move(out), start_line});
    return i + 1;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> toks_;
};

// ---------------------------------------------------------------- parser

class Parser {
 public:
  Parser(std::vector<Token> toks, int max_nesting) : t_(std::move(toks)), max_nesting_(max_nesting) {}

  std::unique_ptr<Template> parse() {
    auto tpl = std::make_unique<Template>();
    tpl->body = parse_body({});
    if (cur().type != Token::kEof) syntax_error(cur().line, "unexpected tag");
    return tpl;
  }

 private:
  const Token& cur() const { return t_[i_]; }
  const Token& peek(size_t k = 1) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  void next() { if (i_ + 1 < t_.size()) ++i_; }
  bool is_op(const char* op) const { return cur().type == Token::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == Token::kName && cur().text == n; }
  bool skip_op(const char* op) { if (is_op(op)) { next(); return true; } return false; }
  bool skip_name(const char* n) { if (is_name(n)) { next(); return true; } return false; }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case Token::kEof: return "end of template";
      case Token::kBlockEnd: return "end of statement block";
      case Token::kVarEnd: return "end of print statement";
      case Token::kData: return "template data";
      case Token::kString: return "string";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) syntax_error(cur().line, std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != Token::kName) syntax_error(cur().line, "expected a name, got " + describe(cur()));
    std::string s = cur().text;
    next();
    return s;
  }
  void expect_block_end() {
    if (cur().type != Token::kBlockEnd) syntax_error(cur().line, "expected end of statement block, got " + describe(cur()));
    next();
  }

  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& pp) : p(pp) {
      if (++p.depth_ > p.max_nesting_) syntax_error(p.cur().line, "template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  ExprPtr mk(Expr::Kind k, int line) { return std::make_unique<Expr>(k, line); }

  // Parses statements until a block tag whose name is in `end_tags` (left unconsumed, the
  // cursor on that name) or EOF.
  Body parse_body(const std::vector<std::string>& end_tags) {
    DepthGuard g(*this);
    Body body;
    while (true) {
      const Token& t = cur();
      if (t.type == Token::kEof) {
        if (!end_tags.empty()) {
          std::string expected;
          for (const auto& e : end_tags) expected += (expected.empty() ? "'" : " or '") + e + "'";
          syntax_error(t.line, "unexpected end of template, expected " + expected);
        }
        return body;
      }
      if (t.type == Token::kData) {
        auto s = std::make_unique<Stmt>(Stmt::Kind::kText, t.line);
        s->text = t.text;
        body.push_back(std::move(s));
        next();
      } else if (t.type == Token::kVarBegin) {
        next();
        auto s = std::make_unique<Stmt>(Stmt::Kind::kPrint, t.line);
        s->expr = parse_tuple(true, false);
        if (cur().type != Token::kVarEnd) syntax_error(cur().line, "expected end of print statement, got " + describe(cur()));
        next();
        body.push_back(std::move(s));
      } else if (t.type == Token::kBlockBegin) {
        next();
        if (cur().type != Token::kName) syntax_error(cur().line, "expected a statement name, got " + describe(cur()));
        for (const auto& e : end_tags)
          if (cur().text == e) return body;
        body.push_back(parse_statement());
      } else {
        syntax_error(t.line, "unexpected " + describe(t));
      }
    }
  }

  StmtPtr parse_statement() {
    const std::string kw = cur().text;
    const int line = cur().line;
    if (kw == "if") return parse_if();
    if (kw == "for") return parse_for();
    if (kw == "set") return parse_set();
    if (kw == "macro") return parse_macro();
    if (kw == "call") return parse_call_block();
    if (kw == "filter") return parse_filter_block();
    if (kw == "with") return parse_with();
    if (kw == "generation") {  // transformers' AssistantTracker extension: renders its body
      next();
      expect_block_end();
      auto s = std::make_unique<Stmt>(Stmt::Kind::kScope, line);
      s->body = parse_body({"endgeneration"});
      next();
      expect_block_end();
      return s;
    }
    if (kw == "do") {
      next();
      auto s = std::make_unique<Stmt>(Stmt::Kind::kDo, line);
      s->expr = parse_tuple(true, false);
      expect_block_end();
      return s;
    }
    if (kw == "break" || kw == "continue") {
      if (loop_depth_ == 0) syntax_error(line, "'" + kw + "' outside of a loop");
      next();
      expect_block_end();
      return std::make_unique<Stmt>(kw == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, line);
    }
    if (kw == "endif" || kw == "endfor" || kw == "endmacro" || kw == "endset" || kw == "else" ||
        kw == "elif" || kw == "endcall" || kw == "endfilter" || kw == "endwith" || kw == "endraw")
      syntax_error(line, "unexpected '" + kw + "'");
    syntax_error(line, "unknown tag '" + kw + "'");
  }

  StmtPtr parse_if() {
    auto s = std::make_unique<Stmt>(Stmt::Kind::kIf, cur().line);
    next();
    while (true) {
      ExprPtr cond = parse_tuple(false, false);
      expect_block_end();
      Body body = parse_body({"elif", "else", "endif"});
      s->branches.emplace_back(std::move(cond), std::move(body));
      const std::string tag = cur().text;
      next();
      if (tag == "elif") continue;
      if (tag == "else") {
        expect_block_end();
        s->else_body = parse_body({"endif"});
        next();
      }
      expect_block_end();
      return s;
    }
  }

  Target parse_assign_target(bool with_namespace) {
    Target t;
    const int line = cur().line;
    if (with_namespace && cur().type == Token::kName && peek().type == Token::kOp && peek().text == ".") {
      t.names.push_back(expect_name());
      next();
      t.ns_attr = expect_name();
      return t;
    }
    const bool paren = skip_op("(");
    while (true) {
      t.names.push_back(expect_name());
      if (!skip_op(",")) break;
      t.is_tuple = true;
      if (cur().type != Token::kName) break;  // trailing comma
    }
    if (paren) {
      expect_op(")");
      if (t.names.size() > 1) t.is_tuple = true;
    }
    for (const auto& n : t.names)
      if (n == "true" || n == "false" || n == "none" || n == "True" || n == "False" || n == "None")
        syntax_error(line, "can't assign to '" + n + "'");
    return t;
  }

  StmtPtr parse_for() {
    auto s = std::make_unique<Stmt>(Stmt::Kind::kFor, cur().line);
    next();
    s->target = parse_assign_target(false);
    if (!skip_name("in")) syntax_error(cur().line, "expected 'in', got " + describe(cur()));
    s->expr = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) s->filter_cond = parse_expression(true);
    if (skip_name("recursive")) s->recursive = true;
    expect_block_end();
    ++loop_depth_;
    s->body = parse_body({"endfor", "else"});
    --loop_depth_;
    if (cur().text == "else") {
      next();
      expect_block_end();
      s->else_body = parse_body({"endfor"});
    }
    next();
    expect_block_end();
    s->uses_loop = body_uses(s->body, "loop") || expr_uses(s->filter_cond.get(), "loop");
    return s;
  }

  StmtPtr parse_set() {
    const int line = cur().line;
    next();
    Target target = parse_assign_target(true);
    if (skip_op("=")) {
      auto s = std::make_unique<Stmt>(Stmt::Kind::kSet, line);
      s->target = std::move(target);
      s->expr = parse_tuple(true, false);
      expect_block_end();
      return s;
    }
    auto s = std::make_unique<Stmt>(Stmt::Kind::kSetBlock, line);
    s->target = std::move(target);
    if (!s->target.ns_attr.empty() || s->target.names.size() != 1) syntax_error(line, "block set needs a single name");
    while (skip_op("|")) s->filters.push_back(parse_filter_call());
    expect_block_end();
    s->body = parse_body({"endset"});
    next();
    expect_block_end();
    return s;
  }

  std::vector<MacroParam> parse_signature() {
    std::vector<MacroParam> params;
    expect_op("(");
    while (!is_op(")")) {
      if (!params.empty()) expect_op(",");
      if (is_op(")")) break;
      MacroParam p;
      p.name = expect_name();
      if (skip_op("=")) p.default_value = parse_expression(true);
      else if (!params.empty() && params.back().default_value)
        syntax_error(cur().line, "non-default argument follows default argument");
      params.push_back(std::move(p));
    }
    next();
    return params;
  }

  StmtPtr parse_macro() {
    auto s = std::make_unique<Stmt>(Stmt::Kind::kMacro, cur().line);
    next();
    s->name = expect_name();
    s->params = parse_signature();
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_body({"endmacro"});
    loop_depth_ = saved;
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = std::make_unique<Stmt>(Stmt::Kind::kCallBlock, cur().line);
    next();
    if (is_op("(")) s->params = parse_signature();
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::kCall) syntax_error(s->line, "expected call");
    expect_block_end();
    const int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_body({"endcall"});
    loop_depth_ = saved;
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = std::make_unique<Stmt>(Stmt::Kind::kFilterBlock, cur().line);
    next();
    s->filters.push_back(parse_filter_call());
    while (skip_op("|")) s->filters.push_back(parse_filter_call());
    expect_block_end();
    s->body = parse_body({"endfilter"});
    next();
    expect_block_end();
    return s;
  }

  StmtPtr parse_with() {
    auto s = std::make_unique<Stmt>(Stmt::Kind::kWith, cur().line);
    next();
    while (cur().type != Token::kBlockEnd) {
      if (!s->assigns.empty()) expect_op(",");
      std::string name = expect_name();
      expect_op("=");
      s->assigns.emplace_back(std::move(name), parse_expression(true));
    }
    expect_block_end();
    s->body = parse_body({"endwith"});
    next();
    expect_block_end();
    return s;
  }

  FilterCall parse_filter_call() {
    FilterCall f;
    f.line = cur().line;
    f.name = expect_name();
    while (is_op(".") && peek().type == Token::kName) {
      next();
      f.name += "." + expect_name();
    }
    if (is_op("(")) f.args = parse_call_args();
    return f;
  }

  // ---- expressions

  bool at_end_rule(const std::vector<std::string>& extra_end) const {
    if (cur().type == Token::kVarEnd || cur().type == Token::kBlockEnd || cur().type == Token::kEof) return true;
    if (is_op(")") || is_op("]") || is_op("}")) return true;
    if (cur().type == Token::kName)
      for (const auto& e : extra_end)
        if (cur().text == e) return true;
    return false;
  }

  ExprPtr parse_tuple(bool with_condexpr, bool explicit_parens, const std::vector<std::string>& extra_end = {}) {
    const int line = cur().line;
    std::vector<ExprPtr> items;
    bool is_tuple = false;
    while (true) {
      if (!items.empty()) expect_op(",");
      if (at_end_rule(extra_end)) break;
      items.push_back(parse_expression(with_condexpr));
      if (is_op(",")) is_tuple = true;
      else break;
    }
    if (!is_tuple) {
      if (!items.empty()) return std::move(items[0]);
      if (!explicit_parens) syntax_error(line, "expected an expression, got " + describe(cur()));
    }
    auto e = mk(Expr::Kind::kTuple, line);
    e->children = std::move(items);
    return e;
  }

  ExprPtr parse_expression(bool with_condexpr) {
    DepthGuard g(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
    ExprPtr e1 = parse_or();
    while (is_name("if")) {
      const int line = cur().line;
      next();
      ExprPtr test = parse_or();
      ExprPtr else_e;
      if (skip_name("else")) else_e = parse_condexpr();
      auto e = mk(Expr::Kind::kCond, line);
      e->a = std::move(test);
      e->b = std::move(e1);
      e->c = std::move(else_e);
      e1 = std::move(e);
    }
    return e1;
  }

  ExprPtr binary(Expr::Kind k, std::string op, ExprPtr l, ExprPtr r, int line) {
    auto e = mk(k, line);
    e->name = std::move(op);
    e->a = std::move(l);
    e->b = std::move(r);
    return e;
  }

  // Left-deep chains (a+b+c+...) are bounded too, since evaluation recurses per level.
  void chain_guard(int& n) {
    if (++n > max_nesting_) syntax_error(cur().line, "expression nested too deeply");
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    int n = 0;
    while (is_name("or")) {
      const int line = cur().line;
      chain_guard(n);
      next();
      l = binary(Expr::Kind::kOr, "or", std::move(l), parse_and(), line);
    }
    return l;
  }
  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    int n = 0;
    while (is_name("and")) {
      const int line = cur().line;
      chain_guard(n);
      next();
      l = binary(Expr::Kind::kAnd, "and", std::move(l), parse_not(), line);
    }
    return l;
  }
  ExprPtr parse_not() {
    if (is_name("not")) {
      DepthGuard g(*this);
      auto e = mk(Expr::Kind::kNot, cur().line);
      next();
      e->a = parse_not();
      return e;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    const int line = cur().line;
    ExprPtr first = parse_math1();
    std::vector<std::string> ops;
    std::vector<ExprPtr> rhs;
    while (true) {
      if (cur().type == Token::kOp && (cur().text == "==" || cur().text == "!=" || cur().text == "<" ||
                                       cur().text == ">" || cur().text == "<=" || cur().text == ">=")) {
        ops.push_back(cur().text);
        next();
      } else if (is_name("in")) {
        ops.push_back("in");
        next();
      } else if (is_name("not") && peek().type == Token::kName && peek().text == "in") {
        ops.push_back("notin");
        next();
        next();
      } else {
        break;
      }
      if (ops.size() > static_cast<size_t>(max_nesting_)) syntax_error(line, "expression nested too deeply");
      rhs.push_back(parse_math1());
    }
    if (ops.empty()) return first;
    auto e = mk(Expr::Kind::kCompare, line);
    e->a = std::move(first);
    e->children = std::move(rhs);
    e->ops = std::move(ops);
    return e;
  }
  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    int n = 0;
    while (is_op("+") || is_op("-")) {
      const std::string op = cur().text;
      const int line = cur().line;
      chain_guard(n);
      next();
      l = binary(Expr::Kind::kBinary, op, std::move(l), parse_concat(), line);
    }
    return l;
  }
  ExprPtr parse_concat() {
    const int line = cur().line;
    ExprPtr first = parse_math2();
    if (!is_op("~")) return first;
    auto e = mk(Expr::Kind::kConcat, line);
    e->children.push_back(std::move(first));
    while (skip_op("~")) e->children.push_back(parse_math2());
    return e;
  }
  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    int n = 0;
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = cur().text;
      const int line = cur().line;
      chain_guard(n);
      next();
      l = binary(Expr::Kind::kBinary, op, std::move(l), parse_pow(), line);
    }
    return l;
  }
  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    int n = 0;
    while (is_op("**")) {
      const int line = cur().line;
      chain_guard(n);
      next();
      l = binary(Expr::Kind::kBinary, "**", std::move(l), parse_unary(true), line);
    }
    return l;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard g(*this);
    ExprPtr node;
    const int line = cur().line;
    if (is_op("-") || is_op("+")) {
      const bool neg = cur().text == "-";
      next();
      node = mk(neg ? Expr::Kind::kNeg : Expr::Kind::kPos, line);
      node->a = parse_unary(false);
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    DepthGuard g(*this);
    const Token& t = cur();
    const int line = t.line;
    if (t.type == Token::kName) {
      auto e = mk(Expr::Kind::kLiteral, line);
      if (t.text == "true" || t.text == "True") e->literal = Value(true);
      else if (t.text == "false" || t.text == "False") e->literal = Value(false);
      else if (t.text == "none" || t.text == "None") e->literal = Value::none();
      else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      next();
      return e;
    }
    if (t.type == Token::kString) {
      std::string s = t.text;
      next();
      while (cur().type == Token::kString) {
        s += cur().text;
        next();
      }
      auto e = mk(Expr::Kind::kLiteral, line);
      e->literal = Value(std::move(s));
      return e;
    }
    if (t.type == Token::kInt || t.type == Token::kFloat) {
      auto e = mk(Expr::Kind::kLiteral, line);
      e->literal = t.type == Token::kInt ? Value(t.ival) : Value(t.fval);
      next();
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr e = parse_tuple(true, true);
      expect_op(")");
      return e;
    }
    if (is_op("[")) {
      next();
      auto e = mk(Expr::Kind::kList, line);
      while (!is_op("]")) {
        if (!e->children.empty()) expect_op(",");
        if (is_op("]")) break;
        e->children.push_back(parse_expression(true));
      }
      expect_op("]");
      return e;
    }
    if (is_op("{")) {
      next();
      auto e = mk(Expr::Kind::kDict, line);
      while (!is_op("}")) {
        if (!e->children.empty()) expect_op(",");
        if (is_op("}")) break;
        e->children.push_back(parse_expression(true));
        expect_op(":");
        e->children.push_back(parse_expression(true));
      }
      expect_op("}");
      return e;
    }
    syntax_error(line, "unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    int n = 0;
    while (true) {
      if (is_op(".") || is_op("[")) {
        chain_guard(n);
        node = parse_subscript(std::move(node));
      } else if (is_op("(")) {
        chain_guard(n);
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    int n = 0;
    while (true) {
      if (is_op("|")) {
        chain_guard(n);
        next();
        FilterCall f = parse_filter_call();
        auto e = mk(Expr::Kind::kFilter, f.line);
        e->name = std::move(f.name);
        e->args = std::move(f.args);
        e->a = std::move(node);
        node = std::move(e);
      } else if (is_name("is")) {
        chain_guard(n);
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        chain_guard(n);
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr node) {
    const int line = cur().line;
    if (skip_op(".")) {
      if (cur().type == Token::kName) {
        auto e = mk(Expr::Kind::kGetAttr, line);
        e->name = cur().text;
        e->a = std::move(node);
        next();
        return e;
      }
      if (cur().type == Token::kInt) {
        auto e = mk(Expr::Kind::kGetItem, line);
        e->a = std::move(node);
        e->b = mk(Expr::Kind::kLiteral, line);
        e->b->literal = Value(cur().ival);
        next();
        return e;
      }
      syntax_error(line, "expected name or number after '.'");
    }
    expect_op("[");
    // slice or index
    ExprPtr start, stop, step;
    bool is_slice = false;
    if (!is_op(":")) start = parse_expression(true);
    if (skip_op(":")) {
      is_slice = true;
      if (!is_op("]") && !is_op(":")) stop = parse_expression(true);
      if (skip_op(":")) {
        if (!is_op("]")) step = parse_expression(true);
      }
    } else if (is_op(",")) {
      // tuple index a[1, 2]
      auto tup = mk(Expr::Kind::kTuple, line);
      tup->children.push_back(std::move(start));
      while (skip_op(",")) {
        if (is_op("]")) break;
        tup->children.push_back(parse_expression(true));
      }
      start = std::move(tup);
    }
    expect_op("]");
    if (!is_slice) {
      auto e = mk(Expr::Kind::kGetItem, line);
      e->a = std::move(node);
      e->b = std::move(start);
      return e;
    }
    auto e = mk(Expr::Kind::kSlice, line);
    e->a = std::move(node);
    e->has_start = start != nullptr;
    e->has_stop = stop != nullptr;
    e->has_step = step != nullptr;
    e->children.push_back(std::move(start));
    e->children.push_back(std::move(stop));
    e->children.push_back(std::move(step));
    return e;
  }

  ArgList parse_call_args() {
    ArgList a;
    expect_op("(");
    bool first = true;
    while (!is_op(")")) {
      if (!first) {
        expect_op(",");
        if (is_op(")")) break;
      }
      first = false;
      if (skip_op("*")) {
        a.star = parse_expression(true);
      } else if (skip_op("**")) {
        a.starstar = parse_expression(true);
      } else if (cur().type == Token::kName && peek().type == Token::kOp && peek().text == "=") {
        Arg arg;
        arg.name = cur().text;
        next();
        next();
        arg.value = parse_expression(true);
        a.args.push_back(std::move(arg));
      } else {
        for (const auto& prev : a.args)
          if (!prev.name.empty()) syntax_error(cur().line, "positional argument follows keyword argument");
        Arg arg;
        arg.value = parse_expression(true);
        a.args.push_back(std::move(arg));
      }
    }
    next();
    return a;
  }

  ExprPtr parse_call(ExprPtr node) {
    auto e = mk(Expr::Kind::kCall, cur().line);
    e->args = parse_call_args();
    e->a = std::move(node);
    return e;
  }

  ExprPtr parse_test(ExprPtr node) {
    const int line = cur().line;
    next();  // 'is'
    const bool negated = skip_name("not");
    std::string name = expect_name();
    while (is_op(".") && peek().type == Token::kName) {
      next();
      name += "." + expect_name();
    }
    auto e = mk(Expr::Kind::kTest, line);
    e->name = std::move(name);
    e->negated = negated;
    e->a = std::move(node);
    if (is_op("(")) {
      e->args = parse_call_args();
    } else if ((cur().type == Token::kName || cur().type == Token::kString || cur().type == Token::kInt ||
                cur().type == Token::kFloat || is_op("(") || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and")) {
      if (is_name("is")) syntax_error(cur().line, "You cannot chain multiple tests with is");
      ExprPtr arg = parse_postfix(parse_primary());
      Arg a;
      a.value = std::move(arg);
      e->args.args.push_back(std::move(a));
    }
    return e;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
  int depth_ = 0;
  int max_nesting_;
  int loop_depth_ = 0;
};

}  // namespace

std::unique_ptr<Template> parse_template(const std::string& source, int max_nesting) {
  Lexer lexer(source);
  Parser parser(lexer.run(), max_nesting);
  return parser.parse();
}

}  // namespace llmserve::jinja
