// pattern_parse.cpp — the recursive-descent parser for rule patterns (grammar in pattern.h).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <sstream>

#include "core/ir/diag.h"
#include "core/ir/text_util.h"
#include "core/rewrite/pattern.h"

namespace lathe {

namespace {

std::string closest_op(std::string_view name) { return closest_op_name(name, 3); }  // close names only

class PatternParser {
 public:
  PatternParser(std::string_view text, const std::string& what) : s_(text), what_(what) {}

  Pattern parse() {
    Pattern p;
    p.source = std::string(s_);
    skip_ws();
    if (at_end()) fail("empty pattern; expected an op like Add(x, 0), a name, a number or _");
    p.root = parse_node(p, 0);
    skip_ws();
    if (!at_end()) fail(std::string("unexpected '") + s_[pos_] + "' after the end of the pattern");
    return p;
  }

 private:
  std::string_view s_;
  std::string what_;
  size_t pos_ = 0;

  [[noreturn]] void fail(const std::string& msg, size_t at = std::string::npos) {
    Diagnostic d;
    d.message = what_ + ": " + msg;
    d.line = 1;
    d.col = static_cast<int>((at == std::string::npos ? pos_ : at) + 1);
    d.source_line = std::string(s_);
    d.file = "<pattern>";
    throw UserError(d);
  }
  bool at_end() const { return pos_ >= s_.size(); }
  char peek() const { return at_end() ? '\0' : s_[pos_]; }
  void skip_ws() { while (!at_end() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_; }
  void expect(char c, const char* context) {
    skip_ws();
    if (peek() != c) {
      std::string got = at_end() ? "the end of the pattern" : std::string("'") + peek() + "'";
      fail(std::string("expected '") + c + "' " + context + ", got " + got);
    }
    ++pos_;
  }
  static bool ident_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }
  std::string ident() {
    size_t b = pos_;
    while (!at_end() && ident_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(b, pos_ - b));
  }
  bool number_start() const {
    char c = peek();
    if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') return true;
    if (c == '-' && pos_ + 1 < s_.size()) {
      char d = s_[pos_ + 1];
      return std::isdigit(static_cast<unsigned char>(d)) || d == '.' || s_.substr(pos_ + 1, 3) == "inf";
    }
    return false;
  }
  double number() {
    size_t b = pos_;
    if (s_.substr(pos_, 4) == "-inf") { pos_ += 4; return -INFINITY; }
    std::string buf(s_.substr(pos_, 64));
    char* endp = nullptr;
    double v = std::strtod(buf.c_str(), &endp);
    size_t used = static_cast<size_t>(endp - buf.c_str());
    if (used == 0) fail("expected a number", b);
    pos_ += used;
    if (!at_end() && ident_char(peek())) fail("malformed number", b);
    return v;
  }

  int bind_slot(Pattern& p, const std::string& name) {
    for (size_t i = 0; i < p.names.size(); ++i) if (p.names[i] == name) return static_cast<int>(i);
    p.names.push_back(name);
    return static_cast<int>(p.names.size() - 1);
  }

  // pattern := '_' | number | name | OpName attrs? ('(' args ')')?
  PatternNode parse_node(Pattern& p, int depth) {
    if (depth > 64) fail("pattern nested too deeply");
    skip_ws();
    PatternNode n;
    n.begin = static_cast<int>(pos_);
    if (number_start()) {
      n.kind = PatternKind::Number;
      n.number = number();
    } else if (peek() == '_' && (pos_ + 1 >= s_.size() || !ident_char(s_[pos_ + 1]))) {
      ++pos_;
      n.kind = PatternKind::Wildcard;
    } else if (std::isalpha(static_cast<unsigned char>(peek())) || peek() == '_') {
      size_t at = pos_;
      std::string id = ident();
      if (id == "inf" || id == "nan") {
        n.kind = PatternKind::Number;
        n.number = id == "inf" ? INFINITY : NAN;
      } else if (std::isupper(static_cast<unsigned char>(id[0]))) {
        parse_op(p, n, id, at, depth);
      } else {
        skip_ws();
        if (peek() == '(' || peek() == '{') {
          std::string hint = closest_op(id);
          fail("'" + id + "' is a binding name (lower-case) and cannot take operands" +
                   (hint.empty() ? std::string("; op names start with an upper-case letter") : "; did you mean " + hint + "?"),
               at);
        }
        n.kind = PatternKind::Bind;
        n.name = id;
        n.slot = bind_slot(p, id);
      }
    } else if (at_end()) {
      fail("unexpected end of the pattern; expected an operand");
    } else {
      fail(std::string("unexpected '") + peek() + "'; expected an op, a name, a number or _");
    }
    n.end = static_cast<int>(pos_);
    return n;
  }

