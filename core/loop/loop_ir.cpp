// loop_ir.cpp — loop IR builders and the small simplifier they apply (constant folding,
// x+0, x*1, x*0, x/1, x%1, re-association of constants, (x/c)*c + x%c) plus substitution and walks.
#include "core/loop/loop_ir.h"

#include <cstdint>

#include "core/ir/diag.h"
#include "core/runtime/host_tensor.h"

namespace lathe::loop {

namespace {

ExprRef make(Expr e) { return std::make_shared<const Expr>(std::move(e)); }

bool is_index_int(const ExprRef& e) { return e->dtype == DType::I64 && e->lanes == 1; }

// wrapping i64 arithmetic for constant folding (matches the generated code's -fwrapv)
int64_t wadd(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b)); }
int64_t wmul(int64_t a, int64_t b) { return static_cast<int64_t>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b)); }

}  // namespace

ExprRef const_int(int64_t v, DType dt) {
  Expr e{ExprKind::Const, dt};
  e.i = v;
  e.f = static_cast<double>(v);
  return make(std::move(e));
}

ExprRef const_float(double v, DType dt) {
  Expr e{ExprKind::Const, dt};
  e.f = v;
  return make(std::move(e));
}

ExprRef const_of(double v, DType dt) {
  if (is_float(dt)) return const_float(v, dt);
  if (dt == DType::Bool) return const_int(v != 0, dt);
  return const_int(static_cast<int64_t>(v), dt);
}

ExprRef var(const std::string& name, DType dt, int lanes) {
  Expr e{ExprKind::Var, dt, lanes};
  e.name = name;
  return make(std::move(e));
}

ExprRef load(int buffer, DType dt, ExprRef index, ExprRef mask, int lanes) {
  if (mask && is_const(mask, 0)) return broadcast(const_of(0, dt), lanes);  // masked off: reads 0
  Expr e{ExprKind::Load, dt, lanes};
  e.buffer = buffer;
  e.args.push_back(std::move(index));
  if (mask && !is_const(mask, 1)) e.args.push_back(std::move(mask));
  return make(std::move(e));
}

ExprRef local_load(const std::string& name, DType dt, ExprRef index, int lanes) {
  Expr e{ExprKind::LocalLoad, dt, lanes};
  e.name = name;
  e.args.push_back(std::move(index));
  return make(std::move(e));
}

ExprRef unary(Op op, ExprRef a) {
  Expr e{ExprKind::Unary, a->dtype, a->lanes};
  e.op = op;
  e.args = {std::move(a)};
  return make(std::move(e));
}

ExprRef binary(Op op, ExprRef a, ExprRef b) {
  if (is_index_int(a) && is_index_int(b)) {
    if (op == Op::Add) return add(a, b);
    if (op == Op::Mul) return mul(a, b);
    if (op == Op::IDiv && is_const(b, 1)) return a;
    if (op == Op::Mod && is_const(b, 1)) return const_int(0);
    if (is_const(a) && is_const(b)) {
      int64_t x = a->i, y = b->i;
      switch (op) {
        case Op::IDiv: if (y != 0 && y != -1) return const_int(x / y); break;
        case Op::Mod: if (y != 0 && y != -1) return const_int(x % y); break;
        case Op::Max: return const_int(std::max(x, y));
        case Op::CmpLT: return const_int(x < y, DType::Bool);
        case Op::CmpNE: return const_int(x != y, DType::Bool);
        default: break;
      }
    }
  }
  if (a->dtype == DType::Bool && b->dtype == DType::Bool && op == Op::And) return logical_and(a, b);
  Expr e{ExprKind::Binary, (op == Op::CmpLT || op == Op::CmpNE) ? DType::Bool : a->dtype, std::max(a->lanes, b->lanes)};
  e.op = op;
  e.args = {std::move(a), std::move(b)};
  return make(std::move(e));
}

ExprRef select(ExprRef c, ExprRef a, ExprRef b) {
  if (is_const(c)) return c->i ? a : b;
  Expr e{ExprKind::Select, a->dtype, std::max(a->lanes, b->lanes)};
  e.args = {std::move(c), std::move(a), std::move(b)};
  return make(std::move(e));
}

