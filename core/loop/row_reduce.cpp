// row_reduce.cpp — reduction rows (see row_reduce.h): the shape check, the rewrite, the
// range split of masked row loops and the profitability test the default schedule uses.
#include "core/loop/row_reduce.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/ir/diag.h"
#include "core/loop/transform_detail.h"

namespace lathe::loop {

const char* const kEdgeNote = "row (the edges: range conditions checked)";

namespace {

const char* const kRowNote = "row";
using detail::refuse;

// ---- index analysis -------------------------------------------------------------------

// e == coef·v + rest with a constant coef and rest free of v; false when e is not so.
bool affine_in(const ExprRef& e, const std::string& v, int64_t& coef, ExprRef& rest) {
  if (!mentions(e, v)) {
    coef = 0;
    rest = e;
    return true;
  }
  if (e->lanes != 1 || e->dtype != DType::I64) return false;
  if (e->kind == ExprKind::Var) {  // e is v itself
    coef = 1;
    rest = const_int(0);
    return true;
  }
  if (e->kind != ExprKind::Binary) return false;
  int64_t ca, cb;
  ExprRef ra, rb;
  if (e->op == Op::Add) {
    if (!affine_in(e->args[0], v, ca, ra) || !affine_in(e->args[1], v, cb, rb)) return false;
    coef = ca + cb;
    rest = add(ra, rb);
    return true;
  }
  if (e->op == Op::Mul) {
    for (int k = 0; k < 2; ++k) {
      const ExprRef& c = e->args[1 - k];
      if (!is_const(c) || !affine_in(e->args[k], v, ca, ra)) continue;
      coef = ca * c->i;
      rest = mul(ra, c);
      return true;
    }
  }
  return false;
}

// floor(x / k) for a constant k > 0 (the loop IR's IDiv truncates).
ExprRef floor_div(const ExprRef& x, int64_t k) {
  if (k == 1) return x;
  if (is_const(x)) return const_int(x->i >= 0 ? x->i / k : -((k - 1 - x->i) / k));
  return select(lt(x, const_int(0)), mul(binary(Op::IDiv, sub(const_int(k - 1), x), const_int(k)), const_int(-1)),
                binary(Op::IDiv, x, const_int(k)));
}
ExprRef max_of(const ExprRef& a, const ExprRef& b) {
  if (!a) return b;
  if (is_const(a) && is_const(b)) return const_int(std::max(a->i, b->i));
  return binary(Op::Max, a, b);
}

// Inlines the i64 and bool Lets of a statement list into the statements after them (index
// math and conditions become analyzable), dropping the Lets.
void inline_index_lets(std::vector<Stmt>& body) {
  std::vector<Stmt> out;
  std::vector<std::pair<std::string, ExprRef>> env;
  auto apply = [&](ExprRef e) {
    for (auto& [n, v] : env) e = substitute(e, n, v);
    return e;
  };
  for (Stmt& s : body) {
    for (auto* e : {&s.extent, &s.cond, &s.index, &s.value})
      if (*e) *e = apply(*e);
    if (s.kind == StmtKind::Let && s.value->lanes == 1 && (s.dtype == DType::I64 || s.dtype == DType::Bool)) {
      env.push_back({s.var, s.value});
      continue;
    }
    LATHE_CHECK(s.kind != StmtKind::For && s.kind != StmtKind::If, "row loop bodies are straight-line code");
    out.push_back(std::move(s));
  }
  body = std::move(out);
}

void and_leaves(const ExprRef& c, std::vector<ExprRef>& out) {
  if (c->kind == ExprKind::Binary && c->op == Op::And && c->dtype == DType::Bool) {
    and_leaves(c->args[0], out);
    and_leaves(c->args[1], out);
    return;
  }
  out.push_back(c);
}

// The range conditions of a straight-line body: the AND-ed terms of load masks and selects.
std::vector<ExprRef> conditions(const std::vector<Stmt>& body) {
  std::vector<ExprRef> leaves;
  std::function<void(const ExprRef&)> visit = [&](const ExprRef& e) {
    if (e->kind == ExprKind::Load && e->args.size() > 1) and_leaves(e->args[1], leaves);
    if (e->kind == ExprKind::Select) and_leaves(e->args[0], leaves);
    for (auto& a : e->args) visit(a);
  };
  walk_exprs(body, visit);
  std::vector<ExprRef> unique;
  std::set<std::string> seen;
  for (auto& l : leaves)
    if (seen.insert(expr_key(l)).second) unique.push_back(l);
  return unique;
}

// e with every sub-expression whose key is in `keys` replaced by `with` (re-simplified).
ExprRef replace_keys(const ExprRef& e, const std::set<std::string>& keys, const ExprRef& with) {
  if (!e) return e;
  if (keys.count(expr_key(e))) return with;
  if (e->args.empty()) return e;
  std::vector<ExprRef> args;
  bool changed = false;
  for (auto& a : e->args) {
    args.push_back(replace_keys(a, keys, with));
    changed |= args.back() != a;
  }
  return changed ? with_args(e, std::move(args)) : e;
}
void replace_keys(std::vector<Stmt>& body, const std::set<std::string>& keys, const ExprRef& with) {
  walk(body, [&](Stmt& s) {
    for (auto* e : {&s.extent, &s.cond, &s.index, &s.value})
      if (*e) *e = replace_keys(*e, keys, with);
    return true;
  });
}

// ---- the shape of an output loop with reduction nests ---------------------------------

// A reduction nest of the output loop's body: `Let acc = init` at S[let_pos], the loops at
// S[let_pos + 1].
struct Nest {
  size_t let_pos = 0;
  std::string acc;
};

// "" when `loop` is a chain of loops reducing into acc only, each body = Lets then one
// For (the next level) or, innermost, Lets then `acc = …`.
std::string check_nest(const Stmt& loop, const std::string& acc) {
  const Stmt* cur = &loop;
  for (;;) {
    if (cur->reduces != std::vector<std::string>{acc}) return "loop " + cur->var + " does not reduce into " + acc + " alone";
    if (cur->body.empty()) return "empty reduction loop " + cur->var;
    for (size_t i = 0; i + 1 < cur->body.size(); ++i)
      if (cur->body[i].kind != StmtKind::Let) return "reduction loop " + cur->var + " does more than compute values";
    const Stmt& last = cur->body.back();
    if (last.kind == StmtKind::Assign && last.var == acc) return "";
    if (last.kind != StmtKind::For) return "reduction loop " + cur->var + " does more than accumulate " + acc;
    cur = &last;
  }
}

// local_stores: output code may store to a local array (split_k's partial results; the
// explicit primitive only, so the default schedule's choices are unchanged)
std::vector<Nest> find_nests(const Stmt& L, std::string& why, bool local_stores = false) {
  std::vector<Nest> nests;
  const auto& S = L.body;
  for (size_t i = 0; i < S.size(); ++i) {
    const Stmt& s = S[i];
    if (s.kind == StmtKind::Let && i + 1 < S.size() && S[i + 1].kind == StmtKind::For &&
        S[i + 1].reduces == std::vector<std::string>{s.var}) {
      if (!is_const(s.value) || s.value->lanes != 1) { why = "accumulator " + s.var + " does not start at a constant"; return {}; }
      std::string w = check_nest(S[i + 1], s.var);
      if (!w.empty()) { why = w; return {}; }
      nests.push_back({i, s.var});
      ++i;
      continue;
    }
    if (s.kind == StmtKind::Let || s.kind == StmtKind::Store || (local_stores && s.kind == StmtKind::LocalStore)) continue;
    why = "its body has a " + std::string(s.kind == StmtKind::For ? "loop" : "statement") + " other than values, stores and reductions";
    return {};
  }
  if (nests.empty()) why = "its body computes no reduction";
  return nests;
}

// ---- the rewrite ----------------------------------------------------------------------

class RowRewrite {
 public:
  RowRewrite(LoopFunc& f, Stmt& L, std::vector<Nest> nests, int64_t block)
      : f_(f), L_(L), nests_(std::move(nests)), B_(block) {}

