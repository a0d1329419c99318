// symbolic.cpp — construction with light canonicalization, evaluation, printing, parsing.
#include "core/ir/symbolic.h"

#include <cctype>
#include <cstdint>
#include <string>
#include <functional>

#include "core/ir/diag.h"

namespace lathe {

namespace {

// Shape arithmetic on constants is checked: a malformed model (or a typo in a script) can
// ask for dims whose product does not fit in 64 bits, and that must be a user error, not
// undefined behaviour that later wraps into a small, plausible size.
[[noreturn]] void overflow(const char* op, int64_t a, int64_t b) {
  std::string msg = "shape arithmetic overflows 64 bits: ";
  msg += std::to_string(a);
  msg += ' ';
  msg += op;
  msg += ' ';
  msg += std::to_string(b);
  throw UserError(msg);
}
int64_t add_i(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_add_overflow(a, b, &r)) overflow("+", a, b);
  return r;
}
int64_t mul_i(int64_t a, int64_t b) {
  int64_t r;
  if (__builtin_mul_overflow(a, b, &r)) overflow("*", a, b);
  return r;
}
int64_t floordiv_i(int64_t a, int64_t b) {
  if (b == 0) return 0;
  if (b == -1 && a == INT64_MIN) overflow("/", a, b);
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
int64_t floormod_i(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t m = a % b;
  if (m != 0 && ((m < 0) != (b < 0))) m += b;
  return m;
}

const char* op_text(SymKind k) {
  switch (k) {
    case SymKind::Add: return "+";
    case SymKind::Mul: return "*";
    case SymKind::FloorDiv: return "/";
    case SymKind::Mod: return "%";
    default: return "";
  }
}

int prec(const SymInt& s) {
  if (s.is_const()) return s.value() < 0 ? 1 : 3;
  switch (s.expr()->kind) {
    case SymKind::Add: return 1;
    case SymKind::Mul: case SymKind::FloorDiv: case SymKind::Mod: return 2;
    default: return 3;
  }
}

std::string wrap(const SymInt& s, int min_prec) {
  std::string t = s.to_string();
  return prec(s) < min_prec ? "(" + t + ")" : t;
}

}  // namespace

struct SymBuild {
  static SymInt make(SymKind k, SymInt a, SymInt b) {
    auto e = std::make_shared<SymExpr>();
    e->kind = k;
    // canonical order for commutative kinds: constants last, then by text
    if ((k == SymKind::Add || k == SymKind::Mul || k == SymKind::Max || k == SymKind::Min)) {
      bool swap = a.is_const() && !b.is_const();
      if (!a.is_const() && !b.is_const() && a.to_string() > b.to_string()) swap = true;
      if (swap) std::swap(a, b);
    }
    e->lhs = a;
    e->rhs = b;
    switch (k) {
      case SymKind::Add:
        if (b.is_const() && b.value() < 0) e->text = wrap(a, 1) + "-" + std::to_string(-b.value());
        else e->text = wrap(a, 1) + "+" + wrap(b, 1);
        break;
      case SymKind::Mul: e->text = wrap(a, 2) + "*" + wrap(b, 3); break;
      case SymKind::FloorDiv: case SymKind::Mod: e->text = wrap(a, 2) + op_text(k) + wrap(b, 3); break;
      case SymKind::Max: e->text = "max(" + a.to_string() + "," + b.to_string() + ")"; break;
      case SymKind::Min: e->text = "min(" + a.to_string() + "," + b.to_string() + ")"; break;
      default: break;
    }
    SymInt r;
    r.e_ = std::move(e);
    return r;
  }
};

SymInt SymInt::var(std::string name) {
  auto e = std::make_shared<SymExpr>();
  e->kind = SymKind::Var;
  e->name = name;
  e->text = std::move(name);
  SymInt r;
  r.e_ = std::move(e);
  return r;
}

int64_t SymInt::value() const {
  LATHE_CHECK(!e_, "SymInt::value() on a symbolic dim " + to_string() + "; call eval() with bindings");
  return c_;
}

std::optional<int64_t> SymInt::eval(const Bindings& b) const {
  if (!e_) return c_;
  const SymExpr& e = *e_;
  if (e.kind == SymKind::Var) {
    auto it = b.find(e.name);
    if (it == b.end()) return std::nullopt;
    return it->second;
  }
  auto l = e.lhs.eval(b), r = e.rhs.eval(b);
  if (!l || !r) return std::nullopt;
  switch (e.kind) {
    case SymKind::Add: return add_i(*l, *r);
    case SymKind::Mul: return mul_i(*l, *r);
    case SymKind::FloorDiv: return floordiv_i(*l, *r);
    case SymKind::Mod: return floormod_i(*l, *r);
    case SymKind::Max: return std::max(*l, *r);
    case SymKind::Min: return std::min(*l, *r);
    default: return std::nullopt;
  }
}

void SymInt::free_vars(std::set<std::string>& out) const {
  if (!e_) return;
  if (e_->kind == SymKind::Var) { out.insert(e_->name); return; }
  e_->lhs.free_vars(out);
  e_->rhs.free_vars(out);
}

std::string SymInt::to_string() const { return e_ ? e_->text : std::to_string(c_); }

size_t SymInt::hash() const {
  return e_ ? std::hash<std::string>()(e_->text) : std::hash<int64_t>()(c_) * 0x9e3779b97f4a7c15ull;
}

bool operator==(const SymInt& a, const SymInt& b) {
  if (a.is_const() != b.is_const()) return false;
  if (a.is_const()) return a.c_ == b.c_;
  return a.e_ == b.e_ || a.e_->text == b.e_->text;
}

SymInt operator+(const SymInt& a, const SymInt& b) {
  if (a.is_const() && b.is_const()) return add_i(a.value(), b.value());
  if (a.is_const() && a.value() == 0) return b;
  if (b.is_const() && b.value() == 0) return a;
  // (x + c1) + c2 -> x + (c1+c2)
  if (b.is_const() && a.expr()->kind == SymKind::Add && a.expr()->rhs.is_const())
    return a.expr()->lhs + add_i(a.expr()->rhs.value(), b.value());
  if (a.is_const()) return b + a;
  return SymBuild::make(SymKind::Add, a, b);
}

SymInt operator-(const SymInt& a, const SymInt& b) {
  if (a == b) return 0;
  if (b.is_const()) return a + SymInt(mul_i(-1, b.value()));
  return a + SymInt(-1) * b;
}

SymInt operator*(const SymInt& a, const SymInt& b) {
  if (a.is_const() && b.is_const()) return mul_i(a.value(), b.value());
  if ((a.is_const() && a.value() == 0) || (b.is_const() && b.value() == 0)) return 0;
  if (a.is_const() && a.value() == 1) return b;
  if (b.is_const() && b.value() == 1) return a;
  // (x * c1) * c2 -> x * (c1*c2)
  const SymInt& c = a.is_const() ? a : b;
  const SymInt& x = a.is_const() ? b : a;
  if (c.is_const() && x.expr()->kind == SymKind::Mul && x.expr()->rhs.is_const())
    return x.expr()->lhs * SymInt(mul_i(x.expr()->rhs.value(), c.value()));
  return SymBuild::make(SymKind::Mul, a, b);
}

SymInt floordiv(const SymInt& a, const SymInt& b) {
  if (a.is_const() && b.is_const()) return floordiv_i(a.value(), b.value());
  if (b.is_const() && b.value() == 1) return a;
  if (a == b) return 1;
  // (x * c) / c -> x
  if (b.is_const() && !a.is_const() && a.expr()->kind == SymKind::Mul && a.expr()->rhs == b) return a.expr()->lhs;
  return SymBuild::make(SymKind::FloorDiv, a, b);
}

SymInt operator%(const SymInt& a, const SymInt& b) {
  if (a.is_const() && b.is_const()) return floormod_i(a.value(), b.value());
  if (b.is_const() && b.value() == 1) return 0;
  if (a == b) return 0;
  if (b.is_const() && !a.is_const() && a.expr()->kind == SymKind::Mul && a.expr()->rhs == b) return 0;
  return SymBuild::make(SymKind::Mod, a, b);
}

SymInt smax(const SymInt& a, const SymInt& b) {
  if (a.is_const() && b.is_const()) return std::max(a.value(), b.value());
  if (a == b) return a;
  return SymBuild::make(SymKind::Max, a, b);
}

SymInt smin(const SymInt& a, const SymInt& b) {
  if (a.is_const() && b.is_const()) return std::min(a.value(), b.value());
  if (a == b) return a;
  return SymBuild::make(SymKind::Min, a, b);
}

// ---- parsing: expr := term (('+'|'-') term)* ; term := unary (('*'|'/'|'%') unary)* ;
//      unary := '-' unary | atom ; atom := INT | NAME | NAME '(' expr ',' expr ')' | '(' expr ')'
namespace {
struct SymParser {
  std::string_view s;
  size_t i = 0;
  bool failed = false;
  size_t fail_pos = 0;