ExprRef cast(ExprRef a, DType dt) {
  if (a->dtype == dt) return a;
  if (is_const(a) && a->lanes == 1) {
    if (is_float(a->dtype) && is_float(dt)) return const_float(a->f, dt);
    if (!is_float(a->dtype) && is_float(dt)) return const_float(static_cast<double>(a->i), dt);
    if (!is_float(a->dtype) && dt == DType::Bool) return const_int(a->i != 0, dt);
    if (!is_float(a->dtype)) return const_int(wrap_int(a->i, dt), dt);
    // float -> int saturates: leave it to the renderer's helper
  }
  Expr e{ExprKind::Cast, dt, a->lanes};
  e.args = {std::move(a)};
  return make(std::move(e));
}

ExprRef broadcast(ExprRef a, int lanes) {
  if (lanes == 1) return a;
  Expr e{ExprKind::Broadcast, a->dtype, lanes};
  e.args = {std::move(a)};
  return make(std::move(e));
}

ExprRef dot_acc(ExprRef acc, ExprRef a, ExprRef b, bool sat16) {
  int g = a->lanes;
  LATHE_CHECK(acc->dtype == DType::I32 && is_int(a->dtype) && is_int(b->dtype) && b->lanes == g * acc->lanes,
              "dot_acc: expects i32 × L accumulators, a group of G integers and G·L integers");
  LATHE_CHECK(!sat16 || (g == 4 && ((a->dtype == DType::U8 && b->dtype == DType::I8) || (a->dtype == DType::I8 && b->dtype == DType::U8))),
              "dot_acc: saturating pairs take u8 × i8 (or i8 × u8) groups of 4");
  Expr e{ExprKind::Dot, DType::I32, acc->lanes};
  e.op = sat16 ? Op::Max : Op::Add;
  e.args = {std::move(acc), std::move(a), std::move(b)};
  return make(std::move(e));
}

bool is_const(const ExprRef& e) { return e && e->kind == ExprKind::Const; }
bool is_const(const ExprRef& e, int64_t v) {
  if (!is_const(e)) return false;
  return is_float(e->dtype) ? e->f == static_cast<double>(v) : e->i == v;
}

namespace {

bool same_expr(const ExprRef& a, const ExprRef& b) {
  if (a == b) return true;
  if (!a || !b || a->kind != b->kind || a->dtype != b->dtype || a->lanes != b->lanes || a->op != b->op || a->i != b->i ||
      a->f != b->f || a->name != b->name || a->buffer != b->buffer || a->args.size() != b->args.size())
    return false;
  for (size_t j = 0; j < a->args.size(); ++j)
    if (!same_expr(a->args[j], b->args[j])) return false;
  return true;
}

bool is_op(const ExprRef& e, Op op) { return e->kind == ExprKind::Binary && e->op == op; }
bool positive_const(const ExprRef& e) { return is_const(e) && e->i > 0; }

// Index math that splits a flat index into coordinates and sums them back (a fused
// epilogue addressing a tensor through a matmul's grouped dims): with c, d > 0,
//   (x / c) * c + x % c         -> x
//   ((x / c) % d) * c + x % c   -> x % (c * d)
// (true for truncating and for flooring div/mod pairs alike). `hi` is the scaled term.
ExprRef fold_div_mod(const ExprRef& hi, const ExprRef& lo) {
  if (!is_op(hi, Op::Mul) || !is_op(lo, Op::Mod) || !positive_const(lo->args[1])) return nullptr;
  const ExprRef& x = lo->args[0];
  int64_t c = lo->args[1]->i;
  if (!is_const(hi->args[1], c)) return nullptr;
  const ExprRef& q = hi->args[0];
  if (is_op(q, Op::IDiv) && is_const(q->args[1], c) && same_expr(q->args[0], x)) return x;
  if (is_op(q, Op::Mod) && positive_const(q->args[1]) && is_op(q->args[0], Op::IDiv) &&
      is_const(q->args[0]->args[1], c) && same_expr(q->args[0]->args[0], x)) {
    int64_t d = q->args[1]->i;
    if (d <= INT64_MAX / c) return binary(Op::Mod, x, const_int(c * d));
  }
  return nullptr;
}

}  // namespace