  void run() {
    const std::string v = L_.var;
    std::string vb = name(v + "_b"), v0 = name(v + "_0"), vn = name(v + "_n");
    bool exact = is_const(L_.extent) && L_.extent->i % B_ == 0;
    ExprRef nblocks = is_const(L_.extent) ? const_int((L_.extent->i + B_ - 1) / B_)
                                          : binary(Op::IDiv, add(L_.extent, const_int(B_ - 1)), const_int(B_));
    std::vector<Stmt> body;
    body.push_back(make_let(v0, DType::I64, mul(var(vb), const_int(B_))));
    body.push_back(make_let(vn, DType::I64, exact ? const_int(B_) : min_of(const_int(B_), sub(L_.extent, var(v0)))));
    v0_ = var(v0);
    n_ = var(vn);
    const auto& S = L_.body;
    for (auto& n : nests_) {
      rows_.push_back(name("row_" + n.acc));
      dts_.push_back(S[n.let_pos].dtype);
      body.push_back(make_alloc(rows_.back(), dts_.back(), 1, B_));
    }
    for (size_t k = 0; k < nests_.size(); ++k) {
      std::string i = name(v + "_z");
      Stmt fill = make_for(i, n_, {make_local_store(rows_[k], var(i), S[nests_[k].let_pos].value)}, "row: start " + nests_[k].acc);
      fill.annot.vectorize = true;
      body.push_back(std::move(fill));
      for (auto& st : nest_copy(k)) body.push_back(std::move(st));
    }
    // the output code, once per element of the row
    std::string i = name(v + "_e");
    std::vector<Stmt> out = prefix(nests_.size(), i);
    std::set<size_t> skip;
    for (auto& n : nests_) skip.insert(n.let_pos), skip.insert(n.let_pos + 1);
    for (size_t p = 0; p < S.size(); ++p)
      if (!skip.count(p) && (S[p].kind == StmtKind::Store || S[p].kind == StmtKind::LocalStore)) out.push_back(S[p]);
    substitute(out, v, add(v0_, var(i)));
    Stmt eloop = make_for(i, n_, std::move(out), L_.note + " (row)");
    eloop.annot.vectorize = true;
    body.push_back(std::move(eloop));
    Stmt blocks = make_for(vb, nblocks, std::move(body), L_.note + " (blocks of " + std::to_string(B_) + ")");
    L_ = std::move(blocks);
  }

