// split_k.cpp — a reduction split across threads into partial results and a combine
// (see split_k.h).
#include "core/loop/split_k.h"

#include <map>
#include <set>

#include "core/ir/diag.h"
#include "core/loop/transform_detail.h"

namespace lathe::loop {

namespace {

using detail::refuse;

bool identity_init(const ExprRef& init, ReduceOp op) {
  if (!is_const(init)) return false;
  double v = is_float(init->dtype) ? init->f : (double)init->i;
  switch (op) {
    case ReduceOp::Add: return v == 0;
    case ReduceOp::Mul: return v == 1;
    case ReduceOp::Max: return true;  // max is idempotent: the init counted P + 1 times is harmless
  }
  return false;
}

Op combine_op(ReduceOp op) { return op == ReduceOp::Add ? Op::Add : op == ReduceOp::Mul ? Op::Mul : Op::Max; }

// every name a statement tree declares (loops, scalar locals), and whether it has an Alloc
void declared(const std::vector<Stmt>& body, std::vector<std::string>& names, bool& alloc) {
  walk(body, [&](const Stmt& s) {
    if (s.kind == StmtKind::For || s.kind == StmtKind::Let) names.push_back(s.var);
    alloc |= s.kind == StmtKind::Alloc;
    return true;
  });
}

ExprRef rename_expr(const ExprRef& e, const std::string& from, const std::string& to) {
  if (!e) return e;
  if (e->kind == ExprKind::Var) return e->name == from ? var(to, e->dtype, e->lanes) : e;
  if (e->args.empty()) return e;
  std::vector<ExprRef> args;
  bool changed = false;
  for (auto& a : e->args) {
    args.push_back(rename_expr(a, from, to));
    changed |= args.back() != a;
  }
  return changed ? with_args(e, std::move(args)) : e;
}

// renames a declared name (a loop, a local) and its uses, keeping each use's type
void rename(std::vector<Stmt>& body, const std::string& from, const std::string& to) {
  walk(body, [&](Stmt& s) {
    if (s.var == from && (s.kind == StmtKind::For || s.kind == StmtKind::Let || s.kind == StmtKind::Assign)) s.var = to;
    for (auto& r : s.reduces)
      if (r == from) r = to;
    for (ExprRef* x : {&s.extent, &s.cond, &s.index, &s.value}) *x = rename_expr(*x, from, to);
    return true;
  });
}

// What split_k would do to loop `loop` of f, checked: "" or the reason it is refused.
struct Site {
  size_t top = 0;                      // f.body index of the nest's outermost statement
  std::vector<const Stmt*> outs;       // the output loops around r, outermost first
  const std::vector<Stmt>* parent = nullptr;
  size_t index = 0;                    // r in *parent (the accumulator's Let is index - 1)
};

std::string check(LoopFunc& f, const std::string& loop, int64_t parts, Site& site) {
  if (parts < 2 || parts > 64) return "parts must be 2..64, got " + std::to_string(parts);
  detail::Found fd = detail::must_find(f, "split_k", loop);
  const Stmt& r = *fd.get();
  if (r.reduces.size() != 1) return "loop " + loop + " does not reduce into one accumulator";
  for (auto* a : fd.ancestors) {
    if (!a->reduces.empty()) return "loop " + loop + " sits inside reduction loop " + a->var + " (split that one)";
    if (!is_const(a->extent)) return "enclosing loop " + a->var + " has no constant extent";
  }
  if (!is_const(r.extent) || r.extent->i < parts)
    return "its extent is not a constant of at least " + std::to_string(parts);
  const std::string& acc = r.reduces[0];
  auto& P = *fd.parent;
  if (fd.index == 0 || P[fd.index - 1].kind != StmtKind::Let || P[fd.index - 1].var != acc)
    return "accumulator " + acc + " is not declared just before the loop";
  if (!identity_init(P[fd.index - 1].value, r.reduce_op))
    return "accumulator " + acc + " does not start at the identity of " + std::string(reduce_op_name(r.reduce_op));
  for (size_t i = fd.index + 1; i < P.size(); ++i)
    if (P[i].kind != StmtKind::Let && P[i].kind != StmtKind::Store)
      return "the code after it does more than compute values and store them";
  // the nest's outermost statement must be a statement of the kernel's body
  const Stmt* top = fd.ancestors.empty() ? &r : fd.ancestors[0];
  site.top = f.body.size();
  for (size_t i = 0; i < f.body.size(); ++i)
    if (&f.body[i] == top) site.top = i;
  if (site.top == f.body.size()) return "its nest is not at the kernel's top level";
  // one reduction in the nest, and no stores but those after it
  std::vector<Stmt> one{*top};
  int reductions = 0, stores = 0, after = 0;
  bool alloc = false;
  walk(one, [&](const Stmt& s) {
    if (s.kind == StmtKind::For && !s.reduces.empty()) { ++reductions; return false; }
    stores += s.kind == StmtKind::Store || s.kind == StmtKind::LocalStore;
    alloc |= s.kind == StmtKind::Alloc;
    return true;
  });
  for (size_t i = fd.index + 1; i < P.size(); ++i) after += P[i].kind == StmtKind::Store;
  if (reductions != 1) return "its loop nest has " + std::to_string(reductions) + " reductions (one is split)";
  if (stores != (fd.ancestors.empty() ? 0 : after)) return "its loop nest stores outside the code after the reduction";
  if (alloc) return "its loop nest has local arrays";
  site.outs = fd.ancestors;
  site.parent = fd.parent;
  site.index = fd.index;
  return "";
}

}  // namespace

void split_k(LoopFunc& f, const std::string& loop, int64_t parts) {
  Site site;
  if (std::string why = check(f, loop, parts, site); !why.empty()) refuse("split_k", loop, why);
  const Stmt& r = (*site.parent)[site.index];
  const std::string acc = r.reduces[0];
  const DType dt = (*site.parent)[site.index - 1].dtype;
  const ReduceOp rop = r.reduce_op;
  const int64_t E = r.extent->i, C = (E + parts - 1) / parts;
  int64_t N = 1;
  for (auto* o : site.outs) N *= std::max<int64_t>(o->extent->i, 0);
  // the flat output index over the enclosing loops (mixed radix)
  ExprRef flat = const_int(0);
  for (auto* o : site.outs) flat = add(mul(flat, o->extent), var(o->var));
  const Stmt init = (*site.parent)[site.index - 1];

  std::string t = detail::fresh(f, loop + "_k"), part = detail::fresh(f, acc + "_part");
  std::set<std::string> taken{t, part};
  auto fresh = [&](const std::string& base) {
    std::string m = detail::fresh(f, base);
    for (int k = 2; taken.count(m); ++k) m = detail::fresh(f, base + std::to_string(k));
    taken.insert(m);
    return m;
  };
  // the partial nest: a copy of the top statement with its names renamed (_p), the
  // reduction over one part, its result stored to part[t·N + flat]
  std::vector<Stmt> copy{f.body[site.top]};
  std::vector<std::string> names;
  bool alloc = false;
  declared(copy, names, alloc);
  if (site.outs.empty()) names.push_back(acc);  // declared before the loop, outside the copy
  std::map<std::string, std::string> to;
  for (auto& n : names)
    if (!to.count(n)) to[n] = fresh(n + "_p");
  for (auto& [from, nm] : to) rename(copy, from, nm);
  ExprRef flat_p = flat;
  for (auto& [from, nm] : to) flat_p = substitute(flat_p, from, var(nm));
  const std::string rp = to.at(loop), accp = to.at(acc);
  const ExprRef first = mul(var(t), const_int(C));
  const ExprRef slot = add(mul(var(t), const_int(N)), flat_p);
  auto restrict_part = [&](Stmt& c) {  // r = t·C + r_p, r_p < min(C, E - t·C) (≥ 0)
    substitute(c.body, rp, add(first, var(rp)));
    c.extent = E % parts == 0 ? const_int(C) : binary(Op::Max, min_of(const_int(C), sub(const_int(E), first)), const_int(0));
    c.note += " (part of " + std::to_string(C) + ")";
  };
  Stmt tl = make_for(t, const_int(parts), {}, "split_k: parts of " + loop);
  tl.annot.parallel = true;
  if (site.outs.empty()) {  // a reduction to one value: the loop is the top statement
    restrict_part(copy[0]);
    copy[0].annot.parallel = false;
    Stmt let = init;
    let.var = accp;
    tl.body.push_back(std::move(let));
    tl.body.push_back(std::move(copy[0]));
    tl.body.push_back(make_local_store(part, slot, var(accp, dt)));
  } else {
    walk(copy, [&](Stmt& s) {
      s.annot.parallel = false;
      for (size_t i = 0; i < s.body.size(); ++i) {
        Stmt& c = s.body[i];
        if (c.kind != StmtKind::For || c.var != rp) continue;
        restrict_part(c);
        s.body.resize(i + 1);  // the values and stores after it belong to the combine
        s.body.push_back(make_local_store(part, slot, var(accp, dt)));
        return false;
      }
      return true;
    });
    tl.body = std::move(copy);
  }
  // the combine: the accumulator's start and loop become the parts' fold
  ExprRef folded;
  for (int64_t k = 0; k < parts; ++k) {
    ExprRef v = local_load(part, dt, add(const_int(k * N), flat));
    folded = folded ? binary(combine_op(rop), folded, v) : v;
  }
  std::vector<Stmt>& P = *const_cast<std::vector<Stmt>*>(site.parent);
  P[site.index - 1] = make_let(acc, dt, folded);
  P.erase(P.begin() + (long)site.index);
  // the partial nest (and its array) before the combine
  size_t at = site.outs.empty() ? site.top - 1 : site.top;  // before the accumulator's Let
  f.body.insert(f.body.begin() + (long)at, std::move(tl));
  f.body.insert(f.body.begin() + (long)at, make_alloc(part, dt, 1, parts * N));
  f.schedule_log.push_back("split_k " + loop + " by " + std::to_string(parts));
}

bool split_k_candidate(const LoopFunc& f, int64_t parts, std::string& loop) {
  std::string first;
  walk(f.body, [&](const Stmt& s) {
    if (first.empty() && s.kind == StmtKind::For && !s.reduces.empty()) first = s.var;
    return first.empty();
  });
  if (first.empty()) return false;
  LoopFunc g = f;
  Site site;
  try {
    if (!check(g, first, parts, site).empty()) return false;
  } catch (const UserError&) {
    return false;
  }
  loop = first;
  return true;
}

}  // namespace lathe::loop