ExprRef add(ExprRef a, ExprRef b) {
  if (is_index_int(a) && is_index_int(b) && a->lanes == 1 && b->lanes == 1) {
    if (auto r = fold_div_mod(a, b)) return r;
    if (auto r = fold_div_mod(b, a)) return r;
    // (A + hi) + lo: the split terms are summed one after another
    if (is_op(a, Op::Add)) {
      if (auto r = fold_div_mod(a->args[1], b)) return add(a->args[0], r);
      if (auto r = fold_div_mod(b, a->args[1])) return add(a->args[0], r);
    }
  }
  if (!is_index_int(a) || !is_index_int(b)) {
    Expr e{ExprKind::Binary, a->dtype, std::max(a->lanes, b->lanes)};
    e.op = Op::Add;
    e.args = {std::move(a), std::move(b)};
    return make(std::move(e));
  }
  if (is_const(a) && !is_const(b)) std::swap(a, b);        // constant on the right
  if (is_const(a) && is_const(b)) return const_int(wadd(a->i, b->i));
  if (is_const(b, 0)) return a;
  // (x + c1) + c2 -> x + (c1 + c2)
  if (is_const(b) && a->kind == ExprKind::Binary && a->op == Op::Add && is_const(a->args[1]))
    return add(a->args[0], const_int(wadd(a->args[1]->i, b->i)));
  // a + (x + c) -> (a + x) + c : keep constants outermost
  if (b->kind == ExprKind::Binary && b->op == Op::Add && is_const(b->args[1]))
    return add(add(a, b->args[0]), b->args[1]);
  Expr e{ExprKind::Binary, DType::I64};
  e.op = Op::Add;
  e.args = {std::move(a), std::move(b)};
  return make(std::move(e));
}

ExprRef mul(ExprRef a, ExprRef b) {
  if (!is_index_int(a) || !is_index_int(b)) {
    Expr e{ExprKind::Binary, a->dtype, std::max(a->lanes, b->lanes)};
    e.op = Op::Mul;
    e.args = {std::move(a), std::move(b)};
    return make(std::move(e));
  }
  if (is_const(a) && !is_const(b)) std::swap(a, b);
  if (is_const(a) && is_const(b)) return const_int(wmul(a->i, b->i));
  if (is_const(b, 0)) return const_int(0);
  if (is_const(b, 1)) return a;
  if (is_const(b) && a->kind == ExprKind::Binary && a->op == Op::Mul && is_const(a->args[1]))
    return mul(a->args[0], const_int(wmul(a->args[1]->i, b->i)));
  if (is_const(b) && a->kind == ExprKind::Binary && a->op == Op::Add && is_const(a->args[1]))
    return add(mul(a->args[0], b), const_int(wmul(a->args[1]->i, b->i)));
  Expr e{ExprKind::Binary, DType::I64};
  e.op = Op::Mul;
  e.args = {std::move(a), std::move(b)};
  return make(std::move(e));
}

ExprRef sub(ExprRef a, ExprRef b) { return add(std::move(a), mul(std::move(b), const_int(-1))); }
ExprRef lt(ExprRef a, ExprRef b) { return binary(Op::CmpLT, std::move(a), std::move(b)); }
ExprRef le(ExprRef a, ExprRef b) { return lt(std::move(a), add(std::move(b), const_int(1))); }

ExprRef logical_and(ExprRef a, ExprRef b) {
  if (!a || is_const(a, 1)) return b;
  if (!b || is_const(b, 1)) return a;
  if (is_const(a, 0) || is_const(b, 0)) return const_int(0, DType::Bool);
  if (expr_key(a) == expr_key(b)) return a;
  Expr e{ExprKind::Binary, DType::Bool, std::max(a->lanes, b->lanes)};
  e.op = Op::And;
  e.args = {std::move(a), std::move(b)};
  return make(std::move(e));
}