  void parse_op(Pattern& p, PatternNode& n, const std::string& id, size_t at, int depth) {
    auto op = op_from_name(id);
    if (!op) {
      std::string hint = closest_op(id);
      fail("unknown op '" + id + "'" + (hint.empty() ? std::string(" (ops are the primitive names of ops.def)")
                                                      : "; did you mean " + hint + "?"),
           at);
    }
    n.kind = PatternKind::OpNode;
    n.op = *op;
    skip_ws();
    if (peek() == '{') parse_attrs(n);
    skip_ws();
    int arity = op_info(*op).arity;
    if (peek() != '(') {
      if (arity > 0) fail(id + " needs its " + std::to_string(arity) + " operand(s) in parentheses, e.g. " + id + "(x" +
                              (arity > 1 ? ", y" : "") + (arity > 2 ? ", z" : "") + ")");
      return;
    }
    size_t open = pos_;
    ++pos_;
    n.has_args = true;
    skip_ws();
    if (*op == Op::Const) {  // Const(a) / Const(2) / Const(_)
      PatternNode arg = parse_node(p, depth + 1);
      expect(')', "to close Const(");
      if (arg.kind == PatternKind::Bind) {
        n.kind = PatternKind::ConstBind;
        n.name = arg.name;
        n.slot = arg.slot;
      } else if (arg.kind == PatternKind::Number) {
        n.kind = PatternKind::Number;
        n.number = arg.number;
      } else if (arg.kind == PatternKind::Wildcard) {
        n.has_args = false;  // any scalar Const
      } else {
        fail("Const takes a name (Const(a) binds its value), a number or _", arg.begin);
      }
      return;
    }
    if (peek() != ')') {
      while (true) {
        n.args.push_back(parse_node(p, depth + 1));
        skip_ws();
        if (peek() == ',') { ++pos_; continue; }
        break;
      }
    }
    expect(')', ("to close " + id + "(").c_str());
    if (arity >= 0 && static_cast<int>(n.args.size()) != arity)
      fail(id + " takes " + std::to_string(arity) + " operand(s), got " + std::to_string(n.args.size()), open);
  }

  // attrs := '{' key '=' value (',' key '=' value)* '}'
  void parse_attrs(PatternNode& n) {
    ++pos_;
    skip_ws();
    while (peek() != '}') {
      size_t at = pos_;
      std::string key = ident();
      if (key.empty()) fail("expected an attribute name (op, axes, name, axis, dtype)");
      expect('=', ("after attribute '" + key + "'").c_str());
      skip_ws();
      size_t vat = pos_;
      if (key == "op") {
        std::string v = string_value();
        auto r = reduce_op_from_name(v);
        if (!r) fail("unknown reduce op '" + v + "'; expected add, max or mul", vat);
        if (n.op != Op::Reduce) fail("attribute 'op' applies to Reduce only", at);
        n.reduce = r;
      } else if (key == "axes") {
        std::vector<int> axes;
        expect('[', "to start the axes list");
        skip_ws();
        while (peek() != ']') {
          size_t nat = pos_;
          double v = number();
          if (v != std::floor(v) || v < 0) fail("axes must be non-negative integers", nat);
          axes.push_back(static_cast<int>(v));
          skip_ws();
          if (peek() == ',') { ++pos_; skip_ws(); } else break;
        }
        expect(']', "to close the axes list");
        if (n.op != Op::Reduce) fail("attribute 'axes' applies to Reduce only", at);
        std::sort(axes.begin(), axes.end());
        n.axes = axes;
      } else if (key == "name") {
        if (n.op != Op::Input && n.op != Op::Extern) fail("attribute 'name' applies to Input and Extern only", at);
        n.attr_name = string_value();
      } else if (key == "axis") {
        if (n.op != Op::Index && n.op != Op::Take) fail("attribute 'axis' applies to Index and Take only", at);
        double v = number();
        if (v != std::floor(v) || v < 0) fail("axis must be a non-negative integer", vat);
        n.axis = static_cast<int>(v);
      } else if (key == "dtype") {
        std::string v = string_value();
        auto dt = dtype_from_name(v);
        if (!dt) fail("unknown dtype '" + v + "'", vat);
        n.dtype = dt;
      } else {
        fail("unknown attribute '" + key + "'; expected op, axes, name, axis or dtype", at);
      }
      skip_ws();
      if (peek() == ',') { ++pos_; skip_ws(); continue; }
      if (peek() != '}') fail("expected ',' or '}' in the attribute list");
    }
    ++pos_;
  }

  std::string string_value() {
    skip_ws();
    char q = peek();
    if (q != '"' && q != '\'') fail("expected a quoted string");
    size_t b = ++pos_;
    while (!at_end() && s_[pos_] != q) ++pos_;
    if (at_end()) fail("unterminated string", b - 1);
    std::string v(s_.substr(b, pos_ - b));
    ++pos_;
    return v;
  }
};

}  // namespace

int Pattern::slot_of(std::string_view name) const {
  for (size_t i = 0; i < names.size(); ++i) if (names[i] == name) return static_cast<int>(i);
  return -1;
}

std::optional<Op> Pattern::root_op() const {
  switch (root.kind) {
    case PatternKind::OpNode: case PatternKind::ConstBind: return root.op == Op::Const ? std::nullopt : std::optional(root.op);
    default: return std::nullopt;  // numbers and Const(...) match Const nodes and broadcast Views
  }
}

Pattern parse_pattern(std::string_view text, const std::string& what) { return PatternParser(text, what).parse(); }

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  std::ostringstream os;
  os.precision(9);
  os << v;
  return os.str();
}

}  // namespace lathe