 private:
  LoopFunc& f_;
  Stmt& L_;
  std::vector<Nest> nests_;
  int64_t B_;
  ExprRef v0_, n_;
  std::vector<std::string> rows_;
  std::vector<DType> dts_;
  std::set<std::string> taken_;

  std::string name(const std::string& base) {
    std::string n = detail::fresh(f_, base);
    for (int k = 2; taken_.count(n); ++k) n = detail::fresh(f_, base + "_" + std::to_string(k));
    taken_.insert(n);
    return n;
  }

  // What every row-loop iteration computes before nest k's own code: the accumulators of
  // the earlier nests and the output loop's values (Lets of S) before nest k (or all, k =
  // nests_.size()). Element i of the row.
  std::vector<Stmt> prefix(size_t k, const std::string& i) {
    std::vector<Stmt> out;
    const auto& S = L_.body;
    size_t end = k < nests_.size() ? nests_[k].let_pos : S.size();
    size_t next = 0;
    for (size_t p = 0; p < end; ++p) {
      if (next < nests_.size() && p == nests_[next].let_pos) {
        out.push_back(make_let(nests_[next].acc, dts_[next], local_load(rows_[next], dts_[next], var(i))));
        ++next;
        ++p;  // the nest's loops
        continue;
      }
      if (S[p].kind == StmtKind::Let) out.push_back(S[p]);
    }
    return out;
  }