ExprRef min_of(ExprRef a, ExprRef b) {
  if (is_const(a) && is_const(b)) return const_int(std::min(a->i, b->i));
  return select(lt(a, b), a, b);
}

ExprRef from_sym(const SymInt& s) {
  if (s.is_const()) return const_int(s.value());
  const SymExpr* x = s.expr();
  switch (x->kind) {
    case SymKind::Const: return const_int(x->value);
    case SymKind::Var: return var(x->name);
    case SymKind::Add: return add(from_sym(x->lhs), from_sym(x->rhs));
    case SymKind::Mul: return mul(from_sym(x->lhs), from_sym(x->rhs));
    case SymKind::FloorDiv: return binary(Op::IDiv, from_sym(x->lhs), from_sym(x->rhs));  // dims are >= 0
    case SymKind::Mod: return binary(Op::Mod, from_sym(x->lhs), from_sym(x->rhs));
    case SymKind::Max: return binary(Op::Max, from_sym(x->lhs), from_sym(x->rhs));
    case SymKind::Min: return min_of(from_sym(x->lhs), from_sym(x->rhs));
  }
  return const_int(0);
}

bool mentions(const ExprRef& e, const std::string& v) {
  if (!e) return false;
  if (e->kind == ExprKind::Var && e->name == v) return true;
  for (auto& a : e->args)
    if (mentions(a, v)) return true;
  return false;
}

ExprRef with_args(const ExprRef& e, std::vector<ExprRef> args) {
  switch (e->kind) {
    case ExprKind::Load: return load(e->buffer, e->dtype, args[0], args.size() > 1 ? args[1] : nullptr, e->lanes);
    case ExprKind::LocalLoad: return local_load(e->name, e->dtype, args[0], e->lanes);
    case ExprKind::Unary: return unary(e->op, args[0]);
    case ExprKind::Binary: return binary(e->op, args[0], args[1]);
    case ExprKind::Select: return select(args[0], args[1], args[2]);
    case ExprKind::Cast: return cast(args[0], e->dtype);
    case ExprKind::Broadcast: return broadcast(args[0], e->lanes);
    case ExprKind::Dot: return dot_acc(args[0], args[1], args[2], e->op == Op::Max);
    default: return e;
  }
}

ExprRef substitute(const ExprRef& e, const std::string& v, const ExprRef& with) {
  if (!e) return e;
  if (e->kind == ExprKind::Var) return e->name == v ? with : e;
  if (!mentions(e, v)) return e;
  std::vector<ExprRef> args;
  for (auto& a : e->args) args.push_back(substitute(a, v, with));
  return with_args(e, std::move(args));
}

std::string expr_key(const ExprRef& e) {
  if (!e) return "_";
  std::string k;
  switch (e->kind) {
    case ExprKind::Const: return is_float(e->dtype) ? std::to_string(e->f) + "f" : std::to_string(e->i);
    case ExprKind::Var: return e->name;
    case ExprKind::Load: k = "L" + std::to_string(e->buffer); break;
    case ExprKind::LocalLoad: k = "l" + e->name; break;
    case ExprKind::Cast: k = "C" + std::string(dtype_name(e->dtype)); break;
    case ExprKind::Broadcast: k = "B" + std::to_string(e->lanes); break;
    case ExprKind::Select: k = "?"; break;
    case ExprKind::Dot: k = e->op == Op::Max ? "Ds" : "D"; break;
    default: k = std::string(op_name(e->op)); break;
  }
  k += "(";
  for (auto& a : e->args) k += expr_key(a) + ",";
  return k + ")";
}

// ---- statements ----------------------------------------------------------------------

Stmt make_for(const std::string& v, ExprRef extent, std::vector<Stmt> body, std::string note) {
  Stmt s{StmtKind::For};
  s.var = v;
  s.extent = std::move(extent);
  s.body = std::move(body);
  s.note = std::move(note);
  return s;
}

