// symbolic.h — symbolic integers for shapes: constants, named dims ("B", "T") and small
// expressions of them (+ - * floordiv mod max min), bound to values at run time.
//
// A SymInt is a constant (the common, fast case) or an immutable expression tree.
// Expressions are kept in a light canonical form (constants folded, x+0, x*1, x*0
// removed, commutative operands ordered) so structural equality is a good proxy for
// semantic equality; `B*784 == 784*B` holds. to_string() is the text form used by the
// printer and parsed back by SymInt::parse.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

namespace lathe {

struct SymExpr;
using Bindings = std::map<std::string, int64_t, std::less<>>;

class SymInt {
 public:
  SymInt() = default;
  SymInt(int64_t v) : c_(v) {}  // NOLINT: implicit on purpose, shapes are mostly constant
  SymInt(int v) : c_(v) {}      // NOLINT
  static SymInt var(std::string name);
  // Parses "B", "B*784", "(T+1)/2", "max(B,1)". Returns nullopt on a syntax error and sets
  // *error_pos to the offending column (0-based) when given.
  static std::optional<SymInt> parse(std::string_view text, size_t* error_pos = nullptr);

  bool is_const() const { return !e_; }
  int64_t value() const;                    // asserts is_const()
  std::optional<int64_t> try_value() const { return e_ ? std::nullopt : std::optional<int64_t>(c_); }
  // Evaluates with the given bindings; nullopt if a name is unbound.
  std::optional<int64_t> eval(const Bindings& b) const;
  void free_vars(std::set<std::string>& out) const;
  std::string to_string() const;
  size_t hash() const;

  friend SymInt operator+(const SymInt& a, const SymInt& b);
  friend SymInt operator-(const SymInt& a, const SymInt& b);
  friend SymInt operator*(const SymInt& a, const SymInt& b);
  friend SymInt floordiv(const SymInt& a, const SymInt& b);
  friend SymInt operator%(const SymInt& a, const SymInt& b);
  friend SymInt smax(const SymInt& a, const SymInt& b);
  friend SymInt smin(const SymInt& a, const SymInt& b);
  SymInt operator-() const { return SymInt(0) - *this; }
  friend bool operator==(const SymInt& a, const SymInt& b);
  friend bool operator!=(const SymInt& a, const SymInt& b) { return !(a == b); }

  const SymExpr* expr() const { return e_.get(); }

 private:
  int64_t c_ = 0;
  std::shared_ptr<const SymExpr> e_;
  friend struct SymExpr;
  friend struct SymBuild;
};

enum class SymKind : uint8_t { Const, Var, Add, Mul, FloorDiv, Mod, Max, Min };

struct SymExpr {
  SymKind kind;
  int64_t value = 0;   // Const
  std::string name;    // Var
  SymInt lhs, rhs;     // binary kinds
  std::string text;    // canonical text, computed once
};

using Shape = std::vector<SymInt>;

std::string shape_to_string(const Shape& s);   // "[B, 784]"
SymInt shape_numel(const Shape& s);
bool shape_is_const(const Shape& s);
// Concrete shape under bindings; throws UserError naming the first unbound dim.
std::vector<int64_t> shape_eval(const Shape& s, const Bindings& b);
std::vector<int64_t> shape_values(const Shape& s);  // asserts constant
Shape shape_from(const std::vector<int64_t>& v);
// Row-major (C order) strides of a shape, in elements.
std::vector<SymInt> contiguous_strides(const Shape& s);

}  // namespace lathe