  // Nest k with the row loop innermost.
  std::vector<Stmt> nest_copy(size_t k) {
    const Stmt& top = L_.body[nests_[k].let_pos + 1];
    std::set<std::string> dep{L_.var};
    for (auto& n : nests_) dep.insert(n.acc);
    for (size_t p = 0; p < nests_[k].let_pos; ++p)
      if (L_.body[p].kind == StmtKind::Let) dep.insert(L_.body[p].var);
    std::vector<Stmt> moved;
    return level(top, k, dep, moved);
  }

  static bool uses_any(const ExprRef& e, const std::set<std::string>& names) {
    if (!e) return false;
    if (e->kind == ExprKind::Var && names.count(e->name)) return true;
    for (auto& a : e->args)
      if (uses_any(a, names)) return true;
    return false;
  }

  // How many copies unrolling the whole chain below (and including) `lp` makes; -1 when a
  // loop of it has a symbolic extent.
  static int64_t unroll_count(const Stmt& lp) {
    if (lp.kind != StmtKind::For || !is_const(lp.extent)) return -1;
    const Stmt& last = lp.body.back();
    if (last.kind == StmtKind::Assign) return lp.extent->i;
    int64_t c = unroll_count(last);
    return c < 0 ? -1 : c * lp.extent->i;
  }

  // Nest level `lp` with the row loop innermost: statements for the level around it. A
  // small window (the chain from lp down, at most kMaxUnroll copies) is unrolled inside the
  // row loop instead of looping around it.
  static constexpr int64_t kMaxUnroll = 16;
  std::vector<Stmt> level(const Stmt& lp, size_t k, std::set<std::string>& dep, std::vector<Stmt>& moved) {
    int64_t copies = unroll_count(lp);
    if (copies > 0 && copies <= kMaxUnroll) return row_loop(k, moved, &lp);
    Stmt out = make_for(lp.var, lp.extent, {}, lp.note);
    out.annot.unroll = lp.annot.unroll;
    for (size_t p = 0; p + 1 < lp.body.size(); ++p) {
      const Stmt& s = lp.body[p];
      if (uses_any(s.value, dep)) {
        moved.push_back(s);
        dep.insert(s.var);
      } else {
        out.body.push_back(s);
      }
    }
    const Stmt& last = lp.body.back();
    std::vector<Stmt> inner = last.kind == StmtKind::For ? level(last, k, dep, moved) : row_loop(k, moved, nullptr, &last);
    for (auto& st : inner) out.body.push_back(std::move(st));
    return {out};
  }

  // The row loop of nest k: the values it needs, then either the accumulation `assign` or
  // the unrolled copies of loop chain `chain`, combined into the row element.
  std::vector<Stmt> row_loop(size_t k, const std::vector<Stmt>& moved, const Stmt* chain, const Stmt* assign = nullptr) {
    std::string i = name(L_.var + "_v");
    std::vector<Stmt> ib = prefix(k, i);
    for (auto& s : moved) ib.push_back(s);
    ExprRef row = local_load(rows_[k], dts_[k], var(i));
    const std::string& acc = nests_[k].acc;
    if (assign) {
      ib.push_back(make_local_store(rows_[k], var(i), substitute(assign->value, acc, row)));
    } else {
      std::vector<ExprRef> values;  // each copy's `acc = …` right-hand side
      unroll_into(*chain, ib, values);
      // acc = acc OP x in every copy: combine the xs as a balanced tree (short dependency
      // chains), then once into the row; else chain the copies in order
      Op op = Op::Add;
      std::vector<ExprRef> xs;
      for (auto& v : values) {
        if (v->kind != ExprKind::Binary || (v->op != Op::Add && v->op != Op::Max && v->op != Op::Mul) ||
            expr_key(v->args[0]) != acc || mentions(v->args[1], acc) || (!xs.empty() && v->op != op)) {
          xs.clear();
          break;
        }
        op = v->op;
        xs.push_back(v->args[1]);
      }
      ExprRef cur = row;
      if (!xs.empty()) {
        while (xs.size() > 1) {
          std::vector<ExprRef> next;
          for (size_t p = 0; p + 1 < xs.size(); p += 2) next.push_back(binary(op, xs[p], xs[p + 1]));
          if (xs.size() % 2) next.push_back(xs.back());
          xs = std::move(next);
        }
        cur = binary(op, row, xs[0]);
      } else {
        for (auto& v : values) {
          std::string t = name(acc + "_u");
          ib.push_back(make_let(t, dts_[k], substitute(v, acc, cur)));
          cur = var(t, dts_[k]);
        }
      }
      ib.push_back(make_local_store(rows_[k], var(i), cur));
    }
    substitute(ib, L_.var, add(v0_, var(i)));
    return split_by_range(i, std::move(ib));
  }