Stmt make_if(ExprRef cond, std::vector<Stmt> body, std::vector<Stmt> else_body) {
  Stmt s{StmtKind::If};
  s.cond = std::move(cond);
  s.body = std::move(body);
  s.else_body = std::move(else_body);
  return s;
}

Stmt make_store(int buffer, ExprRef index, ExprRef value) {
  Stmt s{StmtKind::Store};
  s.buffer = buffer;
  s.index = std::move(index);
  s.value = std::move(value);
  return s;
}

Stmt make_let(const std::string& v, DType dt, ExprRef value) {
  Stmt s{StmtKind::Let};
  s.var = v;
  s.dtype = dt;
  s.value = std::move(value);
  return s;
}

Stmt make_assign(const std::string& v, ExprRef value) {
  Stmt s{StmtKind::Assign};
  s.var = v;
  s.value = std::move(value);
  return s;
}

Stmt make_alloc(const std::string& v, DType dt, int lanes, int64_t count, bool registers) {
  Stmt s{StmtKind::Alloc};
  s.var = v;
  s.dtype = dt;
  s.lanes = lanes;
  s.count = count;
  s.registers = registers;
  return s;
}

Stmt make_local_store(const std::string& v, ExprRef index, ExprRef value) {
  Stmt s{StmtKind::LocalStore};
  s.var = v;
  s.index = std::move(index);
  s.value = std::move(value);
  return s;
}

Stmt make_prefetch(int buffer, ExprRef index, bool write, int locality) {
  LATHE_CHECK(buffer >= 0, "loop IR: prefetch of no buffer");
  LATHE_CHECK(index && index->lanes == 1 && index->dtype == DType::I64, "loop IR: a prefetch's index is one i64");
  LATHE_CHECK(locality >= 0 && locality <= 3, "loop IR: prefetch locality " + std::to_string(locality) + " is not 0-3");
  Stmt s{StmtKind::Prefetch};
  s.buffer = buffer;
  s.index = std::move(index);
  s.write = write;
  s.locality = locality;
  return s;
}

void walk(std::vector<Stmt>& body, const std::function<bool(Stmt&)>& fn) {
  for (auto& s : body) {
    if (!fn(s)) continue;
    walk(s.body, fn);
    walk(s.else_body, fn);
  }
}

void walk(const std::vector<Stmt>& body, const std::function<bool(const Stmt&)>& fn) {
  for (auto& s : body) {
    if (!fn(s)) continue;
    walk(s.body, fn);
    walk(s.else_body, fn);
  }
}

void walk_exprs(const std::vector<Stmt>& body, const std::function<void(const ExprRef&)>& fn) {
  walk(body, [&](const Stmt& s) {
    for (auto* e : {&s.extent, &s.cond, &s.index, &s.value})
      if (*e) fn(*e);
    return true;
  });
}

bool is_dequantize_product(const Expr& e) {
  if (e.kind != ExprKind::Binary || e.op != Op::Mul || !is_float(e.dtype)) return false;
  for (const ExprRef& a : e.args) {
    const Expr* x = a.get();
    while (x->kind == ExprKind::Broadcast) x = x->args[0].get();
    if (x->kind == ExprKind::Cast && !is_float(x->args[0]->dtype) && x->args[0]->dtype != DType::Bool) return true;
  }
  return false;
}

bool has_dequantize_product(const LoopFunc& f) {
  bool found = false;
  std::function<void(const Expr&)> visit = [&](const Expr& e) {
    if (found) return;
    if (is_dequantize_product(e)) found = true;
    for (const ExprRef& a : e.args)
      if (a) visit(*a);
  };
  walk_exprs(f.body, [&](const ExprRef& e) { visit(*e); });
  return found;
}

void substitute(std::vector<Stmt>& body, const std::string& v, const ExprRef& with) {
  walk(body, [&](Stmt& s) {
    for (auto* e : {&s.extent, &s.cond, &s.index, &s.value})
      if (*e) *e = substitute(*e, v, with);
    return true;
  });
}

}  // namespace lathe::loop