  void skip() { while (i < s.size() && std::isspace(static_cast<unsigned char>(s[i]))) ++i; }
  bool eat(char c) { skip(); if (i < s.size() && s[i] == c) { ++i; return true; } return false; }
  SymInt fail() { if (!failed) { failed = true; fail_pos = i; } return 0; }

  SymInt expr() {
    SymInt v = term();
    for (;;) {
      if (eat('+')) v = v + term();
      else if (eat('-')) v = v - term();
      else return v;
    }
  }
  SymInt term() {
    SymInt v = unary();
    for (;;) {
      if (eat('*')) v = v * unary();
      else if (eat('/')) v = floordiv(v, unary());
      else if (eat('%')) v = v % unary();
      else return v;
    }
  }
  SymInt unary() {
    if (eat('-')) return -unary();
    return atom();
  }
  SymInt atom() {
    skip();
    if (i >= s.size()) return fail();
    if (eat('(')) {
      SymInt v = expr();
      if (!eat(')')) return fail();
      return v;
    }
    if (std::isdigit(static_cast<unsigned char>(s[i]))) {
      int64_t v = 0;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) {
        if (v > (INT64_MAX - 9) / 10) return fail();
        v = v * 10 + (s[i++] - '0');
      }
      return v;
    }
    if (std::isalpha(static_cast<unsigned char>(s[i])) || s[i] == '_') {
      size_t b = i;
      while (i < s.size() && (std::isalnum(static_cast<unsigned char>(s[i])) || s[i] == '_')) ++i;
      std::string name(s.substr(b, i - b));
      if ((name == "max" || name == "min") && eat('(')) {
        SymInt a = expr();
        if (!eat(',')) return fail();
        SymInt c = expr();
        if (!eat(')')) return fail();
        return name == "max" ? smax(a, c) : smin(a, c);
      }
      return SymInt::var(name);
    }
    return fail();
  }
};
}  // namespace