  // Appends every iteration of loop chain `lp` to ib (its values renamed per copy) and the
  // right-hand side of each copy's accumulation to `values`.
  void unroll_into(const Stmt& lp, std::vector<Stmt>& ib, std::vector<ExprRef>& values) {
    for (int64_t u = 0; u < lp.extent->i; ++u) {
      std::vector<Stmt> copy(lp.body.begin(), lp.body.end());
      substitute(copy, lp.var, const_int(u));
      for (size_t p = 0; p + 1 < copy.size(); ++p) {  // fresh names for this copy's values
        std::string nn = name(copy[p].var + "_u" + std::to_string(u));
        std::vector<Stmt> rest(copy.begin() + p + 1, copy.end());
        substitute(rest, copy[p].var, var(nn, copy[p].dtype, copy[p].value->lanes));
        std::copy(rest.begin(), rest.end(), copy.begin() + p + 1);
        copy[p].var = nn;
      }
      for (size_t p = 0; p + 1 < copy.size(); ++p) ib.push_back(copy[p]);
      if (copy.back().kind == StmtKind::Assign) values.push_back(copy.back().value);
      else unroll_into(copy.back(), ib, values);
    }
  }

  // The row loop `for i < n: ib`, split by its range conditions (see row_reduce.h).
  std::vector<Stmt> split_by_range(const std::string& i, std::vector<Stmt> ib) {
    inline_index_lets(ib);
    std::set<std::string> declared;
    for (auto& s : ib)
      if (s.kind == StmtKind::Let) declared.insert(s.var);
    ExprRef lo, hi, inv;
    std::set<std::string> affine_keys, inv_keys;
    for (auto& c : conditions(ib)) {
      if (c->kind != ExprKind::Binary || c->op != Op::CmpLT || c->args[0]->dtype != DType::I64 || c->lanes != 1) continue;
      if (uses_any(c, declared)) continue;
      if (!mentions(c, i)) {
        inv = logical_and(inv, c);
        inv_keys.insert(expr_key(c));
        continue;
      }
      int64_t ca, cb;
      ExprRef ra, rb;
      if (!affine_in(c->args[0], i, ca, ra) || !affine_in(c->args[1], i, cb, rb)) continue;
      int64_t co = cb - ca;  // holds when co·i + r > 0
      ExprRef r = sub(rb, ra);
      if (co > 0) lo = max_of(lo, add(floor_div(mul(r, const_int(-1)), co), const_int(1)));
      else if (co < 0) hi = hi ? min_of(hi, add(floor_div(add(r, const_int(-1)), -co), const_int(1)))
                               : add(floor_div(add(r, const_int(-1)), -co), const_int(1));
      else continue;
      affine_keys.insert(expr_key(c));
    }
    auto loop_over = [&](std::vector<Stmt> b, const std::function<ExprRef(ExprRef)>& at, ExprRef count,
                         const std::string& note, bool vec) {
      std::string j = name(i);
      if (!at) substitute(b, i, var(j));
      else if (vec) substitute(b, i, at(var(j)));
      else b.insert(b.begin(), make_let(i, DType::I64, at(var(j))));  // the edges: i computed once
      Stmt s = make_for(j, count, std::move(b), note);
      s.annot.vectorize = vec;
      return s;
    };
    if (affine_keys.empty() && inv_keys.empty()) return {loop_over(std::move(ib), nullptr, n_, kRowNote, true)};
    // [lo, hi): where every condition holds (empty when an invariant one does not); the
    // masked code runs the rest, [0, lo) and [hi, n), as one loop
    std::vector<Stmt> clean = ib, out;
    std::set<std::string> all = affine_keys;
    all.insert(inv_keys.begin(), inv_keys.end());
    replace_keys(clean, all, const_int(1, DType::Bool));
    std::string l = name(i + "_lo"), h = name(i + "_hi");
    ExprRef lov = lo ? min_of(max_of(lo, const_int(0)), n_) : const_int(0);
    if (inv) lov = select(inv, lov, n_);
    out.push_back(make_let(l, DType::I64, lov));
    ExprRef hiv = hi ? max_of(min_of(hi, n_), var(l)) : n_;
    if (inv) hiv = select(inv, hiv, n_);
    out.push_back(make_let(h, DType::I64, hiv));
    ExprRef L = var(l), H = var(h);
    out.push_back(loop_over(std::move(ib), [&](ExprRef j) { return select(lt(j, L), j, add(H, sub(j, L))); },
                            add(L, sub(n_, H)), kEdgeNote, false));
    out.push_back(loop_over(std::move(clean), [&](ExprRef j) { return add(L, j); }, sub(H, L), kRowNote, true));
    return out;
  }
};

Stmt* find(std::vector<Stmt>& body, const std::string& name) {
  Stmt* hit = nullptr;
  walk(body, [&](Stmt& s) {
    if (!hit && s.kind == StmtKind::For && s.var == name) hit = &s;
    return !hit;
  });
  return hit;
}

// The loads an accumulation reads, with the output loop's and the nest's index Lets inlined.
std::vector<ExprRef> nest_loads(const Stmt& L, const Nest& n, std::string& inner_var, ExprRef& inner_extent) {
  std::vector<Stmt> flat;
  for (size_t p = 0; p < n.let_pos; ++p)
    if (L.body[p].kind == StmtKind::Let) flat.push_back(L.body[p]);
  const Stmt* cur = &L.body[n.let_pos + 1];
  for (;;) {
    for (size_t p = 0; p + 1 < cur->body.size(); ++p) flat.push_back(cur->body[p]);
    inner_var = cur->var;
    inner_extent = cur->extent;
    if (cur->body.back().kind != StmtKind::For) break;
    cur = &cur->body.back();
  }
  Stmt acc = cur->body.back();
  flat.push_back(make_local_store("_", const_int(0), acc.value));  // keeps the value through inlining
  inline_index_lets(flat);
  std::vector<ExprRef> loads;
  std::function<void(const ExprRef&)> visit = [&](const ExprRef& e) {
    if (e->kind == ExprKind::Load) loads.push_back(e);
    for (auto& a : e->args) visit(a);
  };
  walk_exprs(flat, visit);
  return loads;
}

// Does reduce_rows pay for output loop L: every load that depends on the output position
// does so with a small constant stride, and the innermost reduction is not already a long
// contiguous (vectorizable) loop?
bool profitable(const Stmt& L, const std::vector<Nest>& nests) {
  bool moves = false;
  for (auto& n : nests) {
    std::string u;
    ExprRef ue;
    auto loads = nest_loads(L, n, u, ue);
    bool u_contiguous = true, any_u = false;
    for (auto& ld : loads) {
      int64_t cv, cu;
      ExprRef rest;
      if (!affine_in(ld->args[0], L.var, cv, rest)) return false;  // a gather along the row
      if (cv < 0 || cv > 4) return false;
      moves |= cv > 0;
      if (!mentions(ld->args[0], u)) continue;
      any_u = true;
      if (!affine_in(ld->args[0], u, cu, rest) || cu != 1) u_contiguous = false;
    }
    bool long_u = !is_const(ue) || ue->i >= 16;
    if (any_u && u_contiguous && long_u) return false;
  }
  return moves;
}

// Does some reduction nest of output loop L run more than 64 iterations (or a symbolic count)?
bool long_reduction(const Stmt& L) {
  bool any = false;
  for (auto& s : L.body) {
    if (s.kind != StmtKind::For || s.reduces.empty()) continue;
    int64_t trips = 1;
    walk(std::vector<Stmt>{s}, [&](const Stmt& x) {
      if (x.kind == StmtKind::For) trips = is_const(x.extent) && trips >= 0 ? trips * x.extent->i : -1;
      return true;
    });
    any |= trips < 0 || trips > 64;
  }
  return any;
}

}  // namespace

void reduce_rows(LoopFunc& f, const std::string& loop, int64_t block) {
  Stmt* L = find(f.body, loop);
  if (!L) refuse("reduce_rows", loop, "no such loop in " + f.name);
  if (block < 1) refuse("reduce_rows", loop, "block must be at least 1");
  if (!L->reduces.empty()) refuse("reduce_rows", loop, "it is a reduction loop; name the output loop around it");
  if (L->annot.parallel) refuse("reduce_rows", loop, "it is a parallel loop");
  std::string why;
  auto nests = find_nests(*L, why, /*local_stores=*/true);
  if (nests.empty()) refuse("reduce_rows", loop, why);
  // the reductions' extents may not depend on the output position
  std::set<std::string> inner{L->var};
  for (auto& s : L->body)
    if (s.kind == StmtKind::Let) inner.insert(s.var);
  for (auto& n : nests)
    walk(std::vector<Stmt>{L->body[n.let_pos + 1]}, [&](const Stmt& s) {
      if (s.kind == StmtKind::For)
        for (auto& v : inner)
          if (mentions(s.extent, v)) why = "the extent of " + s.var + " depends on " + v;
      return true;
    });
  if (!why.empty()) refuse("reduce_rows", loop, why);
  RowRewrite(f, *L, std::move(nests), block).run();
  f.schedule_log.push_back("reduce_rows " + loop + " by " + std::to_string(block));
}

int64_t row_block(int64_t extent, bool long_red, bool outermost, int threads) {
  int64_t e = std::max<int64_t>(extent, 1);
  int64_t cap = long_red ? 2048 : 256;
  if (long_red && outermost && threads > 1 && e > cap) {
    // the row loop is the kernel's parallel loop over its blocks: a multiple of `threads`
    // blocks, as long as the accumulators stay in L2, so every core streams long runs of
    // each reduction step (a row that fits one block stays on one core: a column sum of
    // 4096 x 1024 is cache-resident, and split in two it lost 2-7x under load)
    int64_t nb = (e + kMaxThreadRow - 1) / kMaxThreadRow;
    nb = (nb + threads - 1) / threads * threads;
    return ((e + nb - 1) / nb + 7) / 8 * 8;
  }
  if (e <= cap) return e;
  int64_t nb = (e + cap - 1) / cap;
  return std::min<int64_t>(cap, ((e + nb - 1) / nb + 7) / 8 * 8);
}

int apply_row_reductions(LoopFunc& f, int threads) {
  std::vector<std::string> candidates;
  walk(f.body, [&](const Stmt& s) {
    if (s.kind != StmtKind::For || !s.reduces.empty()) return true;
    std::string why;
    auto nests = find_nests(s, why);
    if (!nests.empty() && profitable(s, nests)) candidates.push_back(s.var);
    return nests.empty();
  });
  int done = 0;
  for (auto& c : candidates) {
    Stmt* L = find(f.body, c);
    // a window's reduction: rows up to 256 (the row of a feature map); a long one (a column
    // sum, x·W): rows up to 2048, so each reduction step reads kilobytes of contiguous memory
    // (short runs a page apart defeat the prefetchers and the TLB); a long one whose row
    // loop is outermost (it becomes the parallel loop): one block per core (up to
    // kMaxThreadRow), each streaming its share of every reduction step (row_block)
    bool outermost = false;
    for (auto& s : f.body) outermost |= &s == L;
    int64_t block = long_reduction(*L) ? 2048 : 256;
    if (is_const(L->extent)) block = row_block(L->extent->i, long_reduction(*L), outermost, threads);
    try {
      reduce_rows(f, c, block);
      ++done;
    } catch (const UserError&) {
    }
  }
  return done;
}

}  // namespace lathe::loop