std::optional<SymInt> SymInt::parse(std::string_view text, size_t* error_pos) {
  SymParser p{text};
  SymInt v = p.expr();
  p.skip();
  if (!p.failed && p.i != text.size()) { p.failed = true; p.fail_pos = p.i; }
  if (p.failed) {
    if (error_pos) *error_pos = p.fail_pos;
    return std::nullopt;
  }
  return v;
}

std::string shape_to_string(const Shape& s) {
  std::string r = "[";
  for (size_t i = 0; i < s.size(); ++i) {
    if (i) r += ", ";
    r += s[i].to_string();
  }
  return r + "]";
}

SymInt shape_numel(const Shape& s) {
  SymInt n = 1;
  for (auto& d : s) n = n * d;
  return n;
}

bool shape_is_const(const Shape& s) {
  for (auto& d : s) if (!d.is_const()) return false;
  return true;
}

std::vector<int64_t> shape_eval(const Shape& s, const Bindings& b) {
  std::vector<int64_t> r;
  r.reserve(s.size());
  for (auto& d : s) {
    auto v = d.eval(b);
    if (!v) {
      std::set<std::string> vars;
      d.free_vars(vars);
      std::string missing;
      for (auto& n : vars) if (!b.count(n)) missing += (missing.empty() ? "" : ", ") + n;
      throw UserError("symbolic dimension '" + d.to_string() + "' is not bound (missing: " + missing +
                      "); bind it by giving an input of that shape");
    }
    r.push_back(*v);
  }
  return r;
}

std::vector<int64_t> shape_values(const Shape& s) {
  std::vector<int64_t> r;
  r.reserve(s.size());
  for (auto& d : s) r.push_back(d.value());
  return r;
}

Shape shape_from(const std::vector<int64_t>& v) { return Shape(v.begin(), v.end()); }

std::vector<SymInt> contiguous_strides(const Shape& s) {
  std::vector<SymInt> st(s.size());
  SymInt acc = 1;
  for (size_t i = s.size(); i-- > 0;) {
    st[i] = acc;
    acc = acc * s[i];
  }
  return st;
}

}  // namespace lathe
